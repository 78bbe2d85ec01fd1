/* The core's connecting (core/connect.c), for the library's pool and the tools. No state. */
#ifndef IDEM_CORE_CONNECT_H
#define IDEM_CORE_CONNECT_H

#include <stddef.h>

#include <libpq-fe.h>

/* Wait until @fd is ready for @events (poll()'s POLLIN, POLLOUT) or @deadline_ms passes (an
 * idem__now_ms() time; LLONG_MAX: no limit). 1 when ready (or in error, which the caller's
 * next libpq call reports; a negative @fd too), 0 at the deadline. */
int idem__wait_socket(int fd, short events, long long deadline_ms);

/* What became of a connection attempt. */
typedef enum idem__connect_outcome {
    IDEM__CONNECT_OK,       /* connected */
    IDEM__CONNECT_SETTINGS, /* libpq refused the settings: a conninfo that does not parse, a
                               value it does not take (sslmode=bogus, port=x) */
    IDEM__CONNECT_REFUSED,  /* the server, or a pooler in front of it, refused the login
                               for good: idem__pg_login_refusal() says what to fix */
    IDEM__CONNECT_FAILED,   /* anything else: no server answered, a server too busy or
                               starting up; a later try may work */
    IDEM__CONNECT_TIMEOUT,  /* no answer before the deadline */
} idem__connect_outcome;

/* Drive *@pg, as PQconnectStartParams(@keys, @values, 1) returned it, to the end of its
 * attempt by the loop libpq documents for PQconnectPoll(), waiting until @deadline_ms (an
 * idem__now_ms() time; LLONG_MAX: no limit), and say what became of it: a failure as
 * idem__pg_connect_failure() tells it (libpq's settings looked for only when it failed at
 * once). With several hosts (host=a,b), as idem__pg_connect_hosts(). *@pg stays the
 * caller's either way (PQerrorMessage() says why it failed). */
idem__connect_outcome idem__pg_connect_wait(PGconn **pg, const char *const *keys,
                                            const char *const *values, long long deadline_ms,
                                            long long per_host_ms, PQnoticeProcessor notices,
                                            void *notices_arg);

/* The connect loop over several hosts. libpq moves on to the next host by itself when one
 * fails, but a host that does not answer at all holds a nonblocking attempt until its
 * caller gives up: here a host gets what is left until @deadline_ms shared evenly among
 * the hosts not yet tried, and no more than @per_host_ms (> 0; libpq's connect_timeout is
 * per host), after which *@pg is replaced by an attempt on the hosts after it (@notices,
 * if not NULL, set on it), until one answers or the last one's wait ends at @deadline_ms.
 * Outcomes as idem__pg_connect_poll(). */
idem__connect_outcome idem__pg_connect_hosts(PGconn **pg, long long deadline_ms,
                                             long long per_host_ms, PQnoticeProcessor notices,
                                             void *notices_arg);

/* The hosts @pg has yet to try, the one it tries now included: 1 for a single host, or when
 * its place in the list cannot be told. */
int idem__pg_hosts_left(PGconn *pg);

/* The loop alone: IDEM__CONNECT_OK, IDEM__CONNECT_FAILED (PQstatus() CONNECTION_BAD) or
 * IDEM__CONNECT_TIMEOUT. */
idem__connect_outcome idem__pg_connect_poll(PGconn *pg, long long deadline_ms);

/* Why @failed (CONNECTION_BAD), made from @keys and @values, failed: IDEM__CONNECT_SETTINGS,
 * IDEM__CONNECT_REFUSED or IDEM__CONNECT_FAILED. With @before_waiting, when nothing says it
 * failed after waiting on a server, libpq's refusal of the settings is looked for (its
 * words, and PQpingParams(), which makes a second attempt unless the settings cannot
 * work); else only the server's refusal. */
idem__connect_outcome idem__pg_connect_failure(PGconn *failed, const char *const *keys,
                                               const char *const *values, int before_waiting);

/* What to fix when the server, or a pooler in front of it, refused @pg's login for good (a
 * wrong or missing password, no pg_hba.conf entry, a role that may not log in, a role or
 * database that does not exist, no CONNECT, SSL demanded of a server without it), or
 * NULL. Told by PQconnectionNeedsPassword() and by libpq's, PostgreSQL's and PgBouncer's
 * words in English (libpq keeps a refused connection's SQLSTATE to itself): a refusal in
 * another language is NULL. */
const char *idem__pg_login_refusal(const PGconn *pg);

/* The connect_timeout libpq applies to @conn (its conninfo's, else PGCONNECT_TIMEOUT), in
 * ms, by libpq's rules: unset, zero or negative is no limit (0), and less than 2 s is 2 s.
 * Returns 0, or -1 when the value is not a whole number, which libpq refuses; then @why
 * (if not NULL) gets libpq's message for it. */
int idem__pg_connect_timeout_ms(long long *ms, PGconn *conn, char *why, size_t size);

#endif
