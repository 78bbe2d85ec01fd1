/* A pooled connection (struct idem_conn), the state that the pool (pool.c, pool_setup.c:
 * checkout, release, lifetimes) and the execution layer (exec*.c: what is prepared, the
 * deadline of the statement in progress) share, as libpq's libpq-int.h serves fe-connect.c
 * and fe-exec.c; and what is done to one connection on its own (conn.c: opening it, waiting
 * on its socket, checking, cleaning and closing it). Private to those two layers: the
 * library's other modules check a connection out (checkout.h) and run statements on it
 * (exec.h). */
#ifndef IDEM_LIB_CONN_H
#define IDEM_LIB_CONN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "deadline.h"
#include "idem/pool.h"
#include "core/stmt.h"

/* The longest name a statement is prepared under on the server (NAMEDATALEN - 1), and
 * how much of the statement's own name it holds (then '_' and 16 hex digits). */
#define IDEM__PREPARED_NAME_MAX 63
#define IDEM__STMT_NAME_MAX     40

/* A statement prepared on the connection's server session, and the name it has there. */
typedef struct idem__prepared {
    const idem__stmt *stmt;
    char name[IDEM__PREPARED_NAME_MAX + 1];
} idem__prepared;

/* A caller's SQL text (an effect's statement) kept as a statement of this connection, so
 * that it is parsed and planned once per connection like idem's own (exec_prepared.c,
 * idem__conn_text_stmt()), from the second time the connection runs it: a text run once
 * (SQL built with its values in it, say) takes no place and leaves nothing on the server. */
#define IDEM__TEXT_STMTS_MAX    32   /* texts kept per connection; later ones go as text */
#define IDEM__TEXT_SEEN_MAX     64   /* texts run once remembered (by hash), the oldest forgotten */
#define IDEM__TEXT_STMT_SQL_MAX 8192 /* longer SQL goes as text */
#define IDEM__TEXT_LABEL_MAX    40
typedef struct idem__text_stmt {
    idem__stmt stmt;                      /* name = label, sql = the copy below */
    char label[IDEM__TEXT_LABEL_MAX + 1]; /* the SQL's first characters, for messages */
    char *sql;
} idem__text_stmt;

struct idem_conn {
    idem_pool *pool;
    PGconn *pg;
    idem_conn *next;         /* in the pool's idle list, or a list of connections to close */
    long long expires_ms;    /* monotonic time after which it is closed (max_lifetime_ms) */
    long long idle_since_ms; /* when it was last released */
    idem__prepared *prepared;
    size_t nprepared;
    size_t prepared_cap;
    idem__text_stmt *texts; /* IDEM__TEXT_STMTS_MAX of them, allocated on first use */
    size_t ntexts;
    uint64_t text_seen[IDEM__TEXT_SEEN_MAX]; /* hashes of texts run once, not kept (0: none) */
    unsigned int text_seen_next;             /* where the next one goes */
    unsigned int text_epoch;                 /* the pool's text_epoch its texts were kept under */
    atomic_uint *pool_text_epoch;            /* the pool's own, shared by its connections */
    int stale_plan; /* the last failure: a kept text's plan no longer fits */
    int unnamed;    /* behind a transaction pooler: nothing is prepared by name */
    unsigned int statement_timeout_ms; /* the pool's, which caps the statement_timeout that a
                                          transaction sets (settings.h); 0 = none */
    int session_timeout;               /* the session's own statement_timeout is
                                          statement_timeout_ms: the pool opened it with the
                                          startup option (pool_setup.c builds it, pool.c sets
                                          this), and it has not been found otherwise since */
    unsigned int kept_timeout_ms;      /* the statement_timeout a store's transaction left on
                                          the session itself (settings.h,
                                          idem__tx_settings_keep_cmd()); 0: none, the session
                                          holds its own */
    int keep_refused;                  /* that transaction found it may not: another
                                          setting of the session's own, or a pooler */
    uint64_t deadline_ms;              /* the call's deadline, an idem__now_ms() time past which its
                                          waits give up; 0 = none; stamped by the checkout
                                          (idem__pool_checkout()), read by the execution layer,
                                          cleared on release */
    long long wait_until_ms;           /* the statement in progress waits until then (exec.c) */
    void (*while_waiting)(void *);     /* run once in the next wait for a reply (exec.h,
                                          idem__conn_while_waiting()); cleared on release */
    void *while_waiting_arg;
    int discard;      /* close on release */
    int citus;        /* the database has the citus extension (pool.c) */
    int close_reason; /* set when it is closed, for the log */
};

