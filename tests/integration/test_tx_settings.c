/* What a call's transaction sets, seen from inside its effect: the call's tenant, a
 * lock_timeout and a statement_timeout that end before the call's deadline (the lock wait
 * first), and the pool's statement_timeout_ms when that is sooner. The same in every form
 * (settings.h): run directly, through PgBouncer in transaction mode (tx_settings_pgbouncer),
 * and on Citus (tools/run test --citus). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pooltest.h"
#include "storetest.h"

TestSuite(tx_settings, .init = storetest_init, .fini = storetest_fini, .timeout = 120);

#define DEADLINE_MS 8000
/* The least a timeout can be: what is left of the deadline when the effect runs, on a
 * loaded machine, less the margin. */
#define LEAST_MS (DEADLINE_MS / 2)

/* What the effect saw. */
typedef struct seen {
    char tenant[64];
    long lock_ms, statement_ms;
} seen;

/* A setting's value in ms, as current_setting() shows it: "7500ms", "8s", "1min". */
static long ms_of(const char *value)
{
    char *unit = NULL;
    long n = strtol(value, &unit, 10);

    if (strcmp(unit, "s") == 0)
        return n * 1000;
    if (strcmp(unit, "min") == 0)
        return n * 60000;
    cr_assert(strcmp(unit, "ms") == 0 || unit[0] == '\0', "a timeout of %s", value);
    return n;
}

#define SHOW_SETTINGS                                                                              \
    "SELECT current_setting('idem.tenant'), current_setting('lock_timeout'),"                      \
    " current_setting('statement_timeout')"

static int show_settings(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                         idem_error *err)
{
    seen *s = ctx;
    PGresult *res = NULL;
    int rc = idem_tx_exec(&res, tx, SHOW_SETTINGS, 0, NULL, err);

    (void)arguments;
    if (rc != 0)
        return rc;
    snprintf(s->tenant, sizeof(s->tenant), "%s", PQgetvalue(res, 0, 0));
    s->lock_ms = ms_of(PQgetvalue(res, 0, 1));
    s->statement_ms = ms_of(PQgetvalue(res, 0, 2));
    PQclear(res);
    *response = json_pack("{s:b}", "seen", 1);
    return IDEM_EFFECT_OK;
}

static void open_store(unsigned int statement_timeout_ms)
{
    idem_store_options opts = IDEM_STORE_OPTIONS_INIT;

    opts.deadline_ms = DEADLINE_MS;
    storetest_open_statement_timeout(&opts, statement_timeout_ms);
}

