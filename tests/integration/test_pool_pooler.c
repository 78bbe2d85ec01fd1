/* The pooler setting on direct connections: IDEM_POOLER_TRANSACTION leaves nothing on the
 * server session, the statement timeout set per transaction (settings.h); IDEM_POOLER_AUTO keeps
 * prepared statements when nothing stands in between; the default notices a server
 * session that does not match what its connection prepared. (Through PgBouncer:
 * test_pgbouncer.c.) */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "checkout.h"
#include "core/clock.h"
#include "exec.h"
#include "pooltest.h"
#include "tenant.h"

TestSuite(pool_pooler, .init = pooltest_init, .fini = pooltest_fini);

static const idem__stmt stmt_add = {"idem_pooltest_add", "SELECT $1::int + 1", 1};

static long exec_add(idem_conn *conn, idem_error *err)
{
    const char *values[1] = {"41"};
    PGresult *res = NULL;
    long sum;
    int rc = idem__conn_exec_prepared(&res, conn, &stmt_add, values, NULL, NULL, 0, err);

    if (rc != 0)
        return rc;
    sum = strtol(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return sum;
}

/* Statements of idem's (named idem_...) prepared on this connection's session. */
static long prepared_here(idem_conn *conn)
{
    return pooltest_query_long(conn, "SELECT count(*) FROM pg_prepared_statements "
                                     "WHERE name LIKE 'idem\\_%' AND NOT from_sql");
}

static idem_pool *open_with(idem_pooler pooler, unsigned int statement_timeout_ms)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.max_size = 1;
    o.pooler = pooler;
    o.statement_timeout_ms = statement_timeout_ms;
    return pooltest_open(&o);
}

/* A connection of @pool checked out for a call with 10 s left. */
static idem_conn *checkout_for_call(idem_pool *pool)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_conn *conn = NULL;

    cr_assert_eq(idem__pool_checkout(&conn, pool, idem__now_ms() + 10000, &err), 0, "%s",
                 err.message);
    return conn;
}

/* The statement timeout inside a transaction a call runs as a tenant (tenant.h). */
static char *show_timeout_in_call(idem_conn *conn)
{
    static const idem__stmt show = {"idem_pooltest_show_timeout",
                                    "SELECT current_setting('statement_timeout')", 0};
    idem_error err = IDEM_ERROR_INIT;
    PGresult *res = NULL;
    char *v;

    cr_assert_eq(idem__tenant_exec(&res, conn, "acme", &show, NULL, NULL, NULL, 0, &err), 0, "%s",
                 err.message);
    v = strdup(PQgetvalue(res, 0, 0));
    PQclear(res);
    return v;
}

Test(pool_pooler, transaction_mode_prepares_nothing_on_the_server_session)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_pool *pool = open_with(IDEM_POOLER_TRANSACTION, 0);
    idem_conn *conn = pooltest_acquire(pool);
    idem__pipe_cmd cmds[3] = {{NULL, "BEGIN", 0, NULL, NULL, NULL, 0, NULL},
                              {&stmt_add, NULL, 0, (const char *const[]){"1"}, NULL, NULL, 0, NULL},
                              {NULL, "COMMIT", 0, NULL, NULL, NULL, 0, NULL}};
    size_t failed_at;

    for (int i = 0; i < 3; i++)
        cr_assert_eq(exec_add(conn, &err), 42, "%s", err.message);
    cr_assert_eq(idem__conn_pipeline(conn, cmds, 3, &failed_at, &err), 0, "%s", err.message);
    cr_assert_str_eq(PQgetvalue(cmds[1].result, 0, 0), "2");
    for (int i = 0; i < 3; i++)
        PQclear(cmds[i].result);
    cr_assert_eq(prepared_here(conn), 0);
    idem_pool_release(conn);
}

Test(pool_pooler, transaction_mode_sets_the_statement_timeout_inside_each_transaction_only)
{
    static const idem__stmt slow = {"idem_pooltest_slow", "SELECT pg_sleep(4)", 0};
    idem_error err = IDEM_ERROR_INIT;
    idem_pool *pool = open_with(IDEM_POOLER_TRANSACTION, 1500);
    idem_conn *conn = checkout_for_call(pool);
    PGresult *res = NULL;
    char *v;

    /* No startup option: the session itself keeps the server's setting. */
    v = pooltest_query(conn, "SHOW statement_timeout");
    cr_assert_str_eq(v, "0");
    free(v);
    v = show_timeout_in_call(conn);
    cr_assert_str_eq(v, "1500ms", "inside the call's transaction, the pool's: %s", v);
    free(v);
    v = pooltest_query(conn, "SHOW statement_timeout");
    cr_assert_str_eq(v, "0", "nothing left on the session: %s", v);
    free(v);

    cr_assert_eq(idem__tenant_exec(&res, conn, "acme", &slow, NULL, NULL, NULL, 0, &err), IDEM_EDB);
    cr_assert_str_eq(err.sqlstate, "57014", "%s", err.message);
    idem_pool_release(conn);
}

