/* Creating a pool on settings that cannot work is told apart from a server that cannot be
 * reached: a login the server (or PgBouncer in front of it) refuses is misconfigured
 * (IDEM_EPERM, with what to fix), settings libpq refuses are invalid (IDEM_EINVAL, field
 * "conninfo"), and only the rest is unavailable (IDEM_EUNAVAIL, retry later). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/status.h"
#include "pooltest.h"

TestSuite(pool_refused, .init = pooltest_init, .fini = pooltest_fini);

/* idem_pool_new() on @conninfo, which must fail with @want; err has why. */
static void refused(const char *conninfo, int want, idem_error *err)
{
    idem_pool *pool = NULL;
    int rc = idem_pool_new(&pool, conninfo, NULL, err);

    cr_assert_eq(rc, want, "%s: %s, expected %s: %s", conninfo, idem_err_name(rc),
                 idem_err_name(want), err->message);
    cr_assert_eq(err->code, want);
    cr_assert_null(pool);
}

/* A refused login: misconfigured, the server's words kept, the advice in front and in the
 * hint, and never "retry later". */
static void misconfigured(const char *conninfo, const char *server_says)
{
    idem_error err = IDEM_ERROR_INIT;

    refused(conninfo, IDEM_EPERM, &err);
    cr_assert_eq(idem_status_from_error(err.code), IDEM_STATUS_MISCONFIGURED);
    cr_assert_neq(idem_status_next_step(idem_status_from_error(err.code)),
                  IDEM_NEXT_RETRY_SAME_KEY);
    cr_assert(strstr(err.message, server_says) != NULL, "the server's words: %s", err.message);
    cr_assert(strstr(err.message, "misconfigured") != NULL, "%s", err.message);
    cr_assert_str_neq(err.hint, "", "the hint says what to fix: %s", err.message);
}

static PGconn *admin(void)
{
    return pgtest_connect(pooltest_conninfo());
}

/* "<base> dbname=<the test's database> <more>" */
static void conninfo_with(char *out, size_t size, const char *base, const char *more)
{
    snprintf(out, size, "%s %s %s", base, pooltest_conninfo(), more);
}

Test(pool_refused, a_database_that_does_not_exist_is_misconfigured)
{
    misconfigured("dbname=idem_no_such_database", "database \"idem_no_such_database\" does not "
                                                  "exist");
}

Test(pool_refused, a_role_that_does_not_exist_is_misconfigured)
{
    char conninfo[256];

    conninfo_with(conninfo, sizeof(conninfo), "", "user=idem_test_no_such_role");
    misconfigured(conninfo, "role \"idem_test_no_such_role\" does not exist");
}

Test(pool_refused, a_role_that_may_not_log_in_is_misconfigured)
{
    char conninfo[256];
    PGconn *conn = admin();

    pgtest_create_role(conn, "idem_test_nologin", "NOLOGIN");
    PQfinish(conn);
    conninfo_with(conninfo, sizeof(conninfo), "", "user=idem_test_nologin");
    misconfigured(conninfo, "is not permitted to log in");
}

/* The role must give its password over TCP (tools/with-postgres's pg_hba.conf): the right
 * one opens the pool, a wrong one or none is misconfigured. No password file is read. */
Test(pool_refused, a_wrong_or_missing_password_is_misconfigured)
{
    char conninfo[512];
    idem_error err = IDEM_ERROR_INIT;
    idem_pool *pool = NULL;
    PGconn *conn = admin();

    pgtest_create_role(conn, PGTEST_PASSWORD_ROLE, "LOGIN PASSWORD '" PGTEST_PASSWORD "'");
    PQfinish(conn);
    conninfo_with(conninfo, sizeof(conninfo), pgtest_tcp(),
                  "user=" PGTEST_PASSWORD_ROLE " passfile=/nonexistent password=" PGTEST_PASSWORD);
    cr_assert_eq(idem_pool_new(&pool, conninfo, NULL, &err), 0, "%s", err.message);
    idem_pool_free(pool);
    conninfo_with(conninfo, sizeof(conninfo), pgtest_tcp(),
                  "user=" PGTEST_PASSWORD_ROLE " passfile=/nonexistent password=wrong");
    misconfigured(conninfo, "password authentication failed for user \"" PGTEST_PASSWORD_ROLE "\"");
    conninfo_with(conninfo, sizeof(conninfo), pgtest_tcp(),
                  "user=" PGTEST_PASSWORD_ROLE " passfile=/nonexistent");
    misconfigured(conninfo, "no password supplied");
}

