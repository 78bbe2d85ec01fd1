#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <idem/pool.h>

#include "cli.h"

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
    return CLI_EXIT_USAGE;
}

int cli_parse_number(long long *out, const char *text, long long min, long long max)
{
    char *end = NULL;
    long long v;

    errno = 0;
    v = strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

void cli_error_redacted(const char *prog, const char *dsn, const char *what, const char *message)
{
    char text[1024];
    size_t n;

    snprintf(text, sizeof(text), "%s", message);
    if (dsn != NULL)
        idem_conninfo_redact(text, sizeof(text), dsn);
    n = strlen(text);
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' '))
        text[--n] = '\0';
    fprintf(stderr, "%s: %s: %s\n", prog, what, text);
}

PGconn *cli_connect(const char *prog, const char *dsn)
{
    const char *keys[] = {"fallback_application_name", "dbname", NULL};
    const char *values[] = {prog, dsn != NULL ? dsn : "", NULL};
    PGconn *conn = PQconnectdbParams(keys, values, 1);

    if (conn == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return NULL;
    }
    if (PQstatus(conn) != CONNECTION_OK) {
        cli_error_redacted(prog, dsn, "cannot connect", PQerrorMessage(conn));
        PQfinish(conn);
        return NULL;
    }
    return conn;
}

static const char SQL_ALL_TENANTS[] =
    "SELECT current_user::text, coalesce((SELECT NOT c.relrowsecurity FROM pg_catalog.pg_class c"
    " WHERE c.oid = to_regclass('idem.operations')), true) OR r.rolsuper OR r.rolbypassrls"
    " OR CASE WHEN to_regrole($1) IS NULL THEN false"
    " ELSE pg_has_role(current_user, $1::name, 'USAGE') END"
    " FROM pg_catalog.pg_roles r WHERE r.rolname = current_user";

int cli_check_all_tenants(PGconn *conn, const char *prog, const char *group_role)
{
    const char *values[1] = {group_role};
    PGresult *res = PQexecParams(conn, SQL_ALL_TENANTS, 1, NULL, values, NULL, NULL, 0);
    int rc = 0;

    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        char *why = strdup(PQresultErrorMessage(res));

        if (why != NULL)
            cli_one_line(why);
        fprintf(stderr, "%s: checking the role's access to every tenant: %s\n", prog,
                why != NULL ? why : "out of memory");
        free(why);
        rc = -1;
    } else if (strcmp(PQgetvalue(res, 0, 1), "t") != 0) {
        fprintf(stderr,
                "%s: role %s may not see every tenant's rows (row-level security): grant it "
                "%s (GRANT %s TO %s), or connect as a superuser or a BYPASSRLS role\n",
                prog, PQgetvalue(res, 0, 0), group_role, group_role, PQgetvalue(res, 0, 0));
        rc = 1;
    }
    PQclear(res);
    return rc;
}

void cli_one_line(char *s)
{
    size_t n = strlen(s);

    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
        s[--n] = '\0';
    for (char *p = s; *p != '\0'; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = ' ';
}
