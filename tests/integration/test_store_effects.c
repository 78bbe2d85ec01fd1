/* What an effect may do and what comes of it: fail for now, run no statement or several,
 * fail in SQL, lose its claim to a concurrent commit, or try to end the transaction. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "storetest.h"

TestSuite(store_effects, .init = storetest_init, .fini = storetest_fini, .timeout = 240);

static int transient_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                            idem_error *err)
{
    PGresult *res = NULL;
    ((effect_counter *)ctx)->runs++;
    /* Write something, then fail: the write must not survive. */
    if (idem_tx_exec(&res, tx,
                     "INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)"
                     " VALUES ('acme', 'half', 'x')",
                     0, NULL, err) == 0)
        PQclear(res);
    snprintf(err->message, sizeof(err->message), "ticket system refused: try later");
    return IDEM_EEFFECT;
}

Test(store_effects, transient_effect_error_stores_nothing_and_runs_again_next_time)
{
    effect_counter cnt = {0};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = storetest_request("acme", "op-transient", "{\"subject\":\"s\"}");
    storetest_open(NULL, 1);

    cr_assert_eq(idem_store_execute(&out, fx.store, &req, transient_effect, &cnt, &err),
                 IDEM_EEFFECT);
    cr_assert_eq(out.status, IDEM_STATUS_EFFECT_FAILED);
    cr_assert_str_eq(err.message, "ticket system refused: try later");
    cr_assert_eq(idem_status_next_step(out.status), IDEM_NEXT_RETURN_TO_CALLER);
    cr_assert_eq(storetest_tasks(), 0);
    cr_assert_eq(storetest_operations(), 0);
    cr_assert_eq(idem_store_execute(&out, fx.store, &req, transient_effect, &cnt, &err),
                 IDEM_EEFFECT);
    cr_assert_eq(cnt.runs, 2);
    cr_assert_eq(idem_store_execute(&out, fx.store, &req, counting_effect, &cnt, &err), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(storetest_tasks(), 1);
    idem_outcome_clear(&out);
}

static int constant_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                           idem_error *err)
{
    ((effect_counter *)ctx)->runs++;
    *response = json_pack("{s:s}", "status", "noted");
    return IDEM_EFFECT_OK;
}

Test(store_effects, effect_that_runs_no_statement_still_commits_its_record_once)
{
    effect_counter cnt = {0};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = storetest_request("acme", "op-const", "{\"note\":true}");
    storetest_open(NULL, 1);

    cr_assert_eq(idem_store_execute(&out, fx.store, &req, constant_effect, &cnt, &err), 0, "%s",
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_str_eq(out.receipt, "{\"status\":\"noted\"}");
    idem_outcome_clear(&out);
    cr_assert_eq(idem_store_execute(&out, fx.store, &req, constant_effect, &cnt, &err), 0);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_eq(cnt.runs, 1);
    cr_assert_eq(storetest_operations(), 1);
    idem_outcome_clear(&out);
}

static int two_statement_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                                idem_error *err)
{
    const char *values[2] = {idem_tx_tenant(tx), idem_tx_operation_id(tx)};
    const char *sql = "INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)"
                      " VALUES ($1, 'part', $2) RETURNING task_id";
    PGresult *a = NULL, *b = NULL;
    int rc = idem_tx_exec(&a, tx, sql, 2, values, err);
    if (rc == 0)
        rc = idem_tx_exec(&b, tx, sql, 2, values, err);
    if (rc == 0)
        *response =
            json_pack("{s:s,s:s}", "first", PQgetvalue(a, 0, 0), "second", PQgetvalue(b, 0, 0));
    PQclear(a);
    PQclear(b);
    return rc;
}

Test(store_effects, effect_with_several_statements_commits_them_all_with_the_record)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = storetest_request("acme", "op-two", "{}");
    storetest_open(NULL, 1);

    cr_assert_eq(idem_store_execute(&out, fx.store, &req, two_statement_effect, NULL, &err), 0,
                 "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(storetest_tasks(), 2);
    cr_assert_eq(pgtest_scalar(fx.check, "SELECT count(*) FROM idem_example.support_tasks"
                                         " WHERE operation_id = 'op-two'"),
                 2);
    idem_outcome_clear(&out);
}

