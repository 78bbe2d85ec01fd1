/* Rounds: the threads that run one side, the rounds that alternate the sides, latencies
 * and ratios, and the measurements they fill. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>
#include <unistd.h>

#include "bench.h"

/* Samples of one side, kept across its rounds. */
typedef struct samples {
    uint64_t *ns;
    size_t n, cap;
} samples;

static uint64_t clock_ns(clockid_t clock)
{
    struct timespec ts;

    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};

    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* The PostgreSQL server whose CPU time the rounds count: its postmaster's process ID. */
static long server_pid;

void bench_watch_server(const char *data_dir)
{
    char path[1100];
    FILE *f;

    snprintf(path, sizeof(path), "%s/postmaster.pid", data_dir);
    if ((f = fopen(path, "r")) == NULL)
        return;
    if (fscanf(f, "%ld", &server_pid) != 1)
        server_pid = 0;
    fclose(f);
}

/* User + system CPU ticks of process @pid (/proc/PID/stat), with its waited-for children's
 * when @children; its parent's ID into *@ppid. -1 when it cannot be read. */
static long long process_ticks(long pid, int children, long *ppid)
{
    char path[64], line[1024];
    unsigned long long ut, st;
    long long cut, cst;
    const char *p;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    if ((f = fopen(path, "r")) == NULL)
        return -1;
    p = fgets(line, sizeof(line), f);
    fclose(f);
    if (p == NULL || (p = strrchr(line, ')')) == NULL ||
        sscanf(p + 2, "%*c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld", ppid, &ut,
               &st, &cut, &cst) != 5)
        return -1;
    return (long long)(ut + st) + (children ? cut + cst : 0);
}

/* The server's CPU time so far, in ns: its postmaster's with every child's, those that
 * ended (the postmaster waited for them) and those still running; 0 when no server is
 * watched (bench_watch_server()) or it is not on this machine. */
static double server_ns(void)
{
    long long ticks;
    long ppid;
    DIR *d;
    const struct dirent *e;

    if (server_pid <= 0 || (ticks = process_ticks(server_pid, 1, &ppid)) < 0 ||
        (d = opendir("/proc")) == NULL)
        return 0;
    while ((e = readdir(d)) != NULL) {
        long pid = strtol(e->d_name, NULL, 10), parent = 0;
        long long t;

        if (pid > 0 && (t = process_ticks(pid, 0, &parent)) >= 0 && parent == server_pid)
            ticks += t;
    }
    closedir(d);
    return (double)ticks * 1e9 / (double)sysconf(_SC_CLK_TCK);
}

uint64_t bench_random(bench_worker *w, uint64_t n)
{
    /* xorshift64*: plenty for picking keys, and no lock between threads. */
    w->rng ^= w->rng >> 12;
    w->rng ^= w->rng << 25;
    w->rng ^= w->rng >> 27;
    return (w->rng * 0x2545F4914F6CDD1DULL) % n;
}

int bench_fail(bench_worker *w, const char *fmt, ...)
{
    va_list ap;

    if (w->errors == 0) {
        va_start(ap, fmt);
        vsnprintf(w->error, sizeof(w->error), fmt, ap);
        va_end(ap);
    }
    w->errors++;
    return -1;
}

static int push(uint64_t **buf, size_t *n, size_t *cap, uint64_t v)
{
    if (*n == *cap) {
        size_t grown = *cap ? *cap * 2 : 4096;
        uint64_t *p = realloc(*buf, grown * sizeof(*p));

        if (p == NULL)
            return -1;
        *buf = p;
        *cap = grown;
    }
    (*buf)[(*n)++] = v;
    return 0;
}

static void *work(void *arg)
{
    bench_worker *w = arg;
    uint64_t cpu0;

    pthread_barrier_wait(w->start);
    cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    while (!atomic_load_explicit(w->stop, memory_order_relaxed)) {
        uint64_t t0 = now_ns();
        int rc = w->side->op(w);
        uint64_t t1 = now_ns();

        if (rc == 0 && push(&w->lat_ns, &w->nlat, &w->cap, t1 - t0) != 0)
            bench_fail(w, "out of memory recording latencies");
        if (w->errors > 1000) /* something is broken; no point spinning */
            break;
    }
    w->cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    return NULL;
}

