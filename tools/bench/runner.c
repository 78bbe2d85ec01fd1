/* The runner: one benchmark run from its settings. It describes the machine, creates the
 * database, runs the modes asked for, drops the database and prints the report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* DROP DATABASE IF EXISTS says so when it does not; that is expected here. */
static void quiet(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

static void describe_machine(bench_results *res, PGconn *admin)
{
    char line[256];
    FILE *f = fopen("/proc/cpuinfo", "r");
    const char *v = PQparameterStatus(admin, "server_version");

    snprintf(res->server_version, sizeof(res->server_version), "%s", v != NULL ? v : "?");
    res->cpus = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(res->cpu_model, sizeof(res->cpu_model), "unknown CPU");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        char *colon = strchr(line, ':');

        if (strncmp(line, "model name", 10) == 0 && colon != NULL) {
            colon[strcspn(colon, "\n")] = '\0';
            snprintf(res->cpu_model, sizeof(res->cpu_model), "%s", colon + 2);
            break;
        }
    }
    if (f != NULL)
        fclose(f);
}

static int run_modes(bench_results *res, const bench_config *cfg, PGconn *admin, const char *db)
{
    char *conninfo = bench_conninfo(cfg->dsn, db);
    int rc = conninfo != NULL ? 0 : -1;

    if (rc == 0 && (cfg->modes & BENCH_MODE_CREATE))
        rc = bench_mode_create(res, cfg, conninfo);
    if (rc == 0 && (cfg->modes & BENCH_MODE_REPLAY))
        rc = bench_mode_replay(res, cfg, conninfo);
    if (rc == 0 && (cfg->modes & BENCH_MODE_CONTENTION))
        rc = bench_mode_contention(res, cfg, conninfo);
    if (rc == 0 && (cfg->modes & BENCH_MODE_GROWTH))
        rc = bench_mode_growth(res, cfg, admin, db);
    if (rc == 0 && (cfg->modes & BENCH_MODE_SWEEP))
        rc = bench_mode_sweep(res, cfg, admin, db);
    if (rc == 0 && (cfg->modes & BENCH_MODE_EXTERNAL))
        rc = bench_mode_external(res, cfg, conninfo);
    if (rc == 0 && (cfg->modes & BENCH_MODE_POOLER))
        rc = bench_mode_pooler(res, cfg, conninfo, db);
    if (rc == 0 && (cfg->modes & BENCH_MODE_RLS))
        rc = bench_mode_rls(res, cfg, admin, db);
    free(conninfo);
    return rc;
}

static int contention_failed(const bench_results *res)
{
    for (int i = 0; i < res->nmeasures; i++) {
        if (res->measure[i].invariant.present && !res->measure[i].invariant.pass)
            return 1;
    }
    return 0;
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;

    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

int bench_main(const bench_config *cfg)
{
    static bench_results res; /* large: keep it off the stack */
    struct timespec t0;
    char db[64];
    PGconn *admin;
    int rc;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    bench_mask_dsn(cfg->dsn);
    admin = PQconnectdb(cfg->dsn);
    if (PQstatus(admin) != CONNECTION_OK) {
        bench_error("connecting", PQerrorMessage(admin));
        PQfinish(admin);
        return 69;
    }
    PQsetNoticeProcessor(admin, quiet, NULL);
    describe_machine(&res, admin);
    if (cfg->existing) {
        int made = 0;

        snprintf(db, sizeof(db), "%s", PQdb(admin));
        bench_say("database %s (existing: not migrated, not dropped)", db);
        int checked = (rc = bench_existing_check(admin, &made)) == 0;

        if (rc == 0)
            rc = run_modes(&res, cfg, admin, db);
        bench_existing_clean(admin, made, checked);
    } else {
        snprintf(db, sizeof(db), "idem_bench_%ld", (long)getpid());
        bench_say("database %s", db);
        rc = bench_db_create(admin, cfg->dsn, db);
        if (rc == 0)
            rc = run_modes(&res, cfg, admin, db);
        bench_db_drop(admin, db);
    }
    PQfinish(admin);
    res.total_s = seconds_since(&t0);
    if (rc == 0 && cfg->json)
        rc = bench_print_json(&res, cfg);
    else if (rc == 0)
        bench_print_table(&res, cfg);
    if (rc != 0)
        return 1;
    return contention_failed(&res) ? 2 : 0;
}
