/* What an effect's statements may not do, and what a statement's failure decides: a
 * statement that would end the store's transaction or leave session state on the pooled
 * connection is refused before it is sent; a failure the effect ignores still decides the
 * call (run again, unavailable, or effect_failed in the statement's words). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <string.h>

#include "records.h"
#include "storetest.h"

TestSuite(store_effect_rules, .init = storetest_init, .fini = storetest_fini, .timeout = 240);

#define INSERT_TASK                                                                                \
    "INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)"                       \
    " VALUES ('acme', 'written', $1)"

/* Writes a task, then runs ctx's statement (an effect_sql), ignoring how it went. */
typedef struct effect_sql {
    char sql[320];
    int rc;   /* what idem_tx_exec() returned for it */
    int runs; /* how many times the effect ran */
} effect_sql;

static int write_then_run(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                          idem_error *err)
{
    effect_sql *e = ctx;
    const char *values[1] = {idem_tx_operation_id(tx)};
    PGresult *res = NULL;
    int rc;

    e->runs++;
    if ((rc = idem_tx_exec(&res, tx, INSERT_TASK, 1, values, err)) != 0)
        return rc;
    PQclear(res);
    res = NULL;
    e->rc = idem_tx_exec(&res, tx, e->sql, 0, NULL, err);
    PQclear(res);
    *response = json_pack("{s:s}", "status", "created");
    return IDEM_EFFECT_OK; /* whatever became of the statement: the store decides */
}

/* Arrays, not pointers: Criterion copies the parameters into the test's process. */
typedef struct refused_case {
    char sql[64];
} refused_case;

ParameterizedTestParameters(store_effect_rules,
                            a_statement_that_ends_the_transaction_or_sets_the_session_is_refused)
{
    static refused_case cases[] = {
        {"COMMIT"},
        {"commit and chain"},
        {"END"},
        {"ABORT"},
        {"ROLLBACK"},
        {"rollback work and chain"},
        {"PREPARE TRANSACTION 'x'"},
        {"  /* a comment /* nested */ */ -- and one more\n COMMIT"},
        {"BEGIN"},
        {"START TRANSACTION"},
        {"SET TRANSACTION READ ONLY"},
        {"SET SESSION default_transaction_read_only = on"},
        {"set statement_timeout = '1ms'"},
        {"SET search_path = nowhere"},
        {"SET ROLE idem_app"},
        {"RESET ALL"},
        {"DISCARD ALL"},
        {"DEALLOCATE ALL"},
        {"LISTEN somewhere"},
        {"SET LOCAL idem.tenant = 'other'"},
        {"set local \"idem.tenant\" to ''"},
        {"SET LOCAL row_security = off"},
    };
    return cr_make_param_array(refused_case, cases, sizeof(cases) / sizeof(cases[0]));
}

/* The statement is refused before it is sent; the effect's earlier write is rolled back,
 * no record is written, and the call ends effect_failed naming the statement. A retry
 * with a well-behaved effect then creates once. */
