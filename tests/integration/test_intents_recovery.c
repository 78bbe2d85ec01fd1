/* Durable intents after a crash: a worker dies after its effect committed, or before; a new
 * worker recovers the intent and resumes it with the same operation ID. Two recovering
 * workers at once each resume an intent once. Against a real server, with the execution
 * layer's fault points standing in for the worker's death. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "intenttest.h"
#include "store_internal.h"
#include "storetest.h"

#define ARGS "{\"subject\":\"Check delayed delivery\"}"

static void open_store(void)
{
    storetest_init();
    storetest_open(NULL, 6);
}

static void close_store(void)
{
    idem__fault_reset();
    storetest_fini();
}

TestSuite(intents_recovery, .init = open_store, .fini = close_store, .timeout = 180);

static idem_intent *approve(const char *tenant, const char *ref)
{
    return intenttest_approve(fx.store, tenant, ref, EXAMPLE_TOOL_NAME, ARGS);
}

/* Recover @tenant's intents; exactly @n expected. */
static idem_intent_list *recover(const char *tenant, size_t n)
{
    idem_intent_list *list = NULL;
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_intent_recover(&list, fx.store, tenant, NULL, &err), 0, "%s", err.message);
    cr_assert_eq(idem_intent_list_count(list), n, "%zu recovered", idem_intent_list_count(list));
    return list;
}

