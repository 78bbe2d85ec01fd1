/**
 * @file pool.h
 * @brief A thread-safe pool of libpq connections.
 *
 * Any number of threads may call idem_pool_acquire() and idem_pool_release() on one
 * pool. A connection belongs to one thread between those two calls. A connection that
 * comes back dirty (open or failed transaction, busy, broken) is rolled back or closed,
 * never handed out again as it is; connections the server broke (SQLSTATE class 08,
 * 57P01–57P03) are replaced, so the pool keeps serving across a server restart. A
 * ROLLBACK is sent only inside a transaction the server still holds: a connection whose
 * session the server ended while it sat in a transaction is closed without one, the
 * server's last words going to the log hook (one line each, as every record).
 *
 * fork(): a child process must not use its parent's pool, nor free it (the
 * connections' sockets are shared with the parent). Create a new pool in the child.
 * Calls on a pool from a process other than the one that created it fail with
 * IDEM_EINVAL.
 *
 * Connection poolers: by default each connection prepares idem's statements once, by
 * name, and keeps them for its life, which needs the connection to stay on one server
 * session (a direct connection, or PgBouncer in session mode). Behind a pooler in
 * transaction mode (PgBouncer's pool_mode = transaction), set
 * idem_pool_options.pooler to ::IDEM_POOLER_TRANSACTION; see ::idem_pooler.
 */
#ifndef IDEM_POOL_H
#define IDEM_POOL_H

#include <libpq-fe.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A pool of connections. Opaque. */
typedef struct idem_pool idem_pool;
/** One connection, checked out of a pool. Opaque. */
typedef struct idem_conn idem_conn;

/** What stands between the pool's connections and PostgreSQL. */
typedef enum idem_pooler {
    /** Nothing, or a pooler in session mode: every connection stays on one server session.
     *  Statements are prepared by name once per connection (the fastest). Should the
     *  server session turn out not to hold what the connection prepared there, or to hold
     *  statements it never prepared (a transaction-mode pooler in between), the call
     *  fails with IDEM_EINVAL, field "pooler", saying to set ::IDEM_POOLER_TRANSACTION;
     *  the connection is closed. */
    IDEM_POOLER_NONE = 0,
    /** A pooler in transaction mode (PgBouncer pool_mode = transaction): a connection may
     *  land on another server session at each transaction, so idem keeps nothing on a
     *  server session across transactions. Statements go unnamed (parsed each time);
     *  statement_timeout_ms is not sent as a startup option, which PgBouncer rejects: it
     *  caps the statement_timeout each of a store's transactions sets (see
     *  @ref statement_timeout_ms). Statement mode is not supported: idem needs
     *  transactions. */
    IDEM_POOLER_TRANSACTION = 1,
    /** Decide when the pool is created: ::IDEM_POOLER_TRANSACTION when its first
     *  connection turns out to reach PostgreSQL through a pooler (see
     *  idem_pooler_detect()), ::IDEM_POOLER_NONE otherwise. Costs one round trip at
     *  creation; statement_timeout_ms is never a startup option then. */
    IDEM_POOLER_AUTO = 2,
} idem_pooler;

/** Pool settings. Initialize with ::IDEM_POOL_OPTIONS_INIT, then change what you need. */
typedef struct idem_pool_options {
    unsigned int version;              /**< ::IDEM_POOL_OPTIONS_VERSION */
    unsigned int max_size;             /**< most connections open at once; default 10.
                                            Size it near twice the database server's
                                            cores: more SERIALIZABLE transactions at once
                                            mostly wait on each other */
    unsigned int min_idle;             /**< connections opened at creation; idle ones
                                            above it are closed at idle_timeout_ms. Not
                                            refilled: lifetime and breakage still close
                                            connections below it; default 0 */
    unsigned int acquire_timeout_ms;   /**< longest wait for a free connection (a store's
                                            call waits no longer than its deadline_ms);
                                            default 5000 */
    unsigned int connect_timeout_ms;   /**< longest wait to open one (connecting, and
                                            asking whether the database has Citus), and
                                            for the ROLLBACK of a connection released
                                            inside a transaction; 0 = no limit; default
                                            5000. A store's call is also bounded by its
                                            deadline_ms (store.h), whichever ends first.
                                            With several hosts (host=a,b) each gets an
                                            even share of what is left, so that a silent
                                            one gives way to the next */
    unsigned int max_lifetime_ms;      /**< close a connection this old when released (minus
                                            up to 10 % random jitter); 0 = never; default
                                            1800000 (30 min) */
    unsigned int idle_timeout_ms;      /**< close an idle connection above min_idle after
                                            this long; 0 = never; default 600000 (10 min).
                                            Idle and expired connections are pruned when
                                            connections are acquired or released (there is
                                            no background thread) */
    unsigned int health_check_idle_ms; /**< a connection idle longer than this is checked
                                            with a round trip (bounded by
                                            connect_timeout_ms) before it is handed out;
                                            default 5000 */
    unsigned int statement_timeout_ms; /**< SET statement_timeout on each connection (a
                                            startup option with ::IDEM_POOLER_NONE), and
                                            the longest statement_timeout that a store's
                                            transaction sets (store.h: each sets what is
                                            left of its call's deadline, less half a
                                            margin); 0 = the server's setting (between a
                                            store's declared calls, one of theirs: see
                                            idem_pool_acquire()); default 0 */
    const char *application_name;      /**< reported to the server; default "idem" */
    idem_log_fn log;                   /**< optional logging hook; default none */
    void *log_ctx;                     /**< passed to @ref log */
    /* Version 2 */
    idem_pooler pooler; /**< what stands between the pool and the server; default
                             ::IDEM_POOLER_NONE (direct connections) */
} idem_pool_options;