/* What idem__conn_clean() found. */
enum idem__conn_state {
    IDEM__CONN_CLEAN,       /* idle, ready for the next user */
    IDEM__CONN_ROLLED_BACK, /* was inside a transaction, now rolled back and idle */
    IDEM__CONN_BROKEN,      /* must be closed */
    IDEM__CONN_ENDED,       /* the server ended the session while it sat in a transaction:
                               closed without a ROLLBACK */
};

/* Open a connection (PQconnectStartParams with expand_dbname), giving up after
 * timeout_ms (0 = no limit), which the message names as @limit ("connect_timeout_ms");
 * libpq's notices go to notices(notices_arg, ...). On success *out is the caller's.
 * Returns 0, IDEM_EUNAVAIL, IDEM_ENOMEM, IDEM_EINVAL (field "conninfo": libpq refused the
 * settings without trying, PQPING_NO_ATTEMPT) or IDEM_EPERM (the server refused them for
 * good: idem__error_login_refused()). */
int idem__pg_connect(PGconn **out, const char *const *keys, const char *const *values,
                     unsigned int timeout_ms, const char *limit, PQnoticeProcessor notices,
                     void *notices_arg, idem_error *err);

/* Wait, until deadline_ms (monotonic ms; LLONG_MAX for no limit), for libpq to have sent
 * everything queued on pg (PQflush) and, with for_result, for a result to be readable
 * without blocking (PQisBusy). Returns 1 when ready, 0 when the deadline passed first, -1
 * when the connection failed (PQerrorMessage says why). pg should be in nonblocking mode
 * (PQsetnonblocking) so that libpq itself never waits. */
int idem__pg_wait_ready(PGconn *pg, int for_result, long long deadline_ms);

/* Whether a connection taken from the idle list can be handed out: round_trip asks the
 * server; otherwise only a connection with unexpected input waiting is asked. */
int idem__conn_alive(idem_conn *conn, int round_trip, unsigned int timeout_ms);

/* Put the session's own statement_timeout back where a store's transaction left one of its
 * (kept_timeout_ms), waiting at most timeout_ms: 1 done (or nothing to do), 0 the
 * connection failed to (the caller closes it). */
int idem__conn_reset_kept_timeout(idem_conn *conn, unsigned int timeout_ms);

/* Bring a released connection back to idle (rolling back an open transaction), or say
 * that it must be closed. Sends ROLLBACK only inside a transaction the server still
 * holds, so that the server never answers "there is no transaction in progress". */
enum idem__conn_state idem__conn_clean(idem_conn *conn, unsigned int timeout_ms);

/* Whether pg reaches PostgreSQL through a connection pooler: *out is 1 when the server
 * process answering is not the one named at startup (PQbackendPID()). Waits at most
 * timeout_ms (0 = no limit); pg must be idle. Returns 0, IDEM_EDB or IDEM_EUNAVAIL (then
 * pg may be left busy: close it). */
int idem__pg_through_pooler(int *out, PGconn *pg, unsigned int timeout_ms, idem_error *err);

/* Whether pg's database has the citus extension (IDEM__SQL_HAS_CITUS, citus.h): *out 1
 * or 0. Waits at most timeout_ms (0 = no limit); pg must be idle. Returns 0, IDEM_EDB (the
 * server refused the question) or IDEM_EUNAVAIL (no answer in time, or the connection
 * failed: pg may be left busy, close it). */
int idem__pg_has_citus(int *out, PGconn *pg, unsigned int timeout_ms, idem_error *err);

/* Close the libpq connection and free the structure. NULL is accepted. */
void idem__conn_close(idem_conn *conn);

#endif
