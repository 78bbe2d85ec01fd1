/*
 * The sweep mode: what retention costs.
 *
 * In a database of its own: a backlog of 1 M expired operation records (one
 * INSERT ... SELECT generate_series: UUID operation IDs, trace IDs and receipts like the
 * example tool's) beside 10 k live records. First the sweeper alone works off half the
 * backlog (its rate with the machine to itself: what a 1 M backlog costs). Then 4 threads
 * replay live keys without a pause while the sweeper works the rest off in slices, as
 * cron would in runs: a run of
 * idem_sweep_run() with the default options and max_runtime_ms SLICE_MS, then a pause of
 * PAUSE_MS, until the backlog is gone. Each replay counts as "during the sweep" when a
 * run was in progress when it started or ended, else as "without": both sides share the
 * same minutes, so the machine's other load weighs on both alike. It reports the sweep's
 * rate over the time its runs took (rows per minute), replay p99 during the sweep against
 * p99 without it, and the table's and its indexes' size before, after the sweep and a
 * VACUUM, and after VACUUM FULL, with the bytes per record and per tombstone.
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

#include "idem/sys/sweep.h"

#include "bench.h"
#include "support_tasks.h"

#define BACKLOG       1000000L
#define LIVE_KEYS     10000L
#define SWEEP_THREADS 4
#define SLICE_MS      1000
#define PAUSE_MS      500

/* Latencies of one kind of replay. */
typedef struct samples {
    uint64_t *ns;
    size_t n, cap;
} samples;

/* One replay thread. */
typedef struct replayer {
    pthread_t tid;
    idem_store *store;
    const atomic_int *stop, *sweeping;
    uint64_t rng;
    samples quiet, during;
    long long errors;
    char error[256];
} replayer;

/* Everything the mode measures. */
typedef struct sweep_numbers {
    double alone_s;                /* the first half, swept with nothing else running */
    unsigned long long alone_rows; /* its rows */
    double sweep_s, wall_s; /* the runs' time; from the first run's start to the last's end */
    unsigned int runs;
    unsigned long long expired;
    unsigned int batches;
    long long heap_before, index_before, heap_after, index_after, heap_full, index_full;
    double record_bytes, tombstone_bytes; /* average pg_column_size of a row */
    double load_before, load_after;       /* the machine's 1-minute load average */
} sweep_numbers;

/* The 1-minute load average (other work on a shared machine shows here); -1 if unknown. */
static double load_average(void)
{
    FILE *f = fopen("/proc/loadavg", "r");
    double load = -1;

    if (f != NULL) {
        if (fscanf(f, "%lf", &load) != 1)
            load = -1;
        fclose(f);
    }
    return load;
}

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

static int push(samples *s, uint64_t v)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 65536;
        uint64_t *grown = realloc(s->ns, cap * sizeof(*grown));

        if (grown == NULL)
            return -1;
        s->ns = grown;
        s->cap = cap;
    }
    s->ns[s->n++] = v;
    return 0;
}

static void *replay_loop(void *arg)
{
    replayer *r = arg;

    while (!atomic_load_explicit(r->stop, memory_order_relaxed)) {
        int during = atomic_load(r->sweeping);
        uint64_t t0 = now_ns();
        int ok = replay_once(r) == 0;
        uint64_t t1 = now_ns();

        during |= atomic_load(r->sweeping);
        if (ok && push(during ? &r->during : &r->quiet, t1 - t0) != 0)
            break;
        if (r->errors > 1000)
            break;
    }
    return NULL;
}

/* Add one thread's samples of one kind to @side and @all. */
static void gather(bench_side_result *side, samples *all, const samples *mine, const replayer *r)
{
    for (size_t i = 0; i < mine->n; i++)
        push(all, mine->ns[i]);
    side->ops += (long long)mine->n;
    if (r->errors > 0 && side->errors == 0)
        snprintf(side->first_error, sizeof(side->first_error), "%s", r->error);
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
    if (n > 0)
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
    atomic_int *sweeping;
    int rc;
    char error[512];
} sweeper;

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Runs of SLICE_MS with pauses of PAUSE_MS, until a run finds nothing more due. */
static void *sweep_thread(void *arg)
{
    sweeper *s = arg;
    sweep_numbers *n = s->numbers;
    PGconn *pg = PQconnectdb(s->conninfo);
    idem_sweep_options opts = IDEM_SWEEP_OPTIONS_INIT;
    idem_sweep_result r = IDEM_SWEEP_RESULT_INIT;
    idem_error err = IDEM_ERROR_INIT;
    uint64_t start = now_ns(), t0;

    opts.max_runtime_ms = SLICE_MS;
    s->rc = PQstatus(pg) == CONNECTION_OK ? 0 : idem_error_set(&err, IDEM_EUNAVAIL, "connecting");
    while (s->rc == 0 && !r.complete) {
        atomic_store(s->sweeping, 1);
        t0 = now_ns();
        s->rc = idem_sweep_run(&r, pg, &opts, &err);
        n->sweep_s += (double)(now_ns() - t0) / 1e9;
        atomic_store(s->sweeping, 0);
        n->runs++;
        n->expired += r.expired;
        n->batches += r.batches;
        if (s->rc == 0 && !r.complete)
            sleep_ms(PAUSE_MS);
    }
    n->wall_s = (double)(now_ns() - start) / 1e9;
    snprintf(s->error, sizeof(s->error), "%s", err.message);
    PQfinish(pg);
    return NULL;
}

