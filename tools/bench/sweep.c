/*
 * The sweep mode: what retention costs.
 *
 * In a database of its own: a backlog of 1 M expired operation records (one
 * INSERT ... SELECT generate_series: UUID operation IDs, trace IDs and receipts like the
 * example tool's) beside 10 k live records. Then, in one run:
 *   1. replays of live keys, 4 threads, for --duration / 2 seconds (no sweep);
 *   2. the same replays while one idem_sweep_run() with the default options turns the
 *      whole backlog into tombstones: its rate in rows per minute;
 *   3. the replays again, --duration / 2 seconds (no sweep);
 * and reports replay p99 during the sweep against p99 without it (phases 1 and 3
 * together), and the table's and its indexes' size before, after the sweep and a VACUUM,
 * and after VACUUM FULL, with the bytes per record and per tombstone.
 *
 * Targets (2 cores): the backlog cleared in under 60 s; replay p99 during the sweep within
 * 1.5 times p99 without it.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "support_tasks.h"

#define BACKLOG       1000000L
#define LIVE_KEYS     10000L
#define SWEEP_THREADS 4

/* One replay thread's samples in one phase. */
typedef struct replayer {
    pthread_t tid;
    idem_store *store;
    const atomic_int *stop;
    uint64_t rng;
    uint64_t *lat_ns;
    size_t n, cap;
    long long errors;
    char error[256];
} replayer;

/* Everything the mode measures. */
typedef struct sweep_numbers {
    double sweep_s;
    idem_sweep_result result;
    long long heap_before, index_before, heap_after, index_after, heap_full, index_full;
    double record_bytes, tombstone_bytes; /* average pg_column_size of a row */
} sweep_numbers;

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t next_random(replayer *r)
{
    r->rng ^= r->rng >> 12;
    r->rng ^= r->rng << 25;
    r->rng ^= r->rng >> 27;
    return r->rng * 0x2545F4914F6CDD1DULL;
}

static int replay_once(replayer *r)
{
    idem_request req = IDEM_REQUEST_INIT;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char op[24];
    int rc;

    bench_loaded_key(op, sizeof(op), next_random(r) % LIVE_KEYS);
    req.tenant = "bench-sweep-live";
    req.operation_id = op;
    req.tool = EXAMPLE_TOOL_NAME;
    req.payload_version = EXAMPLE_TOOL_VERSION;
    req.arguments = BENCH_REPLAY_ARGUMENTS;
    req.arguments_len = strlen(BENCH_REPLAY_ARGUMENTS);
    rc = idem_store_execute(&out, r->store, &req, example_create_support_task, NULL, &err);
    if (rc == 0 && out.status != IDEM_STATUS_REPLAYED)
        rc = -1;
    if (rc != 0 && r->errors++ == 0)
        snprintf(r->error, sizeof(r->error), "%s: %.200s", idem_status_name(out.status),
                 err.message);
    idem_outcome_clear(&out);
    return rc == 0 ? 0 : -1;
}

static void *replay_loop(void *arg)
{
    replayer *r = arg;

    while (!atomic_load_explicit(r->stop, memory_order_relaxed)) {
        uint64_t t0 = now_ns();
        int ok = replay_once(r) == 0;
        uint64_t t1 = now_ns();

        if (ok && r->n == r->cap) {
            size_t cap = r->cap ? r->cap * 2 : 65536;
            uint64_t *grown = realloc(r->lat_ns, cap * sizeof(*grown));

            if (grown == NULL)
                break;
            r->lat_ns = grown;
            r->cap = cap;
        }
        if (ok)
            r->lat_ns[r->n++] = t1 - t0;
        if (r->errors > 1000)
            break;
    }
    return NULL;
}

/* Replay threads, started and stopped around a phase. */
typedef struct phase {
    replayer r[SWEEP_THREADS];
    atomic_int stop;
    uint64_t started_ns;
} phase;