static int failing_sql_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                              idem_error *err)
{
    PGresult *res = NULL;
    /* A constraint violation in the effect's own statement is the effect's failure. */
    return idem_tx_exec(&res, tx,
                        "INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)"
                        " VALUES ('acme', '', 'x')",
                        0, NULL, err);
}

Test(store_effects, effect_statement_error_is_effect_failed_with_sqlstate_and_nothing_stored)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = storetest_request("acme", "op-sqlfail", "{}");
    storetest_open(NULL, 1);

    cr_assert_eq(idem_store_execute(&out, fx.store, &req, failing_sql_effect, NULL, &err),
                 IDEM_EEFFECT);
    cr_assert_eq(out.status, IDEM_STATUS_EFFECT_FAILED);
    cr_assert_str_eq(err.sqlstate, "23514", "check_violation, got '%s' (%s)", err.sqlstate,
                     err.message);
    cr_assert(strstr(err.message, "support_tasks_subject_length") != NULL, "%s", err.message);
    cr_assert_eq(storetest_operations(), 0);
    cr_assert_eq(storetest_tasks(), 0);
    /* The pool's connection is clean for the next call. */
    cr_assert_eq(storetest_create_task(&out, "acme", "op-after", "{\"subject\":\"s\"}", &err), 0,
                 "%s", err.message);
    idem_outcome_clear(&out);
}

/* The effect commits the same key through another connection just before its first
 * statement, which then fails: the claim lost, so the call answers from the record. */
struct racer {
    const char *args;
    const char *statement;
};

static int racing_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                         idem_error *err)
{
    struct racer *r = ctx;
    PGresult *res = NULL;

    storetest_insert_completed(idem_tx_tenant(tx), idem_tx_operation_id(tx), r->args,
                               "{\"winner\":true}");
    int rc = idem_tx_exec(&res, tx, r->statement, 0, NULL, err);
    PQclear(res);
    if (rc != 0)
        return rc;
    *response = json_pack("{s:b}", "winner", 0);
    return IDEM_EFFECT_OK;
}

Test(store_effects,
     claim_lost_to_a_concurrent_commit_answers_from_the_record_even_if_the_statement_failed)
{
    struct racer r = {"{\"subject\":\"race\"}", "SELECT 1/0"};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = storetest_request("acme", "op-race", r.args);
    storetest_open(NULL, 1);

    cr_assert_eq(idem_store_execute(&out, fx.store, &req, racing_effect, &r, &err), 0, "%s (%s)",
                 err.message, idem_status_name(out.status));
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_str_eq(out.receipt, "{\"winner\":true}");
    cr_assert_str_empty(err.message, "no stale message on success: %s", err.message);
    idem_store_stats st = IDEM_STORE_STATS_INIT;
    idem_store_stats_get(&st, fx.store);
    cr_assert_eq(st.claim_races, 1);
    cr_assert_eq(storetest_operations(), 1);
    idem_outcome_clear(&out);
}

static int ending_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                         idem_error *err)
{
    PGresult *res = NULL;
    int *codes = ctx;
    codes[0] = idem_tx_exec(&res, tx, codes[2] ? "COMMIT" : "ROLLBACK", 0, NULL, err);
    PQclear(res);
    res = NULL;
    codes[1] = idem_tx_exec(&res, tx,
                            "INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)"
                            " VALUES ('acme', 'after', 'x')",
                            0, NULL, err);
    PQclear(res);
    *response = json_pack("{s:s}", "status", "created");
    return IDEM_EFFECT_OK; /* ignores the errors: the store must not */
}

