/*
 * The gateway mode: the in-process side of tools/bench/gateway.py, which drives
 * idem-gateway with wrk. The same declared effect as the gateway's bench tool, through
 * idem_store_execute_declared() in this process: the same tenant, tool, payload version,
 * arguments and statement, requests marked as the gateway marks them (a key it has not
 * seen is a first attempt, 1; a key it has seen a retry, 2: tools/idem-gateway/seen.h),
 * one thread per wrk connection, the same pool
 * size. Two sides: new keys, and replays of a fixed set of keys (made here first, through
 * the same path, if missing; the gateway's replays replay the same keys).
 *
 * Its table is the bench's own, public.bench_gateway_tasks, made when missing; its rows
 * and records (tenant gateway-bench) stay, so that the gateway's run finds the keys.
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"

typedef struct gateway_ctx {
    idem_pool *pool;
    idem_store *store;
    idem_declared *declared;
} gateway_ctx;

static const char table_sql[] =
    "SET client_min_messages = warning;" /* not the notice that it exists */
    "CREATE TABLE IF NOT EXISTS public.bench_gateway_tasks (task_id bigserial PRIMARY KEY,"
    " tenant text NOT NULL, subject text NOT NULL, operation_id text NOT NULL,"
    " created_at timestamptz NOT NULL DEFAULT now())";

static int make_table(const char *conninfo)
{
    PGconn *pg = PQconnectdb(conninfo);
    PGresult *res = NULL;
    int rc = -1;

    if (PQstatus(pg) == CONNECTION_OK)
        res = PQexec(pg, table_sql);
    if (PQresultStatus(res) == PGRES_COMMAND_OK)
        rc = 0;
    else
        bench_error("creating public.bench_gateway_tasks", PQerrorMessage(pg));
    PQclear(res);
    PQfinish(pg);
    return rc;
}

/* A call of @op marked @attempt, as the gateway marks it: 1 a new key, 2 a replay. */
static int call(const gateway_ctx *c, const char *op, unsigned int attempt, idem_outcome *out,
                idem_error *err)
{
    idem_request req = IDEM_REQUEST_INIT;

    req.tenant = BENCH_GATEWAY_TENANT;
    req.operation_id = op;
    req.tool = BENCH_GATEWAY_TOOL;
    req.payload_version = 1;
    req.arguments = BENCH_CREATE_ARGUMENTS;
    req.arguments_len = strlen(BENCH_CREATE_ARGUMENTS);
    req.attempt = attempt;
    return idem_store_execute_declared(out, c->store, &req, c->declared, err);
}

static int expect(bench_worker *w, const gateway_ctx *c, const char *op, idem_status want)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    int rc = call(c, op, want == IDEM_STATUS_CREATED ? 1 : 2, &out, &err);

    if (rc == 0 && out.status != want)
        rc = bench_fail(w, "%s: expected %s", idem_status_name(out.status), idem_status_name(want));
    else if (rc != 0)
        rc = bench_fail(w, "%s: %s", idem_status_name(out.status), err.message);
    idem_outcome_clear(&out);
    return rc;
}

static int new_key(bench_worker *w)
{
    char op[IDEM_UUID_STRING_SIZE];

    if (idem_uuid_v7(op, NULL) != 0)
        return bench_fail(w, "no operation ID");
    return expect(w, w->side->ctx, op, IDEM_STATUS_CREATED);
}

static int replay(bench_worker *w)
{
    char op[32];

    bench_gateway_replay_key(op, sizeof(op), bench_random(w, BENCH_GATEWAY_REPLAY_KEYS));
    return expect(w, w->side->ctx, op, IDEM_STATUS_REPLAYED);
}

void bench_gateway_replay_key(char *out, size_t size, uint64_t i)
{
    snprintf(out, size, "gateway-replay-%llu", (unsigned long long)i);
}

/* The replay keys, through the same path: created, or replayed when a run made them. */
static int make_replay_keys(const gateway_ctx *c)
{
    for (uint64_t i = 0; i < BENCH_GATEWAY_REPLAY_KEYS; i++) {
        idem_outcome out = IDEM_OUTCOME_INIT;
        idem_error err = IDEM_ERROR_INIT;
        char op[32];
        int rc;

        bench_gateway_replay_key(op, sizeof(op), i);
        rc = call(c, op, 1, &out, &err);
        if (rc == 0 && out.status != IDEM_STATUS_CREATED && out.status != IDEM_STATUS_REPLAYED)
            rc = -1;
        idem_outcome_clear(&out);
        if (rc != 0)
            return bench_error("making the replay keys", err.message);
    }
    return 0;
}

static int open_ctx(gateway_ctx *c, const char *conninfo, int threads, int pool_cap)
{
    static const char *const params[] = {"$tenant", "subject", "$operation_id"};
    idem_error err = IDEM_ERROR_INIT;

    if (make_table(conninfo) != 0 || bench_pool_open(&c->pool, conninfo, threads, pool_cap) != 0)
        return -1;
    if (idem_store_new(&c->store, c->pool, NULL, &err) != 0)
        return bench_error("store", err.message);
    if (idem_declared_new(&c->declared, BENCH_GATEWAY_SQL, params, 3, &err) != 0)
        return bench_error("declared effect", err.message);
    return make_replay_keys(c);
}

static void close_ctx(gateway_ctx *c)
{
    idem_declared_free(c->declared);
    idem_store_free(c->store);
    idem_pool_free(c->pool);
    *c = (gateway_ctx){NULL, NULL, NULL};
}

static int gateway_at(bench_results *res, const bench_config *cfg, const char *conninfo,
                      int threads)
{
    gateway_ctx c = {NULL, NULL, NULL};
    const bench_side sides[2] = {{"in-process new keys", new_key, &c},
                                 {"in-process replays", replay, &c}};
    bench_plan plan = {sides, 2, threads, cfg->duration_s * 2, cfg->round_s, cfg->round_s};
    bench_measure *m = bench_results_add(
        res, "gateway", threads,
        "the gateway bench's in-process side: its declared effect through "
        "idem_store_execute_declared(), marked as the gateway marks requests (attempt 1 for a "
        "new key, 2 for a replay); new keys, and "
        "replays of " BENCH_GATEWAY_TENANT "'s gateway-replay-* keys");
    int rc;

    if (m == NULL || open_ctx(&c, conninfo, threads, cfg->pool_cap) != 0) {
        close_ctx(&c);
        return -1;
    }
    bench_say("gateway (in-process), %d thread%s", threads, threads == 1 ? "" : "s");
    rc = bench_run(m, &plan);
    close_ctx(&c);
    return rc;
}

int bench_mode_gateway(bench_results *res, const bench_config *cfg, const char *conninfo)
{
    for (int i = 0; i < cfg->nthreads; i++) {
        if (gateway_at(res, cfg, conninfo, cfg->threads[i]) != 0)
            return -1;
    }
    return 0;
}
