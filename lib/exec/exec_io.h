/* The execution layer's parts shared between its files: waiting, dropping and fault
 * points (exec_io.c), and what a connection has prepared (exec_prepared.c). Private to
 * the library. */
#ifndef IDEM_LIB_EXEC_IO_H
#define IDEM_LIB_EXEC_IO_H

#include <stddef.h>
#include <stdint.h>

#include "exec.h"
#include "conn.h"

/* Whether @stmt is one of the transaction-control statements (exec.h), named by its SQL. */
int idem__exec_is_tx_control(const idem__stmt *stmt);

/* The command's name: its statement's (a transaction-control statement's SQL), or its SQL
 * text. */
const char *idem__exec_cmd_name(const idem__pipe_cmd *cmd);

#ifdef IDEM_TESTING
/* The fault point (enum idem__fault_point) a command named @name draws, taken; 0 for none. */
int idem__exec_fault_take(const char *name);
/* The fault a batch of commands draws: the first that one of them draws. */
int idem__exec_fault_for(const idem__pipe_cmd *cmds, size_t n);
/* Count one round trip carrying @statements statements (0 for a PREPARE) for this thread's
 * trace (exec.h, idem__exec_trace_take()). */
void idem__exec_trace_add(unsigned long statements);
#else
#define idem__exec_fault_take(name)   0
#define idem__exec_fault_for(cmds, n) 0
#define idem__exec_trace_add(n)       ((void)0)
#endif

/* How messages name @stmt: a caller's SQL kept by this connection (idem__conn_text_stmt())
 * by its whole text, as it would be named had it gone as text (its statement's name holds
 * only its first characters); idem's own statements by their names. */
const char *idem__exec_stmt_what(const idem_conn *conn, const idem__stmt *stmt);

/* The name @stmt has on this connection's server session, or NULL when it is not
 * prepared there. */
const char *idem__exec_prepared_name(const idem_conn *conn, const idem__stmt *stmt);

/* The name @stmt is prepared under on a server session (its own, and a hash of its SQL). */
void idem__exec_server_name(char *out, size_t size, const idem__stmt *stmt);

/* Remember that this connection's session holds @stmt as @name. Returns 0 or IDEM_ENOMEM. */
int idem__exec_remember_prepared(idem_conn *conn, const idem__stmt *stmt, const char *name,
                                 idem_error *err);

/* A statement failed with @res: when it was a kept text (exec_prepared.c) whose plan no longer
 * fits its table ("cached plan must not change result type"), remember it for
 * idem__conn_take_stale_plan() and move the pool's epoch on. */
void idem__exec_note_stale_plan(idem_conn *conn, const idem__stmt *stmt, const PGresult *res);

/* The connection dies here: the server sees its socket close; marked for discard. */
void idem__exec_drop_socket(idem_conn *conn);

/* Before anything is sent: fix how long this statement may wait (the connection's
 * deadline, at least IDEM__MIN_WAIT_MS), and put libpq's sends in nonblocking mode. */
void idem__exec_io_start(idem_conn *conn);
/* Back to libpq's blocking mode for idem_conn_pg()'s borrowers. */
void idem__exec_io_end(idem_conn *conn);

/* Wait until a result can be read without blocking, within the deadline; on expiry or a
 * lost connection the connection is dropped and IDEM_EUNAVAIL returned. */
int idem__exec_await_result(idem_conn *conn, const char *what, idem_error *err);

/* The reply to the command just sent (sent: what its PQsend*() returned): *res is its last
 * result, or NULL. Returns 0, or IDEM_EUNAVAIL (deadline passed, connection failed). */
int idem__exec_reply(PGresult **res, idem_conn *conn, int sent, const char *what, idem_error *err);

/* A fault point: the replies were read, then the connection died; the caller learns
 * nothing (IDEM_EUNAVAIL). */
int idem__exec_lose_replies(idem_conn *conn, idem__pipe_cmd *cmds, size_t n, size_t *failed_at,
                            idem_error *err);

#endif