/* libpq refuses these, without trying or at its first try (the port): invalid, naming the
 * conninfo, in libpq's words. */
Test(pool_refused, an_invalid_option_value_is_invalid_naming_the_conninfo)
{
    static const char *const cases[][2] = {
        {"sslmode=bogus", "invalid sslmode value: \"bogus\""},
        {"target_session_attrs=bogus", "invalid target_session_attrs value: \"bogus\""},
        {"channel_binding=bogus", "invalid channel_binding value: \"bogus\""},
        {"port=notaport", "invalid integer value \"notaport\" for connection option \"port\""},
    };
    char conninfo[256];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        idem_error err = IDEM_ERROR_INIT;

        conninfo_with(conninfo, sizeof(conninfo), "", cases[i][0]);
        refused(conninfo, IDEM_EINVAL, &err);
        cr_assert_str_eq(err.field, "conninfo", "%s", cases[i][0]);
        cr_assert(strstr(err.message, "conninfo: ") != NULL, "%s", err.message);
        cr_assert(strstr(err.message, cases[i][1]) != NULL, "%s", err.message);
    }
}

/* What may pass stays unavailable: no server listening, a server too busy to take the
 * connection ("too many connections", which a later try may find free). */
Test(pool_refused, a_server_that_cannot_take_the_connection_stays_unavailable)
{
    char conninfo[256];
    idem_error err = IDEM_ERROR_INIT;
    PGconn *conn = admin();

    refused("host=127.0.0.1 port=1", IDEM_EUNAVAIL, &err);
    refused("host=/nonexistent port=1", IDEM_EUNAVAIL, &err);
    pgtest_create_role(conn, "idem_test_no_slots", "LOGIN CONNECTION LIMIT 0");
    PQfinish(conn);
    conninfo_with(conninfo, sizeof(conninfo), "", "user=idem_test_no_slots");
    refused(conninfo, IDEM_EUNAVAIL, &err);
    cr_assert(strstr(err.message, "too many connections") != NULL, "%s", err.message);
}

/* Through PgBouncer: its own refusal of a role it does not know, and the server's refusal
 * it passes on (a role it knows that the server does not have, a database the server does
 * not have). The names are the test's own: after a failed server login PgBouncer makes
 * the next clients of the same pool wait. */
Test(pool_refused, a_login_refused_through_pgbouncer_is_misconfigured)
{
    char conninfo[512], said[256];

    if (pgtest_pgbouncer() == NULL)
        cr_skip_test("no PgBouncer: run under tools/with-postgres --pgbouncer");
    conninfo_with(conninfo, sizeof(conninfo), pgtest_pgbouncer(), "user=idem_test_no_such_role");
    misconfigured(conninfo, "authentication failed");
    conninfo_with(conninfo, sizeof(conninfo), pgtest_pgbouncer(), "user=" PGTEST_GHOST_ROLE);
    misconfigured(conninfo, "role \"" PGTEST_GHOST_ROLE "\" does not exist");
    snprintf(conninfo, sizeof(conninfo), "%s %s_none", pgtest_pgbouncer(), pooltest_conninfo());
    snprintf(said, sizeof(said), "database \"%s_none\" does not exist",
             pooltest_conninfo() + strlen("dbname="));
    misconfigured(conninfo, said);
}
