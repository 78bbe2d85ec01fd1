/* idem-poolbench [PAIRS [RUNS]]: the cost of one idem_pool_acquire() + idem_pool_release()
 * pair, uncontended (1 thread, 1 connection) and contended (16 threads on 4 connections).
 * Connects with the PG* environment variables. Prints each run and the median, in
 * nanoseconds of wall time per pair (for the contended case: elapsed time divided by all
 * the pairs the threads made together). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <idem/idem.h>

#define MAX_RUNS 99

struct worker {
    idem_pool *pool;
    pthread_barrier_t *start;
    long pairs;
    int failures;
};

static double now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void *work(void *arg)
{
    struct worker *w = arg;

    pthread_barrier_wait(w->start);
    for (long i = 0; i < w->pairs; i++) {
        idem_conn *conn = NULL;

        if (idem_pool_acquire(&conn, w->pool, NULL) < 0) {
            w->failures++;
            continue;
        }
        idem_pool_release(conn);
    }
    return NULL;
}

/* One run: threads × pairs_each pairs; returns ns per pair, or -1 on failure. */
static double run_once(idem_pool *pool, int threads, long pairs_each)
{
    pthread_t tid[64];
    struct worker w[64];
    pthread_barrier_t start;
    int failures = 0;
    double t0, t1;

    pthread_barrier_init(&start, NULL, (unsigned int)threads + 1);
    for (int i = 0; i < threads; i++) {
        w[i] = (struct worker){pool, &start, pairs_each, 0};
        if (pthread_create(&tid[i], NULL, work, &w[i]) != 0)
            return -1;
    }
    pthread_barrier_wait(&start);
    t0 = now_ns();
    for (int i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        failures += w[i].failures;
    }
    t1 = now_ns();
    pthread_barrier_destroy(&start);
    if (failures > 0) {
        fprintf(stderr, "idem-poolbench: %d acquires failed\n", failures);
        return -1;
    }
    return (t1 - t0) / ((double)threads * (double)pairs_each);
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static int bench(const char *label, int threads, unsigned int connections, long pairs, int runs)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_pool *pool = NULL;
    double ns[MAX_RUNS];

    o.max_size = connections;
    o.min_idle = connections;
    o.application_name = "idem-poolbench";
    if (idem_pool_new(&pool, NULL, &o, &err) < 0) {
        fprintf(stderr, "idem-poolbench: %s\n", err.message);
        return 1;
    }
    run_once(pool, threads, pairs / threads / 10 + 1); /* warm up */
    printf("%-36s", label);
    for (int r = 0; r < runs; r++) {
        ns[r] = run_once(pool, threads, pairs / threads);
        if (ns[r] < 0) {
            idem_pool_free(pool);
            return 1;
        }
        printf(" %7.0f", ns[r]);
    }
    qsort(ns, (size_t)runs, sizeof(ns[0]), by_value);
    printf("   median %.0f ns/pair\n", ns[runs / 2]);
    idem_pool_free(pool);
    return 0;
}

/* --help and --version, as the other tools take them: 0 when one was given (and done). */
static int help_or_version(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: idem-poolbench [PAIRS>=16 [RUNS 1..%d]]\n"
               "The cost of one acquire + release pair, uncontended and contended; connects\n"
               "with the PG* environment variables.\n"
               "  -h, --help     print this help\n"
               "  -V, --version  print the version\n",
               MAX_RUNS);
        return 0;
    }
    if (argc == 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
        printf("idem-poolbench %s\n", idem_version());
        return 0;
    }
    return -1;
}

int main(int argc, char **argv)
{
    long pairs = argc > 1 ? atol(argv[1]) : 400000;
    int runs = argc > 2 ? atoi(argv[2]) : 5;
    int rc = help_or_version(argc, argv);

    if (rc >= 0)
        return rc;
    if (pairs < 16 || runs < 1 || runs > MAX_RUNS) {
        fprintf(stderr, "usage: idem-poolbench [PAIRS>=16 [RUNS 1..%d]]\n", MAX_RUNS);
        return 64;
    }
    rc = 0;
    printf("acquire+release pairs: %ld per run, %d runs (ns per pair, each run)\n", pairs, runs);
    rc |= bench("1 thread, 1 connection", 1, 1, pairs, runs);
    rc |= bench("1 thread, 4 connections", 1, 4, pairs, runs);
    rc |= bench("4 threads, 4 connections", 4, 4, pairs, runs);
    rc |= bench("16 threads, 4 connections", 16, 4, pairs, runs);
    return rc;
}
