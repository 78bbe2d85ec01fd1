/* The store's execution layer: named statements prepared once per connection, single
 * commands, and pipelines, on a connection checked out of the pool (as libpq's fe-exec.c
 * is to fe-connect.c). Every wait on the server is ours and bounded by the connection's
 * deadline: libpq sends in nonblocking mode, and we poll its socket for what is left of
 * the time before each read. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "exec.h"
#include "exec_io.h"
#include "conn.h"

/* Whether the connection is in a state no one can use. Inside a pipeline libpq reports
 * every connection as busy, so there only the connection itself is judged; the pipeline
 * checks the transaction state once it has left pipeline mode. */
static int unusable(const idem_conn *conn, int in_pipeline)
{
    PGTransactionStatusType ts = PQtransactionStatus(conn->pg);

    if (PQstatus(conn->pg) != CONNECTION_OK)
        return 1;
    return !in_pipeline && (ts == PQTRANS_ACTIVE || ts == PQTRANS_UNKNOWN);
}

static int has_sqlstate(const PGresult *res, const char *sqlstate)
{
    const char *state = res != NULL ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

    return state != NULL && strcmp(state, sqlstate) == 0;
}

/* The server session does not hold a statement this connection prepared there (26000),
 * or holds one it never prepared (42P05): other clients share it, as behind a pooler in
 * transaction mode. Going on would trust a session set up by someone else: the call fails
 * saying which setting fixes it, and the connection is closed on release. */
static int session_mismatch(idem_conn *conn, const PGresult *res, const char *what, idem_error *err)
{
    idem__error_pg(err, conn->pg, res, "%s", what);
    conn->nprepared = 0;
    conn->discard = 1;
    if (err == NULL)
        return IDEM_EINVAL;
    err->code = IDEM_EINVAL;
    snprintf(err->field, sizeof(err->field), "pooler");
    snprintf(err->hint, sizeof(err->hint),
             "behind a pooler in transaction mode (PgBouncer pool_mode = transaction) set "
             "idem_pool_options.pooler to IDEM_POOLER_TRANSACTION or IDEM_POOLER_AUTO; "
             "otherwise do not DEALLOCATE or DISCARD on idem's connections");
    return idem__error_context(err,
                               "pooler: the server session %s (shared with other clients: a "
                               "transaction-mode pooler in between?); set "
                               "idem_pool_options.pooler = IDEM_POOLER_TRANSACTION",
                               has_sqlstate(res, "42P05")
                                   ? "already holds a statement this connection did not prepare"
                                   : "lacks a statement this connection prepared there");
}

/* Keep a successful result; otherwise record the failure, and mark the connection for
 * discard when it is gone or left in a state no one can use. @stmt: the named statement
 * that ran, or NULL for SQL text. */
static int take_result_in(PGresult **out, idem_conn *conn, PGresult *res, const char *what,
                          const idem__stmt *stmt, int in_pipeline, idem_error *err)
{
    ExecStatusType st = PQresultStatus(res);
    int rc;

    if (res != NULL && (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)) {
        *out = res;
        return 0;
    }
    /* 26000 on a statement this connection prepared: the session is not the one it
     * prepared it on. On SQL text (a caller's EXECUTE), the connection's statements may be
     * gone too (DEALLOCATE or DISCARD ALL by a caller): it no longer matches what it
     * remembers. */
    if (stmt != NULL && !conn->unnamed && has_sqlstate(res, "26000")) {
        rc = session_mismatch(conn, res, what, err);
        PQclear(res);
        return rc;
    }
    rc = idem__error_pg(err, conn->pg, res, "%s", what);
    idem__exec_note_stale_plan(conn, stmt, res);
    if (rc == IDEM_EUNAVAIL || unusable(conn, in_pipeline))
        conn->discard = 1;
    if (has_sqlstate(res, "26000")) {
        conn->nprepared = 0;
        conn->discard = 1;
    }
    PQclear(res);
    return rc;
}

static int take_result(PGresult **out, idem_conn *conn, PGresult *res, const char *what,
                       const idem__stmt *stmt, idem_error *err)
{
    return take_result_in(out, conn, res, what, stmt, 0, err);
}