static int by_value(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted samples, in milliseconds. */
static double percentile_ms(const uint64_t *sorted, size_t n, double p)
{
    size_t rank = (size_t)ceil(p * (double)n);

    if (n == 0)
        return 0;
    return (double)sorted[rank > 0 ? rank - 1 : 0] / 1e6;
}

/* Collect the workers' samples into all (kept) and return this round's p50. */
static double gather(samples *all, bench_worker *w, int threads, bench_side_result *r)
{
    size_t first = all->n;

    for (int i = 0; i < threads; i++) {
        for (size_t j = 0; j < w[i].nlat; j++)
            push(&all->ns, &all->n, &all->cap, w[i].lat_ns[j]);
        r->ops += (long long)w[i].nlat;
        r->cpu_ns += (double)w[i].cpu_ns;
        if (w[i].errors > 0 && r->errors == 0)
            snprintf(r->first_error, sizeof(r->first_error), "%s", w[i].error);
        r->errors += w[i].errors;
        free(w[i].lat_ns);
    }
    qsort(all->ns + first, all->n - first, sizeof(uint64_t), by_value);
    return percentile_ms(all->ns + first, all->n - first, 0.5);
}

/* One round of one side on @threads threads for @seconds; returns the elapsed seconds and
 * adds the server's CPU time over them to *@busy_ns. Exits when the threads cannot
 * start (some already wait on the barrier). */
static double round_once(bench_worker *w, const bench_side *side, int threads, double seconds,
                         double *busy_ns)
{
    double busy0;
    pthread_t tid[BENCH_MAX_THREADS];
    pthread_barrier_t start;
    atomic_int stop = 0;
    uint64_t t0, t1;
    int started = 0;

    pthread_barrier_init(&start, NULL, (unsigned int)threads + 1);
    for (int i = 0; i < threads; i++) {
        w[i] = (bench_worker){side, i, 0, &stop, &start, NULL, 0, 0, 0, 0, ""};
        w[i].rng = now_ns() ^ ((uint64_t)(i + 1) * 0x9E3779B97F4A7C15ULL);
        if (pthread_create(&tid[i], NULL, work, &w[i]) != 0)
            break;
        started++;
    }
    if (started < threads) {
        fprintf(stderr, "idem-bench: cannot start %d threads\n", threads);
        exit(70);
    }
    pthread_barrier_wait(&start);
    t0 = now_ns();
    busy0 = server_ns();
    sleep_s(seconds);
    atomic_store(&stop, 1);
    for (int i = 0; i < threads; i++)
        pthread_join(tid[i], NULL);
    t1 = now_ns();
    *busy_ns += server_ns() - busy0;
    pthread_barrier_destroy(&start);
    return (double)(t1 - t0) / 1e9;
}

static void record_round(bench_side_result *r, samples *all, bench_worker *w, int threads,
                         double elapsed)
{
    long long before = r->ops;
    double p50 = gather(all, w, threads, r);

    if (r->nrounds < BENCH_MAX_ROUNDS) {
        r->round_ops_per_s[r->nrounds] = (double)(r->ops - before) / elapsed;
        r->round_p50_ms[r->nrounds] = p50;
        r->nrounds++;
    }
    r->seconds += elapsed;
}

static void summarize(bench_side_result *r, samples *all)
{
    qsort(all->ns, all->n, sizeof(uint64_t), by_value);
    r->ops_per_s = r->seconds > 0 ? (double)r->ops / r->seconds : 0;
    r->cpu_us_per_op = r->ops > 0 ? r->cpu_ns / 1e3 / (double)r->ops : 0;
    r->server_us_per_op = r->ops > 0 ? r->server_ns / 1e3 / (double)r->ops : 0;
    r->p50_ms = percentile_ms(all->ns, all->n, 0.5);
    r->p99_ms = percentile_ms(all->ns, all->n, 0.99);
    r->p999_ms = percentile_ms(all->ns, all->n, 0.999);
}

static void warm_up(bench_worker *w, const bench_plan *plan)
{
    for (int s = 0; s < plan->nsides; s++) {
        double ignored = 0;

        round_once(w, &plan->sides[s], plan->threads, plan->warmup_s, &ignored);
        for (int i = 0; i < plan->threads; i++) {
            if (w[i].errors > 0)
                fprintf(stderr, "idem-bench: warm-up of %s: %s\n", plan->sides[s].name, w[i].error);
            free(w[i].lat_ns);
        }
    }
}

int bench_run(bench_measure *out, const bench_plan *plan)
{
    bench_worker w[BENCH_MAX_THREADS];
    samples all[BENCH_MAX_SIDES] = {{0}};
    int cycles = (int)lround(plan->seconds / (plan->round_s * plan->nsides));

    if (cycles < 2)
        cycles = 2;
    if (cycles > BENCH_MAX_ROUNDS)
        cycles = BENCH_MAX_ROUNDS;
    out->nsides = plan->nsides;
    out->threads = plan->threads;
    for (int s = 0; s < plan->nsides; s++)
        snprintf(out->side[s].name, sizeof(out->side[s].name), "%s", plan->sides[s].name);
    getloadavg(&out->load_start, 1);
    warm_up(w, plan);
    for (int c = 0; c < cycles; c++) {
        for (int s = 0; s < plan->nsides; s++) {
            PGresult *before = bench_statements_snapshot();
            double elapsed = round_once(w, &plan->sides[s], plan->threads, plan->round_s,
                                        &out->side[s].server_ns);

            bench_statements_add(&out->side[s].stmts, before, bench_statements_snapshot());
            record_round(&out->side[s], &all[s], w, plan->threads, elapsed);
        }
    }
    for (int s = 0; s < plan->nsides; s++) {
        summarize(&out->side[s], &all[s]);
        bench_statements_sort(&out->side[s].stmts);
        free(all[s].ns);
    }
    getloadavg(&out->load_end, 1);
    return 0;
}

static int by_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static bench_ratio *add_ratio(bench_measure *m, const double *a, const double *b, int n,
                              const char *label, const char *what, double target, int at_least)
{
    double r[BENCH_MAX_ROUNDS];
    bench_ratio *out;
    int k = 0;

    if (m->nratios == BENCH_MAX_RATIOS)
        return NULL;
    for (int i = 0; i < n; i++) {
        if (b[i] > 0)
            r[k++] = a[i] / b[i];
    }
    out = &m->ratio[m->nratios++];
    *out = (bench_ratio){"", what, NAN, NAN, NAN, target, at_least, NAN, NAN};
    snprintf(out->label, sizeof(out->label), "%s", label);
    if (k == 0)
        return out;
    qsort(r, (size_t)k, sizeof(double), by_double);
    out->median = k % 2 ? r[k / 2] : (r[k / 2 - 1] + r[k / 2]) / 2;
    out->min = r[0];
    out->max = r[k - 1];
    return out;
}

static int common_rounds(const bench_measure *m, int a, int b)
{
    int n = m->side[a].nrounds;

    return m->side[b].nrounds < n ? m->side[b].nrounds : n;
}

void bench_ratio_throughput(bench_measure *m, int a, int b, const char *label, double target)
{
    bench_ratio *r = add_ratio(m, m->side[a].round_ops_per_s, m->side[b].round_ops_per_s,
                               common_rounds(m, a, b), label, "throughput", target, 1);

    if (r != NULL) {
        r->a = m->side[a].ops_per_s;
        r->b = m->side[b].ops_per_s;
    }
}

void bench_ratio_p50(bench_measure *m, int a, int b, const char *label, double target)
{
    bench_ratio *r = add_ratio(m, m->side[a].round_p50_ms, m->side[b].round_p50_ms,
                               common_rounds(m, a, b), label, "p50 latency", target, 0);

    if (r != NULL) {
        r->a = m->side[a].p50_ms;
        r->b = m->side[b].p50_ms;
    }
}

bench_measure *bench_results_add(bench_results *res, const char *mode, int threads,
                                 const char *note)
{
    bench_measure *m;

    if (res->nmeasures == BENCH_MAX_MEASURES)
        return NULL;
    m = &res->measure[res->nmeasures++];
    memset(m, 0, sizeof(*m));
    m->mode = mode;
    m->threads = threads;
    m->note = note;
    return m;
}
