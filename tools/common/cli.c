#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/clock.h"
#include "core/connect.h"
#include "core/parse.h"
#include "core/redact.h"
#include "core/sqlstate.h"
#include "core/text.h"

/* libpq waits for ever by default: a server (or a port forwarder) that accepts the TCP
 * connection and never answers held idem-migrate until it was killed. PGCONNECT_TIMEOUT is
 * libpq's default for connect_timeout, so a connect_timeout in the DSN, or a
 * PGCONNECT_TIMEOUT the user set, still wins. Set before main() runs, so that it holds for
 * every connection of every tool linked with this file. */
__attribute__((constructor)) static void cli_default_connect_timeout(void)
{
    setenv("PGCONNECT_TIMEOUT", CLI_CONNECT_TIMEOUT_S, 0);
}

int cli_usage_error(const char *prog, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s --help'.\n", prog);
    return EXIT_USAGE;
}

void cli_say(const char *prog, const char *fmt, ...)
{
    char line[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    idem__one_line(line);
    fflush(stdout);
    fprintf(stderr, "%s: %s\n", prog, line);
}

void cli_redact(char *buf, size_t size, const char *message, const char *dsn)
{
    snprintf(buf, size, "%s", message);
    if (dsn != NULL)
        idem__conninfo_redact(buf, size, dsn);
}

void cli_error_redacted(const char *prog, const char *dsn, const char *what, const char *message)
{
    char text[1024];

    cli_redact(text, sizeof(text), message, dsn);
    cli_say(prog, "%s: %s", what, text);
}

/* The core's connect, as the library's pool connects, within connect_timeout by libpq's
 * rules (idem__pg_connect_timeout_ms()): per host, as libpq's blocking connect applies it
 * (a silent first host of several gives way to the next), and a value that is not a number
 * refused here, as libpq's blocking connect refuses it (its nonblocking connect leaves it
 * to its caller). */
static idem__connect_outcome connect_within_timeout(PGconn **conn, const char *const *keys,
                                                    const char *const *values,
                                                    PQnoticeProcessor notices, void *arg, char *why,
                                                    size_t size)
{
    long long limit = 0;

    if (PQstatus(*conn) != CONNECTION_BAD &&
        idem__pg_connect_timeout_ms(&limit, *conn, why, size) != 0)
        return IDEM__CONNECT_SETTINGS;
    return idem__pg_connect_wait(conn, keys, values,
                                 idem__deadline_in(limit * idem__pg_hosts_left(*conn)), limit,
                                 notices, arg);
}

int cli_connect_timeout_option(unsigned int *seconds, const char *prog, const char *arg)
{
    long long n = 0;

    if (idem__parse_whole(&n, arg, 1, CLI_CONNECT_TIMEOUT_MAX_S) != 0)
        return cli_usage_error(prog, "--connect-timeout: '%s' is not a number of seconds (1 to %d)",
                               arg, CLI_CONNECT_TIMEOUT_MAX_S);
    *seconds = (unsigned int)n;
    return 0;
}

PGconn *cli_connect(const char *prog, const char *dsn, unsigned int timeout_s,
                    PQnoticeProcessor notices, void *arg, int *transient)
{
    const char *keys[] = {"fallback_application_name", "dbname", NULL};
    const char *values[] = {prog, dsn != NULL ? dsn : "", NULL};
    char why[512] = "";
    idem__connect_outcome got;
    PGconn *conn;

    /* Below the DSN's own connect_timeout, above the environment's and the default. */
    if (timeout_s > 0) {
        snprintf(why, sizeof(why), "%u", timeout_s);
        setenv("PGCONNECT_TIMEOUT", why, 1);
        why[0] = '\0';
    }
    conn = PQconnectStartParams(keys, values, 1);

    *transient = 0;
    if (conn == NULL) {
        cli_say(prog, "out of memory");
        return NULL;
    }
    if (notices != NULL)
        PQsetNoticeProcessor(conn, notices, arg);
    got = connect_within_timeout(&conn, keys, values, notices, arg, why, sizeof(why));
    if (got == IDEM__CONNECT_OK)
        return conn;
    if (why[0] != '\0')
        cli_say(prog, "cannot connect: %s", why);
    else if (got == IDEM__CONNECT_TIMEOUT)
        cli_say(prog, "cannot connect: timeout expired (connect_timeout)");
    else
        cli_error_redacted(prog, dsn, "cannot connect", PQerrorMessage(conn));
    *transient = got == IDEM__CONNECT_FAILED || got == IDEM__CONNECT_TIMEOUT;
    PQfinish(conn);
    return NULL;
}

static const char SQL_ALL_TENANTS[] =
    "SELECT current_user::text, coalesce((SELECT NOT c.relrowsecurity FROM pg_catalog.pg_class c"
    " WHERE c.oid = to_regclass('idem.operations')), true) OR r.rolsuper OR r.rolbypassrls"
    " OR CASE WHEN to_regrole($1) IS NULL THEN false"
    " ELSE pg_has_role(current_user, $1::name, 'USAGE') END"
    " FROM pg_catalog.pg_roles r WHERE r.rolname = current_user";

int cli_exit_for(int rc, const idem_error *err)
{
    const char *state = err != NULL ? err->sqlstate : NULL;

    switch (rc) {
    case IDEM_OK:
        return EXIT_OK;
    case IDEM_EINVAL:
        return EXIT_USAGE;
    case IDEM_ENOMEM:
        return EXIT_OSERR;
    case IDEM_EUNAVAIL:
    case IDEM_ETIMEDOUT:
    case IDEM_EBUSY:
    case IDEM_ELOCKED:
        return EXIT_TEMPFAIL;
    case IDEM_ESCHEMA:
        return EXIT_NO_SCHEMA;
    case IDEM_ENOTFOUND:
        return EXIT_NOT_FOUND;
    case IDEM_EPERM:
        return EXIT_NOPERM;
    case IDEM_EIO:
        return EXIT_IOERR;
    case IDEM_EDB:
        break;
    default:
        return EXIT_SOFTWARE;
    }
    if (idem__sqlstate_is_transient(state))
        return EXIT_TEMPFAIL;
    switch (idem__sqlstate_classify(state)) {
    case IDEM__SQLSTATE_SCHEMA:
        return EXIT_NO_SCHEMA;
    case IDEM__SQLSTATE_ACCESS:
        return EXIT_NOPERM;
    default:
        return EXIT_DATABASE;
    }
}

int cli_connect_exit(int transient)
{
    return transient ? EXIT_TEMPFAIL : EXIT_CONFIG;
}

int cli_pool_exit(const idem_error *err)
{
    if (err->code == IDEM_EINVAL || err->code == IDEM_EPERM)
        return EXIT_CONFIG;
    return cli_exit_for(err->code, err);
}

/* The check's query failed: a missing privilege (no USAGE on schema idem, as for a role
 * outside the group, or a NOINHERIT member that does not use the group's rights) is for
 * a GRANT; other failures go by their SQLSTATE (a lost connection or a timeout may
 * pass). */
static int all_tenants_failed(PGconn *conn, const PGresult *res, const char *prog,
                              const char *group_role)
{
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    idem_error err = IDEM_ERROR_INIT;

    if (PQstatus(conn) != CONNECTION_OK) {
        cli_say(prog, "checking the role's access to every tenant: %s", PQresultErrorMessage(res));
        return EXIT_TEMPFAIL;
    }
    if (state != NULL && strcmp(state, "42501") == 0) {
        char r[256];

        idem__quote_ident(r, sizeof(r), PQuser(conn));
        cli_say(prog,
                "role %s may not use idem's tables (%s): grant it %s (GRANT %s TO %s) and let "
                "it inherit the group's rights (a NOINHERIT role does not: ALTER ROLE %s "
                "INHERIT; from PostgreSQL 16, GRANT %s TO %s WITH INHERIT TRUE), or connect as "
                "a superuser or a BYPASSRLS role",
                PQuser(conn), PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY), group_role,
                group_role, r, r, group_role, r);
        return EXIT_NOPERM;
    }
    cli_say(prog, "checking the role's access to every tenant: %s", PQresultErrorMessage(res));
    snprintf(err.sqlstate, sizeof(err.sqlstate), "%s", state != NULL ? state : "");
    return cli_exit_for(IDEM_EDB, &err);
}

int cli_check_all_tenants(PGconn *conn, const char *prog, const char *group_role)
{
    const char *values[1] = {group_role};
    PGresult *res = PQexecParams(conn, SQL_ALL_TENANTS, 1, NULL, values, NULL, NULL, 0);
    int rc = 0;

    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        rc = all_tenants_failed(conn, res, prog, group_role);
    } else if (strcmp(PQgetvalue(res, 0, 1), "t") != 0) {
        const char *user = PQgetvalue(res, 0, 0);
        char role[256];

        idem__quote_ident(role, sizeof(role), user);
        cli_say(prog,
                "role %s may not see every tenant's rows (row-level security): grant it %s "
                "(GRANT %s TO %s), or connect as a superuser or a BYPASSRLS role",
                user, group_role, group_role, role);
        rc = EXIT_NOPERM;
    }
    PQclear(res);
    return rc;
}

int cli_print_json(json_t *doc)
{
    char *text = doc != NULL ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;

    json_decref(doc);
    if (text == NULL)
        return -1;
    puts(text);
    free(text);
    return 0;
}
