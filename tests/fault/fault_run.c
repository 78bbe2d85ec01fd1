/* A run of the fault suite: its configuration, the workload's pools and stores, the ops
 * of each epoch, the violations found, and the summary line. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "fault.h"

static unsigned int env_uint(const char *name, unsigned int fallback)
{
    const char *v = getenv(name);
    char *end = NULL;
    unsigned long n;

    if (v == NULL || *v == '\0')
        return fallback;
    n = strtoul(v, &end, 10);
    return end != NULL && *end == '\0' && n > 0 && n < 1000000 ? (unsigned int)n : fallback;
}

void fault_config_from_env(fault_config *cfg)
{
    const char *seed = getenv("IDEM_FAULT_SEED");

    cfg->threads = env_uint("IDEM_FAULT_THREADS", 8);
    cfg->seconds = env_uint("IDEM_FAULT_SECONDS", 18);
    cfg->soak = cfg->seconds > 60;
    cfg->epoch_seconds = cfg->soak ? 30 : cfg->seconds;
    cfg->sample_ms = 2000;
    cfg->seed = seed != NULL ? strtoull(seed, NULL, 10) : (unsigned long long)time(NULL);
}

const char *fault_kind_name(enum fault_kind kind)
{
    static const char *const names[FAULT_KIND_COUNT] = {
        "terminate", "restart_fast", "restart_immediate",   "stall",
        "lock",      "commit_lost",  "commit_lost_no_look", "commit_dropped",
    };

    return kind < FAULT_KIND_COUNT ? names[kind] : "unknown";
}

void fault_op_arguments(char *buf, size_t size, const fault_op *op, int changed)
{
    snprintf(buf, size, "{\"payload\":\"%s-%s-%u%s\",\"n\":%u,\"sleep_ms\":%u}", op->tenant, op->id,
             op->index, changed ? "-changed" : "", op->index, op->sleep_ms);
}

/* The workload's two "servers": statement timeouts fire first on one, lock timeouts
 * (what is left of a short deadline) on the other. */
static const struct {
    const char *app;
    unsigned int statement_timeout_ms;
    unsigned int deadline_ms;
} servers[2] = {
    {FAULT_APP_WORK "-st", 1500, 8000},
    {FAULT_APP_WORK "-lt", 0, 1500},
};

static int open_server(fault_run *run, int i, idem_error *err)
{
    idem_pool_options po = IDEM_POOL_OPTIONS_INIT;
    idem_store_options so = IDEM_STORE_OPTIONS_INIT;
    int rc;

    po.max_size = 6;
    po.acquire_timeout_ms = 2000;
    po.connect_timeout_ms = 2000;
    po.health_check_idle_ms = 1000;
    po.statement_timeout_ms = servers[i].statement_timeout_ms;
    po.application_name = servers[i].app;
    so.deadline_ms = servers[i].deadline_ms;
    rc = idem_pool_new(&run->pools[i], run->conninfo, &po, err);
    if (rc == 0)
        rc = idem_store_new(&run->stores[i], run->pools[i], &so, err);
    return rc;
}

int fault_run_new(fault_run **out, const fault_config *cfg, const char *conninfo, char *why,
                  size_t why_size)
{
    idem_retry_policy policy = IDEM_RETRY_POLICY_INIT;
    idem_error err = IDEM_ERROR_INIT;
    fault_run *run = calloc(1, sizeof(*run));
    int rc = IDEM_ENOMEM;

    if (run == NULL || (run->conninfo = strdup(conninfo != NULL ? conninfo : "")) == NULL)
        goto done;
    run->cfg = *cfg;
    pthread_mutex_init(&run->lock, NULL);
    pthread_mutex_init(&run->violations_lock, NULL);
    policy.max_attempts = 8;
    policy.base_delay_ms = 50;
    policy.max_delay_ms = 1000;
    policy.deadline_ms = 10000;
    run->policy = policy;
    if (conninfo != NULL &&
        ((rc = open_server(run, 0, &err)) != 0 || (rc = open_server(run, 1, &err)) != 0 ||
         (rc = idem_retry_budget_new(&run->budget, NULL, &err)) != 0))
        goto done;
    rc = 0;
    *out = run;
    run = NULL;
done:
    if (rc != 0)
        snprintf(why, why_size, "%s: %s", idem_err_name(rc), err.message);
    fault_run_free(run);
    return rc;
}

void fault_run_close_servers(fault_run *run)
{
    for (int i = 0; i < 2; i++) {
        idem_store_stats st = IDEM_STORE_STATS_INIT;

        if (idem_store_stats_get(&st, run->stores[i]) == 0) {
            run->ambiguous_commits += st.ambiguous_commits;
            run->serialization_retries += st.serialization_retries;
            run->claim_races += st.claim_races;
        }
        idem_store_free(run->stores[i]);
        idem_pool_free(run->pools[i]);
        run->stores[i] = NULL;
        run->pools[i] = NULL;
    }
}

void fault_run_free(fault_run *run)
{
    if (run == NULL)
        return;
    fault_run_close_servers(run);
    idem_retry_budget_free(run->budget);
    fault_epoch_free(run->epoch);
    for (size_t i = 0; i < run->nmessages; i++)
        free(run->messages[i]);
    if (run->conninfo != NULL) {
        pthread_mutex_destroy(&run->lock);
        pthread_mutex_destroy(&run->violations_lock);
    }
    free(run->conninfo);
    free(run);
}

