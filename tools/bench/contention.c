/*
 * The contention mode: 64 threads call idem_store_execute() on 10 hot keys. After each
 * successful call, one time in NEW_KEY_ONE_IN, the caller moves that slot to a fresh
 * operation ID, so that the run mixes first calls (which race to create) with retries
 * (which must replay). in_progress and unavailable are retried with the same key as
 * idem_retry_next() says; every other status is an error.
 *
 * At the end every key that got an answer must have exactly one task and one record:
 * tasks == operations == distinct keys == calls answered "created".
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "support_tasks.h"

#define HOT_KEYS           10
#define CONTENTION_THREADS 64
#define NEW_KEY_ONE_IN     10
#define TENANT             "bench-contention"

typedef struct hot_key {
    char id[IDEM_UUID_STRING_SIZE];
    atomic_llong answered, created;
    struct hot_key *next; /* every key ever used, for the final count */
} hot_key;

typedef struct contention {
    idem_store *store;
    idem_retry_policy policy;
    pthread_mutex_t lock;
    hot_key *slot[HOT_KEYS];
    hot_key *all;
    atomic_llong created, replayed, retried;
} contention;

static hot_key *new_key(void)
{
    hot_key *key = calloc(1, sizeof(*key));

    if (key != NULL && idem_uuid_v7(key->id, NULL) != 0) {
        free(key);
        return NULL;
    }
    return key;
}

static void sleep_ms(unsigned int ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* One logical call: the first attempt and its retries with the same key. */
static int call_key(bench_worker *w, contention *c, hot_key *key)
{
    idem_request req = IDEM_REQUEST_INIT;
    idem_retry_state st;
    unsigned int delay;

    req.tenant = TENANT;
    req.operation_id = key->id;
    req.tool = EXAMPLE_TOOL_NAME;
    req.payload_version = EXAMPLE_TOOL_VERSION;
    req.arguments = BENCH_CREATE_ARGUMENTS;
    req.arguments_len = strlen(BENCH_CREATE_ARGUMENTS);
    idem_retry_state_init(&st);
    for (;;) {
        idem_outcome out = IDEM_OUTCOME_INIT;
        idem_error err = IDEM_ERROR_INIT;
        idem_status status;

        idem_store_execute(&out, c->store, &req, example_create_support_task, NULL, &err);
        status = out.status;
        idem_outcome_clear(&out);
        if (status == IDEM_STATUS_CREATED || status == IDEM_STATUS_REPLAYED) {
            atomic_fetch_add(&key->answered, 1);
            atomic_fetch_add(status == IDEM_STATUS_CREATED ? &key->created : &c->replayed, 1);
            return 0;
        }
        if (!idem_retry_next(&delay, &st, &c->policy, NULL, status))
            return bench_fail(w, "%s: %s", idem_status_name(status), err.message);
        atomic_fetch_add(&c->retried, 1);
        sleep_ms(delay);
    }
}

/* Move slot @s from @old to a fresh key, unless another thread already moved it. */
static void rotate(contention *c, unsigned int s, hot_key *old)
{
    hot_key *fresh = new_key();

    if (fresh == NULL)
        return;
    pthread_mutex_lock(&c->lock);
    if (c->slot[s] == old) {
        c->slot[s] = fresh;
        fresh->next = c->all;
        c->all = fresh;
        fresh = NULL;
    }
    pthread_mutex_unlock(&c->lock);
    free(fresh);
}

static int contend(bench_worker *w)
{
    contention *c = w->side->ctx;
    unsigned int s = (unsigned int)bench_random(w, HOT_KEYS);
    hot_key *key;
    int rc;

    pthread_mutex_lock(&c->lock);
    key = c->slot[s];
    pthread_mutex_unlock(&c->lock);
    rc = call_key(w, c, key);
    if (rc == 0 && bench_random(w, NEW_KEY_ONE_IN) == 0)
        rotate(c, s, key);
    return rc;
}

static int setup(contention *c)
{
    static const idem_retry_policy policy = IDEM_RETRY_POLICY_INIT;

    c->policy = policy;
    c->policy.base_delay_ms = 5;
    c->policy.max_attempts = 20;
    for (int s = 0; s < HOT_KEYS; s++) {
        c->slot[s] = new_key();
        if (c->slot[s] == NULL)
            return bench_error("contention", "cannot make operation IDs");
        c->slot[s]->next = c->all;
        c->all = c->slot[s];
    }
    return 0;
}

/* Count what the keys saw, free them, and compare with the database. */
static void check(bench_invariant *inv, contention *c, const char *conninfo)
{
    hot_key *next;

    idem_store_stats stats = IDEM_STORE_STATS_INIT;

    idem_store_stats_get(&stats, c->store);
    *inv = (bench_invariant){1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    inv->serialization_retries = (long long)stats.serialization_retries;
    inv->claim_races = (long long)stats.claim_races;
    for (hot_key *k = c->all; k != NULL; k = next) {
        long long created = atomic_load(&k->created);

        next = k->next;
        inv->distinct_keys += atomic_load(&k->answered) > 0;
        inv->created += created;
        inv->twice_created += created > 1;
        free(k);
    }
    c->all = NULL;
    inv->replayed = atomic_load(&c->replayed);
    inv->retried = atomic_load(&c->retried);
    inv->tasks = bench_count_rows(conninfo, "support_tasks", TENANT);
    inv->operations = bench_count_rows(conninfo, "operations", TENANT);
    inv->pass = inv->tasks == inv->operations && inv->operations == inv->distinct_keys &&
                inv->created == inv->distinct_keys && inv->twice_created == 0;
}

int bench_mode_contention(bench_results *res, const bench_config *cfg, const char *conninfo)
{
    contention c = {0};
    idem_pool *pool = NULL;
    idem_error err = IDEM_ERROR_INIT;
    const bench_side side = {"idem", contend, &c};
    bench_plan plan = {&side, 1, CONTENTION_THREADS, cfg->duration_s, cfg->round_s, cfg->round_s};
    bench_measure *m = bench_results_add(res, "contention", CONTENTION_THREADS,
                                         "10 hot keys, 1 call in 10 moves its key to a new ID");
    int rc = -1;

    pthread_mutex_init(&c.lock, NULL);
    if (m == NULL || setup(&c) != 0 ||
        bench_pool_open(&pool, conninfo, CONTENTION_THREADS, cfg->pool_cap) != 0)
        goto done;
    if (idem_store_new(&c.store, pool, NULL, &err) != 0) {
        bench_error("store", err.message);
        goto done;
    }
    bench_say("contention, %d threads on %d hot keys", CONTENTION_THREADS, HOT_KEYS);
    rc = bench_run(m, &plan);
    check(&m->invariant, &c, conninfo);
done:
    for (hot_key *k = c.all, *next; k != NULL; k = next) {
        next = k->next;
        free(k);
    }
    idem_store_free(c.store);
    idem_pool_free(pool);
    pthread_mutex_destroy(&c.lock);
    return rc;
}
