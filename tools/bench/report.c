/* The report: a plain table, or JSON (--json). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static const char *verdict(const bench_ratio *r)
{
    if (r->target <= 0 || isnan(r->median))
        return "";
    if (r->at_least)
        return r->median >= r->target ? "met" : "MISSED";
    return r->median <= r->target ? "met" : "MISSED";
}

static void print_header(const bench_results *res, const bench_config *cfg)
{
    printf("idem-bench %s: PostgreSQL %s on the same machine; %ld CPUs (%s)\n", idem_version(),
           res->server_version, res->cpus, res->cpu_model);
    printf("durability: %s (%s); data directory %s on %s\n", res->durability, res->durability_note,
           res->data_dir, res->data_fs);
    printf("%.0f s per measurement in rounds of %.2g s that alternate the sides (A B A B ...);"
           " pools of min(threads, %d) connections, statement_timeout_ms %u;\nlatencies in ms;"
           " cpu us: the client's CPU"
           " time (user + system) per operation; server us: the PostgreSQL server's CPU"
           " time (postmaster and backends) per operation\n\n",
           cfg->duration_s, cfg->round_s, cfg->pool_cap, cfg->statement_timeout_ms);
    printf("%-12s %3s  %-38s %9s %8s %8s %8s %8s %10s %6s\n", "mode", "thr", "side", "ops/s", "p50",
           "p99", "p99.9", "cpu us", "server us", "errors");
}

static void print_sides(const bench_measure *m)
{
    for (int s = 0; s < m->nsides; s++) {
        const bench_side_result *r = &m->side[s];

        printf("%-12s %3d  %-38s %9.0f %8.3f %8.3f %8.3f %8.1f %10.1f %6lld\n", m->mode, m->threads,
               r->name, r->ops_per_s, r->p50_ms, r->p99_ms, r->p999_ms, r->cpu_us_per_op,
               r->server_us_per_op, r->errors);
        if (r->errors > 0)
            printf("%16s first error: %s\n", "", r->first_error);
    }
}

/* The two sides' numbers beside their ratio: "3607 / 2608" ops/s, "0.274 / 0.310" ms. */
static void format_pair(char *buf, size_t size, const bench_ratio *r)
{
    if (isnan(r->a) || isnan(r->b))
        snprintf(buf, size, "-");
    else if (strcmp(r->what, "throughput") == 0)
        snprintf(buf, size, "%.0f / %.0f", r->a, r->b);
    else
        snprintf(buf, size, "%.3f / %.3f ms", r->a, r->b);
}

static void print_ratio(const bench_measure *m, const bench_ratio *r)
{
    char target[32] = "", pair[48];

    if (r->target > 0)
        snprintf(target, sizeof(target), "target %s %.2f", r->at_least ? ">=" : "<=", r->target);
    format_pair(pair, sizeof(pair), r);
    printf("%-12s %3d  %-54s %-11s %19s  %5.2f [%.2f-%.2f]  %-14s %s\n", m->mode, m->threads,
           r->label, r->what, pair, r->median, r->min, r->max, target, verdict(r));
}

static void print_invariant(const bench_measure *m)
{
    const bench_invariant *inv = &m->invariant;

    printf("%-12s %3d  invariant: tasks %lld, operations %lld, distinct keys %lld, created %lld"
           " (replayed %lld, retried %lld, keys created twice %lld): %s\n",
           m->mode, m->threads, inv->tasks, inv->operations, inv->distinct_keys, inv->created,
           inv->replayed, inv->retried, inv->twice_created, inv->pass ? "PASS" : "FAIL");
    printf("%-12s %3d  inside the store: %lld serialization retries, %lld claim races\n", m->mode,
           m->threads, inv->serialization_retries, inv->claim_races);
}

/* What each mode's sides are, once per mode. */
static void print_notes(const bench_results *res)
{
    const char *last = "";

    printf("\n");
    for (int i = 0; i < res->nmeasures; i++) {
        const bench_measure *m = &res->measure[i];

        if (strcmp(m->mode, last) != 0)
            printf("%-12s %s\n", m->mode, m->note);
        last = m->mode;
    }
}

/* With --statements: each side's statements, per operation (pg_stat_statements' execution
 * time: not the protocol, parsing or the transaction's start and end around them). */
static void print_statements(const bench_results *res)
{
    int header = 0;

    for (int i = 0; i < res->nmeasures; i++) {
        const bench_measure *m = &res->measure[i];

        for (int s = 0; s < m->nsides; s++) {
            const bench_side_result *r = &m->side[s];
            double sum = 0;

            if (r->stmts.n == 0 || r->ops == 0)
                continue;
            if (!header)
                printf("\nstatements (pg_stat_statements): per operation, executions and the"
                       " server's execution time in microseconds; then each statement's own\n");
            header = 1;
            for (int k = 0; k < r->stmts.n; k++)
                sum += r->stmts.items[k].ms * 1e3 / (double)r->ops;
            printf("%-12s %3d  %s: %.1f us per operation in %d statements\n", m->mode, m->threads,
                   r->name, sum, r->stmts.n);
            for (int k = 0; k < r->stmts.n; k++) {
                const bench_stmt *st = &r->stmts.items[k];

                printf("%18s %6.2f x %7.1f us = %7.1f us  %.160s\n", "", st->calls / (double)r->ops,
                       st->ms * 1e3 / st->calls, st->ms * 1e3 / (double)r->ops, st->query);
            }
        }
    }
}

