/*
 * The rls mode: what tenant isolation by row-level security costs (migration 0007).
 *
 * RLS on   idem as the application role (a login role in idem_app) on the run's database:
 *          every statement on idem's tables filtered and checked by the tenant policy
 * RLS off  the same role on a second database whose idem tables have row-level security
 *          disabled (ALTER TABLE ... DISABLE ROW LEVEL SECURITY): the policies' own cost
 *
 * Both sides set the tenant as the library does (in the claim and in the lookup, on plain
 * PostgreSQL); the operation is a new key (a first attempt) or a replay of an existing key
 * (a retry).
 * The login role idem_bench_app is created when missing (the --dsn role must be a
 * superuser or have CREATEROLE) and stays in the cluster; it connects with the --dsn's
 * other settings, so the server must let it in as it lets that role (trust or peer).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "support_tasks.h"

#define RLS_REPLAY_KEYS 10000L
#define TENANT_CREATE   "bench-rls"
#define TENANT_REPLAY   "bench-rls-replay"
#define RLS_TARGET      0.95

static const char SQL_RLS_OFF[] =
    "DO $$ DECLARE t regclass; BEGIN"
    " FOR t IN SELECT c.oid::regclass FROM pg_class c JOIN pg_namespace n"
    " ON n.oid = c.relnamespace JOIN pg_attribute a ON a.attrelid = c.oid"
    " AND a.attname = 'tenant' WHERE n.nspname = 'idem' AND c.relkind IN ('r', 'p') LOOP"
    " EXECUTE format('ALTER TABLE %s NO FORCE ROW LEVEL SECURITY', t);"
    " EXECUTE format('ALTER TABLE %s DISABLE ROW LEVEL SECURITY', t); END LOOP; END $$";

/* One measurement of @op ("new" or "replay"): RLS on (@as_app[0]) against off. */
static int measure(bench_results *res, const bench_config *cfg, char *const *as_app,
                   const char *what, bench_op_fn op, int threads)
{
    static const char *const kinds[2] = {"RLS on", "RLS off"};
    bench_store_side s[2] = {{NULL, NULL, TENANT_CREATE, TENANT_REPLAY, RLS_REPLAY_KEYS},
                             {NULL, NULL, TENANT_CREATE, TENANT_REPLAY, RLS_REPLAY_KEYS}};
    char names[2][64], label[96];
    bench_side sides[2];
    int rc = 0;
    bench_measure *m =
        bench_results_add(res, "rls", threads,
                          "a new key (first attempt) and a replay (retry) as the application "
                          "role, with row-level security on idem's tables and without");
    bench_plan plan = {sides, 2, threads, cfg->duration_s, cfg->round_s, cfg->round_s};

    for (int i = 0; m != NULL && i < 2 && rc == 0; i++) {
        snprintf(names[i], sizeof(names[i]), "%s: %s", what, kinds[i]);
        rc = bench_store_side_open(&s[i], as_app[i], IDEM_POOLER_NONE, threads, cfg->pool_cap);
        sides[i] = (bench_side){names[i], op, &s[i]};
    }
    if (m != NULL && rc == 0) {
        bench_say("rls, %s, %d thread%s", what, threads, threads == 1 ? "" : "s");
        rc = bench_run(m, &plan);
        snprintf(label, sizeof(label), "%s: RLS on / RLS off", what);
        bench_ratio_throughput(m, 0, 1, label, RLS_TARGET);
    }
    bench_store_sides_close(s, 2);
    return m != NULL ? rc : -1;
}

static int exec_on(const char *conninfo, const char *sql, const char *what)
{
    PGconn *pg = PQconnectdb(conninfo);
    PGresult *res = PQstatus(pg) == CONNECTION_OK ? PQexec(pg, sql) : NULL;
    int rc = PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : bench_error(what, PQerrorMessage(pg));

    PQclear(res);
    PQfinish(pg);
    return rc;
}

/* @conninfo's database ready for the mode: the role's grants and the replay's records;
 * with @rls_off its idem tables without row-level security. */
static int prepare_db(const char *conninfo, int rls_off)
{
    if (bench_app_role_setup(conninfo) != 0)
        return -1;
    if (rls_off && exec_on(conninfo, SQL_RLS_OFF, "disabling row-level security") != 0)
        return -1;
    bench_say("loading %ld operation records for the rls mode's replay", RLS_REPLAY_KEYS);
    return bench_load_operations(conninfo, TENANT_REPLAY, 0, RLS_REPLAY_KEYS);
}

int bench_mode_rls(bench_results *res, const bench_config *cfg, PGconn *admin, const char *db)
{
    char off_db[80], *direct[2] = {NULL, NULL}, *as_app[2] = {NULL, NULL};
    int rc;

    snprintf(off_db, sizeof(off_db), "%s_rls_off", db);
    rc = bench_db_create(admin, cfg->dsn, off_db);
    direct[0] = bench_conninfo(cfg->dsn, db);
    direct[1] = bench_conninfo(cfg->dsn, off_db);
    for (int i = 0; rc == 0 && i < 2; i++) {
        if (direct[i] == NULL || (as_app[i] = bench_app_conninfo(direct[i], NULL)) == NULL)
            rc = bench_error("rls", "out of memory");
        else
            rc = prepare_db(direct[i], i == 1);
    }
    for (int i = 0; rc == 0 && i < cfg->nthreads; i++) {
        rc = measure(res, cfg, as_app, "new", bench_store_new_key, cfg->threads[i]);
        if (rc == 0)
            rc = measure(res, cfg, as_app, "replay", bench_store_replay, cfg->threads[i]);
    }
    bench_db_drop(admin, off_db);
    for (int i = 0; i < 2; i++) {
        free(direct[i]);
        free(as_app[i]);
    }
    return rc;
}