Test(intents_recovery, a_crash_after_commit_is_recovered_as_a_replay_with_one_task)
{
    idem_intent *t = approve("acme", "msg-1");
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    effect_counter runs = {0};
    idem_intent_list *list;
    idem_intent *r, *now;
    char *first;

    /* Worker 1: the effect commits, then the worker dies before it records the result. */
    idem__fault_inject("idem_intent_finish", IDEM__FAULT_DROP_BEFORE_SEND, 1);
    cr_assert_eq(idem_intent_execute(&out, fx.store, t, counting_effect, &runs, NULL, &err), 0,
                 "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    first = strdup(out.receipt);
    now = intenttest_get(fx.store, "acme", idem_intent_operation_id(t));
    cr_assert_eq(idem_intent_current_state(now), IDEM_INTENT_ATTEMPTED, "the result was lost");
    cr_assert_gt(idem_intent_lease_until(now), 0, "the dead worker's lease");
    idem_intent_free(now);
    list = recover("acme", 0); /* its lease is live: not yet */
    idem_intent_list_free(list);
    intenttest_lapse(fx.check, "acme", idem_intent_operation_id(t));

    /* Worker 2, after a restart. */
    list = recover("acme", 1);
    r = idem_intent_list_at(list, 0);
    cr_assert_str_eq(idem_intent_operation_id(r), idem_intent_operation_id(t));
    idem_outcome_clear(&out);
    cr_assert_eq(idem_intent_execute(&out, fx.store, r, counting_effect, &runs, NULL, &err), 0,
                 "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_str_eq(out.receipt, first, "the stored receipt, byte for byte");
    cr_assert_eq(idem_intent_current_state(r), IDEM_INTENT_DONE);
    cr_assert_eq(idem_intent_attempts(r), 2);
    cr_assert_eq(idem_intent_result_attempt(r), 1, "attempt 1 produced the result");
    cr_assert_str_eq(idem_intent_result_status(r), "replayed");
    cr_assert_eq(runs.runs, 1);
    cr_assert_eq(storetest_tasks(), 1);
    free(first);
    idem_outcome_clear(&out);
    idem_intent_list_free(list);
    idem_intent_free(t);
}

Test(intents_recovery, a_crash_before_commit_is_recovered_by_creating_one_task)
{
    idem_intent *t = approve("acme", "msg-1"), *now;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    effect_counter runs = {0};
    idem_intent_list *list;

    /* Worker 1 dies before COMMIT: nothing of the effect commits, nor its result. */
    idem__store_inject_fault(fx.store, IDEM__FAULT_FAIL_BEFORE_COMMIT, 1);
    idem__fault_inject("idem_intent_finish", IDEM__FAULT_DROP_BEFORE_SEND, 1);
    cr_assert_eq(idem_intent_execute(&out, fx.store, t, counting_effect, &runs, NULL, &err),
                 IDEM_EUNAVAIL, "%s", err.message);
    now = intenttest_get(fx.store, "acme", idem_intent_operation_id(t));
    cr_assert_eq(idem_intent_current_state(now), IDEM_INTENT_ATTEMPTED);
    idem_intent_free(now);
    cr_assert_eq(storetest_tasks(), 0);
    cr_assert_eq(storetest_operations(), 0);
    intenttest_lapse(fx.check, "acme", idem_intent_operation_id(t));

    list = recover("acme", 1);
    idem_outcome_clear(&out);
    cr_assert_eq(idem_intent_execute(&out, fx.store, idem_intent_list_at(list, 0), counting_effect,
                                     &runs, NULL, &err),
                 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(idem_intent_result_attempt(idem_intent_list_at(list, 0)), 2);
    cr_assert_eq(storetest_tasks(), 1);
    cr_assert_eq(intenttest_count(fx.check, "done"), 1);
    idem_outcome_clear(&out);
    idem_intent_list_free(list);
    idem_intent_free(t);
}

Test(intents_recovery, a_retryable_failure_leaves_the_intent_for_recovery_and_frees_its_lease)
{
    idem_intent *t = approve("acme", "msg-1");
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    effect_counter runs = {0};
    idem_intent_list *list;

    idem__store_inject_fault(fx.store, IDEM__FAULT_FAIL_BEFORE_COMMIT, 1);
    cr_assert_eq(idem_intent_execute(&out, fx.store, t, counting_effect, &runs, NULL, &err),
                 IDEM_EUNAVAIL);
    cr_assert_eq(idem_intent_current_state(t), IDEM_INTENT_ATTEMPTED);
    cr_assert_str_eq(idem_intent_result_status(t), "unavailable");
    cr_assert_not_null(idem_intent_last_error(t));
    cr_assert_eq(idem_intent_lease_until(t), 0);
    list = recover("acme", 1);
    idem_intent_list_free(list);
    idem_outcome_clear(&out);
    idem_intent_free(t);
}

Test(intents_recovery, the_retry_policy_retries_with_the_same_operation_id)
{
    idem_intent *t = approve("acme", "msg-1");
    idem_retry_policy policy = IDEM_RETRY_POLICY_INIT;
    idem_intent_exec_options opts = IDEM_INTENT_EXEC_OPTIONS_INIT;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    effect_counter runs = {0};

    policy.base_delay_ms = 1;
    opts.retry = &policy;
    idem__store_inject_fault(fx.store, IDEM__FAULT_REPLY_LOST_AFTER_COMMIT, 1);
    cr_assert_eq(idem_intent_execute(&out, fx.store, t, counting_effect, &runs, &opts, &err), 0,
                 "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED, "attempt 2 found attempt 1's commit");
    cr_assert_eq(idem_intent_attempts(t), 2);
    cr_assert_eq(idem_intent_result_attempt(t), 1);
    cr_assert_eq(idem_intent_current_state(t), IDEM_INTENT_DONE);
    cr_assert_eq(storetest_tasks(), 1);
    idem_outcome_clear(&out);
    idem_intent_free(t);
}

Test(intents_recovery, a_recovered_intent_is_not_executed_by_another_worker_meanwhile)
{
    idem_intent *t = approve("acme", "msg-1");
    idem_intent_list *list = recover("acme", 1), *none;
    idem_intent *read;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    effect_counter runs = {0};

    none = recover("acme", 0);
    cr_assert_eq(idem_intent_execute(&out, fx.store, t, counting_effect, &runs, NULL, &err),
                 IDEM_EBUSY, "the approving worker's copy: %s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_IN_PROGRESS);
    idem_outcome_clear(&out);
    read = intenttest_get(fx.store, "acme", idem_intent_operation_id(t));
    cr_assert_eq(idem_intent_execute(&out, fx.store, read, counting_effect, &runs, NULL, &err),
                 IDEM_EBUSY, "a copy read meanwhile does not carry the lease: %s", err.message);
    idem_intent_free(read);
    cr_assert_eq(runs.runs, 0);
    idem_outcome_clear(&out);
    cr_assert_eq(idem_intent_execute(&out, fx.store, idem_intent_list_at(list, 0), counting_effect,
                                     &runs, NULL, &err),
                 0, "the recovering worker's: %s", err.message);
    cr_assert_eq(runs.runs, 1);
    idem_outcome_clear(&out);
    idem_intent_list_free(none);
    idem_intent_list_free(list);
    idem_intent_free(t);
}

/* What the lease is while an intent's effect runs, read from another session: its end (µs)
 * and its length from the attempt's start (the start statement sets updated_at too). */
typedef struct lease_seen {
    char op[IDEM_UUID_STRING_SIZE]; /* a copy: executing replaces the intent's strings */
    long long until_us, length_s;
} lease_seen;

static int lease_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                        idem_error *err)
{
    lease_seen *seen = ctx;
    const char *values[1] = {seen->op};
    PGresult *res = PQexecParams(
        fx.check,
        "SELECT (extract(epoch FROM lease_until - '1970-01-01 00:00:00+00'::timestamptz)"
        " * 1000000)::int8, extract(epoch FROM lease_until - updated_at)::int8"
        " FROM idem.intents WHERE operation_id = $1",
        1, NULL, values, NULL, NULL, 0);

    cr_assert_eq(PQntuples(res), 1, "%s", PQerrorMessage(fx.check));
    seen->until_us = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    seen->length_s = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
    PQclear(res);
    return example_create_support_task(response, tx, arguments, NULL, err);
}

/* Execute @t with @opts (NULL: the defaults); what the lease was during its effect. */
static lease_seen execute_seeing_lease(idem_intent *t, const idem_intent_exec_options *opts)
{
    lease_seen seen = {"", 0, 0};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;

    snprintf(seen.op, sizeof(seen.op), "%s", idem_intent_operation_id(t));
    cr_assert_eq(idem_intent_execute(&out, fx.store, t, lease_effect, &seen, opts, &err), 0, "%s",
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    idem_outcome_clear(&out);
    return seen;
}

/* Executing a recovered intent keeps the recovery's lease (intent.h), unless the execute
 * options set one; any other intent takes 60 s unless they do. */
Test(intents_recovery,
     a_recovered_intent_executes_under_the_recovery_s_lease_unless_options_set_one)
{
    idem_intent *t1 = approve("acme", "msg-1"), *t2 = approve("acme", "msg-2");
    idem_intent *t3 = approve("acme", "msg-3");
    idem_intent_recover_options ro = IDEM_INTENT_RECOVER_OPTIONS_INIT;
    idem_intent_exec_options eo = IDEM_INTENT_EXEC_OPTIONS_INIT;
    idem_intent_list *list = NULL;
    idem_error err = IDEM_ERROR_INIT;
    long long recovered_until;

    cr_assert_eq(eo.lease_s, 0, "the default: inherit");
    ro.lease_s = 3600;
    ro.max = 2;
    cr_assert_eq(idem_intent_recover(&list, fx.store, "acme", &ro, &err), 0, "%s", err.message);
    cr_assert_eq(idem_intent_list_count(list), 2);
    recovered_until = idem_intent_lease_until(idem_intent_list_at(list, 0));
    cr_assert_eq(execute_seeing_lease(idem_intent_list_at(list, 0), NULL).until_us, recovered_until,
                 "the recovery's lease, its end unchanged");
    eo.lease_s = 30;
    cr_assert_eq(execute_seeing_lease(idem_intent_list_at(list, 1), &eo).length_s, 30,
                 "the options' own lease");
    cr_assert_eq(execute_seeing_lease(t3, NULL).length_s, IDEM_INTENT_LEASE_DEFAULT_S,
                 "an intent not recovered: 60 s");
    cr_assert_eq(IDEM_INTENT_LEASE_DEFAULT_S, 60);
    cr_assert_eq(intenttest_count(fx.check, "done"), 3);
    idem_intent_list_free(list);
    idem_intent_free(t1);
    idem_intent_free(t2);
    idem_intent_free(t3);
}

Test(intents_recovery, recovery_takes_the_oldest_first_and_at_most_max)
{
    idem_intent_recover_options opts = IDEM_INTENT_RECOVER_OPTIONS_INIT;
    idem_intent_list *list = NULL;
    idem_error err = IDEM_ERROR_INIT;
    char ref[16];

    for (int i = 0; i < 5; i++) {
        snprintf(ref, sizeof(ref), "msg-%d", i);
        idem_intent_free(approve("acme", ref));
    }
    /* In immutable functions of the row: Citus refuses a stable one (timestamptz - interval)
     * that reads a column in an UPDATE. */
    PQclear(pgtest_exec(fx.check,
                        "UPDATE idem.intents SET approved_at = to_timestamp("
                        "extract(epoch FROM now()) - substr(approval_ref, 5)::int * 60)"));
    opts.max = 3;
    cr_assert_eq(idem_intent_recover(&list, fx.store, "acme", &opts, &err), 0, "%s", err.message);
    cr_assert_eq(idem_intent_list_count(list), 3);
    cr_assert_str_eq(idem_intent_approval_ref(idem_intent_list_at(list, 0)), "msg-4");
    cr_assert_str_eq(idem_intent_approval_ref(idem_intent_list_at(list, 1)), "msg-3");
    cr_assert_str_eq(idem_intent_approval_ref(idem_intent_list_at(list, 2)), "msg-2");
    idem_intent_list_free(list);
}

/* Two restarted workers recovering the same backlog at once. */
#define BACKLOG 24

struct worker {
    pthread_t thread;
    size_t resumed;
    int failures;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    idem_intent_recover_options opts = IDEM_INTENT_RECOVER_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;

    opts.max = 4;
    for (;;) {
        idem_intent_list *list = NULL;
        size_t n;

        if (idem_intent_recover(&list, fx.store, NULL, &opts, &err) != 0) {
            w->failures++;
            break;
        }
        n = idem_intent_list_count(list);
        for (size_t i = 0; i < n; i++) {
            idem_outcome out = IDEM_OUTCOME_INIT;

            if (idem_intent_execute(&out, fx.store, idem_intent_list_at(list, i),
                                    example_create_support_task, NULL, NULL, &err) != 0 ||
                out.status != IDEM_STATUS_CREATED)
                w->failures++;
            idem_outcome_clear(&out);
        }
        w->resumed += n;
        idem_intent_list_free(list);
        if (n == 0)
            break;
    }
    return NULL;
}

/* Under row-level security the application's role sees no tenant's intents without a
 * tenant: recovery across tenants finds nothing rather than everything. */
Test(intents_recovery, across_tenants_the_application_role_finds_nothing)
{
    idem_intent_free(approve("acme", "msg-1"));
    idem_intent_list_free(recover(NULL, 0));
    idem_intent_list_free(recover("acme", 1));
}

/* Two workers of a role in idem_app and idem_operator recover every tenant's intents. */
Test(intents_recovery, two_recovering_workers_resume_each_intent_once)
{
    struct worker w[2] = {{0}, {0}};
    char ref[16];

    storetest_close();
    storetest_open_as(NULL, 6, PGTEST_RECOVERER);
    for (int i = 0; i < BACKLOG; i++) {
        snprintf(ref, sizeof(ref), "msg-%d", i);
        idem_intent_free(approve(i % 2 ? "acme" : "globex", ref));
    }
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&w[i].thread, NULL, work, &w[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(w[i].thread, NULL);
    cr_assert_eq(w[0].failures + w[1].failures, 0);
    cr_assert_eq(w[0].resumed + w[1].resumed, BACKLOG, "%zu + %zu", w[0].resumed, w[1].resumed);
    cr_assert_eq(storetest_tasks(), BACKLOG, "one task per intent");
    cr_assert_eq(intenttest_count(fx.check, "done"), BACKLOG);
    cr_assert_eq(pgtest_scalar(fx.check, "SELECT max(attempts) FROM idem.intents"), 1,
                 "no intent attempted twice");
}
