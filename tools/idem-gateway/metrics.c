/* The metrics registry: labelled series in one list under a mutex (few: a series per
 * configured tool and label value), gauges as atomics; rendered on each scrape. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "budget.h"
#include "metrics.h"

static const double buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                 0.25,  0.5,    1,     2.5,  5,     10,   30};
#define NBUCKETS (sizeof(buckets) / sizeof(buckets[0]))

/* The labelled families, in the order they are rendered. */
enum family { REQUESTS, CALLS, DURATION, UPSTREAM, NFAMILIES };

typedef struct series {
    struct series *next;
    enum family family;
    char tool[72];
    char label[32]; /* the second label's value (code, status, outcome); "" for DURATION */
    unsigned long long count;
    double sum;                           /* DURATION */
    unsigned long long buckets[NBUCKETS]; /* DURATION: per bucket, not cumulative */
} series;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static series *all;
static atomic_long in_flight, connections_open;
static atomic_ullong refused, reloads_ok, reloads_failed;
static atomic_int ready, last_reload_ok = 1;
static _Atomic double start_time, last_reload_time;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The series, made when first seen; NULL when out of memory. Called with the lock held. */
static series *find(enum family f, const char *tool, const char *label)
{
    series *s;

    for (s = all; s != NULL; s = s->next) {
        if (s->family == f && strcmp(s->tool, tool) == 0 && strcmp(s->label, label) == 0)
            return s;
    }
    if ((s = calloc(1, sizeof(*s))) == NULL)
        return NULL;
    s->family = f;
    snprintf(s->tool, sizeof(s->tool), "%s", tool);
    snprintf(s->label, sizeof(s->label), "%s", label);
    s->next = all;
    all = s;
    return s;
}

static void count(enum family f, const char *tool, const char *label)
{
    series *s;

    pthread_mutex_lock(&lock);
    if ((s = find(f, tool, label)) != NULL)
        s->count++;
    pthread_mutex_unlock(&lock);
}

void gw_metrics_started(void)
{
    start_time = now_s();
}

void gw_metrics_request(const char *tool, unsigned int code, double seconds)
{
    char text[16], *at = text + sizeof(text) - 1;
    series *s;
    size_t i = 0;

    *at = '\0'; /* the code in decimal, as printf's %u writes it, a call less */
    do
        *--at = (char)('0' + code % 10);
    while ((code /= 10) > 0);
    pthread_mutex_lock(&lock);
    if ((s = find(REQUESTS, tool, at)) != NULL)
        s->count++;
    if (seconds >= 0 && (s = find(DURATION, tool, "")) != NULL) {
        while (i < NBUCKETS && seconds > buckets[i])
            i++;
        if (i < NBUCKETS)
            s->buckets[i]++;
        s->count++;
        s->sum += seconds;
    }
    pthread_mutex_unlock(&lock);
}

void gw_metrics_call(const char *tool, const char *status)
{
    count(CALLS, tool, status);
}

void gw_metrics_in_flight(int delta)
{
    atomic_fetch_add(&in_flight, delta);
}

void gw_metrics_upstream(const char *tool, const char *outcome)
{
    count(UPSTREAM, tool, outcome);
}

void gw_metrics_reload(int ok, double when)
{
    atomic_fetch_add(ok ? &reloads_ok : &reloads_failed, 1);
    last_reload_ok = ok;
    last_reload_time = when;
}

void gw_metrics_config_loaded(double when)
{
    last_reload_ok = 1;
    last_reload_time = when;
}

void gw_metrics_connection(int delta)
{
    atomic_fetch_add(&connections_open, delta);
}

void gw_metrics_refused(void)
{
    atomic_fetch_add(&refused, 1);
}

void gw_metrics_ready(int r)
{
    ready = r;
}

/* A label value as the text format wants it: \\, \" and \n escaped. */
static void label(FILE *f, const char *value)
{
    for (; *value != '\0'; value++) {
        if (*value == '\\' || *value == '"')
            fprintf(f, "\\%c", *value);
        else if (*value == '\n')
            fputs("\\n", f);
        else
            fputc(*value, f);
    }
}

static void histogram(FILE *f, const series *s)
{
    unsigned long long cumulative = 0;

    for (size_t i = 0; i < NBUCKETS; i++) {
        cumulative += s->buckets[i];
        fputs("idem_gateway_request_duration_seconds_bucket{tool=\"", f);
        label(f, s->tool);
        fprintf(f, "\",le=\"%g\"} %llu\n", buckets[i], cumulative);
    }
    fputs("idem_gateway_request_duration_seconds_bucket{tool=\"", f);
    label(f, s->tool);
    fprintf(f, "\",le=\"+Inf\"} %llu\n", s->count);
    fputs("idem_gateway_request_duration_seconds_sum{tool=\"", f);
    label(f, s->tool);
    fprintf(f, "\"} %.6f\n", s->sum);
    fputs("idem_gateway_request_duration_seconds_count{tool=\"", f);
    label(f, s->tool);
    fprintf(f, "\"} %llu\n", s->count);
}

static const char *const family_head[NFAMILIES][3] = {
    {"idem_gateway_requests_total", "counter", "code"},
    {"idem_gateway_calls_total", "counter", "status"},
    {"idem_gateway_request_duration_seconds", "histogram", NULL},
    {"idem_gateway_upstream_total", "counter", "outcome"},
};