static int exec_as_pipeline(PGresult **out, idem_conn *conn, idem__pipe_cmd cmd, idem_error *err)
{
    size_t failed_at;
    int rc = idem__conn_pipeline(conn, &cmd, 1, &failed_at, err);

    if (rc == 0)
        *out = cmd.result;
    return rc;
}

/* SQL text: with nparams < 0 by the simple protocol (no parameters, several statements
 * allowed, the last result kept), else with nparams text parameters. */
static int exec_text(PGresult **out, idem_conn *conn, const char *sql, int nparams,
                     const char *const *values, idem_error *err)
{
    PGresult *res = NULL;
    const char *what = sql; /* whole: an effect's statement is named as it was written */
    int rc, sent;

    assert(out != NULL && conn != NULL && sql != NULL);
    idem__exec_io_start(conn);
    if (idem__exec_fault_take(sql) != 0)
        idem__exec_drop_socket(conn);
    idem__exec_trace_add(1);
    sent = nparams < 0 ? PQsendQuery(conn->pg, sql)
                       : PQsendQueryParams(conn->pg, sql, nparams, NULL, values, NULL, NULL, 0);
    rc = idem__exec_reply(&res, conn, sent, what, err);
    if (rc == 0)
        rc = take_result(out, conn, res, what, NULL, err);
    idem__exec_io_end(conn);
    return rc;
}

int idem__conn_exec(PGresult **out, idem_conn *conn, const char *sql, idem_error *err)
{
    return exec_text(out, conn, sql, -1, NULL, err);
}

int idem__conn_exec_params(PGresult **out, idem_conn *conn, const char *sql, int nparams,
                           const char *const *values, idem_error *err)
{
    return exec_text(out, conn, sql, nparams < 0 ? 0 : nparams, values, err);
}

/* The reply to preparing @stmt as @name (its result @res, taken): remembered when it
 * succeeded. A statement of that name already there (42P05) means a session this
 * connection did not set up alone. */
static int prepared(idem_conn *conn, const idem__stmt *stmt, const char *name, PGresult *res,
                    int in_pipeline, idem_error *err)
{
    PGresult *kept = NULL;
    int rc;

    if (has_sqlstate(res, "42P05")) {
        rc = session_mismatch(conn, res, idem__exec_stmt_what(conn, stmt), err);
        PQclear(res);
        return rc;
    }
    rc = take_result_in(&kept, conn, res, idem__exec_stmt_what(conn, stmt), NULL, in_pipeline, err);
    if (rc == 0) {
        PQclear(kept);
        rc = idem__exec_remember_prepared(conn, stmt, name, err);
    }
    if (rc < 0)
        idem__error_context(err, "prepare");
    return rc;
}

/* Send a named statement: by its prepared name, or behind a transaction pooler as an
 * unnamed one (parsed again each time; nothing stays on the server session). */
static int send_stmt(idem_conn *conn, const idem__stmt *stmt, const char *const *values,
                     const int *lengths, const int *formats, int result_format)
{
    if (conn->unnamed)
        return PQsendQueryParams(conn->pg, stmt->sql, stmt->nparams, NULL, values, lengths, formats,
                                 result_format);
    return PQsendQueryPrepared(conn->pg, idem__exec_prepared_name(conn, stmt), stmt->nparams,
                               values, lengths, formats, result_format);
}

int idem__conn_exec_prepared(PGresult **out, idem_conn *conn, const idem__stmt *stmt,
                             const char *const *values, const int *lengths, const int *formats,
                             int result_format, idem_error *err)
{
    PGresult *res = NULL;
    const char *what;
    int rc;

    assert(out != NULL && conn != NULL && stmt != NULL);
    /* Not prepared here yet: prepared in the same round trip, where it runs. */
    if (!conn->unnamed && idem__exec_prepared_name(conn, stmt) == NULL)
        return exec_as_pipeline(
            out, conn,
            (idem__pipe_cmd){stmt, NULL, 0, values, lengths, formats, result_format, NULL}, err);
    idem__exec_io_start(conn);
    if (idem__exec_fault_take(stmt->name) != 0)
        idem__exec_drop_socket(conn);
    idem__exec_trace_add(1);
    what = idem__exec_stmt_what(conn, stmt);
    rc = idem__exec_reply(
        &res, conn, send_stmt(conn, stmt, values, lengths, formats, result_format), what, err);
    if (rc == 0)
        rc = take_result(out, conn, res, what, stmt, err);
    idem__exec_io_end(conn);
    return rc;
}

