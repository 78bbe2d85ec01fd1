/* Samples of the process's RSS (/proc/self/statm) and of the server's connections
 * (pg_stat_activity) over a run. Connections never exceed what the pools allow (plus a
 * little for backends still exiting); in a soak run, RSS must level off. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault.h"

/* The pools' max_size together (fault_run.c), and slack for backends still exiting. */
#define WORK_CONNS_MAX  (2 * 6 + 6)
#define OTHER_CONNS_MAX 4 /* injector, sampler, checker, one spare */

typedef struct sample {
    uint64_t t_ms;
    long rss_kib;
    int work_conns; /* the workload's backends; -1 when the server did not answer */
    int all_conns;  /* every client backend */
} sample;

struct fault_sampler {
    fault_run *run;
    pthread_t thread;
    atomic_int stop;
    fault_side side;
    uint64_t start_ms;
    sample *samples;
    size_t n, cap;
};

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;

    if (f == NULL)
        return -1;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void count_conns(fault_sampler *s, sample *out)
{
    PGresult *res =
        fault_side_exec(&s->side,
                        "SELECT count(*) FILTER (WHERE application_name LIKE '" FAULT_APP_WORK
                        "%'), count(*) FROM pg_stat_activity"
                        " WHERE backend_type = 'client backend'",
                        0, NULL);

    out->work_conns = out->all_conns = -1;
    if (res != NULL && PQntuples(res) == 1) {
        out->work_conns = atoi(PQgetvalue(res, 0, 0));
        out->all_conns = atoi(PQgetvalue(res, 0, 1));
    }
    PQclear(res);
}

static void take_sample(fault_sampler *s)
{
    sample *x;

    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        sample *grown = realloc(s->samples, cap * sizeof(*grown));

        if (grown == NULL)
            return;
        s->samples = grown;
        s->cap = cap;
    }
    x = &s->samples[s->n++];
    x->t_ms = fault_now_ms() - s->start_ms;
    x->rss_kib = rss_kib();
    count_conns(s, x);
    if (s->run->cfg.soak && s->n % 15 == 1)
        fprintf(stderr, "fault soak: t=%4llus rss=%ld KiB work_conns=%d client_conns=%d\n",
                (unsigned long long)(x->t_ms / 1000), x->rss_kib, x->work_conns, x->all_conns);
}

static void *sampler_main(void *p)
{
    fault_sampler *s = p;

    while (!atomic_load(&s->stop)) {
        take_sample(s);
        for (unsigned int waited = 0; waited < s->run->cfg.sample_ms && !atomic_load(&s->stop);
             waited += 50)
            fault_sleep_ms(50);
    }
    take_sample(s);
    fault_side_close(&s->side);
    return NULL;
}

fault_sampler *fault_sampler_start(fault_run *run)
{
    fault_sampler *s = calloc(1, sizeof(*s));

    if (s == NULL)
        abort();
    s->run = run;
    s->start_ms = fault_now_ms();
    fault_side_init(&s->side, run->conninfo, FAULT_APP_SAMPLE);
    if (pthread_create(&s->thread, NULL, sampler_main, s) != 0)
        abort();
    return s;
}

static int by_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;

    return (x > y) - (x < y);
}

/* The median RSS of the samples in [from, to). */
static long median_rss(const fault_sampler *s, size_t from, size_t to)
{
    long *v = malloc((to - from) * sizeof(*v)), m;

    if (v == NULL)
        abort();
    for (size_t i = from; i < to; i++)
        v[i - from] = s->samples[i].rss_kib;
    qsort(v, to - from, sizeof(*v), by_long);
    m = v[(to - from) / 2];
    free(v);
    return m;
}

/* RSS after warm-up (the second fifth of the run) against its last fifth. A soak makes
 * some 100 calls a second: a leak of 100 bytes a call adds 4 MiB within seven minutes. */
static void judge_rss(const fault_sampler *s, fault_run *run)
{
    size_t fifth = s->n / 5;
    long early, late, allowed;

    if (fifth < 3)
        return;
    early = median_rss(s, fifth, 2 * fifth);
    late = median_rss(s, s->n - fifth, s->n);
    allowed = early / 10 > 4096 ? early / 10 : 4096;
    fprintf(stderr,
            "fault soak: rss median %ld KiB after warm-up, %ld KiB at the end (+%ld KiB"
            " allowed)\n",
            early, late, allowed);
    if (late - early > allowed)
        fault_violation(run, "RSS grew from %ld KiB to %ld KiB over the run", early, late);
}

static void judge_conns(const fault_sampler *s, fault_run *run)
{
    int work = 0, all = 0;
    long rss_max = 0;
    size_t down = 0;

    for (size_t i = 0; i < s->n; i++) {
        down += s->samples[i].all_conns < 0;
        work = s->samples[i].work_conns > work ? s->samples[i].work_conns : work;
        all = s->samples[i].all_conns > all ? s->samples[i].all_conns : all;
        rss_max = s->samples[i].rss_kib > rss_max ? s->samples[i].rss_kib : rss_max;
    }
    fprintf(stderr,
            "fault suite: %zu samples (%zu while the server was down): max work_conns=%d"
            " client_conns=%d rss=%ld KiB\n",
            s->n, down, work, all, rss_max);
    if (work > WORK_CONNS_MAX || all > WORK_CONNS_MAX + OTHER_CONNS_MAX)
        fault_violation(run, "connections beyond the pools' bounds: workload %d, all clients %d",
                        work, all);
}

void fault_sampler_stop(fault_sampler *s, fault_run *run)
{
    if (s == NULL)
        return;
    atomic_store(&s->stop, 1);
    pthread_join(s->thread, NULL);
    judge_conns(s, run);
    if (run->cfg.soak)
        judge_rss(s, run);
    free(s->samples);
    free(s);
}