/* Replays throughout; the sweep in slices beside them. */
static int measure(bench_measure *m, sweep_numbers *nums, idem_store *store, const char *conninfo)
{
    static replayer r[SWEEP_THREADS]; /* large: off the stack */
    samples quiet = {0}, during = {0};
    atomic_int stop = 0, sweeping = 0;
    sweeper s = {conninfo, nums, &sweeping, 0, ""};
    uint64_t t0;
    pthread_t tid;

    bench_say("sweep: replays, and %ld expired records swept in runs of %d ms every %d ms", BACKLOG,
              SLICE_MS, SLICE_MS + PAUSE_MS);
    for (int i = 0; i < SWEEP_THREADS; i++) {
        r[i] = (replayer){.store = store, .stop = &stop, .sweeping = &sweeping};
        r[i].rng = now_ns() ^ ((uint64_t)(i + 1) * 0x9E3779B97F4A7C15ULL);
        if (pthread_create(&r[i].tid, NULL, replay_loop, &r[i]) != 0) {
            fprintf(stderr, "idem-bench: cannot start threads\n");
            exit(70);
        }
    }
    sleep_ms(PAUSE_MS); /* the replays settle first */
    nums->load_before = load_average();
    t0 = now_ns();
    pthread_create(&tid, NULL, sweep_thread, &s);
    pthread_join(tid, NULL);
    nums->load_after = load_average();
    sleep_ms(PAUSE_MS);
    atomic_store(&stop, 1);
    for (int i = 0; i < SWEEP_THREADS; i++) {
        pthread_join(r[i].tid, NULL);
        gather(&m->side[0], &quiet, &r[i].quiet, &r[i]);
        gather(&m->side[1], &during, &r[i].during, &r[i]);
        m->side[0].errors += r[i].errors;
        free(r[i].quiet.ns);
        free(r[i].during.ns);
    }
    m->side[1].seconds = nums->sweep_s;
    m->side[0].seconds = (double)(now_ns() - t0) / 1e9 - nums->sweep_s;
    summarize(&m->side[0], quiet.ns, quiet.n);
    summarize(&m->side[1], during.ns, during.n);
    free(quiet.ns);
    free(during.ns);
    return s.rc != 0 ? bench_error("sweep", s.error) : 0;
}

static void add_ratio(bench_measure *m, const char *label, const char *what, double value,
                      double target)
{
    bench_ratio *r;

    if (m->nratios == BENCH_MAX_RATIOS)
        return;
    r = &m->ratio[m->nratios++];
    *r = (bench_ratio){"", what, value, value, value, target, 0, NAN, NAN};
    snprintf(r->label, sizeof(r->label), "%s", label);
}

static const char *describe(const sweep_numbers *n)
{
    static char note[1536];
    double mb = 1024.0 * 1024.0;

    snprintf(note, sizeof(note),
             "a backlog of %ld expired records: %llu swept alone in %.1f s (%.0f rows/min); then"
             " %llu swept in %.1f s of runs (%.0f rows/min; %u runs of %d ms"
             " every %d ms, %.1f s in all; %u batches of the default size) while 4 threads"
             " replayed 10 k live keys; load average %.1f before, %.1f after.\n%-10s "
             "idem.operations heap + indexes: %.0f + %.0f MB"
             " with the backlog;"
             " %.0f + %.0f MB after the sweep and VACUUM (space reusable); %.0f + %.0f MB after"
             " VACUUM FULL.\n%-10s row size (pg_column_size): record %.0f bytes, tombstone %.0f"
             " bytes",
             BACKLOG, n->alone_rows, n->alone_s,
             n->alone_s > 0 ? (double)n->alone_rows / n->alone_s * 60 : 0, n->expired, n->sweep_s,
             n->sweep_s > 0 ? (double)n->expired / n->sweep_s * 60 : 0, n->runs, SLICE_MS,
             SLICE_MS + PAUSE_MS, n->wall_s, n->batches, n->load_before, n->load_after, "",
             (double)n->heap_before / mb, (double)n->index_before / mb, (double)n->heap_after / mb,
             (double)n->index_after / mb, (double)n->heap_full / mb, (double)n->index_full / mb, "",
             n->record_bytes, n->tombstone_bytes);
    return note;
}

/* The first half of the backlog, with the machine to itself. */
static int sweep_alone(sweep_numbers *n, PGconn *pg)
{
    idem_sweep_options opts = IDEM_SWEEP_OPTIONS_INIT;
    idem_sweep_result r = IDEM_SWEEP_RESULT_INIT;
    idem_error err = IDEM_ERROR_INIT;
    uint64_t t0 = now_ns();

    bench_say("sweep: %ld expired records swept alone", BACKLOG / 2);
    opts.max_batches = (unsigned int)(BACKLOG / 2 / opts.batch_size);
    if (idem_sweep_run(&r, pg, &opts, &err) != 0)
        return bench_error("sweep", err.message);
    n->alone_s = (double)(now_ns() - t0) / 1e9;
    n->alone_rows = r.expired;
    return 0;
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
        rc = sweep_alone(n, pg);
    if (rc == 0)
        rc = measure(m, n, store, conninfo);
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
    snprintf(m->side[0].name, sizeof(m->side[0].name), "replay between sweep runs");
    snprintf(m->side[1].name, sizeof(m->side[1].name), "replay during a sweep run");
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
    add_ratio(m, "1 M alone (rate of the first 500 k): s / 60", "time",
              n.alone_rows > 0 ? n.alone_s * (double)BACKLOG / (double)n.alone_rows / 60.0 : NAN,
              1.0);
    add_ratio(m, "1 M beside replays (rate of the rest): s / 60", "time",
              n.expired > 0 ? n.sweep_s * (double)BACKLOG / (double)n.expired / 60.0 : NAN, 0);
    add_ratio(m, "bytes per row, tombstone / record", "size",
              n.record_bytes > 0 ? n.tombstone_bytes / n.record_bytes : NAN, 0);
    return 0;
}