static int pipe_send(idem_conn *conn, const idem__pipe_cmd *cmd)
{
    if (cmd->stmt != NULL)
        return send_stmt(conn, cmd->stmt, cmd->values, cmd->lengths, cmd->formats,
                         cmd->result_format);
    return PQsendQueryParams(conn->pg, cmd->sql, cmd->nparams, NULL, cmd->values, cmd->lengths,
                             cmd->formats, cmd->result_format);
}

/* Read one command's results: its result, then the NULL that ends it, within the
 * deadline. Returns 0 (*res may be NULL), or IDEM_EUNAVAIL as idem__exec_await_result(). */
static int pipe_take(PGresult **res, idem_conn *conn, const char *what, idem_error *err)
{
    PGresult *extra;
    int rc = idem__exec_await_result(conn, what, err);

    *res = rc == 0 ? PQgetResult(conn->pg) : NULL;
    while (*res != NULL && (rc = idem__exec_await_result(conn, what, err)) == 0 &&
           (extra = PQgetResult(conn->pg)) != NULL)
        PQclear(extra); /* not expected: one result per command */
    if (rc != 0) {
        PQclear(*res);
        *res = NULL;
    }
    return rc;
}

/* The statements of a pipeline that this connection has not prepared yet: each is
 * prepared in the pipeline, in front of its first use, so that preparing it costs no
 * round trip of its own and happens where it runs (inside the transaction, after what
 * comes before it: a statement that cannot be prepared fails there, and aborts the
 * transaction as its execution would). For such commands name is the statement's name
 * on the server (a later use of the same statement in the pipeline takes it too, without
 * a Parse of its own); "" for the others. */
typedef struct pipe_prep {
    char name[IDEM__PREPARED_NAME_MAX + 1];
    int parse; /* the Parse is sent in front of this command */
} pipe_prep;

static pipe_prep *pipe_preps(const idem_conn *conn, const idem__pipe_cmd *cmds, size_t n,
                             int *failed)
{
    pipe_prep *preps = NULL;

    *failed = 0;
    for (size_t i = 0; i < n && !conn->unnamed; i++) {
        const idem__stmt *stmt = cmds[i].stmt;
        size_t first = i;

        if (stmt == NULL || idem__exec_prepared_name(conn, stmt) != NULL)
            continue;
        for (size_t j = 0; j < i && first == i; j++)
            first = cmds[j].stmt == stmt ? j : i;
        if (preps == NULL && (preps = calloc(n, sizeof(*preps))) == NULL) {
            *failed = 1;
            return NULL;
        }
        idem__exec_server_name(preps[i].name, sizeof(preps[i].name), stmt);
        preps[i].parse = first == i;
    }
    return preps;
}

/* The reply to the Parse in front of cmds[i]: the statement is remembered when the server
 * kept it, whatever failed before; a failure of its own is the pipeline's when none came
 * first. Returns the pipeline's failure so far; *io: the reply never came. */
static int pipe_take_parse(idem_conn *conn, const idem__pipe_cmd *cmd, const pipe_prep *prep,
                           int rc, int *io, idem_error *err)
{
    PGresult *res;

    if ((*io = pipe_take(&res, conn, idem__exec_stmt_what(conn, cmd->stmt), err)) != 0)
        return rc;
    if (PQresultStatus(res) == PGRES_COMMAND_OK) {
        PQclear(res);
        if (idem__exec_remember_prepared(conn, cmd->stmt, prep->name, rc == 0 ? err : NULL) != 0) {
            conn->discard = 1; /* the session holds a statement it does not know of */
            return rc == 0 ? IDEM_ENOMEM : rc;
        }
        return rc;
    }
    if (rc != 0 || PQresultStatus(res) == PGRES_PIPELINE_ABORTED) {
        PQclear(res); /* never carried out: not prepared */
        return rc;
    }
    return prepared(conn, cmd->stmt, prep->name, res, 1, err);
}

