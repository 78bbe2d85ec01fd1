/* The workload: worker threads that make fresh keys and call them, duplicate other
 * threads' keys (often while they are in flight), change a key's arguments, resume keys
 * left without an answer and replay old ones; every call goes through the retry helper
 * with the same operation ID. After the faults, every key without an answer is settled. */
#include <stdlib.h>
#include <string.h>

#include "fault.h"

typedef struct worker {
    fault_run *run;
    pthread_t thread;
    uint64_t rng;
    uint64_t end_ms;
    size_t *unsettled; /* this worker's keys whose last call ended without an answer */
    size_t nunsettled, cap;
} worker;

static void count_attempt(fault_run *run, const idem_outcome *out, const idem_error *err)
{
    atomic_fetch_add(&run->counts.attempts, 1);
    if (out->status <= IDEM_STATUS_MISCONFIGURED)
        atomic_fetch_add(&run->counts.attempt_status[out->status], 1);
    if (strcmp(err->sqlstate, "57014") == 0)
        atomic_fetch_add(&run->counts.statement_timeouts, 1);
    else if (strcmp(err->sqlstate, "55P03") == 0)
        atomic_fetch_add(&run->counts.lock_timeouts, 1);
}

idem_status fault_call(fault_run *run, fault_op *op, enum fault_call_kind kind,
                       const idem_retry_policy *policy, idem_retry_budget *budget, uint64_t *rng)
{
    char args[256];
    idem_request req = IDEM_REQUEST_INIT;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_retry_state state;
    unsigned int delay = 0;
    idem_status status;

    fault_op_arguments(args, sizeof(args), op, kind == CALL_CHANGED);
    req.tenant = op->tenant;
    req.operation_id = op->id;
    req.tool = FAULT_TOOL;
    req.arguments = args;
    req.arguments_len = strlen(args);
    atomic_fetch_add(&run->counts.calls[kind], 1);
    pthread_mutex_lock(&run->lock);
    if (op->active++ > 0)
        atomic_fetch_add(&run->counts.overlapping, 1);
    pthread_mutex_unlock(&run->lock);
    idem_retry_state_init(&state);
    for (;;) {
        idem_outcome_clear(&out);
        idem_store_execute(&out, run->stores[fault_rand(rng) % 2], &req, fault_effect, NULL, &err);
        count_attempt(run, &out, &err);
        if (!idem_retry_next(&delay, &state, policy, budget, out.status))
            break;
        fault_sleep_ms(delay); /* then again, with the same operation ID */
    }
    pthread_mutex_lock(&run->lock);
    op->active--;
    pthread_mutex_unlock(&run->lock);
    fault_judge(run, op, kind == CALL_CHANGED, &out, &err);
    status = out.status;
    idem_outcome_clear(&out);
    return status;
}

static int answered(idem_status s)
{
    return s == IDEM_STATUS_CREATED || s == IDEM_STATUS_REPLAYED;
}

static void remember_unsettled(worker *w, const fault_op *op)
{
    if (w->nunsettled == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        size_t *grown = realloc(w->unsettled, cap * sizeof(*grown));

        if (grown == NULL)
            abort();
        w->unsettled = grown;
        w->cap = cap;
    }
    w->unsettled[w->nunsettled++] = op->index;
}

static idem_status call(worker *w, fault_op *op, enum fault_call_kind kind)
{
    return fault_call(w->run, op, kind, &w->run->policy, w->run->budget, &w->rng);
}

/* The owner's first call; a key left without an answer is resumed later. */
static void call_owner(worker *w, fault_op *op)
{
    if (!answered(call(w, op, CALL_OWNER)))
        remember_unsettled(w, op);
}

/* A fresh key: a UUIDv7, in one of three tenants; sometimes a slow effect; sometimes the
 * same operation ID in another tenant too (another, independent key). */
static int new_key(worker *w)
{
    char tenant[32], id[IDEM_UUID_STRING_SIZE];
    uint64_t r = fault_rand(&w->rng);
    unsigned int t = (unsigned int)(r % 3), sleep_ms = r % 100 < 8 ? 150 + r % 500 : 0;
    fault_op *op, *twin = NULL;

    if (idem_uuid_v7(id, NULL) != 0)
        abort();
    snprintf(tenant, sizeof(tenant), "fault-e%u-t%u", w->run->epoch->number, t);
    if ((op = fault_epoch_add(w->run, tenant, id, sleep_ms)) == NULL)
        return 0;
    if ((r >> 32) % 100 < 8) {
        snprintf(tenant, sizeof(tenant), "fault-e%u-t%u", w->run->epoch->number, (t + 1) % 3);
        twin = fault_epoch_add(w->run, tenant, id, 0);
    }
    call_owner(w, op);
    if (twin != NULL)
        call_owner(w, twin);
    return 1;
}