static int phase_start(phase *p, idem_store *store)
{
    atomic_store(&p->stop, 0);
    p->started_ns = now_ns();
    for (int i = 0; i < SWEEP_THREADS; i++) {
        p->r[i].store = store;
        p->r[i].stop = &p->stop;
        p->r[i].rng = now_ns() ^ ((uint64_t)(i + 1) * 0x9E3779B97F4A7C15ULL);
        if (pthread_create(&p->r[i].tid, NULL, replay_loop, &p->r[i]) != 0) {
            fprintf(stderr, "idem-bench: cannot start threads\n");
            exit(70);
        }
    }
    return 0;
}

/* Stop the threads; add their samples to @side (its latencies kept in *all). */
static void phase_stop(phase *p, bench_side_result *side, uint64_t **all, size_t *nall)
{
    atomic_store(&p->stop, 1);
    for (int i = 0; i < SWEEP_THREADS; i++)
        pthread_join(p->r[i].tid, NULL);
    side->seconds += (double)(now_ns() - p->started_ns) / 1e9;
    for (int i = 0; i < SWEEP_THREADS; i++) {
        replayer *r = &p->r[i];
        uint64_t *grown = realloc(*all, (*nall + r->n + 1) * sizeof(**all));

        if (grown != NULL) {
            memcpy(grown + *nall, r->lat_ns, r->n * sizeof(*r->lat_ns));
            *all = grown;
            *nall += r->n;
        }
        side->ops += (long long)r->n;
        if (r->errors > 0 && side->errors == 0)
            snprintf(side->first_error, sizeof(side->first_error), "%s", r->error);
        side->errors += r->errors;
        free(r->lat_ns);
        memset(r, 0, sizeof(*r));
    }
}

