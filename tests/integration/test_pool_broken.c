/* Broken and dirty connections: a killed backend is replaced, a connection released
 * inside a transaction is rolled back, SQL errors keep the connection. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "pooltest.h"
#include "exec.h"

TestSuite(pool_broken, .init = pooltest_init, .fini = pooltest_fini);

Test(pool_broken, backend_killed_while_idle_is_replaced_on_next_acquire)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.max_size = 1;
    idem_pool *pool = pooltest_open(&o);
    idem_conn *conn = pooltest_acquire(pool);
    long pid = pooltest_backend_pid(conn);

    idem_pool_release(conn);
    pooltest_kill_backend(pid);
    conn = pooltest_acquire(pool);
    cr_assert_neq(pooltest_backend_pid(conn), pid);
    idem_pool_release(conn);

    idem_pool_stats st = pooltest_stats(pool);
    cr_assert_eq(st.closed_health, 1);
    cr_assert_eq(st.opened, 2);
    cr_assert_eq(st.size, 1);
}

Test(pool_broken, backend_killed_while_in_use_gives_unavailable_and_is_discarded)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    PGresult *res = NULL;

    o.max_size = 1;
    idem_pool *pool = pooltest_open(&o);
    idem_conn *conn = pooltest_acquire(pool);
    long pid = pooltest_backend_pid(conn);

    pooltest_kill_backend(pid);
    int rc = idem__conn_exec(&res, conn, "SELECT 1", &err);
    cr_assert_eq(rc, IDEM_EUNAVAIL, "%s: %s", idem_err_name(rc), err.message);
    cr_assert_null(res);
    idem_pool_release(conn);
    cr_assert_eq(pooltest_stats(pool).closed_broken, 1);
    cr_assert_eq(pooltest_stats(pool).size, 0);

    conn = pooltest_acquire(pool);
    cr_assert_neq(pooltest_backend_pid(conn), pid);
    idem_pool_release(conn);
}

Test(pool_broken, discarding_a_broken_connection_is_logged)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    pooltest_log cap = POOLTEST_LOG_INIT;
    PGresult *res = NULL;

    o.log = pooltest_log_record;
    o.log_ctx = &cap;
    idem_pool *pool = pooltest_open(&o);
    idem_conn *conn = pooltest_acquire(pool);

    pooltest_kill_backend(pooltest_backend_pid(conn));
    cr_assert_eq(idem__conn_exec(&res, conn, "SELECT 1", NULL), IDEM_EUNAVAIL);
    idem_pool_release(conn);
    cr_assert(strstr(cap.text, "closing a connection") != NULL, "log: %s", cap.text);
    cr_assert_geq(cap.warnings, 1);
}

Test(pool_broken, connection_released_in_open_transaction_is_rolled_back)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.max_size = 1;
    idem_pool *pool = pooltest_open(&o);
    idem_conn *conn = pooltest_acquire(pool);
    free(pooltest_query(conn, "CREATE TABLE t (id int)"));
    free(pooltest_query(conn, "BEGIN"));
    free(pooltest_query(conn, "INSERT INTO t VALUES (1)"));
    idem_pool_release(conn);

    conn = pooltest_acquire(pool);
    cr_assert_eq(PQtransactionStatus(idem_conn_pg(conn)), PQTRANS_IDLE);
    cr_assert_eq(pooltest_query_long(conn, "SELECT count(*) FROM t"), 0);
    idem_pool_release(conn);
    cr_assert_eq(pooltest_stats(pool).rolled_back, 1);
    cr_assert_eq(pooltest_stats(pool).opened, 1);
}

Test(pool_broken, connection_released_in_failed_transaction_is_rolled_back)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    PGresult *res = NULL;

    o.max_size = 1;
    idem_pool *pool = pooltest_open(&o);
    idem_conn *conn = pooltest_acquire(pool);
    free(pooltest_query(conn, "BEGIN"));
    cr_assert_eq(idem__conn_exec(&res, conn, "SELECT 1/0", NULL), IDEM_EDB);
    cr_assert_eq(PQtransactionStatus(idem_conn_pg(conn)), PQTRANS_INERROR);
    idem_pool_release(conn);

    conn = pooltest_acquire(pool);
    cr_assert_eq(PQtransactionStatus(idem_conn_pg(conn)), PQTRANS_IDLE);
    cr_assert_eq(pooltest_query_long(conn, "SELECT 7"), 7);
    idem_pool_release(conn);
    cr_assert_eq(pooltest_stats(pool).rolled_back, 1);
    cr_assert_eq(pooltest_stats(pool).opened, 1);
}

Test(pool_broken, connection_in_a_transaction_the_server_ended_is_closed_without_a_rollback)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    pooltest_log log = POOLTEST_LOG_INIT;

    o.max_size = 1;
    o.log = pooltest_log_record;
    o.log_ctx = &log;
    idem_pool *pool = pooltest_open(&o);
    idem_conn *conn = pooltest_acquire(pool);
    free(pooltest_query(conn, "BEGIN"));
    FILE *trace = pooltest_trace(conn);
    pooltest_kill_backend(pooltest_backend_pid(conn));
    idem_pool_release(conn);
    cr_assert_not(pooltest_trace_has(trace, "ROLLBACK"), "a ROLLBACK went to the ended session");
    fclose(trace);
    cr_assert_eq(pooltest_stats(pool).closed_broken, 1);
    cr_assert_eq(pooltest_stats(pool).rolled_back, 0);

    conn = pooltest_acquire(pool);
    cr_assert_eq(pooltest_query_long(conn, "SELECT 7"), 7);
    idem_pool_release(conn);
    cr_assert_null(strstr(log.text, "no transaction in progress"), "%s", log.text);
    cr_assert_not_null(strstr(log.text, "terminating connection due to administrator command"),
                       "the server's words: %s", log.text);
    cr_assert_eq(log.multiline, 0, "%s", log.text);
}

Test(pool_broken, connection_released_with_a_query_running_is_closed)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.max_size = 1;
    idem_pool *pool = pooltest_open(&o);
    idem_conn *conn = pooltest_acquire(pool);
    long pid = pooltest_backend_pid(conn);

    cr_assert_eq(PQsendQuery(idem_conn_pg(conn), "SELECT pg_sleep(0.1)"), 1);
    idem_pool_release(conn);
    cr_assert_eq(pooltest_stats(pool).closed_broken, 1);

    conn = pooltest_acquire(pool);
    cr_assert_neq(pooltest_backend_pid(conn), pid);
    idem_pool_release(conn);
}

Test(pool_broken, discarded_connection_is_closed_on_release)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.application_name = pooltest_app();
    idem_pool *pool = pooltest_open(&o);
    idem_conn *conn = pooltest_acquire(pool);

    idem_conn_discard(conn);
    idem_pool_release(conn);
    cr_assert_eq(pooltest_stats(pool).closed_broken, 1);
    cr_assert_eq(pooltest_stats(pool).size, 0);
    cr_assert_eq(pooltest_wait_sessions(pooltest_app(), 0), 0);
}

Test(pool_broken, sql_error_keeps_the_connection)
{
    idem_error err = IDEM_ERROR_INIT;
    PGresult *res = NULL;
    idem_pool *pool = pooltest_open(NULL);
    idem_conn *conn = pooltest_acquire(pool);
    long pid = pooltest_backend_pid(conn);

    cr_assert_eq(idem__conn_exec(&res, conn, "SELECT 1/0", &err), IDEM_EDB);
    cr_assert_str_eq(err.sqlstate, "22012");
    idem_pool_release(conn);
    conn = pooltest_acquire(pool);
    cr_assert_eq(pooltest_backend_pid(conn), pid);
    idem_pool_release(conn);
    cr_assert_eq(pooltest_stats(pool).closed_broken, 0);
}

Test(pool_broken, statement_timeout_cancels_a_long_query_and_keeps_the_connection)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    PGresult *res = NULL;

    o.statement_timeout_ms = 1000; /* the statements before and after the long one fit */
    idem_pool *pool = pooltest_open(&o);
    idem_conn *conn = pooltest_acquire(pool);

    cr_assert_eq(idem__conn_exec(&res, conn, "SELECT pg_sleep(30)", &err), IDEM_EDB);
    cr_assert_str_eq(err.sqlstate, "57014");
    cr_assert_eq(pooltest_query_long(conn, "SELECT 3"), 3);
    idem_pool_release(conn);
    cr_assert_eq(pooltest_stats(pool).closed_broken, 0);
}
