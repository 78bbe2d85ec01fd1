/* The store's execution layer: named statements prepared once per connection, single
 * commands, and pipelines, on a connection checked out of the pool (as libpq's fe-exec.c
 * is to fe-connect.c). */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#ifdef IDEM_TESTING
#include <pthread.h>
#endif

#include "error.h"
#include "exec.h"
#include "pool_conn.h"

#ifdef IDEM_TESTING
#define MAX_FAULTS 8
static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char match[64];
    enum idem__fault_point point;
    unsigned int count;
} faults[MAX_FAULTS];

void idem__fault_inject(const char *match, enum idem__fault_point point, unsigned int count)
{
    pthread_mutex_lock(&fault_lock);
    for (size_t i = 0; i < MAX_FAULTS; i++) {
        if (faults[i].count == 0) {
            snprintf(faults[i].match, sizeof(faults[i].match), "%s", match);
            faults[i].point = point;
            faults[i].count = count;
            break;
        }
    }
    pthread_mutex_unlock(&fault_lock);
}

void idem__fault_reset(void)
{
    pthread_mutex_lock(&fault_lock);
    memset(faults, 0, sizeof(faults));
    pthread_mutex_unlock(&fault_lock);
}

/* The fault that applies to a command named @name, taken (counted down); 0 for none. */
static int fault_take(const char *name)
{
    int point = 0;

    pthread_mutex_lock(&fault_lock);
    for (size_t i = 0; i < MAX_FAULTS && point == 0; i++) {
        if (faults[i].count > 0 && strncmp(name, faults[i].match, strlen(faults[i].match)) == 0) {
            faults[i].count--;
            point = (int)faults[i].point;
        }
    }
    pthread_mutex_unlock(&fault_lock);
    return point;
}
#endif

static const char *cmd_name(const idem__pipe_cmd *cmd)
{
    return cmd->stmt != NULL ? cmd->stmt->name : cmd->sql;
}

#ifdef IDEM_TESTING
/* The fault for a batch of commands: the first that one of them draws. */
static int fault_for(const idem__pipe_cmd *cmds, size_t n)
{
    int point = 0;

    for (size_t i = 0; i < n && point == 0; i++)
        point = fault_take(cmd_name(&cmds[i]));
    return point;
}
#else
#define fault_take(name)   0
#define fault_for(cmds, n) 0
#endif

/* The connection dies here (a fault point): the server sees its socket close. */
static void drop_socket(idem_conn *conn)
{
    shutdown(PQsocket(conn->pg), SHUT_RDWR);
    conn->discard = 1;
}

/* The replies were read, and then the connection died: the caller learns nothing. */
static int lose_replies(idem_conn *conn, idem__pipe_cmd *cmds, size_t n, size_t *failed_at,
                        idem_error *err)
{
    for (size_t i = 0; i < n; i++) {
        PQclear(cmds[i].result);
        cmds[i].result = NULL;
    }
    *failed_at = n;
    drop_socket(conn);
    return idem__error_set(err, IDEM_EUNAVAIL,
                           "injected: the connection was lost before the "
                           "replies arrived");
}

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

/* Keep a successful result; otherwise record the failure, and mark the connection for
 * discard when it is gone or left in a state no one can use. */
static int take_result_in(PGresult **out, idem_conn *conn, PGresult *res, const char *what,
                          int in_pipeline, idem_error *err)
{
    ExecStatusType st = PQresultStatus(res);
    const char *state;
    int rc;

    if (res != NULL && (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)) {
        *out = res;
        return 0;
    }
    rc = idem__error_pg(err, conn->pg, res, "%s", what);
    if (rc == IDEM_EUNAVAIL || unusable(conn, in_pipeline))
        conn->discard = 1;
    /* 26000: our prepared statements are gone (DEALLOCATE or DISCARD ALL by a caller);
     * this connection no longer matches what it remembers. */
    if (res != NULL && (state = PQresultErrorField(res, PG_DIAG_SQLSTATE)) != NULL &&
        strcmp(state, "26000") == 0) {
        conn->nprepared = 0;
        conn->discard = 1;
    }
    PQclear(res);
    return rc;
}

static int take_result(PGresult **out, idem_conn *conn, PGresult *res, const char *what,
                       idem_error *err)
{
    return take_result_in(out, conn, res, what, 0, err);
}

int idem__conn_exec(PGresult **out, idem_conn *conn, const char *sql, idem_error *err)
{
    char what[64];

    assert(out != NULL && conn != NULL && sql != NULL);
    snprintf(what, sizeof(what), "%.48s", sql);
    if (fault_take(sql) != 0)
        drop_socket(conn);
    return take_result(out, conn, PQexec(conn->pg, sql), what, err);
}

static int is_prepared(const idem_conn *conn, const idem__stmt *stmt)
{
    for (size_t i = 0; i < conn->nprepared; i++) {
        if (conn->prepared[i] == stmt)
            return 1;
    }
    return 0;
}

static int remember_prepared(idem_conn *conn, const idem__stmt *stmt, idem_error *err)
{
    if (conn->nprepared == conn->prepared_cap) {
        size_t cap = conn->prepared_cap ? conn->prepared_cap * 2 : 16;
        const idem__stmt **grown = realloc(conn->prepared, cap * sizeof(*grown));

        if (grown == NULL)
            return idem__error_set(err, IDEM_ENOMEM, "out of memory preparing %s", stmt->name);
        conn->prepared = grown;
        conn->prepared_cap = cap;
    }
    conn->prepared[conn->nprepared++] = stmt;
    return 0;
}