/* Collect the results up to and including the Sync. Returns 0 or the first failure; a
 * deadline or a connection lost on the way is not tied to one command. */
static int pipe_collect(idem_conn *conn, idem__pipe_cmd *cmds, size_t n, const pipe_prep *preps,
                        size_t *failed_at, idem_error *err)
{
    const char *what;
    int rc = 0, io;
    PGresult *res;

    for (size_t i = 0; i < n; i++) {
        /* The reply to its Parse first, when it was prepared in the pipeline. */
        if (preps != NULL && preps[i].parse) {
            int was = rc;

            rc = pipe_take_parse(conn, &cmds[i], &preps[i], rc, &io, err);
            if (io != 0) {
                *failed_at = n;
                return io;
            }
            if (rc != 0 && was == 0)
                *failed_at = i;
            if (PQstatus(conn->pg) != CONNECTION_OK) {
                *failed_at = n;
                return rc != 0 ? rc : idem__error_pg(err, conn->pg, NULL, "pipeline");
            }
        }
        what = cmds[i].stmt != NULL ? idem__exec_stmt_what(conn, cmds[i].stmt) : cmds[i].sql;
        if ((io = pipe_take(&res, conn, what, err)) != 0) {
            *failed_at = n;
            return io;
        }
        if (rc != 0 || PQresultStatus(res) == PGRES_PIPELINE_ABORTED) {
            PQclear(res);
            continue;
        }
        rc = take_result_in(&cmds[i].result, conn, res, what, cmds[i].stmt, 1, err);
        if (rc != 0)
            *failed_at = i;
        if (res == NULL || PQstatus(conn->pg) != CONNECTION_OK)
            return rc != 0 ? rc : idem__error_pg(err, conn->pg, NULL, "pipeline");
    }
    if ((io = idem__exec_await_result(conn, "pipeline sync", err)) != 0) {
        *failed_at = n;
        return io;
    }
    res = PQgetResult(conn->pg);
    if (PQresultStatus(res) != PGRES_PIPELINE_SYNC && rc == 0) {
        *failed_at = n;
        rc = idem__error_pg(err, conn->pg, res, "pipeline sync");
        conn->discard = 1;
    }
    PQclear(res);
    return rc;
}

/* Send one command, preparing it first (in the pipeline) as @prep says. */
static int pipe_send_prepared(idem_conn *conn, const idem__pipe_cmd *cmd, const pipe_prep *prep)
{
    if (prep == NULL || prep->name[0] == '\0')
        return pipe_send(conn, cmd);
    if (prep->parse &&
        PQsendPrepare(conn->pg, prep->name, cmd->stmt->sql, cmd->stmt->nparams, NULL) != 1)
        return 0;
    return PQsendQueryPrepared(conn->pg, prep->name, cmd->stmt->nparams, cmd->values, cmd->lengths,
                               cmd->formats, cmd->result_format);
}

/* Send the commands, preparing in the pipeline those this connection has not prepared
 * yet, and collect their results. */
