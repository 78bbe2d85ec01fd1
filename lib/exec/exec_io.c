/* The execution layer's waits on the server, bounded by the connection's deadline, the
 * dropping of a connection, and (test builds) its fault points. */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#ifdef IDEM_TESTING
#include <pthread.h>
#endif

#include "core/clock.h"
#include "error.h"
#include "exec_io.h"

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

static _Thread_local unsigned long trace_round_trips, trace_statements;

void idem__exec_trace_add(unsigned long statements)
{
    trace_round_trips++;
    trace_statements += statements;
}

void idem__exec_trace_take(unsigned long *round_trips, unsigned long *statements)
{
    *round_trips = trace_round_trips;
    *statements = trace_statements;
    trace_round_trips = trace_statements = 0;
}

/* The fault that applies to a command named @name, taken (counted down); 0 for none. */
int idem__exec_fault_take(const char *name)
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

const char *idem__exec_cmd_name(const idem__pipe_cmd *cmd)
{
    if (cmd->stmt == NULL)
        return cmd->sql;
    return idem__exec_is_tx_control(cmd->stmt) ? cmd->stmt->sql : cmd->stmt->name;
}

#ifdef IDEM_TESTING
/* The fault for a batch of commands: the first that one of them draws. */
int idem__exec_fault_for(const idem__pipe_cmd *cmds, size_t n)
{
    int point = 0;

    for (size_t i = 0; i < n && point == 0; i++)
        point = idem__exec_fault_take(idem__exec_cmd_name(&cmds[i]));
    return point;
}
#endif

/* The connection dies here (a fault point): the server sees its socket close. */
void idem__exec_drop_socket(idem_conn *conn)
{
    shutdown(PQsocket(conn->pg), SHUT_RDWR);
    conn->discard = 1;
}

/* Before anything is sent: fix how long this statement may wait (the call's deadline, at
 * least IDEM__MIN_WAIT_MS: deadline.h), and put libpq's sends in nonblocking mode, so that no
 * libpq call waits on the server by itself. */
void idem__exec_io_start(idem_conn *conn)
{
    conn->stale_plan = 0;
    conn->wait_until_ms = idem__deadline_wait_until(conn->deadline_ms);
    PQsetnonblocking(conn->pg, 1); /* a failure shows in the send that follows */
}

/* Back to libpq's default (blocking) mode for idem_conn_pg()'s borrowers. Everything was
 * flushed, so this does not wait. */
void idem__exec_io_end(idem_conn *conn)
{
    if (!conn->discard)
        PQsetnonblocking(conn->pg, 0);
}

/* Wait until a result can be read without blocking (everything sent first), within the
 * deadline. On expiry, or when the connection failed with a reply still due, the
 * connection is dropped: the server sees its socket close and rolls back. */
int idem__exec_await_result(idem_conn *conn, const char *what, idem_error *err)
{
    int ready;

    if (conn->while_waiting != NULL) {
        void (*fn)(void *) = conn->while_waiting;

        conn->while_waiting = NULL;
        (void)PQflush(conn->pg); /* a failure shows in the wait */
        fn(conn->while_waiting_arg);
    }
    ready = idem__pg_wait_ready(conn->pg, 1, conn->wait_until_ms);

    if (ready == 1 || (ready < 0 && !PQisBusy(conn->pg)))
        return 0; /* a failure is then PQgetResult's to report */
    if (ready == 0) {
        idem__exec_drop_socket(conn);
        return idem__error_set(err, IDEM_EUNAVAIL,
                               "deadline passed waiting for the reply to %s; the connection "
                               "is dropped",
                               what);
    }
    idem__error_pg(err, conn->pg, NULL, "%s: connection lost", what);
    idem__exec_drop_socket(conn);
    if (err != NULL)
        err->code = IDEM_EUNAVAIL;
    return IDEM_EUNAVAIL;
}

/* The reply to the command just sent (sent: what its PQsend*() returned): *res is its last
 * result, or NULL when the send failed (take_result() then reports why). Returns 0, or
 * IDEM_EUNAVAIL when the deadline passed or the connection failed mid-reply. */
int idem__exec_reply(PGresult **res, idem_conn *conn, int sent, const char *what, idem_error *err)
{
    PGresult *next;
    int rc = 0;

    *res = NULL;
    while (sent == 1 && (rc = idem__exec_await_result(conn, what, err)) == 0 &&
           (next = PQgetResult(conn->pg)) != NULL) {
        PQclear(*res);
        *res = next;
    }
    if (rc != 0) {
        PQclear(*res);
        *res = NULL;
    }
    return rc;
}

/* The replies were read, and then the connection died: the caller learns nothing. */
int idem__exec_lose_replies(idem_conn *conn, idem__pipe_cmd *cmds, size_t n, size_t *failed_at,
                            idem_error *err)
{
    for (size_t i = 0; i < n; i++) {
        PQclear(cmds[i].result);
        cmds[i].result = NULL;
    }
    *failed_at = n;
    idem__exec_drop_socket(conn);
    return idem__error_set(err, IDEM_EUNAVAIL,
                           "injected: the connection was lost before the "
                           "replies arrived");
}

void idem__conn_while_waiting(idem_conn *conn, void (*fn)(void *), void *arg)
{
    conn->while_waiting = fn;
    conn->while_waiting_arg = arg;
}
