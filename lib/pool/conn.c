/* One pooled connection (conn.h): opening it within a deadline, waiting on its socket,
 * checking that it is alive and clean before it serves a call, detecting a pooler in front
 * of the server, closing it. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/connect.h"
#include "core/text.h"
#include "error.h"
#include "conn.h"
#include "citus.h"

/* libpq refused @pg's settings: IDEM_EINVAL naming conninfo, in libpq's words. */
static int settings_error(const PGconn *pg, idem_error *err)
{
    char why[IDEM_ERROR_MESSAGE_MAX];

    snprintf(why, sizeof(why), "%s", PQerrorMessage(pg));
    idem__chomp(why);
    return idem__error_field(err, IDEM_EINVAL, "conninfo", "%s",
                             why[0] != '\0' ? why : "libpq refuses these settings");
}

int idem__pg_connect(PGconn **out, const char *const *keys, const char *const *values,
                     unsigned int timeout_ms, const char *limit, PQnoticeProcessor notices,
                     void *notices_arg, idem_error *err)
{
    PGconn *pg = PQconnectStartParams(keys, values, 1);
    long long deadline = idem__deadline_in(timeout_ms);
    int rc;

    if (pg == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "out of memory opening a connection");
    PQsetNoticeProcessor(pg, notices, notices_arg);
    switch (idem__pg_connect_wait(&pg, keys, values, deadline, 0, notices, notices_arg)) {
    case IDEM__CONNECT_OK:
        *out = pg;
        return 0;
    case IDEM__CONNECT_SETTINGS:
        rc = settings_error(pg, err);
        break;
    case IDEM__CONNECT_TIMEOUT:
        rc = idem__error_set(err, IDEM_EUNAVAIL, "cannot connect: no answer within %u ms (%s)%s%s",
                             timeout_ms, limit, PQerrorMessage(pg)[0] != '\0' ? "; " : "",
                             PQerrorMessage(pg));
        break;
    default: /* refused for good, or failed */
        rc = idem__error_login_refused(err, pg, idem__error_pg(err, pg, NULL, "cannot connect"));
    }
    PQfinish(pg);
    return rc;
}

static int input_waiting(PGconn *pg)
{
    struct pollfd pfd = {.fd = PQsocket(pg), .events = POLLIN, .revents = 0};

    return poll(&pfd, 1, 0) != 0;
}

int idem__pg_wait_ready(PGconn *pg, int for_result, long long deadline_ms)
{
    int flushed;

    /* The loop libpq documents for nonblocking sends: input is read meanwhile, so that a
     * server blocked on its own output cannot block ours. */
    while ((flushed = PQflush(pg)) == 1) {
        if (!idem__wait_socket(PQsocket(pg), POLLIN | POLLOUT, deadline_ms))
            return 0;
        if (PQconsumeInput(pg) != 1)
            return -1;
    }
    if (flushed < 0)
        return -1;
    while (for_result && PQisBusy(pg)) {
        if (!idem__wait_socket(PQsocket(pg), POLLIN, deadline_ms))
            return 0;
        if (PQconsumeInput(pg) != 1)
            return -1;
    }
    return 1;
}

/* Run a parameterless command, waiting at most timeout_ms (0: no limit) for its answer.
 * 1 when every result had status `expect` and the connection is idle after it; 0
 * otherwise, the connection then possibly busy: the caller closes it. A server that stops
 * answering without closing the socket would otherwise hold the caller for the kernel's
 * TCP timeout. */