static const char *const family_help[NFAMILIES] = {
    "HTTP requests answered, by tool and status code.",
    "Tool calls, by tool and idem status.",
    "Time from a request's headers to its answer, by tool.",
    "Upstream outcomes of http tools: sent, timeout, error, unknown.",
};

static void labelled(FILE *f)
{
    for (int fam = 0; fam < NFAMILIES; fam++) {
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", family_head[fam][0], family_help[fam],
                family_head[fam][0], family_head[fam][1]);
        for (const series *s = all; s != NULL; s = s->next) {
            if ((int)s->family != fam)
                continue;
            if (s->family == DURATION) {
                histogram(f, s);
                continue;
            }
            fprintf(f, "%s{tool=\"", family_head[fam][0]);
            label(f, s->tool);
            fprintf(f, "\",%s=\"", family_head[fam][2]);
            label(f, s->label);
            fprintf(f, "\"} %llu\n", s->count);
        }
    }
}

static void gauge(FILE *f, const char *name, const char *type, const char *help, double value)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, value);
}

static void pool(FILE *f, const idem_pool_stats *stats, unsigned int pool_size)
{
    fputs("# HELP idem_gateway_pool_connections Database connections of the pool, by state.\n"
          "# TYPE idem_gateway_pool_connections gauge\n",
          f);
    fprintf(f, "idem_gateway_pool_connections{state=\"idle\"} %u\n", stats->idle);
    fprintf(f, "idem_gateway_pool_connections{state=\"busy\"} %u\n", stats->in_use);
    gauge(f, "idem_gateway_pool_size", "gauge", "The pool's configured maximum.", pool_size);
}

static void reloads(FILE *f)
{
    fputs("# HELP idem_gateway_config_reloads_total Reloads of the configuration (SIGHUP).\n"
          "# TYPE idem_gateway_config_reloads_total counter\n",
          f);
    fprintf(f, "idem_gateway_config_reloads_total{result=\"ok\"} %llu\n",
            (unsigned long long)reloads_ok);
    fprintf(f, "idem_gateway_config_reloads_total{result=\"failed\"} %llu\n",
            (unsigned long long)reloads_failed);
    gauge(f, "idem_gateway_config_last_reload_success", "gauge",
          "1 when the last reload (or the start) loaded its file, else 0.", last_reload_ok);
    gauge(f, "idem_gateway_config_last_reload_timestamp_seconds", "gauge",
          "When the configuration was last loaded or a reload last tried.", last_reload_time);
}

/* One budget's series (budget.h), per tenant. */
static void budget_series(void *arg, const char *tenant, gw_budget_kind kind,
                          unsigned long long taken, unsigned long long over)
{
    FILE *f = arg;
    const char *names[] = {"idem_gateway_budget_taken_total", "idem_gateway_budget_refused_total"};
    unsigned long long values[] = {taken, over};

    for (int i = 0; i < 2; i++) {
        fprintf(f, "%s{tenant=\"", names[i]);
        label(f, tenant);
        fprintf(f, "\",budget=\"%s\"} %llu\n", gw_budget_name(kind), values[i]);
    }
}

static void budgets(FILE *f)
{
    fputs("# HELP idem_gateway_budget_taken_total Tokens taken from tenants' budgets, by tenant "
          "and budget (calls, new_operations).\n"
          "# TYPE idem_gateway_budget_taken_total counter\n"
          "# HELP idem_gateway_budget_refused_total Calls refused over a tenant's budget (429), "
          "by tenant and budget.\n"
          "# TYPE idem_gateway_budget_refused_total counter\n",
          f);
    gw_budget_each(budget_series, f);
}

static void gauges(FILE *f, const idem_pool_stats *stats, unsigned int pool_size)
{
    gauge(f, "idem_gateway_calls_in_flight", "gauge", "Tool calls under way.", (double)in_flight);
    pool(f, stats, pool_size);
    reloads(f);
    gauge(f, "idem_gateway_connections_open", "gauge", "Client connections open.",
          (double)connections_open);
    gauge(f, "idem_gateway_connections_refused_total", "counter",
          "Connections refused over http.max_connections.", (double)refused);
    gauge(f, "idem_gateway_ready", "gauge", "The last readiness check (/readyz): 1 or 0.", ready);
    gauge(f, "idem_gateway_start_time_seconds", "gauge", "When the process started.", start_time);
    fprintf(f,
            "# HELP idem_gateway_build_info The gateway's version.\n"
            "# TYPE idem_gateway_build_info gauge\n"
            "idem_gateway_build_info{version=\"%s\"} 1\n",
            idem_version());
}

char *gw_metrics_render(const idem_pool_stats *stats, unsigned int pool_size)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    if (f == NULL)
        return NULL;
    pthread_mutex_lock(&lock);
    labelled(f);
    pthread_mutex_unlock(&lock);
    budgets(f);
    gauges(f, stats, pool_size);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

void gw_metrics_free(void)
{
    pthread_mutex_lock(&lock);
    while (all != NULL) {
        series *next = all->next;

        free(all);
        all = next;
    }
    pthread_mutex_unlock(&lock);
}