ParameterizedTest(refused_case *c, store_effect_rules,
                  a_statement_that_ends_the_transaction_or_sets_the_session_is_refused)
{
    effect_sql e = {"", 0, 0};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = storetest_request("acme", "op-refused", "{\"subject\":\"s\"}");

    snprintf(e.sql, sizeof(e.sql), "%s", c->sql);
    storetest_open(NULL, 1);
    cr_assert_eq(idem_store_execute(&out, fx.store, &req, write_then_run, &e, &err), IDEM_EEFFECT,
                 "%s: %s", c->sql, err.message);
    cr_assert_eq(out.status, IDEM_STATUS_EFFECT_FAILED);
    cr_assert_eq(e.rc, IDEM_EINVAL, "%s is refused to the effect", c->sql);
    cr_assert_str_eq(err.field, "sql");
    cr_assert(strstr(err.message, "is refused") != NULL, "%s", err.message);
    cr_assert_eq(storetest_tasks(), 0, "%s: the effect's write is rolled back", c->sql);
    cr_assert_eq(storetest_operations(), 0);
    /* The connection is as it was: the same key then creates, once. */
    snprintf(e.sql, sizeof(e.sql), "SELECT current_setting('transaction_read_only')");
    cr_assert_eq(idem_store_execute(&out, fx.store, &req, write_then_run, &e, &err), 0, "%s",
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(e.rc, 0);
    cr_assert_eq(storetest_tasks(), 1);
    idem_outcome_clear(&out);
}

/* Runs the NULL-terminated statements in ctx, one after another. */
static int run_all(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                   idem_error *err)
{
    PGresult *res = NULL;
    int rc;

    for (const char *const *sql = ctx; *sql != NULL; sql++) {
        if ((rc = idem_tx_exec(&res, tx, *sql, 0, NULL, err)) != 0)
            return rc;
        PQclear(res);
        res = NULL;
    }
    *response = json_pack("{s:s}", "status", "created");
    return IDEM_EFFECT_OK;
}

/* What stays inside the effect's transaction is allowed: SET LOCAL, SET CONSTRAINTS,
 * savepoints and ROLLBACK TO one. */
Test(store_effect_rules, set_local_and_savepoints_are_allowed)
{
    static const char *const set_local[] = {"SET LOCAL statement_timeout = '10s'",
                                            "set local search_path = idem_example", NULL};
    static const char *const constraints[] = {"SET CONSTRAINTS ALL IMMEDIATE", NULL};
    static const char *const savepoints[] = {"SAVEPOINT a", "ROLLBACK TO SAVEPOINT a",
                                             "rollback work to a", "RELEASE SAVEPOINT a", NULL};
    const char *const *effects[] = {set_local, constraints, savepoints};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char op[32];

    storetest_open(NULL, 1);
    for (size_t i = 0; i < sizeof(effects) / sizeof(effects[0]); i++) {
        snprintf(op, sizeof(op), "op-allowed-%zu", i);
        idem_request req = storetest_request("acme", op, "{}");

        cr_assert_eq(idem_store_execute(&out, fx.store, &req, run_all, (void *)effects[i], &err), 0,
                     "%s: %s", effects[i][0], err.message);
        cr_assert_eq(out.status, IDEM_STATUS_CREATED);
        idem_outcome_clear(&out);
    }
    cr_assert_eq(storetest_operations(), 3);
}

/* Writes a task, fails a statement with @ctx's SQLSTATE inside a savepoint or not, and
 * returns OK regardless. */
typedef struct failing {
    const char *sqlstate;
    int savepoint; /* recover with ROLLBACK TO SAVEPOINT */
    int fail_runs; /* fail on the first this many runs */
    int runs;
} failing;

static int ignoring_failure(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                            idem_error *err)
{
    failing *f = ctx;
    const char *values[1] = {idem_tx_operation_id(tx)};
    char raise[128];
    PGresult *res = NULL;

    f->runs++;
    if (idem_tx_exec(&res, tx, INSERT_TASK, 1, values, err) != 0)
        return IDEM_EDB;
    PQclear(res);
    res = NULL;
    if (f->savepoint && idem_tx_exec(&res, tx, "SAVEPOINT s", 0, NULL, err) == 0)
        PQclear(res);
    snprintf(raise, sizeof(raise),
             "DO $$ BEGIN RAISE EXCEPTION 'refused here' USING ERRCODE = '%s'; END $$",
             f->runs <= f->fail_runs ? f->sqlstate : "00000");
    res = NULL;
    if (f->runs <= f->fail_runs && idem_tx_exec(&res, tx, raise, 0, NULL, err) == 0)
        PQclear(res);
    res = NULL;
    if (f->savepoint && idem_tx_exec(&res, tx, "ROLLBACK TO SAVEPOINT s", 0, NULL, err) == 0)
        PQclear(res);
    *response = json_pack("{s:s}", "status", "created");
    return IDEM_EFFECT_OK;
}

static int run_failing(failing *f, const char *op, idem_outcome *out, idem_error *err)
{
    idem_request req = storetest_request("acme", op, "{}");

    return idem_store_execute(out, fx.store, &req, ignoring_failure, f, err);
}

/* An ignored serialization failure still makes the store run the effect again. */
Test(store_effect_rules, an_ignored_serialization_failure_still_runs_the_effect_again)
{
    failing f = {"40001", 0, 1, 0};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;

    storetest_open(NULL, 1);
    cr_assert_eq(run_failing(&f, "op-40001", &out, &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(f.runs, 2);
    cr_assert_eq(out.attempts, 2);
    cr_assert_eq(storetest_tasks(), 1);
    idem_outcome_clear(&out);
}

/* An ignored lock timeout: unavailable (the same call succeeds later), nothing stored. */
Test(store_effect_rules, an_ignored_lock_timeout_still_ends_unavailable)
{
    failing f = {"55P03", 0, 1, 0};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;

    storetest_open(NULL, 1);
    cr_assert_eq(run_failing(&f, "op-55P03", &out, &err), IDEM_EUNAVAIL, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_UNAVAILABLE);
    cr_assert_eq(storetest_tasks(), 0);
    cr_assert_eq(storetest_operations(), 0);
}

/* Any other failure the effect went on after: effect_failed in the statement's words, not
 * an internal "transaction is aborted" as unavailable. */
Test(store_effect_rules, an_ignored_failure_ends_effect_failed_in_the_statements_words)
{
    failing f = {"23505", 0, 1, 0};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;

    storetest_open(NULL, 1);
    cr_assert_eq(run_failing(&f, "op-23505", &out, &err), IDEM_EEFFECT, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_EFFECT_FAILED);
    cr_assert_str_eq(err.sqlstate, "23505");
    cr_assert(strstr(err.message, "refused here") != NULL, "%s", err.message);
    cr_assert_eq(storetest_tasks(), 0);
    cr_assert_eq(storetest_operations(), 0);
}

/* A failure the effect recovered from with ROLLBACK TO SAVEPOINT does not fail the call. */
Test(store_effect_rules, a_failure_recovered_by_a_savepoint_does_not_fail_the_call)
{
    failing f = {"23505", 1, 1, 0};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;

    storetest_open(NULL, 1);
    cr_assert_eq(run_failing(&f, "op-savepoint", &out, &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(storetest_tasks(), 1);
    idem_outcome_clear(&out);
}

/* An effect returning a code that is none of the documented ones is told so. */
static int unknown_code_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                               idem_error *err)
{
    *response = json_pack("{s:s}", "status", "created");
    return 2;
}

Test(store_effect_rules, an_unknown_effect_result_is_named_as_such)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = storetest_request("acme", "op-code-2", "{}");

    storetest_open(NULL, 1);
    cr_assert_eq(idem_store_execute(&out, fx.store, &req, unknown_code_effect, NULL, &err),
                 IDEM_EEFFECT);
    cr_assert(strstr(err.message, "returned 2: neither IDEM_EFFECT_OK") != NULL, "%s", err.message);
    cr_assert_eq(storetest_operations(), 0);
}

/* What an effect does to the tenant setting, to row-level security or to its own record,
 * in ways no statement text shows, and what the finishing statement's guard says of it. */
typedef struct guard_case {
    char sql[320];
    char says[48];  /* in the call's message */
    int claim_only; /* it breaks a pending claim, which only Citus writes: on plain
                       PostgreSQL the key has no row until the call's own, written finished
                       with COMMIT, so the statement finds nothing and the call creates */
} guard_case;

ParameterizedTestParameters(store_effect_rules, an_effect_that_breaks_its_record_commits_nothing)
{
    static guard_case cases[] = {
        {"SELECT set_config('idem.tenant', 'other', true)", "changed idem.tenant", 0},
        {"SELECT set_config('idem.tenant', '', true)", "changed idem.tenant", 0},
        {"DO $$ BEGIN PERFORM set_config('idem.tenant', 'other', true); END $$",
         "changed idem.tenant", 0},
        {"SELECT set_config('row_security', 'off', true)", "turned row_security off", 0},
        {"DELETE FROM idem.operations WHERE operation_id = 'op-guard'", "claimed record", 1},
        {"UPDATE idem.operations SET claim_token = '00000000-0000-4000-8000-000000000000'"
         " WHERE operation_id = 'op-guard'",
         "claimed record", 1},
        {"INSERT INTO idem.operations (tenant, operation_id, tool, payload_version, fingerprint,"
         " state, claim_token, expires_at) VALUES ('acme', 'op-guard', 'create_support_task', 1,"
         " sha256(''), 'pending', gen_random_uuid(), now() + interval '1 day')",
         "claimed record", 0},
    };
    return cr_make_param_array(guard_case, cases, sizeof(cases) / sizeof(cases[0]));
}

/* The effect's write and the claim roll back together; the call ends effect_failed, field
 * sql, in the guard's words; the key stays free, and a retry with a well-behaved effect
 * creates once. On Citus set_config() in a statement without a table changes only the
 * coordinator's session, never the workers' where the effect's rows and the record are
 * written: the call may then create, with its write and its record committed together. */
ParameterizedTest(guard_case *c, store_effect_rules,
                  an_effect_that_breaks_its_record_commits_nothing)
{
    effect_sql e = {"", 0, 0};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = storetest_request("acme", "op-guard", "{\"subject\":\"s\"}");
    int rc;

    snprintf(e.sql, sizeof(e.sql), "%s", c->sql);
    storetest_open(NULL, 1);
    rc = idem_store_execute(&out, fx.store, &req, write_then_run, &e, &err);
    if (c->claim_only && pgtest_citus_workers() == NULL) {
        cr_assert_eq(rc, 0, "%s: %s", c->sql, err.message);
        cr_assert_eq(out.status, IDEM_STATUS_CREATED);
        cr_assert_eq(storetest_tasks(), 1, "%s: the write commits with its record", c->sql);
        cr_assert_eq(records_count(fx.check, "completed"), 1, "%s", c->sql);
        idem_outcome_clear(&out);
        return;
    }
    if (rc == 0 && pgtest_citus_workers() != NULL && strstr(c->sql, "set_config") != NULL) {
        cr_assert_eq(out.status, IDEM_STATUS_CREATED);
        cr_assert_eq(storetest_tasks(), 1, "%s: the write commits with its record", c->sql);
        cr_assert_eq(records_count(fx.check, "completed"), 1, "%s", c->sql);
        idem_outcome_clear(&out);
        return;
    }
    cr_assert_eq(rc, IDEM_EEFFECT, "%s: %s", c->sql, err.message);
    cr_assert_eq(out.status, IDEM_STATUS_EFFECT_FAILED, "%s: %s", c->sql, err.message);
    cr_assert_eq(e.rc, 0, "%s runs: %s", c->sql, err.message);
    cr_assert_str_eq(err.field, "sql");
    cr_assert(strstr(err.message, c->says) != NULL, "%s: %s", c->sql, err.message);
    cr_assert(strstr(err.message, "nothing of the call is kept") != NULL, "%s", err.message);
    cr_assert_eq(storetest_tasks(), 0, "%s: the effect's write is rolled back", c->sql);
    cr_assert_eq(storetest_operations(), 0, "%s: no record, pending or other", c->sql);
    snprintf(e.sql, sizeof(e.sql), "SELECT current_setting('idem.tenant')");
    cr_assert_eq(idem_store_execute(&out, fx.store, &req, write_then_run, &e, &err), 0, "%s",
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(storetest_tasks(), 1);
    cr_assert_eq(storetest_operations(), 1);
    idem_outcome_clear(&out);
}

/* The finishing statement makes the guard's checks itself and calls idem.finish_guard()
 * only when one fails (for its errors): a call whose effect leaves its record alone never
 * calls it. Shown with the function replaced by one that refuses every call; the guard's
 * own cases are above. Plain PostgreSQL: the replacement is not propagated to workers. */
Test(store_effect_rules, a_well_behaved_call_does_not_call_the_guard)
{
    effect_sql e = {"SELECT current_setting('idem.tenant')", 0, 0};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = storetest_request("acme", "op-unguarded", "{\"subject\":\"s\"}");

    if (pgtest_citus_workers() != NULL)
        cr_skip_test("the guard replaced on the coordinator only: plain PostgreSQL");
    PQclear(pgtest_exec(fx.check, "CREATE OR REPLACE FUNCTION idem.finish_guard(call_tenant text,"
                                  " finished bigint) RETURNS integer LANGUAGE plpgsql AS"
                                  " $$BEGIN RAISE EXCEPTION 'finish_guard called'; END$$"));
    storetest_open(NULL, 1);
    cr_assert_eq(idem_store_execute(&out, fx.store, &req, write_then_run, &e, &err), 0, "%s",
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(records_count(fx.check, "completed"), 1);
    idem_outcome_clear(&out);
}

/* The application's tables for the next tests (plain PostgreSQL: under Citus they would
 * have to be distributed): one its role has no privilege on, and one it may write whose
 * row-level security policy admits only the call's tenant. */
static void application_tables(void)
{
    static const char *const sql[] = {
        "CREATE TABLE idem_example.private_notes (tenant text, body text)",
        "CREATE TABLE idem_example.tenant_notes (tenant text, body text)",
        "GRANT SELECT, INSERT ON idem_example.tenant_notes TO " PGTEST_APP,
        "ALTER TABLE idem_example.tenant_notes ENABLE ROW LEVEL SECURITY",
        "CREATE POLICY own_tenant ON idem_example.tenant_notes"
        " USING (tenant = current_setting('idem.tenant', true))",
    };

    if (pgtest_citus_workers() != NULL)
        cr_skip_test("the application's local tables: plain PostgreSQL only");
    for (size_t i = 0; i < sizeof(sql) / sizeof(sql[0]); i++)
        PQclear(pgtest_exec(fx.check, sql[i]));
}

#define DENIED_SQL                                                                                 \
    "INSERT INTO idem_example.private_notes (tenant, body) VALUES ('acme', 'a note longer than "   \
    "forty-eight characters')"

/* A privilege the application's role lacks on its own table: misconfigured, not the
 * effect's failure, with the GRANT naming the role, the server's words (naming the table) and
 * the statement whole; the same on a retry, where the connection runs the statement as
 * one it keeps (named by its first characters on the server). Nothing is stored. */
Test(store_effect_rules, a_missing_privilege_on_the_applications_table_is_misconfigured)
{
    static const char *const statements[] = {DENIED_SQL, NULL};
    idem_store_stats st = IDEM_STORE_STATS_INIT;
    idem_outcome out = IDEM_OUTCOME_INIT;

    application_tables();
    storetest_open(NULL, 1);
    for (unsigned int attempt = 1; attempt <= 2; attempt++) {
        idem_error err = IDEM_ERROR_INIT;
        idem_request req = storetest_request("acme", "op-denied", "{}");

        req.attempt = attempt;
        cr_assert_eq(idem_store_execute(&out, fx.store, &req, run_all, (void *)statements, &err),
                     IDEM_EPERM, "attempt %u: %s", attempt, err.message);
        cr_assert_eq(out.status, IDEM_STATUS_MISCONFIGURED);
        cr_assert_str_eq(err.sqlstate, "42501");
        cr_assert(
            strstr(err.message, DENIED_SQL ": ") != NULL &&
                strstr(err.message, pgtest_server_says("permission denied for table")) != NULL &&
                strstr(err.message, "private_notes") != NULL,
            "attempt %u: the statement whole, then the server's words: %s", attempt, err.message);
        cr_assert(strstr(err.hint, "GRANT") != NULL && strstr(err.hint, PGTEST_APP) != NULL, "%s",
                  err.hint);
        cr_assert(strstr(err.message, err.hint) != NULL, "the advice in the message: %s",
                  err.message);
    }
    cr_assert_eq(storetest_operations(), 0);
    cr_assert_eq(idem_store_stats_get(&st, fx.store), 0);
    cr_assert_eq(st.misconfigured, 2);
    cr_assert_eq(st.effect_failures, 0);
}

/* Row-level security of the application's own table refusing a row (42501 too): the
 * effect's failure, as its own rule says no. */
Test(store_effect_rules, a_row_level_security_refusal_stays_the_effects_failure)
{
    static const char *const statements[] = {
        "INSERT INTO idem_example.tenant_notes (tenant, body) VALUES ('acme', 'mine')",
        "INSERT INTO idem_example.tenant_notes (tenant, body) VALUES ('other', 'not mine')", NULL};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = storetest_request("acme", "op-rls", "{}");

    application_tables();
    storetest_open(NULL, 1);
    cr_assert_eq(idem_store_execute(&out, fx.store, &req, run_all, (void *)statements, &err),
                 IDEM_EEFFECT, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_EFFECT_FAILED);
    cr_assert_str_eq(err.sqlstate, "42501");
    cr_assert(strstr(err.message, pgtest_server_says("violates row-level security policy")) != NULL,
              "%s", err.message);
    cr_assert_eq(storetest_operations(), 0);
    cr_assert_eq(pgtest_scalar(fx.check, "SELECT count(*) FROM idem_example.tenant_notes"), 0);
}

#define LONG_FAILING_SQL                                                                           \
    "SELECT 1 / 0 AS a_column_whose_name_takes_the_statement_past_forty_eight_characters"

/* A failed statement is named whole in the message: after the effect's first statement
 * (sent on its own), and on a retry, where the connection keeps it as a statement. */
Test(store_effect_rules, a_failed_statement_is_named_whole)
{
    static const char *const statements[] = {"SELECT 1", LONG_FAILING_SQL, NULL};
    idem_outcome out = IDEM_OUTCOME_INIT;

    storetest_open(NULL, 1);
    for (unsigned int attempt = 1; attempt <= 2; attempt++) {
        idem_error err = IDEM_ERROR_INIT;
        idem_request req = storetest_request("acme", "op-whole", "{}");

        req.attempt = attempt;
        cr_assert_eq(idem_store_execute(&out, fx.store, &req, run_all, (void *)statements, &err),
                     IDEM_EEFFECT, "attempt %u: %s", attempt, err.message);
        cr_assert_str_eq(err.sqlstate, "22012");
        cr_assert(strstr(err.message, LONG_FAILING_SQL ": ") != NULL &&
                      strstr(err.message, pgtest_server_says("division by zero")) != NULL,
                  "attempt %u: %s", attempt, err.message);
    }
}

/* A statement too long for the message is cut visibly ("..."), the server's words kept. */
Test(store_effect_rules, a_statement_too_long_for_the_message_is_cut_visibly)
{
    char sql[600];
    const char *statements[] = {sql, NULL};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = storetest_request("acme", "op-long", "{}");

    snprintf(sql, sizeof(sql), "SELECT 1 / 0 AS \"%0400d\"", 7);
    storetest_open(NULL, 1);
    cr_assert_eq(idem_store_execute(&out, fx.store, &req, run_all, (void *)statements, &err),
                 IDEM_EEFFECT, "%s", err.message);
    cr_assert(strstr(err.message, "SELECT 1 / 0 AS \"0000") != NULL, "%s", err.message);
    cr_assert(strstr(err.message, "...: ") != NULL &&
                  strstr(err.message, pgtest_server_says("division by zero")) != NULL,
              "%s", err.message);
}

/* A refused statement is named whole too. */
Test(store_effect_rules, a_refused_statement_is_named_whole)
{
    static const char *const statements[] = {
        "SET search_path = a_schema_whose_name_is_longer_than_thirty_two_characters", NULL};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = storetest_request("acme", "op-refused-whole", "{}");

    storetest_open(NULL, 1);
    cr_assert_eq(idem_store_execute(&out, fx.store, &req, run_all, (void *)statements, &err),
                 IDEM_EEFFECT, "%s", err.message);
    cr_assert_str_eq(err.field, "sql");
    cr_assert(strstr(err.message, statements[0]) != NULL, "%s", err.message);
}