/* A random op of the epoch (NULL while there is none); @slow prefers one that an owner
 * started recently with a slow effect. */
static fault_op *pick(worker *w, int slow, int answered_only)
{
    fault_epoch *e = w->run->epoch;
    uint64_t r = fault_rand(&w->rng);
    fault_op *op = NULL;

    pthread_mutex_lock(&w->run->lock);
    if (e->nops > 0) {
        /* The four slow ops started last: most are still in flight. */
        size_t recent = e->inflight_next < 4 ? e->inflight_next : 4;
        size_t i = slow && recent > 0 ? e->inflight[(e->inflight_next - 1 - r % recent) % 32]
                                      : r % e->nops;

        op = &e->ops[i];
        if (answered_only && op->receipt == NULL)
            op = NULL;
    }
    pthread_mutex_unlock(&w->run->lock);
    return op;
}

static void resume_one(worker *w)
{
    fault_op *op;

    if (w->nunsettled == 0)
        return;
    op = &w->run->epoch->ops[w->unsettled[--w->nunsettled]];
    if (!answered(call(w, op, CALL_RESUME)))
        remember_unsettled(w, op);
}

static void step(worker *w)
{
    unsigned int r = (unsigned int)(fault_rand(&w->rng) % 100);
    fault_op *op;

    if (r < 50 && new_key(w))
        return;
    if (r < 65) {
        if ((op = pick(w, 1, 0)) != NULL)
            call(w, op, CALL_DUPLICATE);
    } else if (r < 73) {
        if ((op = pick(w, 0, 1)) != NULL)
            call(w, op, CALL_CHANGED);
    } else if (r < 85) {
        resume_one(w);
    } else if ((op = pick(w, 0, 0)) != NULL) {
        call(w, op, CALL_REPLAY);
    }
}

static void *worker_main(void *p)
{
    worker *w = p;

    while (fault_now_ms() < w->end_ms)
        step(w);
    return NULL;
}

void fault_workload_run(fault_run *run, unsigned int seconds)
{
    unsigned int n = run->cfg.threads;
    worker *workers = calloc(n, sizeof(*workers));
    uint64_t end = fault_now_ms() + (uint64_t)seconds * 1000u;

    if (workers == NULL)
        abort();
    for (unsigned int i = 0; i < n; i++) {
        workers[i] = (worker){.run = run, .end_ms = end};
        workers[i].rng = run->cfg.seed * 0x100000001B3ull + run->epoch->number * 131u + i + 1;
        if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]) != 0)
            abort();
    }
    for (unsigned int i = 0; i < n; i++) {
        pthread_join(workers[i].thread, NULL);
        free(workers[i].unsettled);
    }
    free(workers);
}

/* Settling: with the faults over, every key without an answer is called until it has one. */
typedef struct settler {
    fault_run *run;
    pthread_t thread;
    unsigned int number, of;
    uint64_t rng;
} settler;

static void *settler_main(void *p)
{
    settler *s = p;
    fault_epoch *e = s->run->epoch;
    idem_retry_policy policy = s->run->policy;

    policy.max_attempts = 30;
    policy.deadline_ms = 60000;
    for (size_t i = s->number; i < e->nops; i += s->of) {
        fault_op *op = &e->ops[i];
        int open;
        idem_status st;

        pthread_mutex_lock(&s->run->lock);
        open = op->receipt == NULL;
        pthread_mutex_unlock(&s->run->lock);
        if (open && !answered(st = fault_call(s->run, op, CALL_SETTLE, &policy, NULL, &s->rng)))
            fault_violation(s->run, "%s/%s: no answer after the faults stopped: %s", op->tenant,
                            op->id, idem_status_name(st));
    }
    return NULL;
}

void fault_settle(fault_run *run)
{
    unsigned int n = run->cfg.threads;
    settler *settlers = calloc(n, sizeof(*settlers));

    if (settlers == NULL)
        abort();
    for (unsigned int i = 0; i < n; i++) {
        settlers[i] = (settler){.run = run, .number = i, .of = n, .rng = run->cfg.seed + i + 7};
        if (pthread_create(&settlers[i].thread, NULL, settler_main, &settlers[i]) != 0)
            abort();
    }
    for (unsigned int i = 0; i < n; i++)
        pthread_join(settlers[i].thread, NULL);
    free(settlers);
}