Test(pool_pooler, auto_on_a_direct_connection_prepares_statements_by_name)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_pool *pool = open_with(IDEM_POOLER_AUTO, 1500);
    idem_conn *conn = checkout_for_call(pool);
    int pooled = -1;
    char *v;

    cr_assert_eq(idem_pooler_detect(&pooled, idem_conn_pg(conn), &err), 0, "%s", err.message);
    cr_assert_eq(pooled, 0);
    cr_assert_eq(exec_add(conn, &err), 42, "%s", err.message);
    cr_assert_eq(prepared_here(conn), 1);
    v = show_timeout_in_call(conn);
    cr_assert_str_eq(v, "1500ms", "the timeout is per transaction with auto: %s", v);
    free(v);
    idem_pool_release(conn);
}

Test(pool_pooler, statements_of_one_name_and_different_sql_are_prepared_apart)
{
    static const idem__stmt one = {"idem_pooltest_same", "SELECT 1", 0};
    static const idem__stmt two = {"idem_pooltest_same", "SELECT 2", 0};
    idem_error err = IDEM_ERROR_INIT;
    idem_pool *pool = pooltest_open(NULL);
    idem_conn *conn = pooltest_acquire(pool);
    PGresult *res = NULL;

    cr_assert_eq(idem__conn_exec_prepared(&res, conn, &one, NULL, NULL, NULL, 0, &err), 0, "%s",
                 err.message);
    cr_assert_str_eq(PQgetvalue(res, 0, 0), "1");
    PQclear(res);
    cr_assert_eq(idem__conn_exec_prepared(&res, conn, &two, NULL, NULL, NULL, 0, &err), 0, "%s",
                 err.message);
    cr_assert_str_eq(PQgetvalue(res, 0, 0), "2", "never the other statement of that name");
    PQclear(res);
    cr_assert_eq(prepared_here(conn), 2);
    idem_pool_release(conn);
}

Test(pool_pooler, a_session_already_holding_the_statement_is_refused_naming_the_setting)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_pool *pool = open_with(IDEM_POOLER_NONE, 0);
    idem_conn *conn = pooltest_acquire(pool);
    long pid = pooltest_backend_pid(conn);

    cr_assert_eq(exec_add(conn, &err), 42, "%s", err.message);
    /* As if another client had prepared it on this session. */
    idem__conn_forget_prepared(conn);
    cr_assert_eq(exec_add(conn, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.sqlstate, "42P05");
    cr_assert_str_eq(err.field, "pooler");
    cr_assert(strstr(err.message, "IDEM_POOLER_TRANSACTION") != NULL, "%s", err.message);
    cr_assert(strstr(err.hint, "PgBouncer") != NULL, "%s", err.hint);
    idem_pool_release(conn);
    conn = pooltest_acquire(pool);
    cr_assert_neq(pooltest_backend_pid(conn), pid, "the connection was closed");
    idem_pool_release(conn);
}

Test(pool_pooler, a_version_1_options_struct_is_read_without_the_pooler_field)
{
    idem_pool_options o;
    idem_error err = IDEM_ERROR_INIT;
    idem_pool *pool = NULL;

    memset(&o, 0x7f, sizeof(o)); /* what lies past a version 1 struct: not read */
    cr_assert_eq(idem_pool_options_init(&o, 1), 0);
    cr_assert_eq(o.version, 1);
    cr_assert_eq(o.max_size, 10);
    cr_assert_eq(idem_pool_new(&pool, pooltest_conninfo(), &o, &err), 0, "%s", err.message);
    idem_pool_free(pool);
    cr_assert_eq(idem_pool_options_init(&o, 2), 0);
    cr_assert_eq(o.pooler, IDEM_POOLER_NONE);
    cr_assert_eq(idem_pool_options_init(&o, 3), IDEM_EINVAL);
}

Test(pool_pooler, an_unknown_pooler_value_is_refused_naming_the_field)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_pool *pool = NULL;

    o.pooler = (idem_pooler)7;
    cr_assert_eq(idem_pool_new(&pool, pooltest_conninfo(), &o, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "pooler");
    cr_assert_null(pool);
}

Test(pool_pooler, detection_refuses_null_arguments)
{
    int pooled = 5;

    cr_assert_eq(idem_pooler_detect(NULL, NULL, NULL), IDEM_EINVAL);
    cr_assert_eq(idem_pooler_detect(&pooled, NULL, NULL), IDEM_EINVAL);
    cr_assert_eq(pooled, 5);
}
