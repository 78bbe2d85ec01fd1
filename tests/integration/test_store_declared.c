/* Declared effects (idem_store_execute_declared): the seed's behaviours on the one-round-trip
 * path, and every way the declared statement can go wrong. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"
#include "storetest.h"

static idem_declared *create_task;

static void declared_init(void)
{
    storetest_init();
    create_task = storetest_declared_task();
}

static void declared_fini(void)
{
    idem__store_inject_fault(NULL, IDEM__FAULT_NONE, 0);
    idem_declared_free(create_task);
    create_task = NULL;
    storetest_fini();
}

TestSuite(store_declared, .init = declared_init, .fini = declared_fini, .timeout = 240);

static int run_declared(idem_outcome *out, const idem_declared *d, const char *tenant,
                        const char *op, const char *args, unsigned int attempt, idem_error *err)
{
    idem_request req = storetest_request(tenant, op, args);

    req.attempt = attempt;
    idem_outcome_clear(out);
    return idem_store_execute_declared(out, fx.store, &req, d, err);
}

/* The example tool's callback, as a first attempt: the claim answers for a key taken. */
static int callback_first_attempt(idem_outcome *out, const char *op, const char *args,
                                  idem_error *err)
{
    idem_request req = storetest_request("acme", op, args);

    req.attempt = 1;
    idem_outcome_clear(out);
    return idem_store_execute(out, fx.store, &req, example_create_support_task, NULL, err);
}

static int task(idem_outcome *out, const char *tenant, const char *op, const char *subject,
                unsigned int attempt)
{
    char args[256];
    idem_error err = IDEM_ERROR_INIT;

    snprintf(args, sizeof(args), "{\"subject\":\"%s\"}", subject);
    return run_declared(out, create_task, tenant, op, args, attempt, &err);
}

