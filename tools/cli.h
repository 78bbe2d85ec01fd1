/* What the command-line tools share: usage errors, whole-number options, and a default
 * connect timeout. */
#ifndef IDEM_TOOLS_CLI_H
#define IDEM_TOOLS_CLI_H

#include <idem/common.h>
#include <libpq-fe.h>

/* Seconds a tool waits for a server to answer when connecting, unless the DSN sets
 * connect_timeout or the environment PGCONNECT_TIMEOUT (cli.c sets that default for every
 * tool at start-up). */
#define CLI_CONNECT_TIMEOUT_S "10"

/* The exit status of a usage error (sysexits' EX_USAGE). */
#define CLI_EXIT_USAGE 64

/* Print "PROG: <message>" and "Try 'PROG --help'." on stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *prog, const char *fmt, ...) IDEM_PRINTF(2, 3);

/* A whole decimal number in [min, max] into *out; 0, or -1 (out untouched). */
int cli_parse_number(long long *out, const char *text, long long min, long long max);

/* Connect to @dsn (a conninfo or URI; "" or NULL: the PG* environment) as @prog (its
 * fallback application_name). On failure, prints "PROG: cannot connect: <why>" on stderr,
 * the DSN's password masked, and returns NULL. */
PGconn *cli_connect(const char *prog, const char *dsn);

/* Print "PROG: <what>: <message>" on stderr with @dsn's password masked. */
void cli_error_redacted(const char *prog, const char *dsn, const char *what, const char *message);

/* Whether the connected role may see every tenant's rows of idem's tables, which row-level
 * security (migration 0007) shows only to a superuser, a BYPASSRLS role or a member of
 * @group_role (idem_sweeper, idem_operator). A tool that works across tenants checks this
 * first: under the policies it would otherwise find nothing, and say all is well. Returns
 * 0 when it may (or the database has no row-level security on idem.operations), else
 * prints "PROG: <why>" on stderr and returns 1 (refused) or -1 (the query failed). */
int cli_check_all_tenants(PGconn *conn, const char *prog, const char *group_role);

/* Make s one line, as the library's log records are: trailing newlines dropped, other
 * control characters (a server message's newlines and tabs) turned into spaces. */
void cli_one_line(char *s);

#endif
