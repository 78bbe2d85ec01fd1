/* Serialization failures: retried until the effect commits once, within the attempt cap
 * and the deadline. */
#include <criterion/criterion.h>
#include <string.h>

#include "storetest.h"

TestSuite(store_serialization, .init = storetest_init, .fini = storetest_fini, .timeout = 240);

struct flaky {
    int runs;
    int failures; /* raise a serialization failure this many times, -1 forever */
};

static int flaky_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                        idem_error *err)
{
    struct flaky *f = ctx;
    PGresult *res = NULL;
    f->runs++;
    if (f->failures < 0 || f->runs <= f->failures) {
        int rc = idem_tx_exec(&res, tx,
                              "DO $$BEGIN RAISE EXCEPTION 'forced' USING ERRCODE = "
                              "'serialization_failure'; END$$",
                              0, NULL, err);
        cr_assert_neq(rc, 0);
        return rc;
    }
    return example_create_support_task(response, tx, arguments, NULL, err);
}

Test(store_serialization, serialization_failures_are_retried_and_the_effect_commits_once)
{
    struct flaky f = {0, 2};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = storetest_request("acme", "op-flaky", "{\"subject\":\"s\"}");
    storetest_open(NULL, 1);

    cr_assert_eq(idem_store_execute(&out, fx.store, &req, flaky_effect, &f, &err), 0, "%s",
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(out.attempts, 3);
    cr_assert_eq(f.runs, 3);
    idem_store_stats st = IDEM_STORE_STATS_INIT;
    idem_store_stats_get(&st, fx.store);
    cr_assert_eq(st.serialization_retries, 2);
    cr_assert_eq(storetest_tasks(), 1);
    idem_pool_stats ps = IDEM_POOL_STATS_INIT;
    idem_pool_stats_get(&ps, fx.pool);
    cr_assert_eq(ps.opened, 1, "a serialization failure keeps the connection (%llu opened)",
                 ps.opened);
    idem_outcome_clear(&out);
}

Test(store_serialization, serialization_retries_stop_at_the_attempt_cap)
{
    struct flaky f = {0, -1};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_store_options opts = IDEM_STORE_OPTIONS_INIT;
    opts.max_attempts = 4;
    opts.deadline_ms = 600000;
    idem_request req = storetest_request("acme", "op-cap", "{\"subject\":\"s\"}");
    storetest_open(&opts, 1);

    cr_assert_eq(idem_store_execute(&out, fx.store, &req, flaky_effect, &f, &err), IDEM_EUNAVAIL);
    cr_assert_eq(out.status, IDEM_STATUS_UNAVAILABLE);
    cr_assert_eq(f.runs, 4);
    cr_assert_eq(out.attempts, 4);
    cr_assert(strstr(err.message, "retries spent") != NULL, "%s", err.message);
    cr_assert_eq(storetest_operations(), 0);
    cr_assert_eq(storetest_tasks(), 0);
}

Test(store_serialization, serialization_retries_stop_at_the_deadline)
{
    struct flaky f = {0, -1};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_store_options opts = IDEM_STORE_OPTIONS_INIT;
    opts.max_attempts = 100000;
    opts.deadline_ms = 200;
    opts.backoff_base_ms = 50;
    opts.backoff_max_ms = 50;
    idem_request req = storetest_request("acme", "op-deadline", "{\"subject\":\"s\"}");
    storetest_open(&opts, 1);

    cr_assert_eq(idem_store_execute(&out, fx.store, &req, flaky_effect, &f, &err), IDEM_EUNAVAIL);
    cr_assert_eq(out.status, IDEM_STATUS_UNAVAILABLE);
    /* Backoffs average 25 ms against a 200 ms deadline: far fewer than the cap. */
    cr_assert_lt(f.runs, 1000, "the deadline, not the cap, ended it (%d runs)", f.runs);
    /* The deadline ends it between attempts ("retries spent") or, on a loaded machine,
     * while a statement waits for its reply ("deadline passed"). */
    cr_assert(strstr(err.message, "retries spent") != NULL ||
                  strstr(err.message, "deadline passed") != NULL,
              "%s", err.message);
    cr_assert_eq(storetest_operations(), 0);
}
