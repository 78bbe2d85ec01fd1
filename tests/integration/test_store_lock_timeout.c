/* The lock timeout of a call ends a lock wait on the server, where the row lives, before
 * the call's deadline: on plain PostgreSQL, and on Citus, where the row lives on a worker
 * and only a SET LOCAL propagated from the coordinator reaches the worker's session. The
 * server's 55P03 arrives, the call ends unavailable, and the connection is kept (the client
 * never had to give up on the reply). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "idem/idem.h"
#include "storetest.h"

TestSuite(lock_timeout, .init = storetest_init, .fini = storetest_fini, .timeout = 240);

/* The store keeps a quarter of what is left of the deadline, at most 500 ms, for the
 * server's 55P03 to arrive before the client gives up: with 2 s or more left it keeps all
 * 500 ms, the most any deadline gives a loaded machine. */
#define DEADLINE_MS 2500

/* An application table distributed by tenant (under Citus), one row held FOR UPDATE by
 * another session, which the caller ends with ROLLBACK. */
static PGconn *hold_row(void)
{
    PGconn *holder = pgtest_connect(fx.conninfo);

    PQclear(pgtest_exec(fx.check, "CREATE TABLE public.held (tenant text, id int, n int NOT NULL,"
                                  " PRIMARY KEY (tenant, id));"
                                  "GRANT SELECT, UPDATE ON public.held TO " PGTEST_APP));
    pgtest_distribute(fx.conninfo, "public.held");
    PQclear(pgtest_exec(fx.check, "INSERT INTO public.held VALUES ('acme', 1, 0)"));
    PQclear(pgtest_exec(holder, "BEGIN; SELECT n FROM public.held"
                                " WHERE tenant = 'acme' AND id = 1 FOR UPDATE"));
    return holder;
}

static int update_held(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                       idem_error *err)
{
    const char *values[1] = {idem_tx_tenant(tx)};
    PGresult *res = NULL;
    int rc = idem_tx_exec(&res, tx, "UPDATE public.held SET n = n + 1 WHERE tenant = $1 AND id = 1",
                          1, values, err);

    (void)arguments, (void)ctx;
    if (rc != 0)
        return rc;
    PQclear(res);
    *response = json_pack("{s:b}", "updated", 1);
    return *response != NULL ? IDEM_EFFECT_OK : IDEM_ENOMEM;
}

static void open_store(void)
{
    idem_store_options opts = IDEM_STORE_OPTIONS_INIT;

    opts.deadline_ms = DEADLINE_MS;
    storetest_open(&opts, 1);
}

/* What every variant asserts once the call returned. */
static void expect_server_timeout(const idem_outcome *out, const idem_error *err, PGconn *holder)
{
    idem_pool_stats st = IDEM_POOL_STATS_INIT;

    PQclear(pgtest_exec(holder, "ROLLBACK"));
    PQfinish(holder);
    cr_expect_eq(out->status, IDEM_STATUS_UNAVAILABLE, "status %s: %s",
                 idem_status_name(out->status), err->message);
    cr_expect_str_eq(err->sqlstate, "55P03",
                     "the lock wait did not end on the server before the deadline: %s",
                     err->message);
    cr_assert_eq(idem_pool_stats_get(&st, fx.pool), 0);
    cr_expect_eq(st.closed_broken, 0,
                 "the client gave up on the reply: the connection was dropped");
    cr_expect_eq(pgtest_scalar(fx.check, "SELECT n FROM public.held WHERE tenant = 'acme'"), 0);
}

Test(lock_timeout, an_effects_lock_wait_ends_on_the_server_within_the_deadline)
{
    idem_request req = storetest_request("acme", "op-held-1", "{}");
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    PGconn *holder = hold_row();

    open_store();
    req.tool = "update_held";
    req.attempt = 1;
    idem_store_execute(&out, fx.store, &req, update_held, NULL, &err);
    expect_server_timeout(&out, &err, holder);
    idem_outcome_clear(&out);
}

/* (RETURNING builds its JSON with immutable operators only: Citus refuses others there.) */
Test(lock_timeout, a_declared_statements_lock_wait_ends_on_the_server_within_the_deadline)
{
    static const char *const params[] = {"$tenant"};
    idem_request req = storetest_request("acme", "op-held-2", "{}");
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_declared *d = NULL;
    PGconn *holder = hold_row();

    open_store();
    cr_assert_eq(idem_declared_new(&d,
                                   "UPDATE public.held SET n = n + 1 WHERE tenant = $1 AND id = 1"
                                   " RETURNING '{\"n\": ' || n::text || '}'",
                                   params, 1, &err),
                 0, "%s", err.message);
    req.tool = "update_held";
    req.attempt = 1;
    idem_store_execute_declared(&out, fx.store, &req, d, &err);
    expect_server_timeout(&out, &err, holder);
    idem_outcome_clear(&out);
    idem_declared_free(d);
}
