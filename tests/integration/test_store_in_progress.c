/* A retry of a key that a live attempt holds answers in_progress at once and gives its
 * connection back; one slow key never starves other callers. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "idem/idem.h"
#include "pgtest.h"

static idem_pool *pool;
static idem_store *store;
static atomic_int slow_done;
static char *test_db; /* conninfo of the test's database */

static void close_all(void)
{
    idem_store_free(store);
    idem_pool_free(pool);
    free(test_db);
}

TestSuite(in_progress, .fini = close_all);

/* The slow first attempt's effect, in seconds, and how long a caller waits for a
 * connection: every retry and the unrelated call fit in the first with room to spare on a
 * loaded machine (PGTEST_LOAD_SLACK_MS), while a retry that kept its connection for the
 * whole slow attempt would leave the others waiting past the second. */
#define SLOW_S             "6"
#define ACQUIRE_TIMEOUT_MS 3000

static void open_store(const char *tag, unsigned int pool_size)
{
    idem_pool_options popts = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;

    char *conninfo = pgtest_new_migrated_database(tag);
    popts.max_size = pool_size;
    popts.acquire_timeout_ms = ACQUIRE_TIMEOUT_MS;
    popts.connect_timeout_ms = 30000;
    cr_assert_eq(idem_pool_new(&pool, conninfo, &popts, &err), 0, "%s", err.message);
    cr_assert_eq(idem_store_new(&store, pool, NULL, &err), 0, "%s", err.message);
    test_db = conninfo;
}

/* Sleeps @ctx seconds inside the transaction (0: returns at once). */
static int sleepy_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                         idem_error *err)
{
    const char *secs = ctx;
    const char *values[1] = {secs};
    PGresult *res = NULL;
    int rc = idem_tx_exec(&res, tx, "SELECT pg_sleep($1::float8)", 1, values, err);

    (void)arguments;
    if (rc != 0)
        return rc;
    PQclear(res);
    *response = json_pack("{s:s}", "slept", secs);
    return IDEM_EFFECT_OK;
}

static int call(idem_outcome *out, const char *tenant, const char *op, const char *secs)
{
    idem_request req = IDEM_REQUEST_INIT;
    idem_error err = IDEM_ERROR_INIT;

    req.tenant = tenant;
    req.operation_id = op;
    req.tool = "sleepy";
    req.arguments = "{}";
    req.arguments_len = 2;
    return idem_store_execute(out, store, &req, sleepy_effect, (void *)secs, &err);
}

/* Until the first attempt's effect sleeps (its claim went in the same round trip), however
 * loaded the machine: a fixed pause could end before the claim. */
static void wait_until_sleeping(void)
{
    PGconn *watch = pgtest_connect(test_db);

    for (int i = 0; i < 400; i++) {
        if (pgtest_scalar(watch, "SELECT count(*) FROM pg_stat_activity WHERE state = 'active'"
                                 " AND query LIKE '%pg_sleep%' AND pid <> pg_backend_pid()"
                                 " AND datname = current_database()") > 0)
            break;
        pgtest_sleep_ms(10);
    }
    PQfinish(watch);
}

static void *slow_first_attempt(void *arg)
{
    idem_outcome out = IDEM_OUTCOME_INIT;

    (void)arg;
    int rc = call(&out, "acme", "op-slow", SLOW_S);
    atomic_store(&slow_done, rc == 0 && out.status == IDEM_STATUS_CREATED ? 1 : -1);
    idem_outcome_clear(&out);
    return NULL;
}

Test(in_progress, a_retry_while_the_first_attempt_runs_answers_in_progress_at_once)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_store_stats st = IDEM_STORE_STATS_INIT;
    pthread_t slow;

    open_store("inprog_once", 4);
    cr_assert_eq(pthread_create(&slow, NULL, slow_first_attempt, NULL), 0);
    wait_until_sleeping(); /* the first attempt has claimed and is sleeping */
    int rc = call(&out, "acme", "op-slow", "0");
    int first_still_running = atomic_load(&slow_done) == 0;
    cr_assert_eq(rc, IDEM_EBUSY, "%s", idem_err_name(rc));
    cr_assert_eq(out.status, IDEM_STATUS_IN_PROGRESS);
    cr_assert_eq(idem_status_next_step(out.status), IDEM_NEXT_RETRY_SAME_KEY);
    cr_assert(first_still_running,
              "the retry answered before the " SLOW_S " s first attempt ended, not after it");
    pthread_join(slow, NULL);
    cr_assert_eq(atomic_load(&slow_done), 1, "the first attempt still committed");
    idem_outcome_clear(&out);
    cr_assert_eq(call(&out, "acme", "op-slow", "0"), 0);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED, "once it committed, the retry replays");
    cr_assert_eq(idem_store_stats_get(&st, store), 0);
    cr_assert_geq(st.in_progress, 1);
    idem_outcome_clear(&out);
}

static void *retry_hot_key(void *arg)
{
    int *in_progress = arg;

    for (int i = 0; i < 3; i++) {
        idem_outcome out = IDEM_OUTCOME_INIT;
        if (call(&out, "acme", "op-slow", "0") == IDEM_EBUSY &&
            out.status == IDEM_STATUS_IN_PROGRESS)
            (*in_progress)++;
        idem_outcome_clear(&out);
    }
    return NULL;
}

Test(in_progress, one_slow_key_never_starves_other_tenants_of_connections)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    pthread_t slow, retriers[6];
    int counts[6] = {0};

    open_store("inprog_starve", 4);
    cr_assert_eq(pthread_create(&slow, NULL, slow_first_attempt, NULL), 0);
    wait_until_sleeping();
    for (int i = 0; i < 6; i++)
        cr_assert_eq(pthread_create(&retriers[i], NULL, retry_hot_key, &counts[i]), 0);
    for (int i = 0; i < 6; i++)
        pthread_join(retriers[i], NULL);
    int total = 0;
    for (int i = 0; i < 6; i++)
        total += counts[i];
    int rc = call(&out, "other-tenant", "op-unrelated", "0");
    int first_still_running = atomic_load(&slow_done) == 0;
    cr_assert_eq(rc, 0, "an unrelated call is served: %s", idem_err_name(rc));
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert(first_still_running, "all of this happened while the slow attempt ran");
    cr_assert_eq(total, 18, "18 retries on the held key, 18 in_progress (got %d)", total);
    pthread_join(slow, NULL);
    idem_outcome_clear(&out);
}