void fault_violation(fault_run *run, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&run->violations_lock);
    run->violations++;
    if (run->nmessages < FAULT_MAX_MESSAGES)
        run->messages[run->nmessages++] = strdup(buf);
    pthread_mutex_unlock(&run->violations_lock);
}

void fault_print_violations(const fault_run *run, FILE *to)
{
    for (size_t i = 0; i < run->nmessages; i++)
        fprintf(to, "fault suite: VIOLATION: %s\n", run->messages[i] ? run->messages[i] : "?");
    if (run->violations > run->nmessages)
        fprintf(to, "fault suite: ... and %llu more violations\n",
                run->violations - (unsigned long long)run->nmessages);
}

/* The ops live in their own mapping: its pages are touched only as ops are made, and go
 * back to the system with the epoch. (From malloc, a freed block this large would raise
 * glibc's mmap threshold, and the next epoch's calloc would touch the whole block on the
 * heap: a step in RSS that a soak run would take for growth.) */
fault_epoch *fault_epoch_new(unsigned int number, size_t cap)
{
    fault_epoch *e = calloc(1, sizeof(*e));
    void *ops;

    if (e == NULL)
        return NULL;
    ops = mmap(NULL, cap * sizeof(*e->ops), PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (ops == MAP_FAILED) {
        free(e);
        return NULL;
    }
    e->ops = ops;
    e->number = number;
    e->cap = cap;
    return e;
}

void fault_epoch_free(fault_epoch *epoch)
{
    if (epoch == NULL)
        return;
    for (size_t i = 0; i < epoch->nops; i++)
        free(epoch->ops[i].receipt);
    munmap(epoch->ops, epoch->cap * sizeof(*epoch->ops));
    free(epoch);
}

fault_op *fault_epoch_add(fault_run *run, const char *tenant, const char *id, unsigned int sleep_ms)
{
    fault_epoch *e = run->epoch;
    fault_op *op = NULL;

    pthread_mutex_lock(&run->lock);
    if (e->nops < e->cap) {
        op = &e->ops[e->nops];
        snprintf(op->tenant, sizeof(op->tenant), "%s", tenant);
        snprintf(op->id, sizeof(op->id), "%s", id);
        op->index = (unsigned int)e->nops;
        op->sleep_ms = sleep_ms;
        e->nops++;
        if (sleep_ms > 0)
            e->inflight[e->inflight_next++ % 32] = op->index;
    }
    pthread_mutex_unlock(&run->lock);
    if (op != NULL)
        atomic_fetch_add(&run->counts.ops, 1);
    return op;
}

static unsigned long long load(atomic_ullong *v)
{
    return atomic_load(v);
}

static void print_statuses(FILE *to, const char *what, atomic_ullong *by_status)
{
    fprintf(to, " | %s:", what);
    for (int s = 0; s <= IDEM_STATUS_MISCONFIGURED; s++) {
        if (load(&by_status[s]) > 0)
            fprintf(to, " %s=%llu", idem_status_name((idem_status)s), load(&by_status[s]));
    }
}

static void print_store_stats(FILE *to, fault_run *run)
{
    unsigned long long ambiguous = run->ambiguous_commits;
    unsigned long long serialization = run->serialization_retries, races = run->claim_races;

    for (int i = 0; i < 2; i++) {
        idem_store_stats st = IDEM_STORE_STATS_INIT;

        if (idem_store_stats_get(&st, run->stores[i]) != 0)
            continue;
        ambiguous += st.ambiguous_commits;
        serialization += st.serialization_retries;
        races += st.claim_races;
    }
    fprintf(to, " | store: ambiguous_commits=%llu serialization_retries=%llu claim_races=%llu",
            ambiguous, serialization, races);
}

void fault_print_summary(fault_run *run, FILE *to)
{
    fault_counts *c = &run->counts;
    unsigned long long calls = 0;

    for (int k = 0; k < CALL_KIND_COUNT; k++)
        calls += load(&c->calls[k]);
    fprintf(to, "fault suite: seed=%llu threads=%u seconds=%u keys=%llu calls=%llu attempts=%llu",
            run->cfg.seed, run->cfg.threads, run->cfg.seconds, load(&c->ops), calls,
            load(&c->attempts));
    fprintf(to, " (owner=%llu duplicate=%llu changed=%llu resume=%llu replay=%llu settle=%llu)",
            load(&c->calls[CALL_OWNER]), load(&c->calls[CALL_DUPLICATE]),
            load(&c->calls[CALL_CHANGED]), load(&c->calls[CALL_RESUME]),
            load(&c->calls[CALL_REPLAY]), load(&c->calls[CALL_SETTLE]));
    fprintf(to, " | faults:");
    for (int k = 0; k < FAULT_KIND_COUNT; k++)
        fprintf(to, " %s=%llu", fault_kind_name((enum fault_kind)k), load(&c->faults[k]));
    print_statuses(to, "calls", c->final_status);
    print_statuses(to, "attempts", c->attempt_status);
    fprintf(to, " | overlapping calls on one key=%llu", load(&c->overlapping));
    fprintf(to, " | timeouts: statement=%llu lock=%llu", load(&c->statement_timeouts),
            load(&c->lock_timeouts));
    print_store_stats(to, run);
    fprintf(to, " | invariants: %s (%llu violations)\n", run->violations == 0 ? "PASS" : "FAIL",
            run->violations);
}
