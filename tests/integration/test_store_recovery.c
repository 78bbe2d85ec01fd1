/* The store after a fault inside a call: what it does with the connection that failed. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "idem/idem.h"
#include "pgtest.h"

static idem_pool *pool;
static idem_store *store;

static void close_all(void)
{
    idem__fault_reset();
    idem_store_free(store);
    idem_pool_free(pool);
}

TestSuite(recovery, .fini = close_all);

/* Fails its first run with a serialization failure of its own statement; then inserts. */
static int flaky_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                        idem_error *err)
{
    int *runs = ctx;
    PGresult *res = NULL;
    const char *sql = ++*runs == 1 ? "DO $$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE ="
                                     " '40001'; END $$"
                                   : "SELECT 1";
    int rc = idem_tx_exec(&res, tx, sql, 0, NULL, err);

    (void)arguments;
    if (rc != 0)
        return rc;
    PQclear(res);
    *response = json_pack("{s:i}", "runs", *runs);
    return IDEM_EFFECT_OK;
}

Test(recovery, a_connection_that_failed_is_never_reused_within_the_call)
{
    idem_pool_options popts = IDEM_POOL_OPTIONS_INIT;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_request req = IDEM_REQUEST_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_store_stats st = IDEM_STORE_STATS_INIT;
    int runs = 0;

    char *conninfo = pgtest_new_migrated_database("recovery_reuse");
    popts.max_size = 2;
    popts.connect_timeout_ms = 30000;
    cr_assert_eq(idem_pool_new(&pool, conninfo, &popts, &err), 0, "%s", err.message);
    cr_assert_eq(idem_store_new(&store, pool, NULL, &err), 0, "%s", err.message);
    req.tenant = "acme";
    req.operation_id = "op-reuse";
    req.tool = "flaky";
    req.arguments = "{}";
    req.arguments_len = 2;
    /* The serialization failure's ROLLBACK loses the connection: the retry must start over
     * on a fresh one, not look the key up on the dead one. */
    idem__fault_inject("ROLLBACK", IDEM__FAULT_DROP_BEFORE_SEND, 1);
    int rc = idem_store_execute(&out, store, &req, flaky_effect, &runs, &err);
    cr_assert_eq(rc, 0, "%s: %s", idem_err_name(rc), err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(runs, 2);
    cr_assert_eq(out.attempts, 2);
    cr_assert_eq(idem_store_stats_get(&st, store), 0);
    cr_assert_eq(st.serialization_retries, 1);
    idem_outcome_clear(&out);
    free(conninfo);
}

/* Inserts a mark for its key. */
static int mark_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                       idem_error *err)
{
    const char *values[2] = {idem_tx_tenant(tx), idem_tx_operation_id(tx)};
    PGresult *res = NULL;
    int rc = idem_tx_exec(&res, tx, "INSERT INTO marks VALUES ($1, $2)", 2, values, err);

    (void)arguments, (void)ctx;
    if (rc != 0)
        return rc;
    PQclear(res);
    *response = json_pack("{s:s}", "status", "marked");
    return IDEM_EFFECT_OK;
}

/* A COMMIT that fails with XX000 (how Citus reports that a worker's COMMIT failed) leaves
 * its outcome unknown: the call looks the key up on a fresh connection, as after a lost
 * reply, and starts over when nothing committed. Here a deferred trigger fails the first
 * COMMIT only (a sequence counts, outside the transaction). */
Test(recovery, a_commit_that_fails_with_an_internal_error_is_looked_up_then_retried)
{
    idem_pool_options popts = IDEM_POOL_OPTIONS_INIT;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_request req = IDEM_REQUEST_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_store_stats st = IDEM_STORE_STATS_INIT;

    if (pgtest_citus_workers() != NULL)
        cr_skip_test("a local table with a deferred trigger: plain PostgreSQL only");
    char *conninfo = pgtest_new_migrated_database("recovery_commit_xx000");
    PGconn *check = pgtest_connect(conninfo);
    PQclear(pgtest_exec(check,
                        "CREATE SEQUENCE commit_failures;"
                        "CREATE TABLE marks (tenant text, operation_id text);"
                        "CREATE FUNCTION fail_first_commit() RETURNS trigger LANGUAGE plpgsql AS"
                        " $$ BEGIN IF nextval('commit_failures') = 1 THEN RAISE EXCEPTION"
                        " 'could not commit transaction for shard 1 on at least one active node'"
                        " USING ERRCODE = 'XX000'; END IF; RETURN NULL; END $$;"
                        "CREATE CONSTRAINT TRIGGER fail_first_commit AFTER INSERT ON marks"
                        " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW"
                        " EXECUTE FUNCTION fail_first_commit()"));
    popts.max_size = 2;
    popts.connect_timeout_ms = 30000;
    cr_assert_eq(idem_pool_new(&pool, conninfo, &popts, &err), 0, "%s", err.message);
    cr_assert_eq(idem_store_new(&store, pool, NULL, &err), 0, "%s", err.message);
    req.tenant = "acme";
    req.operation_id = "op-commit";
    req.tool = "mark";
    req.arguments = "{}";
    req.arguments_len = 2;
    req.attempt = 1;
    int rc = idem_store_execute(&out, store, &req, mark_effect, NULL, &err);
    cr_assert_eq(rc, 0, "%s: %s", idem_err_name(rc), err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(out.attempts, 2);
    cr_assert_eq(idem_store_stats_get(&st, store), 0);
    cr_assert_eq(st.ambiguous_commits, 1);
    cr_assert_eq(pgtest_scalar(check, "SELECT count(*) FROM marks"), 1);
    cr_assert_eq(pgtest_scalar(check, "SELECT count(*) FROM idem.operations"), 1);

    /* The declared path, its one round trip's COMMIT failing the same way. */
    static const char *const params[] = {"$tenant", "$operation_id"};
    idem_declared *mark = NULL;
    cr_assert_eq(idem_declared_new(&mark,
                                   "INSERT INTO marks VALUES ($1, $2)"
                                   " RETURNING '{\"status\":\"marked\"}'",
                                   params, 2, &err),
                 0, "%s", err.message);
    PQclear(pgtest_exec(check, "ALTER SEQUENCE commit_failures RESTART"));
    req.operation_id = "op-commit-declared";
    idem_outcome_clear(&out);
    rc = idem_store_execute_declared(&out, store, &req, mark, &err);
    cr_assert_eq(rc, 0, "%s: %s", idem_err_name(rc), err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(idem_store_stats_get(&st, store), 0);
    cr_assert_eq(st.ambiguous_commits, 2);
    cr_assert_eq(pgtest_scalar(check, "SELECT count(*) FROM marks"), 2);
    idem_declared_free(mark);
    idem_outcome_clear(&out);
    PQfinish(check);
    free(conninfo);
}
