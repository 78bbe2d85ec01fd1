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

/* SHOW @name's value into out ("?" when it cannot be read). */
static void show(PGconn *admin, const char *name, char *out, size_t size)
{
    char sql[64];
    PGresult *res;

    snprintf(sql, sizeof(sql), "SHOW %s", name);
    res = PQexec(admin, sql);
    snprintf(out, size, "%s", PQresultStatus(res) == PGRES_TUPLES_OK ? PQgetvalue(res, 0, 0) : "?");
    PQclear(res);
}

/* The mount that holds @path, from /proc/self/mountinfo (the longest mount point that is a
 * prefix of it): "SOURCE (FSTYPE) on MOUNTPOINT". */
static void file_system_of(const char *path, char *out, size_t size)
{
    char line[1024], point[256], fstype[32], source[128];
    size_t best = 0;
    FILE *f = fopen("/proc/self/mountinfo", "r");

    snprintf(out, size, "an unknown file system");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        const char *dash = strstr(line, " - ");
        size_t n;

        if (dash == NULL || sscanf(line, "%*s %*s %*s %*s %255s", point) != 1 ||
            sscanf(dash + 3, "%31s %127s", fstype, source) != 2)
            continue;
        n = strlen(point);
        if (strncmp(path, point, n) == 0 && (path[n] == '/' || path[n] == '\0' || n == 1) &&
            n >= best) {
            best = n;
            snprintf(out, size, "%s (%s) on %s", source, fstype, point);
        }
    }
    if (f != NULL)
        fclose(f);
}

/* The server's durability settings and where its data directory is (the bench runs on the
 * server's machine). */
static void describe_server(bench_results *res, PGconn *admin)
{
    char fsync[16], sync_commit[16], fpw[16];

    show(admin, "fsync", fsync, sizeof(fsync));
    show(admin, "synchronous_commit", sync_commit, sizeof(sync_commit));
    show(admin, "full_page_writes", fpw, sizeof(fpw));
    snprintf(res->durability, sizeof(res->durability),
             "fsync %s, synchronous_commit %s, full_page_writes %s", fsync, sync_commit, fpw);
    show(admin, "data_directory", res->data_dir, sizeof(res->data_dir));
    file_system_of(res->data_dir, res->data_fs, sizeof(res->data_fs));
    bench_watch_server(res->data_dir);
}

static int run_modes(bench_results *res, const bench_config *cfg, PGconn *admin, const char *db)
{
    char *conninfo = bench_conninfo(cfg->dsn, db);
    int rc = conninfo != NULL ? 0 : -1;

    if (rc == 0 && (cfg->modes & BENCH_MODE_CREATE))
        rc = bench_mode_create(res, cfg, conninfo);
    if (rc == 0 && (cfg->modes & BENCH_MODE_REPLAY))
        rc = bench_mode_replay(res, cfg, admin, db);
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
    if (rc == 0 && (cfg->modes & BENCH_MODE_GATEWAY))
        rc = bench_mode_gateway(res, cfg, conninfo);
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
    int rc, durable;

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
    durable = bench_durability_ensure(admin, cfg->keep_durability || cfg->existing,
                                      res.durability_note, sizeof(res.durability_note));
    if (durable < 0) {
        PQfinish(admin);
        return 69;
    }
    describe_server(&res, admin);
    if (cfg->statements && bench_statements_open(cfg->dsn) != 0) {
        if (durable)
            bench_durability_reset(admin);
        PQfinish(admin);
        return 69;
    }
    if (cfg->existing) {
        int made = 0;

        snprintf(db, sizeof(db), "%s", PQdb(admin));
        bench_say("database %s (existing: not migrated, not dropped)", db);
        int checked = (rc = bench_existing_check(admin, cfg->modes, &made)) == 0;

        if (rc == 0)
            rc = run_modes(&res, cfg, admin, db);
        bench_existing_clean(admin, cfg->modes, made, checked);
    } else {
        snprintf(db, sizeof(db), "idem_bench_%ld", (long)getpid());
        bench_say("database %s", db);
        rc = bench_db_create(admin, cfg->dsn, db);
        if (rc == 0)
            rc = run_modes(&res, cfg, admin, db);
        bench_db_drop(admin, db);
    }
    if (durable)
        bench_durability_reset(admin);
    PQfinish(admin);
    bench_statements_close();
    res.total_s = seconds_since(&t0);
    if (rc == 0 && cfg->json)
        rc = bench_print_json(&res, cfg);
    else if (rc == 0)
        bench_print_table(&res, cfg);
    for (int i = 0; i < res.nmeasures; i++) {
        for (int s = 0; s < res.measure[i].nsides; s++)
            bench_statements_free(&res.measure[i].side[s].stmts);
    }
    if (rc != 0)
        return 1;
    return contention_failed(&res) ? 2 : 0;
}
