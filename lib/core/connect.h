/* The core's connecting (core/connect.c), for the library's pool and the tools. No state. */
#ifndef IDEM_CORE_CONNECT_H
#define IDEM_CORE_CONNECT_H

#include <stddef.h>

#include <libpq-fe.h>

/* Wait until @fd is ready for @events (poll()'s POLLIN, POLLOUT) or @deadline_ms passes (an
 * idem__now_ms() time; LLONG_MAX: no limit). 1 when ready (or in error, which the caller's
 * next libpq call reports; a negative @fd too), 0 at the deadline. */
int idem__wait_socket(int fd, short events, long long deadline_ms);

/* What to fix when a failed connection's @message (libpq's PQerrorMessage()) says that the
 * server, or a pooler in front of it, refused its settings for good (a wrong password, no
 * pg_hba.conf entry, a role that may not log in, a role or database that does not exist,
 * no CONNECT, SSL demanded of a server without it), or NULL: in English, as libpq,
 * PostgreSQL and PgBouncer write it (libpq keeps a refused connection's SQLSTATE to
 * itself). */
const char *idem__login_advice(const char *message);

/* The connect_timeout libpq applies to @conn (its conninfo's, else PGCONNECT_TIMEOUT), in
 * ms, by libpq's rules: unset, zero or negative is no limit (0), and less than 2 s is 2 s.
 * Returns 0, or -1 when the value is not a whole number, which libpq refuses; then @why
 * (if not NULL) gets libpq's message for it. */
int idem__pg_connect_timeout_ms(long long *ms, PGconn *conn, char *why, size_t size);

#endif
