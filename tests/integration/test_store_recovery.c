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
