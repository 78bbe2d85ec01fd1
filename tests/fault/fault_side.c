/* The suite's own connections, which survive server restarts by reconnecting, the
 * server's control through $IDEM_PG_CTL, and small helpers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fault.h"

uint64_t fault_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void fault_sleep_ms(unsigned int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0)
        ;
}

uint64_t fault_rand(uint64_t *state)
{
    uint64_t x = *state != 0 ? *state : 0x9E3779B97F4A7C15ull;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

void fault_side_init(fault_side *side, const char *conninfo, const char *app)
{
    snprintf(side->conninfo, sizeof(side->conninfo), "%s application_name=%s connect_timeout=3",
             conninfo, app);
    side->pg = NULL;
}

void fault_side_close(fault_side *side)
{
    PQfinish(side->pg);
    side->pg = NULL;
}

/* A restart's "terminating connection" warning is expected here; keep stderr for results. */
static void quiet(void *arg, const char *message)
{
    (void)arg, (void)message;
}

static PGconn *side_conn(fault_side *side)
{
    if (side->pg != NULL && PQstatus(side->pg) == CONNECTION_OK)
        return side->pg;
    PQfinish(side->pg);
    side->pg = PQconnectdb(side->conninfo);
    if (PQstatus(side->pg) == CONNECTION_OK) {
        PQsetNoticeProcessor(side->pg, quiet, NULL);
        return side->pg;
    }
    PQfinish(side->pg);
    side->pg = NULL;
    return NULL;
}

PGresult *fault_side_exec(fault_side *side, const char *sql, int nparams, const char *const *values)
{
    PGconn *pg;
    PGresult *res;
    ExecStatusType st;

    /* A connection that the last restart broke fails once; then connect again. */
    for (int attempt = 0; attempt < 2; attempt++) {
        if ((pg = side_conn(side)) == NULL)
            return NULL;
        res = PQexecParams(pg, sql, nparams, NULL, values, NULL, NULL, 0);
        st = PQresultStatus(res);
        if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
            return res;
        PQclear(res);
        if (PQstatus(pg) == CONNECTION_OK)
            break;
    }
    return NULL;
}

int fault_pg_ctl(const char *args)
{
    const char *ctl = getenv("IDEM_PG_CTL");
    char cmd[1024];

    if (ctl == NULL)
        return -1;
    snprintf(cmd, sizeof(cmd), "\"%s\" %s >/dev/null 2>&1", ctl, args);
    return system(cmd);
}

int fault_server_wait(unsigned int ms)
{
    uint64_t end = fault_now_ms() + ms;

    for (;;) {
        if (PQping("connect_timeout=2") == PQPING_OK)
            return 1;
        if (fault_now_ms() >= end)
            return 0;
        fault_sleep_ms(100);
    }
}
