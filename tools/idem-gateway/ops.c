/* /healthz, /readyz and /metrics. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "reply.h"
#include "guard.h"
#include "metrics.h"
#include "ops.h"

/* A readiness check answers the probes of the next second too. */
#define READY_REUSE_MS 1000U

static pthread_mutex_t ready_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t ready_at_ms; /* when the last check ended; 0: never */
static int ready_last = -1;  /* its answer; -1: none yet */

static void text(gw_reply *r, unsigned int status, const char *body)
{
    if (gw_reply_body(r, status, "text/plain; charset=utf-8", body, strlen(body)) != 0)
        gw_internal_error(r);
}

void gw_ops_healthz(gw_reply *r)
{
    text(r, 200, "ok\n");
}

/* One check: a pooled connection, then the schema. 1 or 0 with @err. */
static int check(idem_pool *pool, idem_error *err)
{
    idem_conn *conn = NULL;
    int rc = idem_pool_acquire(&conn, pool, err);

    if (rc != 0)
        return 0;
    rc = idem_migrate_check(idem_conn_pg(conn), err);
    idem_pool_release(conn);
    return rc == 0;
}

void gw_ops_readyz(gw_reply *r, idem_pool *pool)
{
    idem_error err = IDEM_ERROR_INIT;
    uint64_t now;
    int ready;

    pthread_mutex_lock(&ready_lock);
    now = idem__now_ms();
    if (ready_last >= 0 && now - ready_at_ms < READY_REUSE_MS) {
        ready = ready_last;
    } else {
        ready = check(pool, &err);
        if (ready != ready_last)
            fprintf(stderr, "idem-gateway: readiness: %s%s%s\n", ready ? "ready" : "not ready",
                    ready ? "" : ": ", ready ? "" : err.message);
        ready_last = ready;
        ready_at_ms = idem__now_ms();
        gw_metrics_ready(ready);
    }
    pthread_mutex_unlock(&ready_lock);
    text(r, ready ? 200 : 503, ready ? "ready\n" : "not ready: the log says why\n");
}

void gw_ops_metrics(gw_reply *r, idem_pool *pool, unsigned int pool_size)
{
    idem_pool_stats stats = IDEM_POOL_STATS_INIT;
    char *body;

    idem_pool_stats_get(&stats, pool);
    if ((body = gw_metrics_render(&stats, pool_size)) == NULL) {
        gw_internal_error(r);
        return;
    }
    if (gw_reply_body(r, 200, "text/plain; version=0.0.4; charset=utf-8", body, strlen(body)) != 0)
        gw_internal_error(r);
    free(body);
}
