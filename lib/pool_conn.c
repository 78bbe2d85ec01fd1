#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "pool_conn.h"

/* Pool bookkeeping counts milliseconds: the coarse clock, where there is one, is precise
 * enough (a few ms) and costs a few nanoseconds instead of tens on each acquire. */
#ifdef CLOCK_MONOTONIC_COARSE
#define BOOKKEEPING_CLOCK CLOCK_MONOTONIC_COARSE
#else
#define BOOKKEEPING_CLOCK CLOCK_MONOTONIC
#endif

long long idem__monotonic_ms(void)
{
    struct timespec ts;

    clock_gettime(BOOKKEEPING_CLOCK, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait until fd is ready for events or the deadline passes; 1 when ready (or in error,
 * which the caller's next libpq call reports), 0 at the deadline. */
static int wait_socket(int fd, short events, long long deadline_ms)
{
    struct pollfd pfd = {.fd = fd, .events = events, .revents = 0};
    int n;

    if (fd < 0)
        return 1; /* nothing to wait for: let libpq say what is wrong */
    for (;;) {
        long long left = deadline_ms - idem__monotonic_ms();
        int timeout = deadline_ms == LLONG_MAX ? -1
                      : left <= 0              ? 0
                      : left > INT_MAX         ? INT_MAX
                                               : (int)left;

        n = poll(&pfd, 1, timeout);
        if (n > 0)
            return 1;
        if (n == 0 && timeout >= 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return 1;
    }
}

int idem__pg_connect(PGconn **out, const char *const *keys, const char *const *values,
                     unsigned int timeout_ms, PQnoticeProcessor notices, void *notices_arg,
                     idem_error *err)
{
    PGconn *pg = PQconnectStartParams(keys, values, 1);
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;
    long long deadline = timeout_ms > 0 ? idem__monotonic_ms() + timeout_ms : LLONG_MAX;
    int rc = 0;

    if (pg == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "out of memory opening a connection");
    PQsetNoticeProcessor(pg, notices, notices_arg);
    /* The loop libpq documents for PQconnectPoll(), with our own deadline around it. */
    while (rc == 0 && st != PGRES_POLLING_OK) {
        if (st == PGRES_POLLING_FAILED || PQstatus(pg) == CONNECTION_BAD)
            rc = idem__error_pg(err, pg, NULL, "cannot connect");
        else if (!wait_socket(PQsocket(pg), st == PGRES_POLLING_READING ? POLLIN : POLLOUT,
                              deadline))
            rc = idem__error_set(err, IDEM_EUNAVAIL,
                                 "cannot connect: no answer within %u ms (connect_timeout_ms)%s%s",
                                 timeout_ms, PQerrorMessage(pg)[0] != '\0' ? "; " : "",
                                 PQerrorMessage(pg));
        else
            st = PQconnectPoll(pg);
    }
    if (rc < 0) {
        PQfinish(pg);
        return rc;
    }
    *out = pg;
    return 0;
}

static int input_waiting(PGconn *pg)
{
    struct pollfd pfd = {.fd = PQsocket(pg), .events = POLLIN, .revents = 0};

    return poll(&pfd, 1, 0) != 0;
}

/* Run a parameterless command, waiting at most timeout_ms (0: no limit) for its answer.
 * 1 when every result had status `expect` and the connection is idle after it; 0
 * otherwise, the connection then possibly busy: the caller closes it. A server that stops
 * answering without closing the socket would otherwise hold the caller for the kernel's
 * TCP timeout. */
static int bounded_command(PGconn *pg, const char *sql, ExecStatusType expect,
                           unsigned int timeout_ms)
{
    long long deadline = timeout_ms > 0 ? idem__monotonic_ms() + timeout_ms : LLONG_MAX;
    PGresult *res;
    int ok = 1;

    if (PQsendQuery(pg, sql) != 1)
        return 0;
    while (PQisBusy(pg)) {
        if (!wait_socket(PQsocket(pg), POLLIN, deadline) || PQconsumeInput(pg) != 1)
            return 0;
    }
    while ((res = PQgetResult(pg)) != NULL) {
        ok = ok && PQresultStatus(res) == expect;
        PQclear(res);
    }
    return ok && PQtransactionStatus(pg) == PQTRANS_IDLE;
}

int idem__conn_alive(idem_conn *conn, int round_trip, unsigned int timeout_ms)
{
    if (PQstatus(conn->pg) != CONNECTION_OK)
        return 0;
    /* An idle connection has nothing to read. Input means a notification, or more likely
     * the server saying goodbye (a terminated backend, a shutdown): ask to be sure. */
    if (!round_trip && !input_waiting(conn->pg))
        return 1;
    return bounded_command(conn->pg, "", PGRES_EMPTY_QUERY, timeout_ms);
}

enum idem__conn_state idem__conn_clean(idem_conn *conn, unsigned int timeout_ms)
{
    if (conn->discard || PQstatus(conn->pg) != CONNECTION_OK ||
        PQpipelineStatus(conn->pg) != PQ_PIPELINE_OFF)
        return IDEM__CONN_BROKEN;
    switch (PQtransactionStatus(conn->pg)) {
    case PQTRANS_IDLE:
        return IDEM__CONN_CLEAN;
    case PQTRANS_INTRANS:
    case PQTRANS_INERROR:
        break;
    default: /* a command still running, or no idea: nothing safe to do but close */
        return IDEM__CONN_BROKEN;
    }
    return bounded_command(conn->pg, "ROLLBACK", PGRES_COMMAND_OK, timeout_ms)
               ? IDEM__CONN_ROLLED_BACK
               : IDEM__CONN_BROKEN;
}

void idem__conn_close(idem_conn *conn)
{
    if (conn == NULL)
        return;
    PQfinish(conn->pg);
    free(conn->prepared);
    free(conn);
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
    res = PQexecPrepared(conn->pg, stmt->name, stmt->nparams, values, lengths, formats,
                         result_format);
    return take_result(out, conn, res, stmt->name, err);
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
        rc = take_result_in(&cmds[i].result, conn, res,
                            cmds[i].stmt != NULL ? cmds[i].stmt->name : cmds[i].sql, 1, err);
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
    int rc = 0;

    assert(conn != NULL && cmds != NULL && failed_at != NULL);
    *failed_at = n;
    for (size_t i = 0; i < n; i++) {
        cmds[i].result = NULL;
        if (cmds[i].stmt != NULL && !is_prepared(conn, cmds[i].stmt) &&
            (rc = prepare(conn, cmds[i].stmt, err)) < 0)
            return rc;
    }
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
    rc = pipe_collect(conn, cmds, n, failed_at, err);
    if (PQexitPipelineMode(conn->pg) != 1 || unusable(conn, 0))
        conn->discard = 1;
    return rc;
}