static void check_ending_effect(int commit)
{
    int codes[3] = {0, 0, commit};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = storetest_request("acme", "op-end", "{}");
    storetest_open(NULL, 1);

    cr_assert_eq(idem_store_execute(&out, fx.store, &req, ending_effect, codes, &err), IDEM_EEFFECT,
                 "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_EFFECT_FAILED);
    cr_assert(strstr(err.message, "COMMIT and ROLLBACK are the store's") != NULL, "%s",
              err.message);
    cr_assert_eq(codes[0], IDEM_EINVAL, "the ending statement is refused to the effect");
    cr_assert_eq(codes[1], IDEM_EINVAL, "nothing runs after it");
    cr_assert_eq(storetest_tasks(), 0);
    cr_assert_eq(storetest_operations(), 0, "no record, pending or not, is left for the key");
    idem_outcome_clear(&out);
}

Test(store_effects, effect_that_rolls_back_by_itself_is_refused_and_nothing_is_stored)
{
    check_ending_effect(0);
}

Test(store_effects, effect_that_commits_by_itself_is_refused_and_nothing_is_stored)
{
    check_ending_effect(1);
}

/* The example tool, as users copy it: characters are counted, not bytes, and a NUL in
 * the subject is refused clearly instead of being cut or tripping a CHECK. */
Test(store_effects, the_example_counts_characters_not_bytes)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    char args[1024] = "{\"subject\":\"";
    storetest_open(NULL, 1);

    for (int i = 0; i < 150; i++)
        strcat(args, "\xc3\xa9"); /* é: 2 bytes, 1 character */
    strcat(args, "\"}");
    cr_assert_eq(storetest_create_task(&out, "acme", "op-e", args, NULL), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED, "150 characters (300 bytes) are within 200");
    cr_assert_eq(storetest_tasks(), 1);
    idem_outcome_clear(&out);
}

Test(store_effects, the_example_refuses_a_nul_in_the_subject_and_inserts_nothing)
{
    static const char *const subjects[] = {"abc\\u0000def", "\\u0000abc"};
    idem_outcome out = IDEM_OUTCOME_INIT;
    char args[128], op[16];
    storetest_open(NULL, 1);

    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof(args), "{\"subject\":\"%s\"}", subjects[i]);
        snprintf(op, sizeof(op), "op-nul-%d", i);
        cr_assert_eq(storetest_create_task(&out, "acme", op, args, NULL), IDEM_EREJECTED, "%s",
                     subjects[i]);
        cr_assert(strstr(out.receipt, "NUL") != NULL, "%s", out.receipt);
    }
    cr_assert_eq(storetest_tasks(), 0, "never a truncated subject");
    idem_outcome_clear(&out);
}

/* An effect whose statement's result follows its table: RETURNING *. */
static int returning_all_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                                idem_error *err)
{
    const char *values[1] = {idem_tx_operation_id(tx)};
    PGresult *res = NULL;
    int rc;

    ((effect_counter *)ctx)->runs++;
    rc =
        idem_tx_exec(&res, tx, "INSERT INTO idem_example.effect_notes (op) VALUES ($1) RETURNING *",
                     1, values, err);
    if (rc != 0)
        return rc;
    *response = json_pack("{s:s, s:i}", "status", "noted", "columns", PQnfields(res));
    PQclear(res);
    return IDEM_EFFECT_OK;
}

static void notes_table(void)
{
    PQclear(pgtest_exec(
        fx.check, "CREATE TABLE idem_example.effect_notes"
                  " (id serial PRIMARY KEY, op text);"
                  " GRANT SELECT, INSERT ON idem_example.effect_notes TO " PGTEST_APP
                  "; GRANT USAGE ON SEQUENCE idem_example.effect_notes_id_seq TO " PGTEST_APP));
}

static long prepared_effect_statements(void)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_conn *conn = NULL;
    long n;

    cr_assert_eq(idem_pool_acquire(&conn, fx.pool, &err), 0, "%s", err.message);
    n = pgtest_scalar(idem_conn_pg(conn),
                      "SELECT count(*) FROM pg_prepared_statements"
                      " WHERE statement LIKE 'INSERT INTO idem_example.effect_notes%'");
    idem_pool_release(conn);
    return n;
}

/* A new key @op created by @effect in @attempts transaction attempts (0: any number; not
 * checked behind PgBouncer). */