Test(store_declared, a_new_key_creates_in_one_call_and_the_retry_replays_byte_for_byte)
{
    idem_outcome out = IDEM_OUTCOME_INIT, again = IDEM_OUTCOME_INIT;
    idem_store_stats stats = IDEM_STORE_STATS_INIT;
    storetest_open(NULL, 2);

    cr_assert_eq(task(&out, "acme", "op-1", "Check delayed delivery", 1), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_str_eq(out.receipt, "{\"status\":\"created\",\"task_id\":1}");
    for (unsigned int attempt = 1; attempt <= 2; attempt++) {
        cr_assert_eq(task(&again, "acme", "op-1", "Check delayed delivery", attempt), 0);
        cr_assert_eq(again.status, IDEM_STATUS_REPLAYED, "attempt %u", attempt);
        cr_assert_eq(again.receipt_len, out.receipt_len);
        cr_assert_eq(memcmp(again.receipt, out.receipt, out.receipt_len), 0);
    }
    cr_assert_eq(storetest_tasks(), 1);
    cr_assert_eq(storetest_operations(), 1);
    /* The first attempt on a key with a record lost its claim to that record: a race, and
     * the lookup behind it answered; the retry looked first. */
    cr_assert_eq(idem_store_stats_get(&stats, fx.store), 0);
    cr_assert_eq(stats.claim_races, 1);
    cr_assert_eq(stats.created, 1);
    cr_assert_eq(stats.replayed, 2);
    idem_outcome_clear(&out);
    idem_outcome_clear(&again);
}

/* The record keeps the server's JSON text, as earlier versions stored and answered it; the
 * first caller and every retry get its canonical form (RFC 8785 whitespace and member
 * order), every number's digits as written. */
Test(store_declared, the_receipt_goes_out_canonical_with_its_numbers_as_written)
{
    static const char canonical[] = "{\"a\":\"x\",\"b\":1.50,\"c\":[1E+400,-0],"
                                    "\"d\":123456789012345678901234567890.0100}";
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_declared *d = NULL;
    char *stored;

    storetest_open(NULL, 2);
    cr_assert_eq(idem_declared_new(&d,
                                   "SELECT '{\"d\" : 123456789012345678901234567890.0100,"
                                   " \"c\" : [1E+400, -0], \"b\" : 1.50, \"a\" : \"x\"}'::json",
                                   NULL, 0, &err),
                 0, "%s", err.message);
    cr_assert_eq(run_declared(&out, d, "acme", "op-c", "{}", 1, &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_str_eq(out.receipt, canonical);
    cr_assert_eq(out.receipt_len, strlen(canonical));
    stored = storetest_receipt("acme", "op-c");
    cr_assert_str_eq(stored, "{\"d\" : 123456789012345678901234567890.0100, \"c\" : [1E+400, -0],"
                             " \"b\" : 1.50, \"a\" : \"x\"}");
    free(stored);
    cr_assert_eq(pgtest_scalar(fx.check, "SELECT count(*) FROM idem.operations"
                                         " WHERE operation_id = 'op-c' AND receipt_canonical"),
                 1, "the record says its receipt goes out canonical");
    for (unsigned int attempt = 1; attempt <= 2; attempt++) {
        cr_assert_eq(run_declared(&out, d, "acme", "op-c", "{}", attempt, &err), 0, "%s",
                     err.message);
        cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
        cr_assert_str_eq(out.receipt, canonical, "attempt %u", attempt);
    }
    /* The claim of a callback call of the same tool and arguments finds the record. */
    cr_assert_eq(callback_first_attempt(&out, "op-c", "{}", &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_str_eq(out.receipt, canonical);
    cr_assert_eq(storetest_tasks(), 0, "the callback's effect never ran");
    idem_declared_free(d);
    idem_outcome_clear(&out);
}

/* A declared record written before migration 0013 answered its first caller the server's
 * text, spacing and all: every retry gets those bytes again, whichever way it reads the
 * record: the declared statement's first attempt (the key is taken: the lookup answers),
 * a retry's lookup, and the claim of a callback call of the same tool and arguments.
 * Nothing runs again. */
Test(store_declared, a_record_of_an_earlier_version_replays_byte_for_byte_as_stored)
{
    static const char args[] = "{\"subject\":\"s\"}";
    static const char stored[] = "{\"task_id\" : 7, \"status\" : \"created\"}";
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;

    storetest_open(NULL, 2);
    storetest_insert_completed("acme", "op-old", args, stored); /* as before 0013 */
    for (unsigned int attempt = 1; attempt <= 2; attempt++) {
        cr_assert_eq(run_declared(&out, create_task, "acme", "op-old", args, attempt, &err), 0,
                     "%s", err.message);
        cr_assert_eq(out.status, IDEM_STATUS_REPLAYED, "attempt %u", attempt);
        cr_assert_eq(out.receipt_len, strlen(stored), "attempt %u", attempt);
        cr_assert_str_eq(out.receipt, stored, "attempt %u", attempt);
    }
    cr_assert_eq(callback_first_attempt(&out, "op-old", args, &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_str_eq(out.receipt, stored);
    cr_assert_eq(storetest_tasks(), 0, "nothing ran again");
    idem_outcome_clear(&out);
}

Test(store_declared, a_lost_reply_after_commit_is_replayed_by_the_retry)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    storetest_open(NULL, 2);

    idem__store_inject_fault(fx.store, IDEM__FAULT_REPLY_LOST_AFTER_COMMIT, 1);
    cr_assert_eq(task(&out, "acme", "op-lost", "s", 1), IDEM_EUNAVAIL);
    cr_assert_eq(out.status, IDEM_STATUS_UNAVAILABLE);
    cr_assert_eq(storetest_tasks(), 1, "the effect committed");
    cr_assert_eq(task(&out, "acme", "op-lost", "s", 2), 0);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_eq(storetest_tasks(), 1);
    idem_outcome_clear(&out);
}

Test(store_declared, a_connection_lost_during_commit_resolves_to_created)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    char want[96];
    storetest_open(NULL, 2);

    idem__store_inject_fault(fx.store, IDEM__FAULT_DROP_DURING_COMMIT, 1);
    cr_assert_eq(task(&out, "acme", "op-drop", "s", 1), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED, "%s", idem_status_name(out.status));
    cr_assert_eq(storetest_tasks(), 1);
    /* The one task's receipt, canonical as on the direct path: found again after the lost
     * reply, or, when the server saw the socket close before COMMIT (a loaded machine),
     * written by the attempt after it, whose task took the next identity value. */
    snprintf(want, sizeof(want), "{\"status\":\"created\",\"task_id\":%ld}",
             pgtest_scalar(fx.check, "SELECT task_id FROM idem_example.support_tasks"));
    cr_assert_str_eq(out.receipt, want, "%s", out.receipt);
    idem_outcome_clear(&out);
}

Test(store_declared, a_rolled_back_attempt_leaves_nothing_and_the_retry_creates)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    storetest_open(NULL, 2);

    idem__store_inject_fault(fx.store, IDEM__FAULT_FAIL_BEFORE_COMMIT, 1);
    cr_assert_eq(task(&out, "acme", "op-rb", "s", 1), IDEM_EUNAVAIL);
    cr_assert_eq(storetest_tasks(), 0);
    cr_assert_eq(storetest_operations(), 0);
    cr_assert_eq(task(&out, "acme", "op-rb", "s", 2), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(storetest_tasks(), 1);
    idem_outcome_clear(&out);
}

Test(store_declared, changed_arguments_conflict_and_write_nothing)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    storetest_open(NULL, 2);

    cr_assert_eq(task(&out, "acme", "op-c", "first", 1), 0);
    for (unsigned int attempt = 1; attempt <= 2; attempt++) {
        cr_assert_eq(task(&out, "acme", "op-c", "second", attempt), IDEM_ECONFLICT);
        cr_assert_eq(out.status, IDEM_STATUS_CONFLICT);
        cr_assert_null(out.receipt);
    }
    cr_assert_eq(storetest_tasks(), 1);
    idem_outcome_clear(&out);
}

Test(store_declared, two_intents_with_the_same_arguments_create_two_tasks)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    storetest_open(NULL, 2);

    cr_assert_eq(task(&out, "acme", "op-a", "same", 1), 0);
    cr_assert_eq(task(&out, "acme", "op-b", "same", 1), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(storetest_tasks(), 2);
    idem_outcome_clear(&out);
}

Test(store_declared, the_same_operation_id_in_another_tenant_is_another_key)
{
    idem_outcome a = IDEM_OUTCOME_INIT, b = IDEM_OUTCOME_INIT;
    storetest_open(NULL, 2);

    cr_assert_eq(task(&a, "acme", "op-t", "same", 1), 0);
    cr_assert_eq(task(&b, "globex", "op-t", "same", 1), 0);
    cr_assert_eq(b.status, IDEM_STATUS_CREATED, "never acme's receipt");
    cr_assert_str_neq(a.receipt, b.receipt);
    cr_assert_eq(storetest_tasks(), 2);
    idem_outcome_clear(&a);
    idem_outcome_clear(&b);
}

Test(store_declared, invalid_input_names_the_field_and_writes_nothing)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_declared *d = NULL;
    storetest_open(NULL, 2);

    cr_assert_eq(run_declared(&out, create_task, "", "op", "{}", 1, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "tenant");
    cr_assert_eq(run_declared(&out, create_task, "acme", "op", "[1]", 1, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "arguments");
    cr_assert_eq(out.status, IDEM_STATUS_INVALID);
    cr_assert_eq(run_declared(&out, create_task, "acme", "op", "{\"subject\":", 1, &err),
                 IDEM_EINVAL);
    cr_assert_str_eq(err.field, "arguments");
    cr_assert_eq(run_declared(&out, NULL, "acme", "op", "{}", 1, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "effect");
    cr_assert_eq(idem_declared_new(&d, "", NULL, 0, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "sql");
    cr_assert_eq(idem_declared_new(&d, "SELECT 1", NULL, 2, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "params");
    cr_assert_null(d);
    cr_assert_eq(storetest_operations(), 0);
    cr_assert_eq(storetest_tasks(), 0);
    idem_outcome_clear(&out);
}

struct hot {
    int created;
};

static void *hammer(void *arg)
{
    struct hot *h = arg;

    for (int i = 0; i < 20; i++) {
        idem_outcome out = IDEM_OUTCOME_INIT;
        int rc = 1;
        for (unsigned int attempt = 1; attempt <= 50 && rc != 0; attempt++) {
            rc = task(&out, "acme", "op-hot", "hot", attempt);
            if (rc != 0 && out.status != IDEM_STATUS_IN_PROGRESS &&
                out.status != IDEM_STATUS_UNAVAILABLE)
                break;
        }
        cr_assert_eq(rc, 0, "%s", idem_status_name(out.status));
        if (out.status == IDEM_STATUS_CREATED)
            __atomic_add_fetch(&h->created, 1, __ATOMIC_SEQ_CST);
        idem_outcome_clear(&out);
    }
    return NULL;
}

Test(store_declared, many_threads_on_one_key_create_exactly_one_task)
{
    struct hot h = {0};
    pthread_t t[8];
    storetest_open(NULL, 8);

    for (int i = 0; i < 8; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, hammer, &h), 0);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    cr_assert_eq(h.created, 1);
    cr_assert_eq(storetest_tasks(), 1);
    cr_assert_eq(storetest_operations(), 1);
}

/* Each bad statement ends effect_failed with nothing stored, its message saying @says. */
static void expect_effect_failed(const char *sql, const char *why, const char *says)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_declared *d = NULL;

    cr_assert_eq(idem_declared_new(&d, sql, NULL, 0, &err), 0, "%s", err.message);
    int rc = run_declared(&out, d, "acme", "op-bad", "{}", 1, &err);
    cr_assert_eq(rc, IDEM_EEFFECT, "%s: %s %s", why, idem_err_name(rc), err.message);
    cr_assert_eq(out.status, IDEM_STATUS_EFFECT_FAILED, "%s", why);
    cr_assert_null(out.receipt);
    cr_assert_not_null(strstr(err.message, says), "%s: message '%s' lacks '%s'", why, err.message,
                       says);
    cr_assert_eq(storetest_operations(), 0, "%s: nothing stored", why);
    cr_assert_eq(storetest_tasks(), 0, "%s: the statement rolled back", why);
    idem_declared_free(d);
    idem_outcome_clear(&out);
}

Test(store_declared, a_statement_that_fails_returns_no_row_several_rows_or_non_json_stores_nothing)
{
    storetest_open(NULL, 2);
    expect_effect_failed("INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)"
                         " VALUES ('acme', '', 'x') RETURNING '{\"id\" : ' || task_id::text || '}'",
                         "a CHECK violation", pgtest_server_says("violates check constraint"));
    expect_effect_failed("UPDATE idem_example.support_tasks SET status = 'closed'"
                         " WHERE false RETURNING '{\"id\" : ' || task_id::text || '}'",
                         "no row", "returned 0 rows");
    expect_effect_failed("INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)"
                         " VALUES ('acme', 'a', 'x'), ('acme', 'b', 'x')"
                         " RETURNING '{\"id\" : ' || task_id::text || '}'",
                         "two rows", "returned 2 rows");
    expect_effect_failed("INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)"
                         " VALUES ('acme', 'a', 'x') RETURNING 'not json'::text",
                         "non-JSON", pgtest_server_says("type json"));
    /* The application's own objects missing, even named like idem's: the statement's fault,
     * not a schema behind the library (misconfigured). */
    expect_effect_failed("INSERT INTO idem_example.operations (tenant) VALUES ('acme')"
                         " RETURNING '{}'::json",
                         "a missing table named like idem's", pgtest_server_says("does not exist"));
    expect_effect_failed("SELECT idem_example.declared_outcome('{}'::json)",
                         "a missing function named like idem's",
                         pgtest_server_says("does not exist"));
    expect_effect_failed(
        "INSERT INTO myidem.operations (tenant) VALUES ('acme') RETURNING '{}'::json",
        "a missing table whose name ends like idem's", pgtest_server_says("does not exist"));
}

/* A first attempt on a key that has a record is answered from the record whatever its
 * statement returns, no row or several as much as one: a retry finds what the first attempt
 * did, and the rows of the statement are rolled back. (Until this release such an attempt
 * ended effect_failed, the statement's rule checked before the key's record.) */
Test(store_declared,
     a_statement_returning_no_row_or_several_on_a_taken_key_is_answered_from_its_record)
{
    static const char *const bad[] = {
        "UPDATE idem_example.support_tasks SET status = 'closed'"
        " WHERE false RETURNING '{\"id\" : ' || task_id::text || '}'",
        "INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)"
        " VALUES ('acme', 'a', 'x'), ('acme', 'b', 'x')"
        " RETURNING '{\"id\" : ' || task_id::text || '}'",
    };
    idem_outcome first = IDEM_OUTCOME_INIT, out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    storetest_open(NULL, 2);

    cr_assert_eq(task(&first, "acme", "op-kept", "s", 1), 0);
    cr_assert_eq(first.status, IDEM_STATUS_CREATED);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        idem_declared *d = NULL;

        cr_assert_eq(idem_declared_new(&d, bad[i], NULL, 0, &err), 0, "%s", err.message);
        cr_assert_eq(run_declared(&out, d, "acme", "op-kept", "{\"subject\":\"s\"}", 1, &err), 0,
                     "statement %zu: %s", i, err.message);
        cr_assert_eq(out.status, IDEM_STATUS_REPLAYED, "statement %zu", i);
        cr_assert_eq(out.receipt_len, first.receipt_len);
        cr_assert_eq(memcmp(out.receipt, first.receipt, first.receipt_len), 0);
        idem_declared_free(d);
    }
    cr_assert_eq(storetest_operations(), 1);
    cr_assert_eq(storetest_tasks(), 1, "the two rows of the second statement rolled back");
    idem_outcome_clear(&first);
    idem_outcome_clear(&out);
}

/* The statement's text does not depend on how the server reads string literals: a role or
 * database that turns standard_conforming_strings off creates and replays alike. */
Test(store_declared, a_session_without_standard_conforming_strings_creates_and_replays)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_conn *conn = NULL;
    PGresult *res;

    PQclear(pgtest_exec(fx.check, "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET"
                                  " standard_conforming_strings = off', current_database());"
                                  " END $$"));
    storetest_open(NULL, 2);
    cr_assert_eq(idem_pool_acquire(&conn, fx.pool, &err), 0, "%s", err.message);
    res = PQexec(idem_conn_pg(conn), "SHOW standard_conforming_strings");
    cr_assert_str_eq(PQgetvalue(res, 0, 0), "off", "the store's sessions read literals so");
    PQclear(res);
    idem_pool_release(conn);
    cr_assert_eq(task(&out, "acme", "op-scs", "Check delayed delivery", 1), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(task(&out, "acme", "op-scs", "Check delayed delivery", 2), 0);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_eq(storetest_tasks(), 1);
    idem_outcome_clear(&out);
}

Test(store_declared, a_statement_returning_sql_null_says_so_and_stores_nothing)
{
    storetest_open(NULL, 2);
    expect_effect_failed("SELECT NULL::json", "SELECT NULL",
                         "declared effect: the declared statement returned SQL NULL instead of "
                         "JSON");
    expect_effect_failed("INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)"
                         " VALUES ('acme', 'a', 'x') RETURNING NULL::jsonb",
                         "INSERT ... RETURNING NULL", "returned SQL NULL instead of JSON");
}

/* A statement whose receipt is @bytes long: {"s" : "xx..."} (text holding JSON: Citus
 * takes only immutable functions in a distributed INSERT's RETURNING). */
static idem_declared *receipt_of(size_t bytes)
{
    static const char *const params[] = {"$tenant", "$operation_id"};
    char sql[512];
    idem_declared *d = NULL;
    idem_error err = IDEM_ERROR_INIT;

    snprintf(sql, sizeof(sql),
             "INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)"
             " VALUES ($1, 'big', $2) RETURNING '{\"s\" : \"' || repeat('x', %zu) || '\"}'",
             bytes - strlen("{\"s\" : \"\"}"));
    cr_assert_eq(idem_declared_new(&d, sql, params, 2, &err), 0, "%s", err.message);
    return d;
}

Test(store_declared, a_receipt_over_max_response_bytes_fails_naming_the_limit_and_stores_nothing)
{
    idem_store_options opts = IDEM_STORE_OPTIONS_INIT;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_declared *big = receipt_of(2000010), *at_limit = receipt_of(100), *over = receipt_of(101);
    storetest_open(NULL, 2);

    /* The default limit, 1 MiB. */
    cr_assert_eq(run_declared(&out, big, "acme", "op-big", "{}", 1, &err), IDEM_EEFFECT, "%s",
                 idem_status_name(out.status));
    cr_assert_eq(out.status, IDEM_STATUS_EFFECT_FAILED);
    cr_assert_null(out.receipt);
    cr_assert_str_eq(err.message, "declared effect: receipt: 2000010 bytes exceed the limit of "
                                  "1048576 (max_response_bytes)");
    cr_assert_eq(storetest_operations(), 0);
    cr_assert_eq(storetest_tasks(), 0, "the statement rolled back");
    /* A key that already has a record answers from it, whatever the receipt would be. */
    cr_assert_eq(task(&out, "acme", "op-taken", "s", 1), 0);
    cr_assert_eq(run_declared(&out, big, "acme", "op-taken", "{\"subject\":\"s\"}", 1, &err), 0,
                 "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    storetest_close();

    /* The limit is inclusive. */
    opts.max_response_bytes = 100;
    storetest_open(&opts, 2);
    cr_assert_eq(run_declared(&out, at_limit, "acme", "op-100", "{}", 1, &err), 0, "%s",
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    /* The limit applies to the record's text; the receipt goes out without its two blanks. */
    cr_assert_eq(out.receipt_len, 98);
    cr_assert_eq(run_declared(&out, over, "acme", "op-101", "{}", 1, &err), IDEM_EEFFECT);
    cr_assert_str_eq(err.message, "declared effect: receipt: 101 bytes exceed the limit of 100 "
                                  "(max_response_bytes)");
    cr_assert_eq(storetest_operations(), 2, "op-taken's and op-100's");
    cr_assert_eq(storetest_tasks(), 2);
    idem_declared_free(big);
    idem_declared_free(at_limit);
    idem_declared_free(over);
    idem_outcome_clear(&out);
}

/* idem_declared_new() refuses the declaration: IDEM_EINVAL naming @field, with @says. */
static void expect_refused(const char *sql, const char *const *params, size_t nparams,
                           const char *field, const char *says)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_declared *d = NULL;

    cr_assert_eq(idem_declared_new(&d, sql, params, nparams, &err), IDEM_EINVAL, "<%s> accepted",
                 sql);
    cr_assert_null(d);
    cr_assert_str_eq(err.field, field);
    cr_assert_not_null(strstr(err.message, says), "message '%s' lacks '%s'", err.message, says);
}

Test(store_declared, sql_referring_beyond_its_parameters_is_refused)
{
    static const char *const one[] = {"subject"};
    static const char *const quoted_args[] = {"a"};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_declared *d = NULL;
    storetest_open(NULL, 2);

    /* $2 would have been the store's tenant. */
    expect_refused("SELECT json_build_object('subject', $1, 'tenant', $2)", one, 1, "sql",
                   "$2, beyond the 1 parameter declared");
    expect_refused("SELECT json_build_object('x', $0)", one, 1, "sql", "$0");
    expect_refused("SELECT json_build_object('x', $1)", NULL, 0, "sql", "$1, beyond the 0");
    /* In quotes, comments and dollar quotes $N is text. */
    cr_assert_eq(idem_declared_new(&d,
                                   "SELECT -- $7\n json_build_object('a', $1::text, 'b',"
                                   " '$2', 'c', $$ $3 $$, 'd', $t$ $4 $t$) /* $6 */",
                                   quoted_args, 1, &err),
                 0, "%s", err.message);
    cr_assert_eq(run_declared(&out, d, "acme", "op-q", "{\"a\":\"x\"}", 1, &err), 0, "%s",
                 err.message);
    cr_assert_str_eq(out.receipt, "{\"a\":\"x\",\"b\":\"$2\",\"c\":\" $3 \",\"d\":\" $4 \"}");
    idem_declared_free(d);
    idem_outcome_clear(&out);
}

/* Each would fail on every call (the store's statement around it cannot hold it): refused
 * when declared, saying why. */
Test(store_declared, a_statement_that_can_never_run_as_a_declared_effect_is_refused_when_declared)
{
    static const char *const params[] = {"$tenant", "subject"};

    expect_refused("COMMIT", NULL, 0, "sql", "'COMMIT' cannot run inside the store's statement");
    expect_refused("ROLLBACK", NULL, 0, "sql", "'ROLLBACK' cannot run");
    expect_refused("SET statement_timeout = 0", NULL, 0, "sql", "'SET' cannot run");
    expect_refused("VACUUM idem_example.support_tasks", NULL, 0, "sql", "'VACUUM' cannot run");
    expect_refused("CREATE TABLE t (a int)", NULL, 0, "sql", "'CREATE' cannot run");
    expect_refused("INSERT INTO idem_example.support_tasks (tenant, subject) VALUES ($1, $2)",
                   params, 2, "sql",
                   "a declared statement must return its receipt: INSERT without RETURNING");
}

Test(store_declared, params_starting_with_a_dollar_other_than_the_keys_parts_are_refused)
{
    static const char *const bogus[] = {"$tenant", "$bogus"};
    static const char *const tenants[] = {"$tenants"};
    static const char *const dollar[] = {"$"};

    expect_refused("SELECT json_build_object('t', $1, 'b', $2)", bogus, 2, "params",
                   "parameter $2 is \"$bogus\": names starting with '$' are reserved for the "
                   "key's parts");
    expect_refused("SELECT json_build_object('t', $1)", tenants, 1, "params", "\"$tenants\"");
    expect_refused("SELECT json_build_object('t', $1)", dollar, 1, "params", "\"$\"");
}

Test(store_declared, a_trailing_comment_or_semicolon_does_not_break_the_statement)
{
    static const char *const params[] = {"$tenant", "subject", "$operation_id"};
    static const char *const endings[] = {" -- the new task", ";",           "; \n\t",
                                          "-- a\n-- b",       " /* done */", "; -- done",
                                          ";\n/* c */ ;"};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    storetest_open(NULL, 2);

    for (size_t i = 0; i < sizeof(endings) / sizeof(endings[0]); i++) {
        char sql[512], op[16];
        idem_declared *d = NULL;

        snprintf(sql, sizeof(sql),
                 "INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)"
                 " VALUES ($1, $2, $3) RETURNING '{\"id\" : ' || task_id::text || '}'%s",
                 endings[i]);
        snprintf(op, sizeof(op), "op-end-%zu", i);
        cr_assert_eq(idem_declared_new(&d, sql, params, 3, &err), 0, "%s", err.message);
        cr_assert_eq(run_declared(&out, d, "acme", op, "{\"subject\":\"s\"}", 1, &err), 0,
                     "<%s>: %s", endings[i], err.message);
        cr_assert_eq(out.status, IDEM_STATUS_CREATED);
        idem_declared_free(d);
    }
    cr_assert_eq(storetest_tasks(), 7);
    cr_assert_eq(storetest_operations(), 7);
    idem_outcome_clear(&out);
}

/* A declaration freed and another made at once (often at the same address): the
 * connection that prepared the first runs the second's SQL, never the first's. */
Test(store_declared, a_new_declaration_never_runs_a_freed_ones_statement)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char sql[64], op[16], receipt[32];

    storetest_open(NULL, 1);
    for (int i = 0; i < 6; i++) {
        idem_declared *d = NULL;

        snprintf(sql, sizeof(sql), "SELECT json_build_object('run', %d)", i);
        snprintf(op, sizeof(op), "op-run-%d", i);
        snprintf(receipt, sizeof(receipt), "{\"run\":%d}", i);
        cr_assert_eq(idem_declared_new(&d, sql, NULL, 0, &err), 0, "%s", err.message);
        cr_assert_eq(run_declared(&out, d, "acme", op, "{}", 1, &err), 0, "%s", err.message);
        cr_assert_str_eq(out.receipt, receipt, "declaration %d", i);
        idem_outcome_clear(&out);
        idem_declared_free(d);
    }
}

Test(store_declared, a_late_retry_is_expired_and_never_runs_the_statement)
{
    /* A UUIDv7 minted on 2020-01-01: far beyond any key memory. */
    static const char old_op[] = "016f5e66-e800-7000-8000-000000000001";
    idem_outcome out = IDEM_OUTCOME_INIT;
    storetest_open(NULL, 2);

    cr_assert_eq(task(&out, "acme", old_op, "late", 1), IDEM_EEXPIRED);
    cr_assert_eq(out.status, IDEM_STATUS_EXPIRED);
    cr_assert_eq(task(&out, "acme", "op-tomb", "s", 1), 0);
    PQclear(pgtest_exec(fx.check, "UPDATE idem.operations SET state = 'expired',"
                                  " response = NULL, expired_at = now()"
                                  " WHERE operation_id = 'op-tomb'"));
    cr_assert_eq(task(&out, "acme", "op-tomb", "s", 1), IDEM_EEXPIRED);
    cr_assert_eq(out.status, IDEM_STATUS_EXPIRED);
    cr_assert_eq(storetest_tasks(), 1, "neither late call ran the statement");
    idem_outcome_clear(&out);
}

/* A declared statement that changes the tenant setting on its way meets the tenant policy
 * when its record is written with its rows: nothing is kept, and the call says why. (On
 * Citus the coordinator evaluates set_config() in its own session, which the worker that
 * writes the rows and the record never sees: nothing to test there.) */
Test(store_declared, a_statement_that_changes_the_tenant_stores_nothing)
{
    if (pgtest_citus_workers() != NULL)
        cr_skip_test("set_config() changes only the coordinator's session on Citus");
    storetest_open(NULL, 2);
    expect_effect_failed("INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)"
                         " SELECT 'acme', 'a', 'x' FROM (SELECT set_config('idem.tenant',"
                         " 'other', true)) AS s RETURNING '{\"id\" : 1}'",
                         "tenant changed", "changed idem.tenant");
}

/* A declared statement @sql, of one parameter ($tenant), on a table of the application's
 * that @setup makes (as the owner), with the store opened after it, its pool's
 * statement_timeout_ms @cap_ms (0: none). Plain PostgreSQL only: the test is skipped on
 * Citus. */
static idem_declared *on_application_table(const char *setup, const char *sql, unsigned int cap_ms)
{
    static const char *const params[] = {"$tenant"};
    idem_error err = IDEM_ERROR_INIT;
    idem_declared *d = NULL;

    if (pgtest_citus_workers() != NULL)
        cr_skip_test("the application's local tables: plain PostgreSQL only");
    PQclear(pgtest_exec(fx.check, setup));
    if (cap_ms > 0)
        storetest_open_statement_timeout(NULL, cap_ms);
    else
        storetest_open(NULL, 2);
    cr_assert_eq(idem_declared_new(&d, sql, params, 1, &err), 0, "%s", err.message);
    return d;
}

/* A privilege the application's role lacks on its own table: misconfigured, as on the
 * callback path, with the GRANT in the hint; nothing is stored. */
Test(store_declared, a_missing_privilege_on_the_applications_table_is_misconfigured)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_declared *d =
        on_application_table("CREATE TABLE idem_example.private_notes (tenant text)",
                             "INSERT INTO idem_example.private_notes (tenant) VALUES ($1)"
                             " RETURNING json_build_object('t', tenant)",
                             0);

    for (unsigned int attempt = 1; attempt <= 2; attempt++) {
        cr_assert_eq(run_declared(&out, d, "acme", "op-denied", "{}", attempt, &err), IDEM_EPERM,
                     "attempt %u: %s", attempt, err.message);
        cr_assert_eq(out.status, IDEM_STATUS_MISCONFIGURED);
        cr_assert_str_eq(err.sqlstate, "42501");
        cr_assert(strstr(err.message, pgtest_server_says("permission denied for table")) != NULL &&
                      strstr(err.message, "private_notes") != NULL,
                  "%s", err.message);
        cr_assert(strstr(err.hint, "GRANT") != NULL && strstr(err.hint, PGTEST_APP) != NULL, "%s",
                  err.hint);
    }
    cr_assert_eq(storetest_operations(), 0);
    idem_declared_free(d);
    idem_outcome_clear(&out);
}

/* A unique violation in a table of the application's whose key has the name of idem's
 * (operations_pkey, here in idem_example.operations) is the statement's failure, never
 * taken for the key's record, on a first attempt or a retry; the key stays free. */
Test(store_declared, a_unique_violation_of_an_application_key_named_like_idems_is_the_effects)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_declared *d =
        on_application_table("CREATE TABLE idem_example.operations (tenant text, operation_id text,"
                             " CONSTRAINT operations_pkey PRIMARY KEY (tenant, operation_id));"
                             " INSERT INTO idem_example.operations VALUES ('acme', 'op-app');"
                             " GRANT SELECT, INSERT ON idem_example.operations TO " PGTEST_APP,
                             "INSERT INTO idem_example.operations (tenant, operation_id)"
                             " VALUES ($1, 'op-app') RETURNING json_build_object('t', tenant)",
                             0);

    for (unsigned int attempt = 1; attempt <= 2; attempt++) {
        cr_assert_eq(run_declared(&out, d, "acme", "op-app", "{}", attempt, &err), IDEM_EEFFECT,
                     "attempt %u: %s", attempt, err.message);
        cr_assert_eq(out.status, IDEM_STATUS_EFFECT_FAILED);
        cr_assert_str_eq(err.sqlstate, "23505");
        cr_assert_str_eq(err.constraint, "operations_pkey", "the server's name, as it gave it");
        cr_assert_not_null(strstr(err.message, pgtest_server_says("duplicate key")), "%s",
                           err.message);
    }
    cr_assert_eq(storetest_operations(), 0, "nothing stored");
    cr_assert_eq(task(&out, "acme", "op-app", "s", 1), 0, "the key is still free");
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(task(&out, "acme", "op-app", "s", 1), 0, "a first attempt on the key taken");
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    idem_declared_free(d);
    idem_outcome_clear(&out);
}

/* Under the pool's statement_timeout, which the session holds, the statement sets the
 * call's tenant itself (store_declared.c): before the tool's SQL runs, so that a policy of
 * the application's own table that reads it admits the call's tenant's rows, and only
 * those; nothing is kept of a call whose row the policy refuses. */
Test(store_declared, the_tenant_is_set_before_the_tools_sql_runs_when_the_statement_sets_it)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_declared *d = on_application_table(
        "CREATE TABLE idem_example.tenant_notes (tenant text, body text);"
        " GRANT SELECT, INSERT ON idem_example.tenant_notes TO " PGTEST_APP ";"
        " ALTER TABLE idem_example.tenant_notes ENABLE ROW LEVEL SECURITY;"
        " CREATE POLICY own_tenant ON idem_example.tenant_notes"
        " USING (tenant = current_setting('idem.tenant', true))",
        "INSERT INTO idem_example.tenant_notes (tenant, body) VALUES ('acme', $1)"
        " RETURNING json_build_object('t', tenant)",
        5000);

    cr_assert_eq(run_declared(&out, d, "acme", "op-own", "{}", 1, &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(run_declared(&out, d, "globex", "op-other", "{}", 1, &err), IDEM_EEFFECT);
    cr_assert_str_eq(err.sqlstate, "42501");
    cr_assert_eq(storetest_operations(), 1);
    cr_assert_eq(pgtest_scalar(fx.check, "SELECT count(*) FROM idem_example.tenant_notes"), 1);
    idem_declared_free(d);
    idem_outcome_clear(&out);
}

/* A tool's statement whose own failure reads as the session check's (the same SQLSTATE and
 * words) is the effect's failure: not taken for the check where the statement carried none,
 * and taken once at most where it did (the connection is then not checked again), never
 * retried until the deadline. */
Test(store_declared, a_failure_in_the_words_of_the_session_check_is_the_effects)
{
    static const char sql[] = "SELECT json_build_object('x', set_config('statement_timeout',"
                              " 'idem: the session has another statement_timeout', true))";

    storetest_open(NULL, 2);
    expect_effect_failed(sql, "without the session's check", "statement_timeout");
    storetest_close();
    storetest_open_statement_timeout(NULL, 5000);
    expect_effect_failed(sql, "with the session's check", "statement_timeout");
}
