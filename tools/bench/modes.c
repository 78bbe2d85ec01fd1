/*
 * The replay and growth modes: idem against what the same work costs without it.
 *
 * (create is in create.c.)
 * replay   idem_store_execute() on an existing key, as a retry (attempt 2: the lookup
 *          answers) and as a request wrongly marked a first attempt (the claim answers),
 *          against the prepared primary-key read of the same row's response bytes (copied
 *          out, as idem copies the receipt):
 *            SELECT response FROM idem.operations WHERE tenant = $1 AND operation_id = $2
 *          all sides through one pool, as the application role (idem_bench_app, row-level
 *          security on; the session's idem.tenant is the replay's tenant, so that the
 *          bare read sees its rows), in the run's database (warm: VACUUM ANALYZE after
 *          loading) and again in a fresh one (replay-fresh: loaded, never analyzed,
 *          autovacuum off on idem.operations, so every statement is planned on a table
 *          without statistics). With --existing: in that database only, as the --dsn role.
 * growth   replay latency (1 thread) on tables of 10 k and 1 M records (10 M with --large),
 *          each in its own database, rounds interleaved.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "support_tasks.h"

#define REPLAY_KEYS 10000L

typedef struct side_ctx {
    idem_pool *pool;
    idem_store *store;
    const char *tenant;
    uint64_t nkeys; /* replay: keys k0..k<nkeys-1> exist */
} side_ctx;

static const char read_name[] = "idem_bench_read";
static const char read_sql[] = "SELECT response FROM idem.operations"
                               " WHERE tenant = $1 AND operation_id = $2";

/* ---- the idem sides ------------------------------------------------------------------ */

static int idem_replay(bench_worker *w)
{
    const side_ctx *c = w->side->ctx;
    char op[24];

    bench_loaded_key(op, sizeof(op), bench_random(w, c->nkeys));
    return bench_execute(w, c->store, c->tenant, op, BENCH_REPLAY_ARGUMENTS, 2,
                         IDEM_STATUS_REPLAYED);
}

/* A replay of a request wrongly marked as a first attempt: the claim answers. */
static int idem_replay_first(bench_worker *w)
{
    const side_ctx *c = w->side->ctx;
    char op[24];

    bench_loaded_key(op, sizeof(op), bench_random(w, c->nkeys));
    return bench_execute(w, c->store, c->tenant, op, BENCH_REPLAY_ARGUMENTS, 1,
                         IDEM_STATUS_REPLAYED);
}

/* ---- the bare sides ------------------------------------------------------------------ */

/* A prepared read (@name, @sql: two parameters, tenant and operation ID), prepared on
 * first use on each connection. */
static PGresult *prepared_read(PGconn *pg, const char *name, const char *sql,
                               const char *const *values)
{
    PGresult *res = PQexecPrepared(pg, name, 2, values, NULL, NULL, 1);
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

    if (state == NULL || strcmp(state, "26000") != 0)
        return res;
    PQclear(res);
    res = PQprepare(pg, name, sql, 2, NULL);
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        return res;
    PQclear(res);
    return PQexecPrepared(pg, name, 2, values, NULL, NULL, 1);
}

static PGresult *read_row(PGconn *pg, const char *const *values)
{
    return prepared_read(pg, read_name, read_sql, values);
}

/* The read that sets the tenant itself, as the library's lookup does on plain PostgreSQL
 * (lib/tx/tenant.h, idem__tenant_exec_either()): with the bare read, what row-level
 * security's setting costs the least a lookup does. */
static const char as_tenant_sql[] =
    "SELECT o.response FROM (SELECT set_config('idem.tenant', $1, true) AS tenant) AS one"
    " JOIN idem.operations o ON o.tenant = one.tenant AND o.operation_id = $2";

static PGresult *read_row_as_tenant(PGconn *pg, const char *const *values)
{
    return prepared_read(pg, "idem_bench_read_as", as_tenant_sql, values);
}