static void call_creating(idem_effect_fn effect, unsigned int attempts, const char *op)
{
    effect_counter cnt = {0};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = storetest_request("acme", op, "{}");

    cr_assert_eq(idem_store_execute(&out, fx.store, &req, effect, &cnt, &err), 0, "%s: %s", op,
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    if (attempts > 0 && !pgtest_through_pgbouncer())
        cr_assert_eq(out.attempts, attempts, "%s: %u attempts", op, out.attempts);
    idem_outcome_clear(&out);
}

static void call_noting(const char *op, unsigned int attempts)
{
    call_creating(returning_all_effect, attempts, op);
}

/* Keys @prefix-0 .. @prefix-(n-1), each created by @effect. */
static void calls_creating(idem_effect_fn effect, const char *prefix, int n)
{
    char op[32];

    for (int i = 0; i < n; i++) {
        snprintf(op, sizeof(op), "%s-%d", prefix, i);
        call_creating(effect, 0, op);
    }
}

/* The effect's statement is parsed and planned once per connection, as a statement the
 * connection keeps; behind a transaction pooler nothing is kept. */
Test(store_effects, an_effects_statement_is_prepared_once_per_connection)
{
    notes_table();
    storetest_open(NULL, 1);
    calls_creating(returning_all_effect, "op-kept", 1);
    /* Kept from its second run: a text run once leaves nothing on the server. */
    cr_assert_eq(prepared_effect_statements(), 0, "after one call");
    calls_creating(returning_all_effect, "op-kept-again", 2);
    cr_assert_eq(prepared_effect_statements(), pgtest_through_pgbouncer() ? 0 : 1);
    cr_assert_eq(pgtest_scalar(fx.check, "SELECT count(*) FROM idem_example.effect_notes"), 3);
}

/* Writes through SQL with its value built in (a text that changes with every call). */
static int inlined_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                          idem_error *err)
{
    char sql[128];
    PGresult *res = NULL;
    int rc;

    snprintf(sql, sizeof(sql), "INSERT INTO idem_example.effect_notes (op) VALUES ('%s')",
             idem_tx_operation_id(tx));
    if ((rc = idem_tx_exec(&res, tx, sql, 0, NULL, err)) != 0)
        return rc;
    PQclear(res);
    *response = json_pack("{s:s}", "status", "noted");
    return IDEM_EFFECT_OK;
}

/* SQL that changes with every call is never kept, so that however much of it a
 * connection runs, a statement that comes back is still kept. */
Test(store_effects, sql_run_once_is_not_kept_and_crowds_out_no_statement)
{
    notes_table();
    storetest_open(NULL, 1);
    calls_creating(inlined_effect, "op-inlined", 40);
    calls_creating(returning_all_effect, "op-param", 2);
    cr_assert_eq(prepared_effect_statements(), pgtest_through_pgbouncer() ? 0 : 1,
                 "the statement with a parameter is kept");
    cr_assert_eq(pgtest_scalar(fx.check, "SELECT count(*) FROM pg_prepared_statements"
                                         " WHERE statement LIKE '%op-inlined-%'"),
                 0);
    cr_assert_eq(pgtest_scalar(fx.check, "SELECT count(*) FROM idem_example.effect_notes"), 42);
}

/* The table changes under a kept statement whose result follows it: PostgreSQL refuses
 * the old plan (0A000, cached plan must not change result type). The call starts over,
 * the statement sent afresh, and succeeds; the effect commits once. */