#define IDEM_POOL_OPTIONS_VERSION 2
#define IDEM_POOL_OPTIONS_INIT                                                                     \
    {                                                                                              \
        IDEM_POOL_OPTIONS_VERSION, 10, 0, 5000, 5000, 1800000, 600000, 5000, 0, "idem", NULL,      \
            NULL, IDEM_POOLER_NONE                                                                 \
    }

/** Fill @p opts with the defaults of struct version @p version (for bindings that cannot
 *  use ::IDEM_POOL_OPTIONS_INIT). @return 0, or IDEM_EINVAL (NULL, unknown version). */
IDEM_API int idem_pool_options_init(idem_pool_options *opts, unsigned int version);

/** A snapshot of a pool's counters. Caller-allocated: initialize with
 *  ::IDEM_POOL_STATS_INIT (or set version to ::IDEM_POOL_STATS_VERSION). */
typedef struct idem_pool_stats {
    unsigned int version;                /**< ::IDEM_POOL_STATS_VERSION */
    unsigned int size;                   /**< connections open now */
    unsigned int idle;                   /**< of which idle in the pool */
    unsigned int in_use;                 /**< of which checked out */
    unsigned int waiting;                /**< threads waiting in idem_pool_acquire() */
    unsigned long long acquires;         /**< successful acquires */
    unsigned long long timeouts;         /**< acquires that timed out */
    unsigned long long connect_failures; /**< attempts to open a connection that failed */
    unsigned long long opened;           /**< connections opened */
    unsigned long long closed_broken;    /**< closed because broken or dirty beyond repair */
    unsigned long long closed_lifetime;  /**< closed at max_lifetime_ms */
    unsigned long long closed_idle;      /**< closed at idle_timeout_ms */
    unsigned long long closed_health;    /**< failed the health check on checkout */
    unsigned long long rolled_back;      /**< came back inside a transaction, rolled back */
} idem_pool_stats;

#define IDEM_POOL_STATS_VERSION 1
#define IDEM_POOL_STATS_INIT                                                                       \
    {                                                                                              \
        IDEM_POOL_STATS_VERSION, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0                             \
    }

/** Fill @p stats with zero counters of struct version @p version (for bindings that cannot
 *  use ::IDEM_POOL_STATS_INIT). @return 0, or IDEM_EINVAL (NULL, or an unknown version). */
IDEM_API int idem_pool_stats_init(idem_pool_stats *stats, unsigned int version);

/**
 * Mask the password of @p conninfo wherever it appears in @p text, in place: a
 * `password=` value (quoted or not) and the password of a URI's user information
 * (`postgresql://user:password@host`). libpq repeats parts of a malformed connection
 * string in its messages; idem masks its own messages this way, and an application can do
 * the same with anything it logs. @p text is a NUL-terminated buffer of @p size bytes; a
 * message that would grow past it is cut.
 * @return how many occurrences were masked; 0 for NULL arguments.
 */
IDEM_API size_t idem_conninfo_redact(char *text, size_t size, const char *conninfo);