static int read_with(bench_worker *w, PGresult *(*read)(PGconn *, const char *const *))
{
    const side_ctx *c = w->side->ctx;
    char op[24];
    const char *values[2] = {c->tenant, op};
    idem_error err = IDEM_ERROR_INIT;
    idem_conn *conn = NULL;
    PGresult *res;
    char *copy = NULL;
    int rc;

    bench_loaded_key(op, sizeof(op), bench_random(w, c->nkeys));
    if (idem_pool_acquire(&conn, c->pool, &err) != 0)
        return bench_fail(w, "acquire: %s", err.message);
    res = read(idem_conn_pg(conn), values);
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
        copy = malloc((size_t)PQgetlength(res, 0, 0) + 1);
    if (copy != NULL) {
        memcpy(copy, PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0));
        copy[PQgetlength(res, 0, 0)] = '\0';
    }
    rc = copy != NULL ? 0 : bench_fail(w, "read %s: %s", op, PQerrorMessage(idem_conn_pg(conn)));
    free(copy);
    PQclear(res);
    idem_pool_release(conn);
    return rc;
}

static int bare_read(bench_worker *w)
{
    return read_with(w, read_row);
}

static int bare_read_as_tenant(bench_worker *w)
{
    return read_with(w, read_row_as_tenant);
}

/* ---- measurements -------------------------------------------------------------------- */

static int open_side(side_ctx *c, const char *conninfo, int threads, int pool_cap)
{
    idem_error err = IDEM_ERROR_INIT;

    if (bench_pool_open(&c->pool, conninfo, threads, pool_cap) != 0)
        return -1;
    if (idem_store_new(&c->store, c->pool, NULL, &err) != 0)
        return bench_error("store", err.message);
    return 0;
}

static void close_side(side_ctx *c)
{
    idem_store_free(c->store);
    idem_pool_free(c->pool);
    c->store = NULL;
    c->pool = NULL;
}

static bench_plan plan_for(const bench_config *cfg, const bench_side *sides, int n, int threads)
{
    return (bench_plan){sides, n, threads, cfg->duration_s, cfg->round_s, cfg->round_s};
}

static int replay_at(bench_results *res, const bench_config *cfg, const char *conninfo, int threads,
                     const char *mode)
{
    side_ctx c = {NULL, NULL, "bench-replay", REPLAY_KEYS};
    const bench_side sides[4] = {
        {"idem (retry)", idem_replay, &c},
        {"bare primary-key SELECT", bare_read, &c},
        {"idem (marked first attempt)", idem_replay_first, &c},
        {"bare SELECT behind the tenant setting", bare_read_as_tenant, &c}};
    bench_plan plan = plan_for(cfg, sides, 4, threads);
    bench_measure *m = bench_results_add(
        res, mode, threads,
        strcmp(mode, "replay") == 0
            ? "random existing keys among 10 k records, analyzed; bare = the prepared"
              " primary-key SELECT of the stored receipt, same pool, as the application role"
            : "the same in a fresh database: its records never analyzed");
    int rc;

    if (m == NULL || open_side(&c, conninfo, threads, cfg->pool_cap) != 0) {
        close_side(&c);
        return -1;
    }
    bench_say("%s, %d thread%s", mode, threads, threads == 1 ? "" : "s");
    rc = bench_run(m, &plan);
    close_side(&c);
    bench_ratio_throughput(m, 0, 1, "idem (retry) / bare primary-key SELECT", 0.9);
    bench_ratio_throughput(m, 2, 1, "idem (marked first attempt) / bare primary-key SELECT", 0);
    /* The tenant's setting for row-level security (lib/tx/tenant.h), on the least a lookup does. */
    bench_ratio_throughput(m, 3, 1, "bare behind the tenant setting / bare", 0.95);
    return rc;
}

/* The replay's measurements in the database @conninfo names, as the application role
 * (with --existing: as the --dsn role), its records loaded: analyzed, or @fresh. */
static int replay_in(bench_results *res, const bench_config *cfg, const char *conninfo, int fresh)
{
    char *as_app = NULL;
    int rc = 0;

    if (!cfg->existing && bench_app_role_setup(conninfo) != 0)
        return -1;
    as_app = cfg->existing ? strdup(conninfo) : bench_app_conninfo(conninfo, "bench-replay");
    if (as_app == NULL)
        return bench_error("replay", "out of memory");
    bench_say("loading %ld operation records for replay%s", REPLAY_KEYS,
              fresh ? ", never analyzed" : "");
    rc = fresh ? bench_load_operations_fresh(conninfo, "bench-replay", 0, REPLAY_KEYS)
               : bench_load_operations(conninfo, "bench-replay", 0, REPLAY_KEYS);
    for (int i = 0; rc == 0 && i < cfg->nthreads; i++)
        rc = replay_at(res, cfg, as_app, cfg->threads[i], fresh ? "replay-fresh" : "replay");
    free(as_app);
    return rc;
}

