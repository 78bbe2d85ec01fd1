#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

void cli_say(const char *prog, const char *fmt, ...)
{
    char line[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    cli_one_line(line);
    fflush(stdout);
    fprintf(stderr, "%s: %s\n", prog, line);
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

/* libpq's parse_int_param(): strtol's grammar (leading white space), an int, trailing
 * white space allowed. */
static int parse_libpq_int(int *out, const char *text)
{
    char *end = NULL;
    long v;

    errno = 0;
    v = strtol(text, &end, 10);
    if (end == text || errno != 0 || v < INT_MIN || v > INT_MAX)
        return -1;
    while (*end != '\0' && isspace((unsigned char)*end))
        end++;
    if (*end != '\0')
        return -1;
    *out = (int)v;
    return 0;
}

/* libpq's blocking connect takes a connect_timeout of 1 s as 2 s: a rounded-down second
 * could otherwise end the wait at once. */
#define LIBPQ_LEAST_CONNECT_TIMEOUT_MS 2000

int cli_connect_timeout_ms(long long *ms, PGconn *conn, char *why, size_t size)
{
    PQconninfoOption *opts = PQconninfo(conn);
    int rc = 0, seconds = 0;

    for (PQconninfoOption *o = opts; o != NULL && o->keyword != NULL; o++) {
        if (strcmp(o->keyword, "connect_timeout") != 0 || o->val == NULL)
            continue;
        rc = parse_libpq_int(&seconds, o->val);
        if (rc != 0 && why != NULL)
            snprintf(why, size,
                     "invalid integer value \"%s\" for connection option "
                     "\"connect_timeout\"",
                     o->val);
    }
    PQconninfoFree(opts);
    *ms = rc != 0 || seconds <= 0 ? 0
          : seconds < 2           ? LIBPQ_LEAST_CONNECT_TIMEOUT_MS
                                  : (long long)seconds * 1000;
    return rc;
}

void cli_redact(char *buf, size_t size, const char *message, const char *dsn)
{
    snprintf(buf, size, "%s", message);
    if (dsn != NULL)
        idem_conninfo_redact(buf, size, dsn);
}

void cli_error_redacted(const char *prog, const char *dsn, const char *what, const char *message)
{
    char text[1024];

    cli_redact(text, sizeof(text), message, dsn);
    cli_say(prog, "%s: %s", what, text);
}

static long long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The loop libpq documents for PQconnectPoll(), within @limit ms (0: none), as libpq's
 * blocking connect would wait (cli_connect_timeout_ms()). 0, or -1 when the time ran out. */
int cli_connect_wait(PGconn *conn, long long limit)
{
    long long deadline = now_ms() + limit;
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;

    while (st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED) {
        struct pollfd pfd = {PQsocket(conn), st == PGRES_POLLING_READING ? POLLIN : POLLOUT, 0};
        long long left = deadline - now_ms();
        int n = poll(&pfd, 1,
                     limit == 0       ? -1
                     : left <= 0      ? 0
                     : left > INT_MAX ? INT_MAX
                                      : (int)left);

        if (n == 0)
            return -1;
        if (n > 0 || errno != EINTR)
            st = PQconnectPoll(conn);
    }
    return 0;
}

/* What the server, or a pooler in front of it, says when it refuses these very settings,
 * and what libpq says of a value it reads only when it tries (`invalid integer value "x"
 * for connection option "port"`): in English, as libpq, an English-speaking server and
 * PgBouncer say it; any other refusal is taken as passing. The library knows the same
 * words (lib/error.c, idem__error_login_refused(); lib/pool_conn.c). */
static int refused_for_good(PGconn *failed)
{
    static const char *const says[] = {
        "authentication failed",          "does not exist",       "no pg_hba.conf entry",
        "not permitted to log in",        "no such database",     "no such user",
        "permission denied for database", "does not support SSL", "for connection option"};
    const char *message = PQerrorMessage(failed);

    if (PQconnectionNeedsPassword(failed))
        return 1;
    for (size_t i = 0; i < sizeof(says) / sizeof(says[0]); i++)
        if (strstr(message, says[i]) != NULL)
            return 1;
    return 0;
}

/* Whether a failed connection's settings are at fault rather than the network or the
 * server's state, so that no later try can work: connect_timeout is not a number; the
 * server (or a pooler in front of it) answered and refused these settings for good (a
 * wrong password, a role or database that does not exist), which libpq's words say, as it
 * keeps the SQLSTATE of a refused connection to itself; or libpq refused the settings
 * without trying (a DSN that does not parse, sslmode=bogus), which its PQpingParams()
 * says. The refusal's words decide before the ping: a pooler that forwards the server's
 * refusal leaves the ping without an answer (PQPING_NO_RESPONSE). A busy server ("too many
 * clients", starting up) answers in other words, and passes. A connection that ran out of
 * time had no answer: no second wait for the ping. */
static int settings_at_fault(PGconn *failed, const char *const *keys, const char *const *values,
                             long long elapsed_ms)
{
    long long limit = 0;

    if (cli_connect_timeout_ms(&limit, failed, NULL, 0) != 0)
        return 1;
    if (limit > 0 && elapsed_ms >= limit)
        return 0;
    if (refused_for_good(failed))
        return 1;
    return PQpingParams(keys, values, 1) == PQPING_NO_ATTEMPT;
}

PGconn *cli_connect(const char *prog, const char *dsn, int *transient)
{
    const char *keys[] = {"fallback_application_name", "dbname", NULL};
    const char *values[] = {prog, dsn != NULL ? dsn : "", NULL};
    long long start = now_ms();
    PGconn *conn = PQconnectdbParams(keys, values, 1);

    *transient = 0;
    if (conn == NULL) {
        cli_say(prog, "out of memory");
        return NULL;
    }
    if (PQstatus(conn) == CONNECTION_OK)
        return conn;
    cli_error_redacted(prog, dsn, "cannot connect", PQerrorMessage(conn));
    *transient = !settings_at_fault(conn, keys, values, now_ms() - start);
    PQfinish(conn);
    return NULL;
}

int cli_sqlstate_transient(const char *s)
{
    static const char *const states[] = {"40001", "40P01", "53000", "53100", "53200", "53300",
                                         "55P03", "57014", "57P01", "57P02", "57P03", "57P05"};

    if (s == NULL || s[0] == '\0')
        return 0;
    if (strncmp(s, "08", 2) == 0)
        return 1;
    for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
        if (strcmp(s, states[i]) == 0)
            return 1;
    return 0;
}

static const char SQL_ALL_TENANTS[] =
    "SELECT current_user::text, coalesce((SELECT NOT c.relrowsecurity FROM pg_catalog.pg_class c"
    " WHERE c.oid = to_regclass('idem.operations')), true) OR r.rolsuper OR r.rolbypassrls"
    " OR CASE WHEN to_regrole($1) IS NULL THEN false"
    " ELSE pg_has_role(current_user, $1::name, 'USAGE') END"
    " FROM pg_catalog.pg_roles r WHERE r.rolname = current_user";

/* @name as SQL writes it in a GRANT a reader copies: as it is when it needs no quotes (lower
 * case letters, digits, '_', '$', not first a digit or '$'), else double-quoted. */
static void quote_ident(char *out, size_t size, const char *name)
{
    size_t o = 0;
    int plain = (name[0] >= 'a' && name[0] <= 'z') || name[0] == '_';

    for (const char *p = name; plain && *p != '\0'; p++)
        plain = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '$';
    if (plain) {
        snprintf(out, size, "%s", name);
        return;
    }
    out[o++] = '"';
    for (const char *p = name; *p != '\0' && o + 3 < size; p++) {
        if (*p == '"')
            out[o++] = '"';
        out[o++] = *p;
    }
    out[o++] = '"';
    out[o] = '\0';
}

/* The check's query failed: a missing privilege (no USAGE on schema idem, as for a role
 * outside the group, or a NOINHERIT member that does not use the group's rights) is for
 * a GRANT; other permanent errors are configuration errors too; a lost connection or a
 * timeout may pass. */
static int all_tenants_failed(PGconn *conn, const PGresult *res, const char *prog,
                              const char *group_role)
{
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

    if (PQstatus(conn) != CONNECTION_OK || cli_sqlstate_transient(state)) {
        cli_say(prog, "checking the role's access to every tenant: %s", PQresultErrorMessage(res));
        return -1;
    }
    if (state != NULL && strcmp(state, "42501") == 0) {
        char r[256];

        quote_ident(r, sizeof(r), PQuser(conn));
        cli_say(prog,
                "role %s may not use idem's tables (%s): grant it %s (GRANT %s TO %s) and let "
                "it inherit the group's rights (a NOINHERIT role does not: ALTER ROLE %s "
                "INHERIT; from PostgreSQL 16, GRANT %s TO %s WITH INHERIT TRUE), or connect as "
                "a superuser or a BYPASSRLS role",
                PQuser(conn), PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY), group_role,
                group_role, r, r, group_role, r);
        return 1;
    }
    cli_say(prog, "checking the role's access to every tenant: %s", PQresultErrorMessage(res));
    return 1;
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

        quote_ident(role, sizeof(role), user);
        cli_say(prog,
                "role %s may not see every tenant's rows (row-level security): grant it %s "
                "(GRANT %s TO %s), or connect as a superuser or a BYPASSRLS role",
                user, group_role, group_role, role);
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
