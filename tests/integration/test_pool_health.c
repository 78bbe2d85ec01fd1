/* Health checks, lifetime and idle timeout: when the pool looks at a connection, and when
 * it closes one. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pooltest.h"

TestSuite(pool_health, .init = pooltest_init, .fini = pooltest_fini);

static char *last_query_of(long pid)
{
    PGconn *admin = pgtest_connect("dbname=postgres");
    char text[32];
    const char *param = text;
    PGresult *res;
    char *q;

    snprintf(text, sizeof(text), "%ld", pid);
    res = PQexecParams(admin, "SELECT query FROM pg_stat_activity WHERE pid = $1::int", 1, NULL,
                       &param, NULL, NULL, 0);
    cr_assert_eq(PQntuples(res), 1, "%s", PQerrorMessage(admin));
    q = strdup(PQgetvalue(res, 0, 0));
    PQclear(res);
    PQfinish(admin);
    return q;
}

Test(pool_health, connection_idle_past_the_threshold_is_checked_with_a_round_trip)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.max_size = 1;
    o.health_check_idle_ms = 20;
    idem_pool *pool = pooltest_open(&o);
    idem_conn *conn = pooltest_acquire(pool);
    long pid = pooltest_backend_pid(conn);

    idem_pool_release(conn);
    pgtest_sleep_ms(60);
    conn = pooltest_acquire(pool);
    char *last = last_query_of(pid);
    cr_assert_str_eq(last, "", "no round trip on checkout: last query was \"%s\"", last);
    free(last);
    idem_pool_release(conn);
}

Test(pool_health, connection_idle_below_the_threshold_is_handed_out_without_a_round_trip)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.max_size = 1;
    o.health_check_idle_ms = 600000;
    idem_pool *pool = pooltest_open(&o);
    idem_conn *conn = pooltest_acquire(pool);
    long pid = pooltest_backend_pid(conn);

    idem_pool_release(conn);
    conn = pooltest_acquire(pool);
    char *last = last_query_of(pid);
    cr_assert_str_eq(last, "SELECT pg_backend_pid()");
    free(last);
    idem_pool_release(conn);
}

Test(pool_health, connection_past_max_lifetime_is_closed_on_release)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.max_lifetime_ms = 100;
    idem_pool *pool = pooltest_open(&o);
    idem_conn *conn = pooltest_acquire(pool);

    pgtest_sleep_ms(150);
    idem_pool_release(conn);
    cr_assert_eq(pooltest_stats(pool).closed_lifetime, 1);
    cr_assert_eq(pooltest_stats(pool).size, 0);
}

Test(pool_health, idle_connections_above_min_idle_are_closed_after_idle_timeout)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.min_idle = 1;
    o.max_size = 3;
    o.idle_timeout_ms = PGTEST_LOAD_SLACK_MS; /* none is closed before the three are idle */
    idem_pool *pool = pooltest_open(&o);
    idem_conn *a = pooltest_acquire(pool);
    idem_conn *b = pooltest_acquire(pool);
    idem_conn *c = pooltest_acquire(pool);

    idem_pool_release(a);
    idem_pool_release(b);
    idem_pool_release(c);
    cr_assert_eq(pooltest_stats(pool).idle, 3);
    pgtest_sleep_ms(PGTEST_LOAD_SLACK_MS + 100);
    idem_pool_release(pooltest_acquire(pool));

    idem_pool_stats st = pooltest_stats(pool);
    cr_assert_eq(st.closed_idle, 2);
    cr_assert_eq(st.size, 1);
    cr_assert_eq(st.idle, 1);
}