Test(store_effects, a_kept_statement_whose_table_changed_is_planned_again_and_the_call_succeeds)
{
    effect_counter cnt = {0};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request first = storetest_request("acme", "op-before", "{}");
    idem_request kept = storetest_request("acme", "op-kept", "{}");
    idem_request second = storetest_request("acme", "op-after", "{}");

    notes_table();
    storetest_open(NULL, 1);
    cr_assert_eq(idem_store_execute(&out, fx.store, &first, returning_all_effect, &cnt, &err), 0,
                 "%s", err.message);
    cr_assert_str_eq(out.receipt, "{\"columns\":2,\"status\":\"noted\"}");
    idem_outcome_clear(&out);
    /* Its second run: now kept. */
    cr_assert_eq(idem_store_execute(&out, fx.store, &kept, returning_all_effect, &cnt, &err), 0,
                 "%s", err.message);
    idem_outcome_clear(&out);
    PQclear(pgtest_exec(fx.check, "ALTER TABLE idem_example.effect_notes ADD COLUMN note text"));
    cr_assert_eq(idem_store_execute(&out, fx.store, &second, returning_all_effect, &cnt, &err), 0,
                 "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_str_eq(out.receipt, "{\"columns\":3,\"status\":\"noted\"}");
    cr_assert_eq(out.attempts, pgtest_through_pgbouncer() ? 1 : 2);
    idem_outcome_clear(&out);
    cr_assert_eq(
        pgtest_scalar(fx.check,
                      "SELECT count(*) FROM idem_example.effect_notes WHERE op = 'op-after'"),
        1);
    cr_assert_eq(storetest_operations(), 3);
}

/* Every connection of the pool kept the statement before its table changed: each call
 * still succeeds. The first to meet the old plan starts over once; the other connection
 * sends its statement as text from then on (no second failure), and fresh connections
 * prepare it anew. */
Test(store_effects, a_table_that_changed_under_every_connections_kept_statement_fails_no_call)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_conn *held = NULL;

    notes_table();
    storetest_open(NULL, 2);
    /* Two calls on each of the two connections: each keeps the statement. */
    cr_assert_eq(idem_pool_acquire(&held, fx.pool, &err), 0, "%s", err.message);
    call_noting("op-kept-a1", 1);
    call_noting("op-kept-a2", 1);
    idem_pool_release(held);
    call_noting("op-kept-b1", 1);
    call_noting("op-kept-b2", 1);
    PQclear(pgtest_exec(fx.check, "ALTER TABLE idem_example.effect_notes ADD COLUMN note text"));
    call_noting("op-changed-1", 2);
    call_noting("op-changed-2", 1);
    call_noting("op-changed-3", 1);
    call_noting("op-changed-4", 1);
    cr_assert_eq(pgtest_scalar(fx.check, "SELECT count(*) FROM idem_example.effect_notes"), 8);
    cr_assert_eq(storetest_operations(), 8);
}

/* Writes through a statement that cannot be prepared (its table does not exist), ignores
 * the failure, then writes through a good one. */
static int careless_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                           idem_error *err)
{
    const char *values[1] = {idem_tx_operation_id(tx)};
    PGresult *res = NULL;
    int rc;

    if (idem_tx_exec(&res, tx, "INSERT INTO idem_example.no_such_table (op) VALUES ($1)", 1, values,
                     err) == 0)
        PQclear(res);
    rc = idem_tx_exec(&res, tx, "INSERT INTO idem_example.effect_notes (op) VALUES ($1)", 1, values,
                      err);
    if (rc != 0)
        return rc;
    PQclear(res);
    *response = json_pack("{s:s}", "status", "noted");
    return IDEM_EFFECT_OK;
}

/* A first statement that cannot be prepared fails inside the transaction, after the claim:
 * the transaction is aborted, so the effect's next statement fails too and nothing
 * commits. */
Test(store_effects, a_first_statement_that_cannot_be_prepared_leaves_nothing_committed)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = storetest_request("acme", "op-careless", "{}");

    notes_table();
    storetest_open(NULL, 1);
    req.attempt = 1;
    cr_assert_eq(idem_store_execute(&out, fx.store, &req, careless_effect, NULL, &err),
                 IDEM_EEFFECT, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_EFFECT_FAILED);
    cr_assert_str_eq(err.sqlstate, "25P02", "%s: %s", err.sqlstate, err.message);
    cr_assert_eq(pgtest_scalar(fx.check, "SELECT count(*) FROM idem_example.effect_notes"), 0);
    cr_assert_eq(storetest_operations(), 0);
    idem_outcome_clear(&out);
}

/* A first attempt whose key has a record replays it, even when the effect's statement no
 * longer prepares (a table renamed since): the claim answers before the statement is
 * prepared. */
Test(store_effects, a_first_attempt_replays_even_when_the_effects_statement_no_longer_prepares)
{
    effect_counter cnt = {0};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = storetest_request("acme", "op-renamed", "{}");

    notes_table();
    storetest_open(NULL, 1);
    req.attempt = 1;
    cr_assert_eq(idem_store_execute(&out, fx.store, &req, returning_all_effect, &cnt, &err), 0,
                 "%s", err.message);
    idem_outcome_clear(&out);
    cr_assert_eq(idem_store_execute(&out, fx.store, &req, careless_effect, NULL, &err), 0, "%s",
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_str_eq(out.receipt, "{\"columns\":2,\"status\":\"noted\"}");
    idem_outcome_clear(&out);
}
