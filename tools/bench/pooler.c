/*
 * The pooler mode: what the pooler-safe setting costs against the default, in one run.
 *
 * default, direct      idem with IDEM_POOLER_NONE (statements prepared once per
 *                      connection) straight to the server
 * pooler-safe, direct  idem with IDEM_POOLER_TRANSACTION (statements unnamed, parsed each
 *                      time) straight to the server: the setting's own cost
 * pooler-safe, PgBouncer  the same through PgBouncer in transaction mode (--pgbouncer):
 *                      the setting and the extra hop; only with --pgbouncer
 *
 * Each side has its own pool and store; the operation is a new key (marked a first
 * attempt: the claim, the effect, the receipt and COMMIT) or a replay of an existing key
 * (a retry: one lookup).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "support_tasks.h"

#define POOLER_REPLAY_KEYS 10000L
#define TENANT_CREATE      "bench-pooler"
#define TENANT_REPLAY      "bench-pooler-replay"
#define MAX_POOLER_SIDES   3

typedef struct pooler_side {
    idem_pool *pool;
    idem_store *store;
} pooler_side;

static int call(bench_worker *w, const pooler_side *s, const char *tenant, const char *op,
                const char *args, unsigned int attempt, idem_status expected)
{
    idem_request req = IDEM_REQUEST_INIT;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    int rc;

    req.tenant = tenant;
    req.operation_id = op;
    req.tool = EXAMPLE_TOOL_NAME;
    req.payload_version = EXAMPLE_TOOL_VERSION;
    req.arguments = args;
    req.arguments_len = strlen(args);
    req.attempt = attempt;
    rc = idem_store_execute(&out, s->store, &req, example_create_support_task, NULL, &err);
    if (rc == 0 && out.status != expected)
        rc = bench_fail(w, "%s: expected %s", idem_status_name(out.status),
                        idem_status_name(expected));
    else if (rc != 0)
        rc = bench_fail(w, "%s: %s", idem_status_name(out.status), err.message);
    idem_outcome_clear(&out);
    return rc;
}

static int create_op(bench_worker *w)
{
    char op[IDEM_UUID_STRING_SIZE];

    if (idem_uuid_v7(op, NULL) != 0)
        return bench_fail(w, "no operation ID");
    return call(w, w->side->ctx, TENANT_CREATE, op, BENCH_CREATE_ARGUMENTS, 1, IDEM_STATUS_CREATED);
}

static int replay_op(bench_worker *w)
{
    char op[24];

    bench_loaded_key(op, sizeof(op), bench_random(w, POOLER_REPLAY_KEYS));
    return call(w, w->side->ctx, TENANT_REPLAY, op, BENCH_REPLAY_ARGUMENTS, 2,
                IDEM_STATUS_REPLAYED);
}

static int open_side(pooler_side *s, const char *conninfo, idem_pooler pooler, int threads, int cap)
{
    idem_pool_options opts = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;

    opts.max_size = (unsigned int)(threads < cap ? threads : cap);
    opts.min_idle = opts.max_size;
    opts.acquire_timeout_ms = 30000;
    opts.application_name = "idem-bench";
    opts.pooler = pooler;
    if (idem_pool_new(&s->pool, conninfo, &opts, &err) != 0)
        return bench_error("opening the pool", err.message);
    if (idem_store_new(&s->store, s->pool, NULL, &err) != 0)
        return bench_error("store", err.message);
    return 0;
}

static void close_sides(pooler_side *s, int n)
{
    for (int i = 0; i < n; i++) {
        idem_store_free(s[i].store);
        idem_pool_free(s[i].pool);
        s[i] = (pooler_side){NULL, NULL};
    }
}

/* The conninfos of the sides: direct twice, then through PgBouncer when there is one. */
typedef struct pooler_setup {
    const char *direct;
    char *bouncer; /* NULL without --pgbouncer */
} pooler_setup;

/* One measurement of @op ("new" or "replay") on every side. */
static int measure(bench_results *res, const bench_config *cfg, const pooler_setup *p,
                   const char *what, bench_op_fn op, int threads)
{
    static const char *const kinds[MAX_POOLER_SIDES] = {"default, direct", "pooler-safe, direct",
                                                        "pooler-safe, PgBouncer"};
    pooler_side s[MAX_POOLER_SIDES] = {{NULL, NULL}};
    char names[MAX_POOLER_SIDES][64], label[96];
    bench_side sides[MAX_POOLER_SIDES];
    int n = p->bouncer != NULL ? 3 : 2, rc = 0;
    bench_measure *m = bench_results_add(
        res, "pooler", threads,
        "a new key (first attempt) and a replay (retry) with the default setting (prepared"
        " statements) and IDEM_POOLER_TRANSACTION (unnamed), directly and through PgBouncer");
    bench_plan plan = {sides, n, threads, cfg->duration_s, cfg->round_s, cfg->round_s};

    for (int i = 0; m != NULL && i < n && rc == 0; i++) {
        snprintf(names[i], sizeof(names[i]), "%s: %s", what, kinds[i]);
        rc = open_side(&s[i], i < 2 ? p->direct : p->bouncer,
                       i == 0 ? IDEM_POOLER_NONE : IDEM_POOLER_TRANSACTION, threads, cfg->pool_cap);
        sides[i] = (bench_side){names[i], op, &s[i]};
    }
    if (m != NULL && rc == 0) {
        bench_say("pooler, %s, %d thread%s", what, threads, threads == 1 ? "" : "s");
        rc = bench_run(m, &plan);
        snprintf(label, sizeof(label), "%s: pooler-safe / default (direct)", what);
        bench_ratio_throughput(m, 1, 0, label, 0);
        snprintf(label, sizeof(label), "%s: via PgBouncer / default (direct)", what);
        if (n == 3)
            bench_ratio_throughput(m, 2, 0, label, 0);
    }
    close_sides(s, n);
    return m != NULL ? rc : -1;
}

/* PgBouncer keeps server sessions on the database after its clients went: end them, so
 * that the run can drop it. */
static void end_pooled_sessions(const char *direct)
{
    PGconn *pg = PQconnectdb(direct);

    if (PQstatus(pg) == CONNECTION_OK)
        PQclear(PQexec(pg, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                           " WHERE datname = current_database() AND pid <> pg_backend_pid()"));
    PQfinish(pg);
}

int bench_mode_pooler(bench_results *res, const bench_config *cfg, const char *conninfo,
                      const char *db)
{
    pooler_setup p = {conninfo, NULL};
    int rc = 0;

    if (cfg->pgbouncer != NULL && cfg->pgbouncer[0] != '\0' &&
        (p.bouncer = bench_conninfo(cfg->pgbouncer, db)) == NULL)
        return -1;
    if (p.bouncer == NULL)
        bench_say("pooler: no --pgbouncer; measuring the direct sides only");
    bench_say("loading %ld operation records for the pooler mode's replay", POOLER_REPLAY_KEYS);
    rc = bench_load_operations(conninfo, TENANT_REPLAY, 0, POOLER_REPLAY_KEYS);
    for (int i = 0; rc == 0 && i < cfg->nthreads; i++) {
        rc = measure(res, cfg, &p, "new", create_op, cfg->threads[i]);
        if (rc == 0)
            rc = measure(res, cfg, &p, "replay", replay_op, cfg->threads[i]);
    }
    if (p.bouncer != NULL)
        end_pooled_sessions(conninfo);
    free(p.bouncer);
    return rc;
}
