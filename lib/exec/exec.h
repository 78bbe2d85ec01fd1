/* The execution layer (exec.c; what a connection keeps prepared, caller SQL included, in
 * exec_prepared.c): named statements prepared once per connection, single commands and
 * pipelines, on a connection checked out of the pool.
 *
 * Behind a pooler in transaction mode (the pool's IDEM_POOLER_TRANSACTION) the layer keeps
 * nothing on a server session across transactions: named statements go unnamed (parsed
 * each time, in the same round trip). What a transaction sets (the tenant, lock_timeout,
 * statement_timeout) is not this layer's: its callers send it, built by settings.h. */
#ifndef IDEM_LIB_EXEC_H
#define IDEM_LIB_EXEC_H

#include <libpq-fe.h>
#include <stdint.h>

#include "idem/pool.h"
#include "core/stmt.h"

/* Every wait on the server (each send and each reply) on a connection is bounded by its
 * call's deadline, which the checkout stamped on it (checkout.h, idem__pool_checkout()). A
 * reply that has not come by then is abandoned: the socket is shut down (the server sees it
 * close and rolls back), the connection is marked for discard, and the call returns
 * IDEM_EUNAVAIL (the store's `unavailable`: retry later with the same key) with a message
 * saying that the deadline passed. A statement sent with less than IDEM__MIN_WAIT_MS left,
 * or after the deadline, may still wait that long (deadline.h). */

/* Execute a named statement on a checked-out connection, preparing it first, in the same
 * round trip, if this connection has not seen it. values/lengths/formats as PQexecPrepared (lengths
 * and formats may be NULL for text parameters). On success (PGRES_COMMAND_OK or PGRES_TUPLES_OK)
 * *out is the result, caller PQclear()s it. On failure *out is untouched, err has the SQLSTATE and
 * server message, and a connection-level failure marks the connection for discard. Every wait is
 * bounded by the call's deadline (above). Returns 0, IDEM_EDB or
 * IDEM_EUNAVAIL; IDEM_EINVAL (field "pooler", the connection marked for discard) when the server
 * session lost a statement this connection prepared there (26000) or already holds one it is
 * preparing (42P05): the session is shared, as behind a transaction-mode pooler without
 * IDEM_POOLER_TRANSACTION. */
int idem__conn_exec_prepared(PGresult **out, idem_conn *conn, const idem__stmt *stmt,
                             const char *const *values, const int *lengths, const int *formats,
                             int result_format, idem_error *err);

/* Execute a parameterless command ("BEGIN ...", "COMMIT", "ROLLBACK"); same contract. */
int idem__conn_exec(PGresult **out, idem_conn *conn, const char *sql, idem_error *err);

/* Execute SQL text with nparams text parameters (an effect's statement, text results);
 * same contract. */
int idem__conn_exec_params(PGresult **out, idem_conn *conn, const char *sql, int nparams,
                           const char *const *values, idem_error *err);

/* The statement this connection keeps for a caller's SQL text with @nparams text
 * parameters (an effect's statement), so that the text is parsed and planned once per
 * connection instead of on every call; prepared like idem's own statements, in the round
 * trip that runs it. NULL when it goes as text instead: the first time this connection
 * runs it (a text run once is never kept), behind a transaction pooler, for SQL longer
 * than IDEM__TEXT_STMT_SQL_MAX, once IDEM__TEXT_STMTS_MAX texts are kept, when the same
 * text came with another parameter count, or out of memory. The statement belongs to the
 * connection: use it only on @conn. */
const idem__stmt *idem__conn_text_stmt(idem_conn *conn, const char *sql, int nparams);

/* Whether the last statement on this connection failed because it was a kept text
 * (idem__conn_text_stmt()) whose plan no longer fits its table, changed since it was
 * prepared; asking clears it. The pool then keeps texts anew on fresh connections, and
 * this one sends them as text until it is closed on release. */
int idem__conn_take_stale_plan(idem_conn *conn);

/* Transaction control as named statements, prepared once per connection like idem's other
 * statements: parsing the text again on every call costs the server about as much as
 * carrying it out (BEGIN ISOLATION LEVEL SERIALIZABLE and COMMIT together: about 51,000
 * instructions as text, 30,000 prepared). Messages and fault points name them by their
 * SQL, as when they went as text. */
extern const idem__stmt idem__stmt_begin_serializable;   /* BEGIN ISOLATION LEVEL SERIALIZABLE */
extern const idem__stmt idem__stmt_begin_read_committed; /* BEGIN ISOLATION LEVEL READ COMMITTED */
extern const idem__stmt idem__stmt_commit;               /* COMMIT */

/* One command of a pipeline: a named statement (prepared first if this connection has
 * not seen it), or with stmt NULL the SQL text `sql` with `nparams` text parameters. */
typedef struct idem__pipe_cmd {
    const idem__stmt *stmt;
    const char *sql;
    int nparams; /* for sql; a statement's own count is used otherwise */
    const char *const *values;
    const int *lengths;
    const int *formats;
    int result_format;
    PGresult *result; /* out: set for each command that succeeded; caller PQclear()s */
} idem__pipe_cmd;

/* A command of named statement @stmt with its text parameters @values (NULL: none). */
idem__pipe_cmd idem__pipe_stmt(const idem__stmt *stmt, const char *const *values);