static int by_value(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

static double percentile_ms(const uint64_t *sorted, size_t n, double p)
{
    size_t rank = (size_t)ceil(p * (double)n);

    return n == 0 ? 0 : (double)sorted[rank > 0 ? rank - 1 : 0] / 1e6;
}

static void summarize(bench_side_result *side, uint64_t *lat, size_t n)
{
    qsort(lat, n, sizeof(*lat), by_value);
    side->ops_per_s = side->seconds > 0 ? (double)side->ops / side->seconds : 0;
    side->p50_ms = percentile_ms(lat, n, 0.5);
    side->p99_ms = percentile_ms(lat, n, 0.99);
    side->p999_ms = percentile_ms(lat, n, 0.999);
}

/* ---- the database ------------------------------------------------------------------------ */

static int exec_sql(PGconn *pg, const char *sql)
{
    PGresult *res = PQexec(pg, sql);
    ExecStatusType st = PQresultStatus(res);
    int rc =
        st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? 0 : bench_error(sql, PQerrorMessage(pg));

    PQclear(res);
    return rc;
}

/* The backlog: expired records as the store writes them, in one statement. */
static int load_backlog(PGconn *pg)
{
    static const char sql[] =
        "INSERT INTO idem.operations (tenant, operation_id, tool, payload_version, fingerprint,"
        " state, response, trace_id, claim_token, created_at, completed_at, expires_at,"
        " forget_at)"
        " SELECT 'bench-sweep', gen_random_uuid()::text, 'create_support_task', 1,"
        " sha256(int8send(i)), 'completed',"
        " convert_to('{\"status\":\"created\",\"task_id\":' || i || '}', 'UTF8'),"
        " 'call_' || md5(i::text), gen_random_uuid(), now() - interval '8 days',"
        " now() - interval '8 days', now() - interval '1 day', now() + interval '22 days'"
        " FROM generate_series(1, 1000000) AS i";

    return exec_sql(pg, sql) == 0 ? exec_sql(pg, "VACUUM ANALYZE idem.operations") : -1;
}

static int sizes(PGconn *pg, long long *heap, long long *index)
{
    PGresult *res = PQexec(pg, "SELECT pg_table_size('idem.operations'),"
                               " pg_indexes_size('idem.operations')");
    int rc = PQresultStatus(res) == PGRES_TUPLES_OK ? 0 : bench_error("sizes", PQerrorMessage(pg));

    if (rc == 0) {
        *heap = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        *index = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
    }
    PQclear(res);
    return rc;
}

/* Average pg_column_size of a row in @state, over a sample. */
static double row_bytes(PGconn *pg, const char *state)
{
    const char *values[1] = {state};
    PGresult *res = PQexecParams(pg,
                                 "SELECT avg(pg_column_size(o.*)) FROM (SELECT * FROM"
                                 " idem.operations WHERE tenant = 'bench-sweep' AND state = $1"
                                 " LIMIT 10000) o",
                                 1, NULL, values, NULL, NULL, 0);
    double v = PQresultStatus(res) == PGRES_TUPLES_OK ? strtod(PQgetvalue(res, 0, 0), NULL) : NAN;

    PQclear(res);
    return v;
}

/* ---- the sweep beside the replays ---------------------------------------------------------- */

typedef struct sweeper {
    const char *conninfo;
    sweep_numbers *numbers;
    int rc;
    char error[512];
} sweeper;

static void *sweep_thread(void *arg)
{
    sweeper *s = arg;
    PGconn *pg = PQconnectdb(s->conninfo);
    idem_error err = IDEM_ERROR_INIT;
    uint64_t t0 = now_ns();

    s->rc = PQstatus(pg) == CONNECTION_OK
                ? idem_sweep_run(&s->numbers->result, pg, NULL, &err)
                : idem_error_set(&err, IDEM_EUNAVAIL, "%s", PQerrorMessage(pg));
    s->numbers->sweep_s = (double)(now_ns() - t0) / 1e9;
    snprintf(s->error, sizeof(s->error), "%s", err.message);
    PQfinish(pg);
    return NULL;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};

    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Phases 1-3: replays alone, during the sweep, alone again. */
static int measure(bench_measure *m, sweep_numbers *nums, idem_store *store, const char *conninfo,
                   double quiet_s)
{
    static phase p; /* large: off the stack */
    uint64_t *quiet = NULL, *during = NULL;
    size_t nquiet = 0, nduring = 0;
    sweeper s = {conninfo, nums, 0, ""};
    pthread_t tid;

    bench_say("sweep: replays without a sweep, %.0f s", quiet_s);
    phase_start(&p, store);
    sleep_s(quiet_s);
    phase_stop(&p, &m->side[0], &quiet, &nquiet);
    bench_say("sweep: replays while %ld expired records are swept", BACKLOG);
    phase_start(&p, store);
    pthread_create(&tid, NULL, sweep_thread, &s);
    pthread_join(tid, NULL);
    phase_stop(&p, &m->side[1], &during, &nduring);
    bench_say("sweep: replays without a sweep again, %.0f s", quiet_s);
    phase_start(&p, store);
    sleep_s(quiet_s);
    phase_stop(&p, &m->side[0], &quiet, &nquiet);
    summarize(&m->side[0], quiet, nquiet);
    summarize(&m->side[1], during, nduring);
    free(quiet);
    free(during);
    if (s.rc != 0)
        return bench_error("sweep", s.error);
    return 0;
}

static void add_ratio(bench_measure *m, const char *label, const char *what, double value,
                      double target)
{
    bench_ratio *r;

    if (m->nratios == BENCH_MAX_RATIOS)
        return;
    r = &m->ratio[m->nratios++];
    *r = (bench_ratio){"", what, value, value, value, target, 0};
    snprintf(r->label, sizeof(r->label), "%s", label);
}

static const char *describe(const sweep_numbers *n)
{
    static char note[1024];
    double mb = 1024.0 * 1024.0;

    snprintf(note, sizeof(note),
             "%llu expired records swept in %.1f s (%.0f rows/min, %u batches of the default"
             " size), 4 threads replaying 10 k live keys; p99 without = phases before and after"
             " the sweep.\n%-10s idem.operations heap + indexes: %.0f + %.0f MB with the backlog;"
             " %.0f + %.0f MB after the sweep and VACUUM (space reusable); %.0f + %.0f MB after"
             " VACUUM FULL.\n%-10s row size (pg_column_size): record %.0f bytes, tombstone %.0f"
             " bytes",
             n->result.expired, n->sweep_s,
             n->sweep_s > 0 ? (double)n->result.expired / n->sweep_s * 60 : 0, n->result.batches,
             "", (double)n->heap_before / mb, (double)n->index_before / mb,
             (double)n->heap_after / mb, (double)n->index_after / mb, (double)n->heap_full / mb,
             (double)n->index_full / mb, "", n->record_bytes, n->tombstone_bytes);
    return note;
}

static int after_sweep(sweep_numbers *n, PGconn *pg)
{
    bench_say("sweep: VACUUM, then VACUUM FULL");
    n->tombstone_bytes = row_bytes(pg, "expired");
    if (exec_sql(pg, "VACUUM ANALYZE idem.operations") != 0 ||
        sizes(pg, &n->heap_after, &n->index_after) != 0 ||
        exec_sql(pg, "VACUUM FULL idem.operations") != 0)
        return -1;
    return sizes(pg, &n->heap_full, &n->index_full);
}

static int run_sweep(bench_measure *m, sweep_numbers *n, const bench_config *cfg,
                     const char *conninfo)
{
    PGconn *pg = PQconnectdb(conninfo);
    idem_pool *pool = NULL;
    idem_store *store = NULL;
    idem_error err = IDEM_ERROR_INIT;
    int rc = PQstatus(pg) == CONNECTION_OK ? 0 : bench_error("connecting", PQerrorMessage(pg));

    if (rc == 0) {
        bench_say("sweep: loading %ld live and %ld expired operation records", LIVE_KEYS, BACKLOG);
        rc = bench_load_operations(conninfo, "bench-sweep-live", 0, LIVE_KEYS);
    }
    if (rc == 0 && (rc = load_backlog(pg)) == 0 &&
        (rc = sizes(pg, &n->heap_before, &n->index_before)) == 0) {
        n->record_bytes = row_bytes(pg, "completed");
        rc = bench_pool_open(&pool, conninfo, SWEEP_THREADS, cfg->pool_cap);
    }
    if (rc == 0 && idem_store_new(&store, pool, NULL, &err) != 0)
        rc = bench_error("store", err.message);
    if (rc == 0)
        rc = measure(m, n, store, conninfo, cfg->duration_s / 2);
    idem_store_free(store);
    idem_pool_free(pool);
    if (rc == 0)
        rc = after_sweep(n, pg);
    PQfinish(pg);
    return rc;
}

int bench_mode_sweep(bench_results *res, const bench_config *cfg, PGconn *admin, const char *prefix)
{
    static sweep_numbers n;
    char db[96];
    char *conninfo = NULL;
    bench_measure *m = bench_results_add(res, "sweep", SWEEP_THREADS, "");
    int rc;

    if (m == NULL)
        return -1;
    m->nsides = 2;
    snprintf(m->side[0].name, sizeof(m->side[0].name), "replay, no sweep");
    snprintf(m->side[1].name, sizeof(m->side[1].name), "replay during the sweep");
    snprintf(db, sizeof(db), "%s_sweep", prefix);
    rc = bench_db_create(admin, cfg->dsn, db);
    if (rc == 0 && (conninfo = bench_conninfo(cfg->dsn, db)) == NULL)
        rc = -1;
    if (rc == 0)
        rc = run_sweep(m, &n, cfg, conninfo);
    free(conninfo);
    bench_db_drop(admin, db);
    if (rc != 0)
        return rc;
    m->note = describe(&n);
    add_ratio(m, "replay p99, during the sweep / without", "p99 latency",
              m->side[0].p99_ms > 0 ? m->side[1].p99_ms / m->side[0].p99_ms : NAN, 1.5);
    add_ratio(m, "1 M backlog: sweep time / 60 s", "time", n.sweep_s / 60.0, 1.0);
    add_ratio(m, "bytes per row, tombstone / record", "size",
              n.record_bytes > 0 ? n.tombstone_bytes / n.record_bytes : NAN, 0);
    return 0;
}
