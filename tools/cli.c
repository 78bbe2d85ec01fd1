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