/* Send every command in one pipeline closed by one Sync, so that they cost one round trip,
 * and collect their results. A named statement this connection has not prepared yet is
 * prepared in the pipeline, in front of its first command (no round trip of its own): one
 * that cannot be prepared fails at that command. Returns 0 when all succeeded. Otherwise the
 * failing command's index goes to *failed_at (n when the failure is not tied to one command, such
 * as a lost connection) and err has its SQLSTATE and message; commands before it keep their
 * results, those after it were skipped by the server. Same discard rules as
 * idem__conn_exec(). */
int idem__conn_pipeline(idem_conn *conn, idem__pipe_cmd *cmds, size_t n, size_t *failed_at,
                        idem_error *err);

/* Fault points of the execution layer (test builds only: the installed library has none
 * of this). A fault applies to the next @count commands, on any connection, whose
 * statement name or SQL text starts with @match ("COMMIT", "idem_store_resolve"). */
enum idem__fault_point {
    IDEM__FAULT_DROP_BEFORE_SEND = 1, /* the socket dies before the command is sent */
    IDEM__FAULT_DROP_AFTER_SEND,      /* sent (and carried out), the socket dies before the reply */
    IDEM__FAULT_LOSE_REPLY,           /* replies read, then the socket dies: reported lost */
};
#ifdef IDEM_TESTING
void idem__fault_inject(const char *match, enum idem__fault_point point, unsigned int count);
/* Remove every fault not yet taken. */
void idem__fault_reset(void);
/* What the calling thread sent since it last asked (or started): round trips (a pipeline, a
 * single statement, each waited on before the next) and the statements they carried (a
 * statement's PREPARE, which travels with its first use, is not one). Both counters restart at 0.
 */
void idem__exec_trace_take(unsigned long *round_trips, unsigned long *statements);
#endif

/* Have @fn(@arg) run once, in the next wait for a reply on @conn, once what was sent is
 * flushed: work its caller needs only after the reply, done while the server works (a
 * retry's fingerprint, hashed while its lookup is on the wire). @fn NULL takes back one that
 * has not run. It runs at most once, and not at all when nothing was sent (a send that
 * failed): a caller that needs the work does it after the statement if it did not run.
 * @fn must not use @conn. */
void idem__conn_while_waiting(idem_conn *conn, void (*fn)(void *), void *arg);

/* Whether the connection failed (it is marked to be closed on release). NULL is. */
int idem__conn_failed(const idem_conn *conn);

/* Whether the connection's database has the citus extension (looked up when the pool
 * opened it): the tenant's setting then travels as SET LOCAL in a transaction (tenant.h). */
int idem__conn_citus(const idem_conn *conn);

/* The call's deadline that the checkout stamped on the connection (0: none), and its pool's
 * statement_timeout_ms (0: none): what a transaction's timeouts are made of (settings.h). */
uint64_t idem__conn_deadline(const idem_conn *conn);
unsigned int idem__conn_statement_timeout_ms(const idem_conn *conn);

/* The pool's statement_timeout_ms when the connection's session was opened with it as its
 * own statement_timeout (a startup option: not behind a transaction pooler) and has not been
 * found with another since; else 0. A transaction whose statement timeout would be that
 * value need not set it (settings.h, idem__tx_settings_session()). */
unsigned int idem__conn_session_statement_timeout_ms(const idem_conn *conn);

/* The session's statement_timeout was found to be another (an application set it on a
 * connection it took from the pool, or a pooler dropped the startup option): from now on
 * every transaction on the connection sets its own. */
void idem__conn_session_timeout_changed(idem_conn *conn);

/* Whether a store's transaction may leave its statement_timeout on @conn's session for the
 * next (settings.h, idem__tx_settings_keep_cmd()): the pool has no statement_timeout_ms,
 * the connection keeps its server session across transactions (no transaction pooler, not
 * Citus), and no such transaction found the session unfit for it. */
int idem__conn_may_keep_timeout(const idem_conn *conn);

/* The statement_timeout a store's transaction left on the session (in ms), which the
 * session has held since; 0: none. Cleared by idem__conn_session_timeout_changed(), and by
 * the checkout of the connection for anything but a store's timed call (pool.c), which
 * puts the session's own setting back first. */
unsigned int idem__conn_kept_timeout_ms(const idem_conn *conn);

/* A transaction that tried to leave its statement_timeout on the session committed: it did,
 * @ms (> 0), or found it may not (0: the connection is not asked again). */
void idem__conn_timeout_kept(idem_conn *conn, unsigned int ms);

#ifdef IDEM_TESTING
/* Forget that statements were prepared on this connection (after DISCARD ALL, say). Tests
 * only: compiled into the test library, never into the installed one. */
void idem__conn_forget_prepared(idem_conn *conn);
#endif

/* Run one statement with PQexecParams on a connection the caller lent us (not a pooled
 * one: nothing is prepared there, since a prepared statement would outlive the call).
 * On success (PGRES_COMMAND_OK or PGRES_TUPLES_OK) *out is the result, caller PQclear()s
 * it. On failure *out is untouched and err has the SQLSTATE and the server's message with
 * @what in front; a misconfigured deployment (a missing migration, a missing privilege)
 * gives IDEM_ESCHEMA or IDEM_EPERM with advice (idem__error_misconfigured()). Returns 0,
 * IDEM_ESCHEMA, IDEM_EPERM, IDEM_EDB or IDEM_EUNAVAIL. */
int idem__pg_exec(PGresult **out, PGconn *conn, const char *sql, int nparams,
                  const char *const *values, const int *lengths, const int *formats,
                  int result_format, const char *what, idem_error *err);

#endif