void bench_print_table(const bench_results *res, const bench_config *cfg)
{
    print_header(res, cfg);
    for (int i = 0; i < res->nmeasures; i++)
        print_sides(&res->measure[i]);
    print_notes(res);
    printf("\nratios: a / b over all rounds, then the median of the per-round ratios [min-max over"
           " the rounds]; checks\n");
    for (int i = 0; i < res->nmeasures; i++) {
        const bench_measure *m = &res->measure[i];

        for (int r = 0; r < m->nratios; r++)
            print_ratio(m, &m->ratio[r]);
        if (m->invariant.present)
            print_invariant(m);
    }
    bench_print_summary(res);
    print_statements(res);
    printf("\ntotal time %.0f s\n", res->total_s);
}

/* ---- JSON ---------------------------------------------------------------------------- */

static json_t *statements_json(const bench_side_result *r)
{
    json_t *list = json_array();

    for (int k = 0; k < r->stmts.n && r->ops > 0; k++) {
        const bench_stmt *st = &r->stmts.items[k];

        json_array_append_new(list, json_pack("{s:s, s:f, s:f, s:f}", "query", st->query,
                                              "calls_per_op", st->calls / (double)r->ops,
                                              "us_per_call", st->ms * 1e3 / st->calls, "us_per_op",
                                              st->ms * 1e3 / (double)r->ops));
    }
    return list;
}

static json_t *side_json(const bench_side_result *r)
{
    json_t *rounds = json_array(), *o;

    for (int i = 0; i < r->nrounds; i++)
        json_array_append_new(rounds, json_real(r->round_ops_per_s[i]));
    o = json_pack("{s:s, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:o, s:s?}", "side", r->name,
                  "ops", (json_int_t)r->ops, "errors", (json_int_t)r->errors, "seconds", r->seconds,
                  "ops_per_s", r->ops_per_s, "p50_ms", r->p50_ms, "p99_ms", r->p99_ms, "p999_ms",
                  r->p999_ms, "client_cpu_us_per_op", r->cpu_us_per_op, "server_cpu_us_per_op",
                  r->server_us_per_op, "round_ops_per_s", rounds, "first_error",
                  r->errors > 0 ? r->first_error : NULL);
    if (o != NULL && r->stmts.n > 0)
        json_object_set_new(o, "statements", statements_json(r));
    return o;
}

/* A number, or null when there is none (no rounds to take a ratio of). */
static json_t *number(double x)
{
    return isnan(x) ? json_null() : json_real(x);
}

static json_t *ratio_json(const bench_ratio *r)
{
    json_t *o = json_pack("{s:s, s:s, s:o, s:o, s:o, s:o, s:o}", "ratio", r->label, "of", r->what,
                          "a", number(r->a), "b", number(r->b), "median", number(r->median), "min",
                          number(r->min), "max", number(r->max));

    if (o != NULL && r->target > 0) {
        json_object_set_new(o, "target", json_real(r->target));
        json_object_set_new(o, "target_is", json_string(r->at_least ? "minimum" : "maximum"));
        json_object_set_new(o, "met", json_boolean(verdict(r)[0] == 'm'));
    }
    return o;
}

static json_t *invariant_json(const bench_invariant *inv)
{
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b}", "tasks",
                     (json_int_t)inv->tasks, "operations", (json_int_t)inv->operations,
                     "distinct_keys", (json_int_t)inv->distinct_keys, "created",
                     (json_int_t)inv->created, "replayed", (json_int_t)inv->replayed, "retried",
                     (json_int_t)inv->retried, "keys_created_twice", (json_int_t)inv->twice_created,
                     "serialization_retries", (json_int_t)inv->serialization_retries, "claim_races",
                     (json_int_t)inv->claim_races, "pass", inv->pass);
}

static json_t *measure_json(const bench_measure *m)
{
    json_t *sides = json_array(), *ratios = json_array();
    json_t *o;

    for (int s = 0; s < m->nsides; s++)
        json_array_append_new(sides, side_json(&m->side[s]));
    for (int r = 0; r < m->nratios; r++)
        json_array_append_new(ratios, ratio_json(&m->ratio[r]));
    o = json_pack("{s:s, s:s, s:i, s:o, s:o, s:[f, f]}", "mode", m->mode, "note", m->note,
                  "threads", m->threads, "sides", sides, "ratios", ratios, "load_average",
                  m->load_start, m->load_end);
    if (o != NULL && m->invariant.present)
        json_object_set_new(o, "invariant", invariant_json(&m->invariant));
    return o;
}

int bench_print_json(const bench_results *res, const bench_config *cfg)
{
    json_t *measures = json_array(), *doc;
    char *text;

    for (int i = 0; i < res->nmeasures; i++)
        json_array_append_new(measures, measure_json(&res->measure[i]));
    doc = json_pack("{s:s, s:{s:s, s:s, s:s, s:s, s:s, s:I, s:s}, s:{s:f, s:f, s:b, s:i}, s:o,"
                    " s:f}",
                    "idem_version", idem_version(), "machine", "postgresql", res->server_version,
                    "durability", res->durability, "durability_note", res->durability_note,
                    "data_directory", res->data_dir, "data_file_system", res->data_fs, "cpus",
                    (json_int_t)res->cpus, "cpu_model", res->cpu_model, "settings", "duration_s",
                    cfg->duration_s, "round_s", cfg->round_s, "large", cfg->large, "pool_cap",
                    cfg->pool_cap, "results", measures, "total_s", res->total_s);
    text = doc != NULL ? json_dumps(doc, JSON_INDENT(2) | JSON_REAL_PRECISION(6)) : NULL;
    json_decref(doc);
    if (text == NULL)
        return bench_error("json", "out of memory");
    printf("%s\n", text);
    free(text);
    return 0;
}
