/* What the command-line tools share above the core they share with the library
 * (lib/core/): usage errors, one-line messages with a DSN's password masked, connecting (a
 * default connect timeout, then the core's connect and its judgement of a failure), the
 * check that a role sees every tenant, JSON output. */
#ifndef IDEM_TOOLS_CLI_H
#define IDEM_TOOLS_CLI_H

#include <stddef.h>

#include <idem/common.h>
#include <jansson.h>
#include <libpq-fe.h>

#include "exit.h"

/* Seconds a tool waits for a server to answer when connecting, unless the DSN sets
 * connect_timeout or the environment PGCONNECT_TIMEOUT (cli.c sets that default for every
 * tool at start-up). */
#define CLI_CONNECT_TIMEOUT_S "10"

/* Print "PROG: <message>" and "Try 'PROG --help'." on stderr; returns EXIT_USAGE. */
int cli_usage_error(const char *prog, const char *fmt, ...) IDEM_PRINTF(2, 3);

/* Print "PROG: <message>" on stderr as one line, whatever a server or libpq message put in
 * it (its newlines and tabs become spaces); stdout is flushed first. */
void cli_say(const char *prog, const char *fmt, ...) IDEM_PRINTF(2, 3);

/* The longest --connect-timeout, in seconds. */
#define CLI_CONNECT_TIMEOUT_MAX_S 3600

/* Parse --connect-timeout's @arg (whole seconds, 1 to CLI_CONNECT_TIMEOUT_MAX_S) into
 * *@seconds: 0, or the usage error's status after printing it as @prog's. */
int cli_connect_timeout_option(unsigned int *seconds, const char *prog, const char *arg);

/* Connect to @dsn (a conninfo or URI; "" or NULL: the PG* environment) as @prog (its
 * fallback application_name), as the library's pool connects (lib/core/connect.h), within
 * connect_timeout by libpq's rules (for each host of the DSN), which is @timeout_s when it
 * is not 0 (--connect-timeout) and the DSN sets none;
 * libpq's notices, those of the connection's start included, go to @notices (@arg), or, if
 * it is NULL, to libpq's default (stderr). On failure, prints "PROG: cannot connect: <why>"
 * on stderr (one line, the DSN's password masked), sets *transient to 1 when a later try
 * may work (no server answered, or not in time, or one too busy) or to 0 when the settings
 * cannot work (libpq refuses them, or the server or a pooler refused the login for good),
 * and returns NULL. */
PGconn *cli_connect(const char *prog, const char *dsn, unsigned int timeout_s,
                    PQnoticeProcessor notices, void *arg, int *transient);

/* @message into @buf (of @size bytes) with @dsn's password masked (libpq repeats a
 * malformed URI whole in its message); @dsn may be NULL. */
void cli_redact(char *buf, size_t size, const char *message, const char *dsn);

/* Print "PROG: <what>: <message>" on stderr, one line, with @dsn's password masked. */
void cli_error_redacted(const char *prog, const char *dsn, const char *what, const char *message);

/* The exit status (exit.h) of a library call that returned @rc (IDEM_OK or an IDEM_E*
 * code) with @err (may be NULL): the meaning every tool gives it; a tool whose command
 * gives a code a meaning of its own (idem-migrate: IDEM_ESCHEMA is drift) decides that
 * first. IDEM_EDB goes by its SQLSTATE's class (core/sqlstate.h): one that may pass is
 * EXIT_TEMPFAIL, a missing schema EXIT_NO_SCHEMA, a missing privilege EXIT_NOPERM, any
 * other EXIT_DATABASE. */
int cli_exit_for(int rc, const idem_error *err);

/* The exit status of a failed cli_connect(): EXIT_TEMPFAIL when @transient, else
 * EXIT_CONFIG (the settings cannot work). */
int cli_connect_exit(int transient);

/* The exit status of a pool or a store that could not be made from a tool's settings
 * (idem_pool_new(), idem_store_new()): EXIT_CONFIG when the settings were refused
 * (IDEM_EINVAL) or the server refused the login (idem_pool_new()'s IDEM_EPERM: the role,
 * its password, the database), as for a failed cli_connect(); else as cli_exit_for(). */
int cli_pool_exit(const idem_error *err);

/* Whether the connected role may see every tenant's rows of idem's tables, which row-level
 * security (migration 0007) shows only to a superuser, a BYPASSRLS role or a member of
 * @group_role (idem_sweeper, idem_operator) that inherits its rights. A tool that works
 * across tenants checks this first: under the policies it would otherwise find nothing,
 * and say all is well. Returns 0 when it may (or the database has no row-level security
 * on idem.operations); else prints "PROG: <why>" on stderr (for a missing privilege, the
 * GRANT to run) and returns the exit status: EXIT_NOPERM when it may not, else the
 * check's failure as cli_exit_for() classes it (EXIT_TEMPFAIL when it may pass: the
 * connection lost, a timeout). */
int cli_check_all_tenants(PGconn *conn, const char *prog, const char *group_role);

/* Print @doc (its reference stolen) on stdout, indented, keys in their order. 0, or -1 when
 * out of memory (NULL @doc included). */
int cli_print_json(json_t *doc);

#endif
