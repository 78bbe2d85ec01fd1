/* Creating a pool: arguments refused, connections opened with their settings, and
 * freeing one. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pooltest.h"

/* idem_pool_new() refusing what it is given: no database needed. */

Test(pool_new, new_rejects_malformed_conninfo_naming_the_field)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_pool *pool = (idem_pool *)&err; /* must stay untouched */
    int rc = idem_pool_new(&pool, "this is not a conninfo", NULL, &err);

    cr_assert_eq(rc, IDEM_EINVAL, "%s", idem_err_name(rc));
    cr_assert_str_eq(err.field, "conninfo");
    cr_assert(strstr(err.message, "conninfo") != NULL, "%s", err.message);
    cr_assert_eq(pool, (idem_pool *)&err);
}

Test(pool_new, new_rejects_unknown_conninfo_keyword)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_pool *pool = NULL;
    int rc = idem_pool_new(&pool, "dbname=x no_such_keyword=1", NULL, &err);

    cr_assert_eq(rc, IDEM_EINVAL, "%s", idem_err_name(rc));
    cr_assert_str_eq(err.field, "conninfo");
    cr_assert(strstr(err.message, "no_such_keyword") != NULL, "%s", err.message);
    cr_assert_null(pool);
}

Test(pool_new, new_fails_at_creation_when_no_server_listens)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_pool *pool = NULL;
    int rc = idem_pool_new(&pool, "host=127.0.0.1 port=1", NULL, &err);

    cr_assert_eq(rc, IDEM_EUNAVAIL, "%s", idem_err_name(rc));
    cr_assert(strstr(err.message, "cannot connect") != NULL, "%s", err.message);
    cr_assert_null(pool);
}

Test(pool_new, new_rejects_zero_max_size)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_pool *pool = NULL;

    o.max_size = 0;
    cr_assert_eq(idem_pool_new(&pool, "", &o, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "max_size");
    cr_assert_null(pool);
}

Test(pool_new, new_rejects_min_idle_above_max_size)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_pool *pool = NULL;

    o.max_size = 2;
    o.min_idle = 3;
    cr_assert_eq(idem_pool_new(&pool, "", &o, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "min_idle");
    cr_assert_null(pool);
}

/* Pools that open: a fresh database per test. */
TestSuite(pool_create, .init = pooltest_init, .fini = pooltest_fini);

Test(pool_create, new_opens_min_idle_connections)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.min_idle = 3;
    o.application_name = pooltest_app();
    idem_pool *pool = pooltest_open(&o);
    idem_pool_stats st = pooltest_stats(pool);

    cr_assert_eq(st.size, 3);
    cr_assert_eq(st.idle, 3);
    cr_assert_eq(st.opened, 3);
    cr_assert_eq(pooltest_sessions(pooltest_app()), 3);
}

Test(pool_create, connections_carry_application_name_and_statement_timeout)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.application_name = pooltest_app();
    o.statement_timeout_ms = 1500;
    idem_pool *pool = pooltest_open(&o);
    idem_conn *conn = pooltest_acquire(pool);
    char *timeout = pooltest_query(conn, "SHOW statement_timeout");
    char *name = pooltest_query(conn, "SHOW application_name");

    cr_assert_str_eq(timeout, "1500ms");
    cr_assert_str_eq(name, pooltest_app());
    free(timeout);
    free(name);
    idem_pool_release(conn);
}

Test(pool_create, application_name_in_the_conninfo_wins_over_the_option)
{
    char conninfo[256];
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    snprintf(conninfo, sizeof(conninfo), "%s application_name=%s", pooltest_conninfo(),
             pooltest_app());
    o.application_name = "from-the-options";
    idem_pool *pool = pooltest_open_at(conninfo, &o);
    idem_conn *conn = pooltest_acquire(pool);
    char *name = pooltest_query(conn, "SHOW application_name");

    cr_assert_str_eq(name, pooltest_app());
    free(name);
    idem_pool_release(conn);
}

Test(pool_create, statement_timeout_keeps_the_server_options_of_the_conninfo)
{
    char conninfo[256];
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    snprintf(conninfo, sizeof(conninfo), "%s options='-c work_mem=7MB'", pooltest_conninfo());
    o.statement_timeout_ms = 2500;
    idem_pool *pool = pooltest_open_at(conninfo, &o);
    idem_conn *conn = pooltest_acquire(pool);
    char *work_mem = pooltest_query(conn, "SHOW work_mem");
    char *timeout = pooltest_query(conn, "SHOW statement_timeout");

    cr_assert_str_eq(work_mem, "7MB");
    cr_assert_str_eq(timeout, "2500ms");
    free(work_mem);
    free(timeout);
    idem_pool_release(conn);
}

Test(pool_create, free_closes_every_connection)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.min_idle = 2;
    o.application_name = pooltest_app();
    idem_pool *pool = pooltest_open(&o);
    idem_conn *conn = pooltest_acquire(pool);
    idem_conn *other = pooltest_acquire(pool);
    idem_conn *third = pooltest_acquire(pool);

    idem_pool_release(conn);
    idem_pool_release(other);
    idem_pool_release(third);
    cr_assert_eq(pooltest_sessions(pooltest_app()), 3);
    pooltest_close();
    cr_assert_eq(pooltest_wait_sessions(pooltest_app(), 0), 0);
}
