/* The headline ratios side by side: one row per comparison the targets are about, one
 * column per thread count, so that a reader compares 1, 4 and 16 threads at a glance. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

typedef struct headline {
    const char *mode;  /* the measurement's mode */
    const char *label; /* its ratio's label (bench_ratio_throughput) */
    const char *row;   /* what the summary calls it */
} headline;

static const headline rows[] = {
    {"create", "idem callback / hand-written", "callback create / hand-written (>= 1.0)"},
    {"create", "idem callback / floor", "callback create / floor"},
    {"create", "idem declared SQL / floor", "declared create / floor (>= 0.8)"},
    {"replay", "idem (retry) / bare primary-key SELECT", "replay / primary-key read (>= 0.9)"},
    {"replay-fresh", "idem (retry) / bare primary-key SELECT",
     "fresh database: replay / read (>= 0.9)"},
};

static const bench_ratio *find_ratio(const bench_measure *m, const char *label)
{
    for (int r = 0; r < m->nratios; r++) {
        if (strcmp(m->ratio[r].label, label) == 0)
            return &m->ratio[r];
    }
    return NULL;
}

/* The thread counts the create and replay modes ran at, in their order; how many. */
static int thread_counts(const bench_results *res, int out[8])
{
    int n = 0;

    for (int i = 0; i < res->nmeasures; i++) {
        const bench_measure *m = &res->measure[i];
        int seen = 0;

        if (strcmp(m->mode, "create") != 0 && strcmp(m->mode, "replay") != 0)
            continue;
        for (int k = 0; k < n; k++)
            seen |= out[k] == m->threads;
        if (!seen && n < 8)
            out[n++] = m->threads;
    }
    return n;
}

static void print_cell(const bench_results *res, const headline *h, int threads)
{
    char cell[64] = "-";

    for (int i = 0; i < res->nmeasures; i++) {
        const bench_measure *m = &res->measure[i];
        const bench_ratio *r =
            m->threads == threads && strcmp(m->mode, h->mode) == 0 ? find_ratio(m, h->label) : NULL;

        if (r != NULL && !isnan(r->median))
            snprintf(cell, sizeof(cell), "%.2f (%.0f/%.0f) load %.1f-%.1f", r->median, r->a, r->b,
                     m->load_start, m->load_end);
    }
    printf("  %-44s", cell);
}

void bench_print_summary(const bench_results *res)
{
    int threads[8], n = thread_counts(res, threads);

    if (n == 0)
        return;
    printf("\nratios side by side: median of the per-round ratios (a/b ops/s over all rounds)"
           " and the 1-minute load average before-after the measurement; durability: %s (%s)\n",
           res->durability, res->durability_note);
    printf("%-42s", "");
    for (int k = 0; k < n; k++)
        printf("  %-44d", threads[k]);
    printf("threads\n");
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        printf("%-42s", rows[i].row);
        for (int k = 0; k < n; k++)
            print_cell(res, &rows[i], threads[k]);
        printf("\n");
    }
}