static int pipe_run(idem_conn *conn, idem__pipe_cmd *cmds, size_t n, size_t *failed_at,
                    idem_error *err)
{
    int rc = 0, fault = idem__exec_fault_for(cmds, n), nomem;
    pipe_prep *preps = pipe_preps(conn, cmds, n, &nomem);

    if (nomem)
        return idem__error_set(err, IDEM_ENOMEM, "out of memory sending a pipeline");
    if (fault == IDEM__FAULT_DROP_BEFORE_SEND)
        idem__exec_drop_socket(conn);
    idem__exec_trace_add(n);
    if (PQenterPipelineMode(conn->pg) != 1) {
        free(preps);
        return idem__error_pg(err, conn->pg, NULL, "pipeline");
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (pipe_send_prepared(conn, &cmds[i], preps != NULL ? &preps[i] : NULL) != 1)
            rc = idem__error_pg(err, conn->pg, NULL, "pipeline send");
    }
    if (rc == 0 && PQpipelineSync(conn->pg) != 1)
        rc = idem__error_pg(err, conn->pg, NULL, "pipeline sync");
    if (rc != 0) {
        conn->discard = 1;
        free(preps);
        return rc;
    }
    if (fault == IDEM__FAULT_DROP_AFTER_SEND)
        idem__exec_drop_socket(conn);
    rc = pipe_collect(conn, cmds, n, preps, failed_at, err);
    free(preps);
    if (PQexitPipelineMode(conn->pg) != 1 || unusable(conn, 0))
        conn->discard = 1;
    /* Whatever arrived before the socket died, the caller learns nothing: a reply that
     * beat the drop must not make the fault a success. */
    if (fault == IDEM__FAULT_LOSE_REPLY || fault == IDEM__FAULT_DROP_AFTER_SEND)
        rc = idem__exec_lose_replies(conn, cmds, n, failed_at, err);
    return rc;
}

idem__pipe_cmd idem__pipe_stmt(const idem__stmt *stmt, const char *const *values)
{
    return (idem__pipe_cmd){stmt, NULL, 0, values, NULL, NULL, 0, NULL};
}

int idem__conn_pipeline(idem_conn *conn, idem__pipe_cmd *cmds, size_t n, size_t *failed_at,
                        idem_error *err)
{
    int rc;

    assert(conn != NULL && cmds != NULL && failed_at != NULL);
    *failed_at = n;
    for (size_t i = 0; i < n; i++)
        cmds[i].result = NULL;
    idem__exec_io_start(conn);
    rc = pipe_run(conn, cmds, n, failed_at, err);
    idem__exec_io_end(conn);
    return rc;
}

int idem__conn_failed(const idem_conn *conn)
{
    return conn == NULL || conn->discard || PQstatus(conn->pg) != CONNECTION_OK;
}

int idem__pg_exec(PGresult **out, PGconn *conn, const char *sql, int nparams,
                  const char *const *values, const int *lengths, const int *formats,
                  int result_format, const char *what, idem_error *err)
{
    PGresult *res = PQexecParams(conn, sql, nparams, NULL, values, lengths, formats, result_format);
    ExecStatusType st = PQresultStatus(res);
    int rc;

    assert(out != NULL && conn != NULL && sql != NULL);
    if (res != NULL && (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)) {
        *out = res;
        return 0;
    }
    rc = idem__error_misconfigured(err, idem__error_pg(err, conn, res, "%s", what));
    PQclear(res);
    return rc;
}

int idem__conn_citus(const idem_conn *conn)
{
    return conn != NULL && conn->citus;
}

uint64_t idem__conn_deadline(const idem_conn *conn)
{
    return conn != NULL ? conn->deadline_ms : 0;
}

unsigned int idem__conn_statement_timeout_ms(const idem_conn *conn)
{
    return conn != NULL ? conn->statement_timeout_ms : 0;
}

unsigned int idem__conn_session_statement_timeout_ms(const idem_conn *conn)
{
    return conn != NULL && conn->session_timeout ? conn->statement_timeout_ms : 0;
}

void idem__conn_session_timeout_changed(idem_conn *conn)
{
    if (conn != NULL) {
        conn->session_timeout = 0;
        conn->kept_timeout_ms = 0;
    }
}

int idem__conn_may_keep_timeout(const idem_conn *conn)
{
    return conn != NULL && conn->statement_timeout_ms == 0 && !conn->unnamed && !conn->citus &&
           !conn->keep_refused;
}

unsigned int idem__conn_kept_timeout_ms(const idem_conn *conn)
{
    return conn != NULL ? conn->kept_timeout_ms : 0;
}

void idem__conn_timeout_kept(idem_conn *conn, unsigned int ms)
{
    if (ms != 0)
        conn->kept_timeout_ms = ms;
    else
        conn->keep_refused = 1;
}
