/* Many threads on the same keys: one task and one receipt per key. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "storetest.h"

TestSuite(store_concurrency, .init = storetest_init, .fini = storetest_fini, .timeout = 240);

struct worker {
    pthread_t thread;
    int first_key, keys, calls;
    int created, replayed, bad;
    char receipts[100][64]; /* receipt seen per key (index key - first_key) */
    int mismatch;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < w->calls; i++) {
        int k = w->keys == 1 ? 0 : (i * 7 + w->first_key) % w->keys;
        char op[32], args[64];
        idem_outcome out = IDEM_OUTCOME_INIT;
        idem_retry_policy policy = IDEM_RETRY_POLICY_INIT;
        idem_retry_state st;
        unsigned int delay;
        snprintf(op, sizeof(op), "key-%d", k);
        snprintf(args, sizeof(args), "{\"subject\":\"task for key %d\"}", k);
        idem_retry_state_init(&st);
        for (;;) {
            idem_outcome_clear(&out);
            storetest_create_task(&out, "load", op, args, NULL);
            if (!idem_retry_next(&delay, &st, &policy, NULL, out.status))
                break;
            struct timespec ts = {0, (long)delay * 1000000L};
            nanosleep(&ts, NULL);
        }
        if (out.status == IDEM_STATUS_CREATED)
            w->created++;
        else if (out.status == IDEM_STATUS_REPLAYED)
            w->replayed++;
        else
            w->bad++;
        if (out.receipt != NULL) {
            if (w->receipts[k][0] == '\0')
                snprintf(w->receipts[k], sizeof(w->receipts[k]), "%s", out.receipt);
            else if (strcmp(w->receipts[k], out.receipt) != 0)
                w->mismatch++;
        }
        idem_outcome_clear(&out);
    }
    return NULL;
}

static void run_workers(int threads, int calls, int keys)
{
    struct worker *w = calloc((size_t)threads, sizeof(*w));
    for (int t = 0; t < threads; t++) {
        w[t].first_key = t;
        w[t].keys = keys;
        w[t].calls = calls;
        cr_assert_eq(pthread_create(&w[t].thread, NULL, worker_main, &w[t]), 0);
    }
    int created = 0, replayed = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(w[t].thread, NULL);
        cr_assert_eq(w[t].bad, 0, "thread %d got %d calls that were neither created nor replayed",
                     t, w[t].bad);
        cr_assert_eq(w[t].mismatch, 0, "thread %d saw two receipts for one key", t);
        created += w[t].created;
        replayed += w[t].replayed;
    }
    cr_assert_eq(created, keys, "one creation per key: %d for %d keys", created, keys);
    cr_assert_eq(created + replayed, threads * calls);
    /* Every caller's receipt for a key is the key's stored receipt. */
    for (int k = 0; k < keys; k++) {
        char op[32];
        snprintf(op, sizeof(op), "key-%d", k);
        char *stored = storetest_receipt("load", op);
        for (int t = 0; t < threads; t++)
            if (w[t].receipts[k][0] != '\0')
                cr_assert_str_eq(w[t].receipts[k], stored, "thread %d key %d", t, k);
        free(stored);
    }
    free(w);
    cr_assert_eq(storetest_tasks(), keys);
    cr_assert_eq(storetest_operations(), keys);
}

Test(store_concurrency, sixteen_calls_from_eight_threads_on_one_key_make_one_task)
{
    storetest_open(NULL, 8);
    run_workers(8, 2, 1);
}

Test(store_concurrency, many_threads_over_a_hundred_keys_make_exactly_a_hundred_tasks,
     .timeout = 600)
{
    int calls = getenv("IDEM_TEST_LIGHT") != NULL ? 200 : 2000;
    storetest_open(NULL, 16);
    run_workers(64, calls, 100);
    idem_store_stats st = IDEM_STORE_STATS_INIT;
    idem_store_stats_get(&st, fx.store);
    cr_assert_eq(st.created, 100);
}
