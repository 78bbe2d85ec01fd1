/* The pool across a server stop and start. These tests stop the shared throwaway
 * server, so they run alone (see tests/meson.build) and one at a time. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "idem/pool.h"
#include "pgtest.h"
#include "pooltest.h"
#include "exec.h"

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static int server_up(void)
{
    return PQping("connect_timeout=2") == PQPING_OK;
}

/* Run $IDEM_PG_CTL with action (stop|start); 0 on success. */
static int pg_ctl(const char *action)
{
    const char *ctl = getenv("IDEM_PG_CTL");
    char cmd[1024];

    snprintf(cmd, sizeof(cmd), "\"%s\" %s >/dev/null 2>&1", ctl, action);
    return system(cmd);
}

static void wait_server_up(void)
{
    for (int i = 0; i < 300 && !server_up(); i++)
        sleep_ms(100);
}

static void require_pg_ctl(void)
{
    if (getenv("IDEM_PG_CTL") != NULL)
        return;
    if (getenv("IDEM_REQUIRE_PG") != NULL)
        cr_assert_fail("IDEM_PG_CTL is not set; run under tools/with-postgres");
    cr_skip_test("IDEM_PG_CTL is not set; run under tools/with-postgres");
}

/* Whatever happened in the test, leave the server running for the next one. */
static void restore_server(void)
{
    if (getenv("IDEM_PG_CTL") == NULL || server_up())
        return;
    pg_ctl("start");
    wait_server_up();
}

TestSuite(pool_restart, .fini = restore_server);

static idem_pool *new_pool(const char *conninfo, const char *app)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_pool *pool = NULL;
    int rc;

    o.max_size = 4;
    o.min_idle = 2;
    o.connect_timeout_ms = 2000;
    o.acquire_timeout_ms = 2000;
    o.application_name = app;
    rc = idem_pool_new(&pool, conninfo, &o, &err);
    cr_assert_eq(rc, 0, "idem_pool_new: %s", err.message);
    return pool;
}

/* Acquire, run SELECT 1, release; the first failing code, or 0. */
static int use_once(idem_pool *pool, idem_error *err)
{
    idem_conn *conn = NULL;
    PGresult *res = NULL;
    int rc = idem_pool_acquire(&conn, pool, err);

    if (rc == 0)
        rc = idem__conn_exec(&res, conn, "SELECT 1", err);
    PQclear(res);
    idem_pool_release(conn);
    return rc;
}

Test(pool_restart, pool_serves_again_after_the_server_restarts)
{
    require_pg_ctl();
    char *ci = pgtest_new_database("restart");
    idem_pool *pool = new_pool(ci, "idem-pooltest-restart");
    idem_error err = IDEM_ERROR_INIT;
    idem_pool_stats st = IDEM_POOL_STATS_INIT;

    cr_assert_eq(use_once(pool, &err), 0, "%s", err.message);
    cr_assert_eq(pg_ctl("stop"), 0, "pg_ctl stop failed");
    int rc = use_once(pool, &err);
    cr_assert_eq(rc, IDEM_EUNAVAIL, "with the server down: %s (%s)", idem_err_name(rc),
                 err.message);
    cr_assert_eq(pg_ctl("start"), 0, "pg_ctl start failed");
    wait_server_up();

    rc = use_once(pool, &err);
    cr_assert_eq(rc, 0, "after the restart: %s (%s)", idem_err_name(rc), err.message);
    cr_assert_eq(use_once(pool, &err), 0, "%s", err.message);
    idem_pool_stats_get(&st, pool);
    cr_assert_geq(st.closed_health, 1, "dead idle connections were not discarded");
    cr_assert_geq(st.connect_failures, 1);
    cr_assert_eq(st.in_use, 0);
    idem_pool_free(pool);
    free(ci);
}