static void execute(seen *s, const char *op)
{
    idem_request req = storetest_request("acme", op, "{}");
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;

    req.attempt = 1;
    cr_assert_eq(idem_store_execute(&out, fx.store, &req, show_settings, s, &err), 0, "%s",
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    idem_outcome_clear(&out);
}

/* The declared path: the statement returns what it sees. */
static void execute_declared_on(idem_store *store, seen *s, const char *op)
{
    idem_request req = storetest_request("acme", op, "{}");
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_declared *d = NULL;
    json_t *receipt;

    cr_assert_eq(idem_declared_new(&d,
                                   "SELECT json_build_object('tenant',"
                                   " current_setting('idem.tenant'), 'lock',"
                                   " current_setting('lock_timeout'), 'statement',"
                                   " current_setting('statement_timeout'))",
                                   NULL, 0, &err),
                 0, "%s", err.message);
    cr_assert_eq(idem_store_execute_declared(&out, store, &req, d, &err), 0, "%s", err.message);
    cr_assert_eq(out.attempts, 1, "%s: %u attempts", op, out.attempts);
    receipt = json_loadb(out.receipt, out.receipt_len, 0, NULL);
    cr_assert_not_null(receipt, "receipt %.*s", (int)out.receipt_len, out.receipt);
    snprintf(s->tenant, sizeof(s->tenant), "%s",
             json_string_value(json_object_get(receipt, "tenant")));
    s->lock_ms = ms_of(json_string_value(json_object_get(receipt, "lock")));
    s->statement_ms = ms_of(json_string_value(json_object_get(receipt, "statement")));
    json_decref(receipt);
    idem_outcome_clear(&out);
    idem_declared_free(d);
}

static void execute_declared(seen *s, const char *op)
{
    execute_declared_on(fx.store, s, op);
}

/* The call's: its tenant; a lock wait that ends first, a margin before the deadline; a
 * statement that ends before the deadline too (at @statement_ms exactly when the pool's
 * is sooner, 0 otherwise). */
static void expect_the_calls(const seen *s, long statement_ms, const char *path)
{
    cr_assert_str_eq(s->tenant, "acme", "%s: tenant", path);
    cr_assert(s->lock_ms >= LEAST_MS && s->lock_ms <= DEADLINE_MS - 50,
              "%s: lock_timeout %ld ms under a deadline of %d ms", path, s->lock_ms, DEADLINE_MS);
    if (statement_ms > 0)
        cr_assert_eq(s->statement_ms, statement_ms, "%s: statement_timeout %ld ms", path,
                     s->statement_ms);
    else
        cr_assert(s->statement_ms > s->lock_ms && s->statement_ms < DEADLINE_MS,
                  "%s: statement_timeout %ld ms, lock_timeout %ld ms, deadline %d ms", path,
                  s->statement_ms, s->lock_ms, DEADLINE_MS);
}

Test(tx_settings, an_effect_runs_as_the_calls_tenant_under_its_timeouts)
{
    seen s = {{0}, 0, 0};

    open_store(0);
    execute(&s, "op-settings");
    expect_the_calls(&s, 0, "callback");
    memset(&s, 0, sizeof(s));
    execute_declared(&s, "op-settings-declared");
    expect_the_calls(&s, 0, "declared");
}

Test(tx_settings, the_pools_statement_timeout_caps_the_calls)
{
    seen s = {{0}, 0, 0};

    open_store(700);
    execute(&s, "op-capped");
    expect_the_calls(&s, 700, "callback");
    memset(&s, 0, sizeof(s));
    execute_declared(&s, "op-capped-declared");
    expect_the_calls(&s, 700, "declared");
}

/* Nothing of a call's transaction stays on the session. */
Test(tx_settings, the_settings_end_with_the_transaction)
{
    seen s = {{0}, 0, 0};
    idem_error err = IDEM_ERROR_INIT;
    idem_conn *conn = NULL;
    PGresult *res;

    open_store(0);
    execute(&s, "op-then-session");
    cr_assert_eq(idem_pool_acquire(&conn, fx.pool, &err), 0, "%s", err.message);
    res = PQexec(idem_conn_pg(conn), "SELECT current_setting('idem.tenant', true),"
                                     " current_setting('lock_timeout')");
    cr_assert_eq(PQresultStatus(res), PGRES_TUPLES_OK, "%s", PQresultErrorMessage(res));
    cr_assert_str_eq(PQgetvalue(res, 0, 0), "", "the tenant stayed on the session");
    cr_assert_str_eq(PQgetvalue(res, 0, 1), "0", "the lock timeout stayed on the session");
    PQclear(res);
    idem_pool_release(conn);
}

/* An application that takes a connection from the pool and changes its session's
 * statement_timeout does not change what idem's calls run under: the declared statement,
 * which leaves the timeout to a session that holds the pool's, finds the session changed
 * before anything of it runs, and the call sets the timeout itself, in one attempt; so do
 * the calls after it on that connection. */
Test(tx_settings, a_session_an_application_changed_is_found_out)
{
    seen s = {{0}, 0, 0};

    open_store(700);
    execute_declared(&s, "op-session-first");
    expect_the_calls(&s, 700, "declared, the session as opened");
    free(pooltest_query_acquired(fx.pool, "SET statement_timeout = '3min'"));
    for (int i = 0; i < 2; i++) {
        memset(&s, 0, sizeof(s));
        execute_declared(&s, i == 0 ? "op-session-changed" : "op-session-changed-again");
        expect_the_calls(&s, 700, "declared, the session changed");
        execute(&s, i == 0 ? "op-session-changed-cb" : "op-session-changed-cb-again");
        expect_the_calls(&s, 700, "callback, the session changed");
    }
    cr_assert_eq(storetest_operations(), 5);
}

/* The session's statement_timeout as an application that takes the connection sees it. */
static void expect_the_sessions(const char *want)
{
    char *timeout = pooltest_query_acquired(fx.pool, "SHOW statement_timeout");

    cr_assert_str_eq(timeout, want, "the session's statement_timeout");
    free(timeout);
}

/* Without the pool's statement_timeout_ms, the first declared create on a connection
 * leaves a statement_timeout on the session for the next (settings.h,
 * idem__tx_settings_keep_cmd()): each runs under one between its lock_timeout and its own
 * statement_timeout, and an application that takes the connection finds the session's
 * own. */
Test(tx_settings, declared_creates_run_under_their_own_timeouts_or_one_kept_between_them)
{
    seen s = {{0}, 0, 0};
    char op[32];

    open_store(0);
    for (int i = 0; i < 3; i++) {
        memset(&s, 0, sizeof(s));
        snprintf(op, sizeof(op), "op-kept-%d", i);
        execute_declared(&s, op);
        expect_the_calls(&s, 0, "declared");
    }
    expect_the_sessions("0");
    execute_declared(&s, "op-kept-after");
    expect_the_calls(&s, 0, "declared, after the application");
}

/* A store with a longer deadline on the same pool runs under its own timeouts, not under
 * the shorter one another store's call kept on the session; and the other way round. */
Test(tx_settings, a_kept_statement_timeout_serves_only_calls_it_fits)
{
    idem_store_options opts = IDEM_STORE_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_store *longer = NULL;
    seen s = {{0}, 0, 0};

    open_store(0);
    opts.deadline_ms = 6 * DEADLINE_MS;
    cr_assert_eq(idem_store_new(&longer, fx.pool, &opts, &err), 0, "%s", err.message);
    execute_declared(&s, "op-short-1");
    execute_declared(&s, "op-short-2");
    expect_the_calls(&s, 0, "declared, the shorter deadline");
    for (int i = 0; i < 2; i++) {
        memset(&s, 0, sizeof(s));
        execute_declared_on(longer, &s, i == 0 ? "op-long-1" : "op-long-2");
        cr_assert(s.lock_ms > 5 * DEADLINE_MS && s.statement_ms > s.lock_ms &&
                      s.statement_ms < 6 * DEADLINE_MS,
                  "the longer deadline: lock_timeout %ld ms, statement_timeout %ld ms", s.lock_ms,
                  s.statement_ms);
    }
    memset(&s, 0, sizeof(s));
    execute_declared(&s, "op-short-3");
    expect_the_calls(&s, 0, "declared, the shorter deadline again");
    idem_store_free(longer);
}

/* A session with a statement_timeout of its own (here an application's) keeps it: the
 * calls set theirs for their transactions, and leave nothing on the session. */
Test(tx_settings, a_session_with_a_statement_timeout_of_its_own_keeps_it)
{
    seen s = {{0}, 0, 0};

    open_store(0);
    execute_declared(&s, "op-own-first");
    free(pooltest_query_acquired(fx.pool, "SET statement_timeout = '3min'"));
    for (int i = 0; i < 2; i++) {
        memset(&s, 0, sizeof(s));
        execute_declared(&s, i == 0 ? "op-own-1" : "op-own-2");
        expect_the_calls(&s, 0, "declared, the session's own statement_timeout");
    }
    expect_the_sessions("3min");
}