static int bounded_command(PGconn *pg, const char *sql, ExecStatusType expect,
                           unsigned int timeout_ms)
{
    long long deadline = idem__deadline_in(timeout_ms);
    PGresult *res;
    int ok = 1, ready;

    if (PQsetnonblocking(pg, 1) != 0 || PQsendQuery(pg, sql) != 1)
        return 0;
    while ((ready = idem__pg_wait_ready(pg, 1, deadline)) == 1 && (res = PQgetResult(pg)) != NULL) {
        ok = ok && PQresultStatus(res) == expect;
        PQclear(res);
    }
    return ready == 1 && ok && PQtransactionStatus(pg) == PQTRANS_IDLE &&
           PQsetnonblocking(pg, 0) == 0;
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

int idem__conn_reset_kept_timeout(idem_conn *conn, unsigned int timeout_ms)
{
    if (conn->kept_timeout_ms == 0)
        return 1;
    if (!bounded_command(conn->pg, "RESET statement_timeout", PGRES_COMMAND_OK, timeout_ms))
        return 0;
    conn->kept_timeout_ms = 0;
    return 1;
}

enum idem__conn_state idem__conn_clean(idem_conn *conn, unsigned int timeout_ms)
{
    if (conn->discard || PQstatus(conn->pg) != CONNECTION_OK ||
        PQpipelineStatus(conn->pg) != PQ_PIPELINE_OFF)
        return IDEM__CONN_BROKEN;
    switch (PQtransactionStatus(conn->pg)) {
    case PQTRANS_IDLE:
        return IDEM__CONN_CLEAN; /* no transaction to end: nothing is sent */
    case PQTRANS_INTRANS:
    case PQTRANS_INERROR:
        break;
    default: /* a command still running, or no idea: nothing safe to do but close */
        return IDEM__CONN_BROKEN;
    }
    /* libpq's transaction state is the last one the server reported. A server that speaks
     * to a session idle in a transaction is ending it (pg_terminate_backend, a shutdown,
     * idle_in_transaction_session_timeout): its transaction is already gone, and a
     * ROLLBACK would go to a closed session. Read its last words (they reach the notice
     * processor, hence the pool's log) and close. */
    if (input_waiting(conn->pg)) {
        if (PQconsumeInput(conn->pg) == 1)
            (void)PQisBusy(conn->pg); /* parses what was read */
        return IDEM__CONN_ENDED;
    }
    return bounded_command(conn->pg, "ROLLBACK", PGRES_COMMAND_OK, timeout_ms)
               ? IDEM__CONN_ROLLED_BACK
               : IDEM__CONN_BROKEN;
}

/* Ask @sql (one row, one column) on idle @pg, waiting at most timeout_ms (0: no limit):
 * *res is its last result (the caller PQclear()s it), of one row when 0 is returned.
 * Returns 0, IDEM_EDB or IDEM_EUNAVAIL (no answer in time: pg is left busy), naming @what. */
static int bounded_ask(PGresult **res, PGconn *pg, const char *sql, unsigned int timeout_ms,
                       const char *what, idem_error *err)
{
    long long deadline = idem__deadline_in(timeout_ms);
    int was_nonblocking = PQisnonblocking(pg), ready = -1;
    PGresult *next;

    *res = NULL;
    if (PQsetnonblocking(pg, 1) == 0 && PQsendQuery(pg, sql) == 1) {
        while ((ready = idem__pg_wait_ready(pg, 1, deadline)) == 1 &&
               (next = PQgetResult(pg)) != NULL) {
            PQclear(*res);
            *res = next;
        }
    }
    if (ready == 0)
        return idem__error_set(err, IDEM_EUNAVAIL, "%s: no answer within %u ms", what, timeout_ms);
    PQsetnonblocking(pg, was_nonblocking);
    if (PQresultStatus(*res) != PGRES_TUPLES_OK || PQntuples(*res) != 1)
        return idem__error_pg(err, pg, *res, "%s", what);
    return 0;
}

/* A pooler answers the startup with a process ID of its own making (its cancel key), so
 * it differs from the server process that runs the query. */
int idem__pg_through_pooler(int *out, PGconn *pg, unsigned int timeout_ms, idem_error *err)
{
    PGresult *res = NULL;
    int rc = bounded_ask(&res, pg, "SELECT pg_backend_pid()", timeout_ms, "pooler detection", err);

    if (rc == 0)
        *out = strtol(PQgetvalue(res, 0, 0), NULL, 10) != (long)PQbackendPID(pg);
    PQclear(res);
    return rc;
}

int idem__pg_has_citus(int *out, PGconn *pg, unsigned int timeout_ms, idem_error *err)
{
    PGresult *res = NULL;
    int rc = bounded_ask(&res, pg, IDEM__SQL_HAS_CITUS, timeout_ms, "citus detection", err);

    if (rc == 0)
        *out = PQgetvalue(res, 0, 0)[0] == 't';
    PQclear(res);
    return rc;
}

void idem__conn_close(idem_conn *conn)
{
    if (conn == NULL)
        return;
    PQfinish(conn->pg);
    free(conn->prepared);
    for (size_t i = 0; i < conn->ntexts; i++)
        free(conn->texts[i].sql);
    free(conn->texts);
    free(conn);
}