Test(pool_restart, no_rollback_and_no_server_warning_across_a_restart)
{
    require_pg_ctl();
    char *ci = pgtest_new_database("restart_tx");
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    pooltest_log log = POOLTEST_LOG_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_pool *pool = NULL;
    idem_conn *in_tx = NULL;
    PGresult *res = NULL;
    FILE *trace;

    o.max_size = 2;
    o.connect_timeout_ms = 2000;
    o.log = pooltest_log_record;
    o.log_ctx = &log;
    cr_assert_eq(idem_pool_new(&pool, ci, &o, &err), 0, "%s", err.message);
    cr_assert_eq(use_once(pool, &err), 0, "%s", err.message); /* one idle connection */
    cr_assert_eq(idem_pool_acquire(&in_tx, pool, &err), 0, "%s", err.message);
    cr_assert_eq(idem__conn_exec(&res, in_tx, "BEGIN", &err), 0, "%s", err.message);
    PQclear(res);
    trace = pooltest_trace(in_tx);
    cr_assert_eq(pg_ctl("restart"), 0, "pg_ctl restart failed");
    wait_server_up();
    idem_pool_release(in_tx);
    cr_assert_not(pooltest_trace_has(trace, "ROLLBACK"), "a ROLLBACK went to the ended session");
    fclose(trace);
    cr_assert_eq(use_once(pool, &err), 0, "after the restart: %s", err.message);
    cr_assert_eq(use_once(pool, &err), 0, "%s", err.message);
    idem_pool_free(pool);
    cr_assert_null(strstr(log.text, "no transaction in progress"), "%s", log.text);
    cr_assert_eq(log.multiline, 0, "%s", log.text);
    free(ci);
}

struct in_flight {
    idem_pool *pool;
    int rc;
    idem_error err;
};

static void *long_query(void *p)
{
    struct in_flight *f = p;
    idem_conn *conn = NULL;
    PGresult *res = NULL;

    f->rc = idem_pool_acquire(&conn, f->pool, &f->err);
    if (f->rc == 0)
        f->rc = idem__conn_exec(&res, conn, "SELECT pg_sleep(60)", &f->err);
    PQclear(res);
    idem_pool_release(conn);
    return NULL;
}

static long running_sleeps(const char *app)
{
    PGconn *admin = pgtest_connect("dbname=postgres");
    const char *param = app;
    PGresult *res = PQexecParams(admin,
                                 "SELECT count(*) FROM pg_stat_activity WHERE application_name "
                                 "= $1 AND state = 'active' AND query LIKE 'SELECT pg_sleep%'",
                                 1, NULL, &param, NULL, NULL, 0);
    long n = strtol(PQgetvalue(res, 0, 0), NULL, 10);

    PQclear(res);
    PQfinish(admin);
    return n;
}

Test(pool_restart, caller_in_flight_when_the_server_stops_gets_unavailable)
{
    require_pg_ctl();
    const char *app = "idem-pooltest-inflight";
    char *ci = pgtest_new_database("inflight");
    idem_pool *pool = new_pool(ci, app);
    struct in_flight f = {.pool = pool, .rc = -99, .err = IDEM_ERROR_INIT};
    idem_error err = IDEM_ERROR_INIT;
    pthread_t thread;

    cr_assert_eq(pthread_create(&thread, NULL, long_query, &f), 0);
    for (int i = 0; i < 500 && running_sleeps(app) == 0; i++)
        sleep_ms(10);
    cr_assert_eq(running_sleeps(app), 1);
    cr_assert_eq(pg_ctl("stop"), 0, "pg_ctl stop failed");
    pthread_join(thread, NULL);
    cr_assert_eq(f.rc, IDEM_EUNAVAIL, "%s: %s", idem_err_name(f.rc), f.err.message);

    idem_pool_stats st = IDEM_POOL_STATS_INIT;
    idem_pool_stats_get(&st, pool);
    cr_assert_eq(st.closed_broken, 1);
    cr_assert_eq(pg_ctl("start"), 0, "pg_ctl start failed");
    wait_server_up();
    int rc = use_once(pool, &err);
    cr_assert_eq(rc, 0, "after the restart: %s (%s)", idem_err_name(rc), err.message);
    idem_pool_free(pool);
    free(ci);
}
