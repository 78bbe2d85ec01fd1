#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pgtest.h"
#include "stalltest.h"

/* How long a backend may take to be seen waiting for its client. */
#define CLIENT_READ_WAIT_MS 10000

static pid_t stopped_backend;
static pid_t watchdog;

pid_t stalltest_pooled_backend(idem_pool *pool)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_conn *conn = NULL;
    pid_t pid;

    cr_assert_eq(idem_pool_acquire(&conn, pool, &err), 0, "%s", err.message);
    pid = PQbackendPID(idem_conn_pg(conn));
    idem_pool_release(conn);
    return pid;
}

/* Whether pg_stat_activity shows @backend waiting for its client. */
static int waits_for_client(PGconn *monitor, pid_t backend)
{
    char pid[16];
    const char *values[1] = {pid};
    PGresult *res;
    int yes;

    snprintf(pid, sizeof(pid), "%d", (int)backend);
    res = PQexecParams(monitor,
                       "SELECT 1 FROM pg_stat_activity WHERE pid = $1::int"
                       " AND wait_event = 'ClientRead'",
                       1, NULL, values, NULL, NULL, 0);
    cr_assert_eq(PQresultStatus(res), PGRES_TUPLES_OK, "%s", PQresultErrorMessage(res));
    yes = PQntuples(res) == 1;
    PQclear(res);
    return yes;
}

void stalltest_stop(pid_t backend, const char *conninfo)
{
    PGconn *monitor = pgtest_connect(conninfo);
    int waited = 0;

    while (!waits_for_client(monitor, backend) && waited < CLIENT_READ_WAIT_MS) {
        pgtest_sleep_ms(10);
        waited += 10;
    }
    PQfinish(monitor);
    cr_assert_lt(waited, CLIENT_READ_WAIT_MS, "backend %d never waited for its client",
                 (int)backend);
    watchdog = fork();
    cr_assert_neq(watchdog, -1, "fork: %s", strerror(errno));
    if (watchdog == 0) {
        sleep(STALLTEST_WATCHDOG_S);
        kill(backend, SIGCONT);
        _exit(0);
    }
    stopped_backend = backend;
    cr_assert_eq(kill(backend, SIGSTOP), 0, "SIGSTOP %d: %s", (int)backend, strerror(errno));
}

void stalltest_resume(void)
{
    if (stopped_backend > 0)
        kill(stopped_backend, SIGCONT);
    if (watchdog > 0) {
        kill(watchdog, SIGKILL);
        waitpid(watchdog, NULL, 0);
    }
    stopped_backend = watchdog = 0;
}