/**
 * Create a pool. The connection string is checked now (a bad one fails here, not at
 * first use), and one connection is opened to prove the server answers when
 * min_idle is 0 (min_idle connections otherwise).
 *
 * TCP connections get keepalives (keepalives_idle=30, keepalives_interval=10,
 * keepalives_count=3) and tcp_user_timeout=30000, so that a peer that vanished is noticed
 * on an idle connection too; the same keywords in @p conninfo override them.
 *
 * Settings that cannot work are told from a server that cannot be reached, so that only
 * the latter reads "retry later":
 * - IDEM_EINVAL, field "conninfo": the string does not parse, or libpq refuses one of its
 *   values (sslmode=bogus, a port that is not a number), in libpq's words.
 * - IDEM_EPERM (status misconfigured; what to fix in front of the message and in
 *   err.hint): the server, or a pooler in front of it, refused the login for good: a wrong
 *   or missing password, an authentication that failed, no pg_hba.conf entry, a role
 *   without LOGIN, a role or database that does not exist, no CONNECT privilege, SSL
 *   required of a server without it. libpq gives no SQLSTATE for a refused connection:
 *   these are recognised by libpq's, PostgreSQL's and PgBouncer's words in English
 *   (PQconnectionNeedsPassword() for a missing password). A refusal in other words (a
 *   server whose lc_messages is another language) stays IDEM_EUNAVAIL, as does an
 *   authentication method whose own server is down (LDAP, RADIUS), which PostgreSQL
 *   reports as a failed authentication and which is taken for a refused login.
 * - IDEM_EUNAVAIL: everything else (no server answers, not within connect_timeout_ms, too
 *   many connections, the server starting up or shutting down).
 *
 * @param out       on success, the pool; caller owns it, free with idem_pool_free().
 * @param conninfo  libpq key=value string or URI; NULL or "" uses the PG* environment.
 * @param opts      NULL for the defaults.
 * @return 0, IDEM_EINVAL (bad conninfo or options, see above; field "pooler": a pooler
 *         refused the startup option that carries statement_timeout_ms, see
 *         ::idem_pooler), IDEM_EPERM (login refused, see above), IDEM_EUNAVAIL (server
 *         unreachable, or anything not recognised above), IDEM_ENOMEM.
 */
IDEM_API int idem_pool_new(idem_pool **out, const char *conninfo, const idem_pool_options *opts,
                           idem_error *err);

/** Close every connection and free the pool. Every connection must have been released.
 *  NULL is accepted. */
IDEM_API void idem_pool_free(idem_pool *pool);

/**
 * Check out a connection, waiting up to acquire_timeout_ms for one. No deadline is put on
 * it: what you send on it is bounded by your own settings (statement_timeout_ms). Its
 * session has its own statement_timeout: where a store's declared call left one of its own
 * there (with statement_timeout_ms 0, lib/README.md, "Behind a connection pooler"), it is
 * put back first (RESET statement_timeout, bounded by connect_timeout_ms; a connection that
 * fails to is closed and another one taken).
 *
 * @param out  on success, a connection for this thread's use; give it back with
 *             idem_pool_release(). Untouched on failure.
 * @return 0, IDEM_EUNAVAIL (pool exhausted: the message shows the pool's counters; or the
 *         server cannot be reached), IDEM_EPERM (a connection opened now was refused for
 *         good, as idem_pool_new() tells: a password or role changed since),
 *         IDEM_EINVAL (pool used after fork()), IDEM_ENOMEM.
 *         A caller handed a free slot then opens a connection, so the longest wait is
 *         acquire_timeout_ms + connect_timeout_ms (+ connect_timeout_ms for the health
 *         round trip of a long-idle connection).
 */
IDEM_API int idem_pool_acquire(idem_conn **out, idem_pool *pool, idem_error *err);

/** Give a connection back. A dirty one is cleaned or closed. NULL is accepted. */
IDEM_API void idem_pool_release(idem_conn *conn);

/** The libpq connection. Borrowed: valid until idem_pool_release(). Do not PQfinish()
 *  it; leave it idle (no open transaction) or call idem_conn_discard(). Do not DEALLOCATE
 *  or DISCARD on it: the pool remembers which statements it prepared there (a
 *  connection found without them is closed on release). Behind a transaction-mode
 *  pooler, nothing set on it outside a transaction (SET, PREPARE, session locks) is
 *  there for the next transaction. */
IDEM_API PGconn *idem_conn_pg(idem_conn *conn);

/** Close this connection when it is released instead of reusing it. */
IDEM_API void idem_conn_discard(idem_conn *conn);

/** Fill @p out (its version set) with the pool's counters now; all zero for a NULL pool
 *  or in a forked child. @return 0, or IDEM_EINVAL (NULL @p out, unknown version). */
IDEM_API int idem_pool_stats_get(idem_pool_stats *out, idem_pool *pool);

/**
 * Whether @p conn reaches PostgreSQL through a connection pooler such as PgBouncer: the
 * server process answering (pg_backend_pid()) is not the one the connection was given at
 * startup (PQbackendPID(), which a pooler makes up). One round trip, outside any
 * transaction. A pooler cannot be told from this to pool by session or by transaction.
 *
 * @param out   1 through a pooler, 0 direct; untouched on failure.
 * @param conn  borrowed; idle (no transaction open) and not in pipeline mode. Your own
 *              connection: no deadline of idem's bounds the round trip (libpq's and the
 *              server's settings do).
 * @return 0, IDEM_EINVAL (NULL argument), IDEM_EDB or IDEM_EUNAVAIL (the query failed).
 */
IDEM_API int idem_pooler_detect(int *out, PGconn *conn, idem_error *err);

#ifdef __cplusplus
}
#endif

#endif