int bench_mode_replay(bench_results *res, const bench_config *cfg, PGconn *admin, const char *db)
{
    char fresh_db[96];
    char *conninfo = bench_conninfo(cfg->dsn, db), *fresh = NULL;
    int rc = conninfo != NULL ? replay_in(res, cfg, conninfo, 0) : -1;

    snprintf(fresh_db, sizeof(fresh_db), "%s_fresh", db);
    if (rc == 0 && !cfg->existing) {
        rc = bench_db_create(admin, cfg->dsn, fresh_db);
        fresh = rc == 0 ? bench_conninfo(cfg->dsn, fresh_db) : NULL;
        rc = fresh != NULL ? replay_in(res, cfg, fresh, 1) : -1;
        bench_db_drop(admin, fresh_db);
    }
    free(conninfo);
    free(fresh);
    return rc;
}

/* ---- growth -------------------------------------------------------------------------- */

typedef struct growth_size {
    long rows;
    const char *label; /* "10k" */
    char db[96];
    char *conninfo;
    char idem_name[48], bare_name[48];
    side_ctx ctx;
} growth_size;

static int growth_prepare(growth_size *g, const bench_config *cfg, PGconn *admin,
                          const char *prefix)
{
    snprintf(g->db, sizeof(g->db), "%s_g%s", prefix, g->label);
    snprintf(g->idem_name, sizeof(g->idem_name), "idem replay, %s records", g->label);
    snprintf(g->bare_name, sizeof(g->bare_name), "bare SELECT, %s records", g->label);
    g->ctx = (side_ctx){NULL, NULL, "bench-growth", (uint64_t)g->rows};
    if (bench_db_create(admin, cfg->dsn, g->db) != 0)
        return -1;
    g->conninfo = bench_conninfo(cfg->dsn, g->db);
    if (g->conninfo == NULL)
        return -1;
    bench_say("growth: loading %ld operation records", g->rows);
    if (bench_load_operations(g->conninfo, "bench-growth", 0, g->rows) != 0)
        return -1;
    return open_side(&g->ctx, g->conninfo, 1, cfg->pool_cap);
}

static void growth_ratios(bench_measure *m, const growth_size *g, int n)
{
    char label[96];

    for (int i = 1; i < n; i++) {
        snprintf(label, sizeof(label), "idem replay p50, %s / %s records", g[i].label, g[0].label);
        bench_ratio_p50(m, i, 0, label, i == 1 ? 1.3 : 0);
    }
    for (int i = 1; i < n; i++) {
        snprintf(label, sizeof(label), "bare SELECT p50, %s / %s records", g[i].label, g[0].label);
        bench_ratio_p50(m, n + i, n, label, 0);
    }
}

int bench_mode_growth(bench_results *res, const bench_config *cfg, PGconn *admin,
                      const char *prefix)
{
    growth_size g[3] = {{10000, "10k", "", NULL, "", "", {0}},
                        {1000000, "1M", "", NULL, "", "", {0}},
                        {10000000, "10M", "", NULL, "", "", {0}}};
    int n = cfg->large ? 3 : 2, rc = 0;
    bench_side sides[BENCH_MAX_SIDES];
    bench_measure *m = bench_results_add(res, "growth", 1,
                                         "replay of random keys, 1 thread, one database per table"
                                         " size; measured for twice --duration");

    for (int i = 0; rc == 0 && i < n; i++) {
        rc = growth_prepare(&g[i], cfg, admin, prefix);
        sides[i] = (bench_side){g[i].idem_name, idem_replay, &g[i].ctx};
        sides[n + i] = (bench_side){g[i].bare_name, bare_read, &g[i].ctx};
    }
    if (rc == 0 && m != NULL) {
        bench_plan plan = plan_for(cfg, sides, 2 * n, 1);

        plan.seconds *= 2; /* four sides or more: give each enough rounds */

        bench_say("growth, 1 thread");
        rc = bench_run(m, &plan);
        growth_ratios(m, g, n);
    }
    for (int i = 0; i < n; i++) {
        close_side(&g[i].ctx);
        free(g[i].conninfo);
        if (g[i].db[0])
            bench_db_drop(admin, g[i].db);
    }
    return m != NULL ? rc : -1;
}