/* A statement of that name already there (42P05) is taken as ours: names are unique
 * across the library. The failed PREPARE still aborts an open transaction, though. */
static int prepare(idem_conn *conn, const idem__stmt *stmt, idem_error *err)
{
    PGresult *res = PQprepare(conn->pg, stmt->name, stmt->sql, stmt->nparams, NULL);
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    int exists = state != NULL && strcmp(state, "42P05") == 0;
    PGresult *kept = NULL;
    int rc = 0;

    if (exists) {
        rc = remember_prepared(conn, stmt, err);
        if (rc == 0 && PQtransactionStatus(conn->pg) == PQTRANS_INERROR)
            rc = idem__error_pg(err, conn->pg, res, "prepare %s", stmt->name);
        PQclear(res);
        return rc;
    }
    rc = take_result(&kept, conn, res, stmt->name, err);
    if (rc == 0) {
        PQclear(kept);
        rc = remember_prepared(conn, stmt, err);
    }
    if (rc < 0)
        idem__error_context(err, "prepare");
    return rc;
}

int idem__conn_exec_prepared(PGresult **out, idem_conn *conn, const idem__stmt *stmt,
                             const char *const *values, const int *lengths, const int *formats,
                             int result_format, idem_error *err)
{
    PGresult *res;
    int rc;

    assert(out != NULL && conn != NULL && stmt != NULL);
    if (!is_prepared(conn, stmt)) {
        rc = prepare(conn, stmt, err);
        if (rc < 0)
            return rc;
    }
    if (fault_take(stmt->name) != 0)
        drop_socket(conn);
    res = PQexecPrepared(conn->pg, stmt->name, stmt->nparams, values, lengths, formats,
                         result_format);
    return take_result(out, conn, res, stmt->name, err);
}

int idem__conn_failed(const idem_conn *conn)
{
    return conn == NULL || conn->discard || PQstatus(conn->pg) != CONNECTION_OK;
}

void idem__conn_forget_prepared(idem_conn *conn)
{
    if (conn != NULL)
        conn->nprepared = 0;
}

static int pipe_send(idem_conn *conn, const idem__pipe_cmd *cmd)
{
    if (cmd->stmt != NULL)
        return PQsendQueryPrepared(conn->pg, cmd->stmt->name, cmd->stmt->nparams, cmd->values,
                                   cmd->lengths, cmd->formats, cmd->result_format);
    return PQsendQueryParams(conn->pg, cmd->sql, cmd->nparams, NULL, cmd->values, cmd->lengths,
                             cmd->formats, cmd->result_format);
}

/* Read one command's results: its result, then the NULL that ends it. */
static PGresult *pipe_take(idem_conn *conn)
{
    PGresult *res = PQgetResult(conn->pg);
    PGresult *extra;

    while (res != NULL && (extra = PQgetResult(conn->pg)) != NULL)
        PQclear(extra); /* not expected: one result per command */
    return res;
}

/* Collect the results up to and including the Sync. Returns 0 or the first failure. */
static int pipe_collect(idem_conn *conn, idem__pipe_cmd *cmds, size_t n, size_t *failed_at,
                        idem_error *err)
{
    int rc = 0;
    PGresult *res;

    for (size_t i = 0; i < n; i++) {
        res = pipe_take(conn);
        if (rc != 0 || PQresultStatus(res) == PGRES_PIPELINE_ABORTED) {
            PQclear(res);
            continue;
        }
        rc = take_result_in(&cmds[i].result, conn, res, cmd_name(&cmds[i]), 1, err);
        if (rc != 0)
            *failed_at = i;
        if (res == NULL || PQstatus(conn->pg) != CONNECTION_OK)
            return rc != 0 ? rc : idem__error_pg(err, conn->pg, NULL, "pipeline");
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

int idem__conn_pipeline(idem_conn *conn, idem__pipe_cmd *cmds, size_t n, size_t *failed_at,
                        idem_error *err)
{
    int rc = 0, fault;

    assert(conn != NULL && cmds != NULL && failed_at != NULL);
    *failed_at = n;
    for (size_t i = 0; i < n; i++) {
        cmds[i].result = NULL;
        if (cmds[i].stmt != NULL && !is_prepared(conn, cmds[i].stmt) &&
            (rc = prepare(conn, cmds[i].stmt, err)) < 0) {
            *failed_at = i;
            return rc;
        }
    }
    fault = fault_for(cmds, n);
    if (fault == IDEM__FAULT_DROP_BEFORE_SEND)
        drop_socket(conn);
    if (PQenterPipelineMode(conn->pg) != 1)
        return idem__error_pg(err, conn->pg, NULL, "pipeline");
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (pipe_send(conn, &cmds[i]) != 1)
            rc = idem__error_pg(err, conn->pg, NULL, "pipeline send");
    }
    if (rc == 0 && PQpipelineSync(conn->pg) != 1)
        rc = idem__error_pg(err, conn->pg, NULL, "pipeline sync");
    if (rc != 0) {
        conn->discard = 1;
        return rc;
    }
    if (fault == IDEM__FAULT_DROP_AFTER_SEND)
        drop_socket(conn);
    rc = pipe_collect(conn, cmds, n, failed_at, err);
    if (PQexitPipelineMode(conn->pg) != 1 || unusable(conn, 0))
        conn->discard = 1;
    if (fault == IDEM__FAULT_LOSE_REPLY)
        rc = lose_replies(conn, cmds, n, failed_at, err);
    return rc;
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
