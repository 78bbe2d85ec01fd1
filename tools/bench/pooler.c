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
    bench_store_side s[MAX_POOLER_SIDES];
    char names[MAX_POOLER_SIDES][64], label[96];
    bench_side sides[MAX_POOLER_SIDES];
    int n = p->bouncer != NULL ? 3 : 2, rc = 0;
    bench_measure *m = bench_results_add(
        res, "pooler", threads,
        "a new key (first attempt) and a replay (retry) with the default setting (prepared"
        " statements) and IDEM_POOLER_TRANSACTION (unnamed), directly and through PgBouncer");
    bench_plan plan = {sides, n, threads, cfg->duration_s, cfg->round_s, cfg->round_s};

    for (int i = 0; i < n; i++)
        s[i] = (bench_store_side){NULL, NULL, TENANT_CREATE, TENANT_REPLAY, POOLER_REPLAY_KEYS};
    for (int i = 0; m != NULL && i < n && rc == 0; i++) {
        snprintf(names[i], sizeof(names[i]), "%s: %s", what, kinds[i]);
        rc = bench_store_side_open(&s[i], i < 2 ? p->direct : p->bouncer,
                                   i == 0 ? IDEM_POOLER_NONE : IDEM_POOLER_TRANSACTION, threads,
                                   cfg->pool_cap);
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
    bench_store_sides_close(s, n);
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
        rc = measure(res, cfg, &p, "new", bench_store_new_key, cfg->threads[i]);
        if (rc == 0)
            rc = measure(res, cfg, &p, "replay", bench_store_replay, cfg->threads[i]);
    }
    if (p.bouncer != NULL)
        end_pooled_sessions(conninfo);
    free(p.bouncer);
    return rc;
}
