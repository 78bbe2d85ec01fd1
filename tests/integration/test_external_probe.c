/* Resolvers: asking the provider what became of an outcome_unknown operation. The fake
 * provider really recorded (or did not record) each dispatch under its downstream key and
 * answers status requests from that record, or hangs, fails or answers garbage on command.
 * Unknown → done: the retry replays the provider's result, nothing dispatched again; →
 * not done: the next attempt dispatches once with the same key; → failed: rejected, stored
 * and replayed; a resolver that hangs, fails or answers garbage leaves the outcome unknown
 * with the reason; three askers at once change the record once and leave three answers;
 * bad input is refused naming the field. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "idem/sys/external.h"

#include "extest.h"
#include "pgtest.h"

#define ARGS          "{\"to\":\"ana@example.com\",\"subject\":\"Your order\"}"
#define RESOLVER_NAME "mail status"
/* Generous: a loaded machine must not turn a prompt answer into "no answer". */
#define DEADLINE_MS      60000
#define PROBE_TIMEOUT_MS 25000
/* The time limit of a resolver that hangs. */
#define HANG_LIMIT_MS 300
#define KEY_SIZE      64
#define SENT_RECEIPT  "{\"message_id\":\"msg-1\",\"status\":\"sent\"}"

static fake_provider *provider;

/* The tests' store has a long deadline (DEADLINE_MS): only the tests of time limits are
 * about time. */
static void open_all(void)
{
    idem_store_options so = IDEM_STORE_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;

    extest_open("xprobe", 30000, 8);
    idem_external_free(ex.ext);
    idem_store_free(ex.store);
    so.deadline_ms = DEADLINE_MS;
    cr_assert_eq(idem_store_new(&ex.store, ex.pool, &so, &err), 0, "%s", err.message);
    cr_assert_eq(idem_external_new(&ex.ext, ex.store, NULL, &err), 0, "%s", err.message);
    provider = fake_provider_new(1);
}

/* A resolver left hanging is let go, and waited for, before the provider goes. */
static void close_all(void)
{
    struct timespec tick = {0, 10 * 1000 * 1000};

    fake_provider_unhang(provider);
    while (fake_provider_status_active(provider) > 0) {
        fake_provider_unhang(provider);
        nanosleep(&tick, NULL);
    }
    nanosleep(&tick, NULL); /* the resolver's last steps after the provider answered */
    fake_provider_free(provider);
    extest_close();
}

TestSuite(xprobe, .init = open_all, .fini = close_all, .timeout = 120);

/* The example resolver: one status request, its reply turned into an answer. */
static int ask_mail(idem_external_answer *answer, const idem_external_question *q, void *ctx)
{
    char ref[FAKE_REF_SIZE], body[FAKE_BODY_SIZE];
    json_t *result = NULL;
    int rc = 0;

    switch (fake_provider_status(ctx, q->downstream_key, ref, body)) {
    case FAKE_STATUS_SENT:
    case FAKE_STATUS_MANGLED:
        result = json_loads(body, 0, NULL); /* NULL when mangled: an answer not to be used */
        idem_external_answer_done(answer, ref[0] != '\0' ? ref : NULL, result, NULL);
        break;
    case FAKE_STATUS_REFUSED:
        result = json_loads(body, 0, NULL);
        idem_external_answer_failed(answer, NULL, result, "refused for good", NULL);
        break;
    case FAKE_STATUS_NOT_FOUND:
        idem_external_answer_not_done(answer, "no message under this key", NULL);
        break;
    default:
        rc = -1; /* the status request failed */
    }
    json_decref(result);
    return rc;
}

/* A resolver that returns without answering. */
static int say_nothing(idem_external_answer *answer, const idem_external_question *q, void *ctx)
{
    (void)answer;
    (void)q;
    (void)ctx;
    return 0;
}

static void use_resolver(idem_external *ext, idem_external_probe_fn fn, unsigned int timeout_ms)
{
    idem_external_resolver r = IDEM_EXTERNAL_RESOLVER_INIT;
    idem_error err = IDEM_ERROR_INIT;

    r.probe = fn;
    r.ctx = provider;
    r.name = RESOLVER_NAME;
    r.timeout_ms = timeout_ms;
    cr_assert_eq(idem_external_set_resolver(ext, EXTEST_TOOL, &r, &err), 0, "%s", err.message);
}

/* Dispatch @op once as @b makes it go, which leaves it outcome_unknown; @key gets its
 * downstream key. */
static void make_unknown(const char *op, enum fake_behaviour b, char key[KEY_SIZE])
{
    idem_external_attempt *a = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;

    cr_assert_eq(extest_begin(&a, &out, "acme", op, ARGS), 0);
    snprintf(key, KEY_SIZE, "%s", idem_external_attempt_downstream_key(a));
    fake_provider_script(provider, b, 1);
    cr_assert_eq(extest_dispatch(&out, a, provider), IDEM_EUNKNOWN);
    idem_outcome_clear(&out);
    idem_external_attempt_free(a);
}

static int begin(idem_external_attempt **a, idem_outcome *out, idem_external *ext, const char *op,
                 idem_error *err)
{
    idem_request req = extest_request("acme", op, ARGS);

    idem_outcome_clear(out);
    return idem_external_begin(a, out, ext, &req, err);
}

static idem_external_history *history(const char *op)
{
    idem_external_history *h = NULL;
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_external_history_get(&h, ex.check, "acme", op, &err), 0, "%s", err.message);
    return h;
}

/* The outcome_unknown item's resolver, or "" while it is open. */
static void item_resolved_by(char *out, size_t size, const char *op)
{
    char sql[256];
    PGresult *res;

    snprintf(sql, sizeof(sql),
             "SELECT coalesce(resolved_by, '') FROM idem.reconciliation_items WHERE tenant ="
             " 'acme' AND operation_id = '%s' AND kind = 'outcome_unknown'",
             op);
    res = pgtest_exec(ex.check, sql);
    cr_assert_eq(PQntuples(res), 1, "one outcome_unknown item for %s", op);
    snprintf(out, size, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
}

static long elapsed_ms(const struct timespec *t0)
{
    struct timespec t1;

    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

Test(xprobe, unknown_then_done_the_retry_replays_the_providers_result_without_dispatching)
{
    idem_external_attempt *a = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_external_history *h;
    const idem_external_probe_record *pr;
    char key[KEY_SIZE], by[128];

    make_unknown("op-1", FAKE_LOSE_REPLY, key);
    use_resolver(ex.ext, ask_mail, PROBE_TIMEOUT_MS);
    cr_assert_eq(begin(&a, &out, ex.ext, "op-1", &err), 0, "%s", err.message);
    cr_assert_null(a, "nothing to dispatch");
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED, "%s", idem_status_name(out.status));
    cr_assert_str_eq(out.receipt, SENT_RECEIPT, "the provider's result, canonical");
    cr_assert_eq(fake_provider_requests(provider), 1, "not dispatched again");
    cr_assert_eq(fake_provider_acts_for(provider, key), 1);
    cr_assert_eq(fake_provider_status_requests(provider), 1);
    h = history("op-1");
    cr_assert_str_eq(idem_external_history_state(h), "completed");
    cr_assert_str_eq(idem_external_history_provider_ref(h), "msg-1");
    cr_assert_eq(idem_external_history_count(h), 1, "one attempt");
    cr_assert_eq(idem_external_history_probe_count(h), 1);
    pr = idem_external_history_probe_at(h, 0);
    cr_assert_str_eq(pr->asked_by, "retry");
    cr_assert_str_eq(pr->resolver, RESOLVER_NAME);
    cr_assert_str_eq(pr->answer, "done");
    cr_assert_str_eq(pr->provider_ref, "msg-1");
    cr_assert_str_eq(pr->result, SENT_RECEIPT);
    cr_assert(pr->changed);
    cr_assert_gt(pr->answered_at, 0);
    cr_assert_null(idem_external_history_probe_at(h, 1));
    item_resolved_by(by, sizeof(by), "op-1");
    cr_assert_str_eq(by, RESOLVER_NAME, "the item is resolved, naming the resolver");
    cr_assert_eq(begin(&a, &out, ex.ext, "op-1", &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_str_eq(out.receipt, SENT_RECEIPT);
    cr_assert_eq(fake_provider_status_requests(provider), 1, "a settled key is not asked about");
    idem_external_history_free(h);
    idem_outcome_clear(&out);
}

/* Not done: the retry itself takes the key over and dispatches it, with the same key. */
Test(xprobe, unknown_then_not_done_the_retry_dispatches_once_with_the_same_key)
{
    idem_external_attempt *a = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_external_history *h;
    char key[KEY_SIZE], by[128];

    make_unknown("op-2", FAKE_LOSE_REQUEST, key);
    cr_assert_eq(fake_provider_requests(provider), 0, "the request never arrived");
    use_resolver(ex.ext, ask_mail, PROBE_TIMEOUT_MS);
    cr_assert_eq(begin(&a, &out, ex.ext, "op-2", &err), 0, "%s", err.message);
    cr_assert_not_null(a, "this retry dispatches");
    cr_assert_eq(out.status, IDEM_STATUS_IN_PROGRESS);
    cr_assert_str_eq(idem_external_attempt_downstream_key(a), key, "the same downstream key");
    cr_assert_eq(idem_external_attempt_number(a), 2);
    cr_assert_eq(extest_dispatch(&out, a, provider), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    idem_external_attempt_free(a);
    a = NULL;
    cr_assert_eq(fake_provider_acts_for(provider, key), 1, "dispatched once");
    cr_assert_eq(fake_provider_requests(provider), 1);
    h = history("op-2");
    cr_assert_str_eq(idem_external_history_state(h), "completed");
    cr_assert_eq(idem_external_history_count(h), 2);
    cr_assert_str_eq(idem_external_history_at(h, 0)->outcome, "unknown");
    cr_assert_str_eq(idem_external_history_at(h, 1)->outcome, "completed");
    cr_assert_eq(idem_external_history_probe_count(h), 1);
    cr_assert_str_eq(idem_external_history_probe_at(h, 0)->answer, "not_done");
    cr_assert_str_eq(idem_external_history_probe_at(h, 0)->reason, "no message under this key");
    cr_assert(idem_external_history_probe_at(h, 0)->changed);
    item_resolved_by(by, sizeof(by), "op-2");
    cr_assert_str_eq(by, RESOLVER_NAME);
    cr_assert_eq(begin(&a, &out, ex.ext, "op-2", &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    idem_external_history_free(h);
    idem_outcome_clear(&out);
}

/* Not done, from a worker: the record is pending again, and the next call dispatches it. */
Test(xprobe, unknown_then_not_done_from_a_worker_the_next_attempt_dispatches_once_with_the_same_key)
{
    idem_external_probe_result r = IDEM_EXTERNAL_PROBE_RESULT_INIT;
    idem_external_attempt *a = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_external_history *h;
    char key[KEY_SIZE];

    make_unknown("op-3", FAKE_LOSE_REQUEST, key);
    use_resolver(ex.ext, ask_mail, PROBE_TIMEOUT_MS);
    cr_assert_eq(idem_external_probe(&r, ex.ext, "acme", "op-3", &err), 0, "%s", err.message);
    cr_assert_eq(r.verdict, IDEM_PROBE_NOT_DONE);
    cr_assert_eq(r.changed, 1);
    h = history("op-3");
    cr_assert_str_eq(idem_external_history_state(h), "pending");
    cr_assert_not(idem_external_history_lease_live(h));
    cr_assert_str_eq(idem_external_history_probe_at(h, 0)->asked_by, "probe");
    idem_external_history_free(h);
    cr_assert_eq(fake_provider_requests(provider), 0, "a probe dispatches nothing");
    cr_assert_eq(begin(&a, &out, ex.ext, "op-3", &err), 0, "%s", err.message);
    cr_assert_not_null(a);
    cr_assert_str_eq(idem_external_attempt_downstream_key(a), key);
    cr_assert_eq(extest_dispatch(&out, a, provider), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    idem_external_attempt_free(a);
    cr_assert_eq(fake_provider_acts_for(provider, key), 1);
    cr_assert_eq(fake_provider_status_requests(provider), 1,
                 "the pending record was not asked about");
    idem_outcome_clear(&out);
}

Test(xprobe, unknown_then_failed_is_stored_and_replayed_as_rejected)
{
    idem_external_probe_result r = IDEM_EXTERNAL_PROBE_RESULT_INIT;
    idem_external_attempt *a = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_external_history *h;
    char key[KEY_SIZE];

    make_unknown("op-4", FAKE_REFUSE_LOSE_REPLY, key);
    use_resolver(ex.ext, ask_mail, PROBE_TIMEOUT_MS);
    cr_assert_eq(idem_external_probe(&r, ex.ext, "acme", "op-4", &err), 0, "%s", err.message);
    cr_assert_eq(r.verdict, IDEM_PROBE_FAILED);
    cr_assert_eq(r.changed, 1);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(begin(&a, &out, ex.ext, "op-4", &err), IDEM_EREJECTED, "%s", err.message);
        cr_assert_null(a);
        cr_assert_eq(out.status, IDEM_STATUS_REJECTED);
        cr_assert_str_eq(out.receipt, "{\"error\":\"mailbox unavailable\"}");
    }
    h = history("op-4");
    cr_assert_str_eq(idem_external_history_state(h), "failed");
    cr_assert_str_eq(idem_external_history_probe_at(h, 0)->answer, "failed");
    cr_assert_str_eq(idem_external_history_probe_at(h, 0)->reason, "refused for good");
    idem_external_history_free(h);
    cr_assert_eq(fake_provider_status_requests(provider), 1);
    cr_assert_eq(fake_provider_acts(provider), 0, "never sent");
    idem_outcome_clear(&out);
}

/* The outcome stays unknown, the item open, and the answer is kept with @reason. */
static void still_unknown(const char *op, size_t probes, const char *reason)
{
    idem_external_history *h = history(op);
    const idem_external_probe_record *pr = idem_external_history_probe_at(h, probes - 1);
    char by[128];

    cr_assert_str_eq(idem_external_history_state(h), "outcome_unknown");
    cr_assert_eq(idem_external_history_probe_count(h), probes);
    cr_assert_str_eq(pr->answer, "unknown");
    cr_assert_not(pr->changed);
    cr_assert_not_null(strstr(pr->reason, reason), "%s", pr->reason);
    item_resolved_by(by, sizeof(by), op);
    cr_assert_str_eq(by, "", "the item stays open");
    idem_external_history_free(h);
}

Test(xprobe, a_resolver_that_hangs_is_given_up_after_its_time_limit)
{
    idem_external_attempt *a = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    struct timespec t0;
    char key[KEY_SIZE];
    long took;

    make_unknown("op-5", FAKE_LOSE_REPLY, key);
    use_resolver(ex.ext, ask_mail, HANG_LIMIT_MS);
    fake_provider_script_status(provider, FAKE_STATUS_HANG, 1);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_assert_eq(begin(&a, &out, ex.ext, "op-5", &err), IDEM_EUNKNOWN, "%s", err.message);
    took = elapsed_ms(&t0);
    cr_assert_null(a);
    cr_assert_eq(out.status, IDEM_STATUS_OUTCOME_UNKNOWN);
    cr_assert_not_null(
        strstr(err.message, "resolver " RESOLVER_NAME " gave no answer within 300 ms"), "%s",
        err.message);
    cr_assert_leq(took, pgtest_late_ms(HANG_LIMIT_MS), "took %ld ms", took);
    still_unknown("op-5", 1, "gave no answer within 300 ms");
    cr_assert_eq(fake_provider_requests(provider), 1, "not dispatched again");
}

Test(xprobe, a_resolver_that_hangs_is_given_up_within_the_calls_deadline)
{
    idem_store_options so = IDEM_STORE_OPTIONS_INIT;
    idem_store *store = NULL;
    idem_external *ext = NULL;
    idem_external_attempt *a = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    struct timespec t0;
    char key[KEY_SIZE];
    long took;

    make_unknown("op-6", FAKE_LOSE_REPLY, key);
    so.deadline_ms = 2000;
    cr_assert_eq(idem_store_new(&store, ex.pool, &so, &err), 0, "%s", err.message);
    cr_assert_eq(idem_external_new(&ext, store, NULL, &err), 0, "%s", err.message);
    use_resolver(ext, ask_mail, 600000); /* its own limit is far off: the deadline rules */
    fake_provider_script_status(provider, FAKE_STATUS_HANG, 1);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_assert_eq(begin(&a, &out, ext, "op-6", &err), IDEM_EUNKNOWN, "%s", err.message);
    took = elapsed_ms(&t0);
    cr_assert_eq(out.status, IDEM_STATUS_OUTCOME_UNKNOWN);
    cr_assert_not_null(strstr(err.message, "gave no answer within"), "%s", err.message);
    cr_assert_leq(took, pgtest_late_ms(so.deadline_ms), "took %ld ms", took);
    still_unknown("op-6", 1, "gave no answer within");
    idem_external_free(ext);
    idem_store_free(store);
}

Test(xprobe, a_resolver_that_fails_or_answers_garbage_leaves_the_outcome_unknown_with_the_reason)
{
    idem_external_probe_result r = IDEM_EXTERNAL_PROBE_RESULT_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char key[KEY_SIZE];

    make_unknown("op-7", FAKE_LOSE_REPLY, key);
    use_resolver(ex.ext, ask_mail, PROBE_TIMEOUT_MS);
    fake_provider_script_status(provider, FAKE_STATUS_ERROR, 1);
    fake_provider_script_status(provider, FAKE_STATUS_GARBAGE, 1);
    cr_assert_eq(idem_external_probe(&r, ex.ext, "acme", "op-7", &err), IDEM_EUNKNOWN);
    cr_assert_eq(r.verdict, IDEM_PROBE_UNKNOWN);
    cr_assert_eq(r.changed, 0);
    cr_assert_not_null(strstr(err.message, "resolver " RESOLVER_NAME " failed (it returned -1)"),
                       "%s", err.message);
    still_unknown("op-7", 1, "failed (it returned -1)");
    cr_assert_eq(idem_external_probe(&r, ex.ext, "acme", "op-7", &err), IDEM_EUNKNOWN);
    cr_assert_not_null(
        strstr(err.message, "answered what cannot be used: result: must not be NULL"), "%s",
        err.message);
    still_unknown("op-7", 2, "answered what cannot be used");
    use_resolver(ex.ext, say_nothing, PROBE_TIMEOUT_MS);
    cr_assert_eq(idem_external_probe(&r, ex.ext, "acme", "op-7", &err), IDEM_EUNKNOWN);
    cr_assert_not_null(strstr(err.message, "returned without an answer"), "%s", err.message);
    still_unknown("op-7", 3, "returned without an answer");
    cr_assert_eq(fake_provider_requests(provider), 1, "never dispatched again");
}

/* One asker of the concurrency test. */
typedef struct asker {
    pthread_t thread;
    int retry; /* idem_external_begin(), else idem_external_probe() */
    int rc;
    idem_outcome out;
    idem_external_probe_result result;
    idem_external_attempt *a;
    idem_error err;
} asker;

static void *ask_once(void *arg)
{
    asker *k = arg;

    if (k->retry)
        k->rc = begin(&k->a, &k->out, ex.ext, "op-8", &k->err);
    else
        k->rc = idem_external_probe(&k->result, ex.ext, "acme", "op-8", &k->err);
    return NULL;
}

Test(xprobe, three_askers_at_once_change_the_record_once_and_leave_three_answers)
{
    asker k[3];
    char key[KEY_SIZE], by[128];
    long changed;

    make_unknown("op-8", FAKE_LOSE_REPLY, key);
    use_resolver(ex.ext, ask_mail, PROBE_TIMEOUT_MS);
    fake_provider_hold_status(provider, 3); /* each answers once all three have asked */
    for (int i = 0; i < 3; i++) {
        memset(&k[i], 0, sizeof(k[i]));
        k[i].retry = i == 2;
        k[i].out = (idem_outcome)IDEM_OUTCOME_INIT;
        k[i].result = (idem_external_probe_result)IDEM_EXTERNAL_PROBE_RESULT_INIT;
        k[i].err = (idem_error)IDEM_ERROR_INIT;
        cr_assert_eq(pthread_create(&k[i].thread, NULL, ask_once, &k[i]), 0);
    }
    for (int i = 0; i < 3; i++)
        pthread_join(k[i].thread, NULL);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(k[i].rc, 0, "probe %d: %s", i, k[i].err.message);
        cr_assert_eq(k[i].result.verdict, IDEM_PROBE_DONE);
    }
    cr_assert_eq(k[2].rc, 0, "retry: %s", k[2].err.message);
    cr_assert_null(k[2].a);
    cr_assert_eq(k[2].out.status, IDEM_STATUS_REPLAYED);
    cr_assert_str_eq(k[2].out.receipt, SENT_RECEIPT);
    cr_assert_eq(fake_provider_status_requests(provider), 3, "the provider was asked three times");
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.external_probes WHERE operation_id ="
                               " 'op-8'"),
                 3, "three answers kept");
    changed = extest_scalar("SELECT count(*) FROM idem.external_probes WHERE operation_id ="
                            " 'op-8' AND changed");
    cr_assert_eq(changed, 1, "one state change");
    cr_assert_leq(k[0].result.changed + k[1].result.changed, 1);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.operations WHERE operation_id = 'op-8'"
                               " AND state = 'completed'"),
                 1);
    item_resolved_by(by, sizeof(by), "op-8");
    cr_assert_str_eq(by, RESOLVER_NAME);
    cr_assert_eq(fake_provider_requests(provider), 1, "never dispatched again");
    idem_outcome_clear(&k[2].out);
}

Test(xprobe, probe_asks_only_about_an_unknown_outcome_with_a_resolver)
{
    idem_external_probe_result r = IDEM_EXTERNAL_PROBE_RESULT_INIT;
    idem_external_attempt *a = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char key[KEY_SIZE];

    make_unknown("op-9", FAKE_LOSE_REPLY, key);
    cr_assert_eq(idem_external_probe(&r, ex.ext, "acme", "op-9", &err), IDEM_ENOTFOUND);
    cr_assert_str_eq(err.message, "no resolver is registered for tool " EXTEST_TOOL);
    cr_assert_eq(begin(&a, &out, ex.ext, "op-9", &err), IDEM_EUNKNOWN,
                 "without a resolver the retry answers as before");
    use_resolver(ex.ext, ask_mail, PROBE_TIMEOUT_MS);
    cr_assert_eq(idem_external_probe(&r, ex.ext, "acme", "op-10", &err), IDEM_ENOTFOUND);
    cr_assert_eq(extest_begin(&a, &out, "acme", "op-11", ARGS), 0);
    cr_assert_eq(extest_dispatch(&out, a, provider), 0);
    idem_external_attempt_free(a);
    cr_assert_eq(idem_external_probe(&r, ex.ext, "acme", "op-11", &err), IDEM_ECONFLICT);
    cr_assert_str_eq(err.message,
                     "operation op-11 is completed; only an unknown outcome is probed");
    cr_assert_eq(fake_provider_status_requests(provider), 0, "nobody was asked");
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.external_probes"), 0);
    idem_outcome_clear(&out);
}

Test(xprobe, bad_input_is_refused_naming_the_field)
{
    idem_external_resolver r = IDEM_EXTERNAL_RESOLVER_INIT, v = IDEM_EXTERNAL_RESOLVER_INIT;
    idem_external_probe_result res = IDEM_EXTERNAL_PROBE_RESULT_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char long_name[200];

    r.ctx = provider;
    cr_assert_eq(idem_external_set_resolver(ex.ext, EXTEST_TOOL, &r, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "resolver.probe");
    r.probe = ask_mail;
    v = r;
    v.version = 0;
    cr_assert_eq(idem_external_set_resolver(ex.ext, EXTEST_TOOL, &v, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "resolver.version");
    v.version = IDEM_EXTERNAL_RESOLVER_VERSION + 1;
    cr_assert_eq(idem_external_set_resolver(ex.ext, EXTEST_TOOL, &v, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "resolver.version");
    cr_assert_eq(idem_external_set_resolver(ex.ext, "", &r, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "tool");
    cr_assert_eq(idem_external_set_resolver(ex.ext, NULL, &r, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "tool");
    cr_assert_eq(idem_external_set_resolver(ex.ext, EXTEST_TOOL, NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "resolver");
    cr_assert_eq(idem_external_set_resolver(NULL, EXTEST_TOOL, &r, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "ext");
    v = r;
    v.timeout_ms = 0;
    cr_assert_eq(idem_external_set_resolver(ex.ext, EXTEST_TOOL, &v, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "resolver.timeout_ms");
    v = r;
    memset(long_name, 'n', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    v.name = long_name;
    cr_assert_eq(idem_external_set_resolver(ex.ext, EXTEST_TOOL, &v, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "resolver.name");
    cr_assert_eq(idem_external_resolver_init(&v, 0), IDEM_EINVAL);
    cr_assert_eq(idem_external_resolver_init(&v, IDEM_EXTERNAL_RESOLVER_VERSION), 0);
    cr_assert_eq(v.timeout_ms, 2000);
    cr_assert_null(v.probe);
    res.version = 0;
    cr_assert_eq(idem_external_probe(&res, ex.ext, "acme", "op-1", &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "out.version");
    cr_assert_eq(idem_external_probe(NULL, ex.ext, "acme", "op-1", &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "out");
    cr_assert_eq(idem_external_probe_result_init(&res, IDEM_EXTERNAL_PROBE_RESULT_VERSION), 0);
    cr_assert_eq(idem_external_probe(&res, NULL, "acme", "op-1", &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "ext");
    cr_assert_eq(idem_external_probe(&res, ex.ext, "", "op-1", &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "tenant");
    cr_assert_eq(idem_external_probe(&res, ex.ext, "acme", NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "operation_id");
    cr_assert_eq(idem_external_answer_done(NULL, NULL, NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "answer");
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.external_probes"), 0, "nothing written");
}

/* An effect that enqueues one email (outbox.h); @ctx gets the item's operation ID. */
static int enqueue_email(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                         idem_error *err)
{
    char *item = ctx;
    int rc = idem_tx_enqueue(item, tx, EXTEST_TOOL, 1, arguments, NULL, err);

    if (rc == 0)
        *response = json_pack("{s:s}", "queued", item);
    return rc;
}

/* Enqueue an email under @op, claim it and dispatch it as @b makes it go (unknown). */
static void outbox_unknown(const char *op, enum fake_behaviour b, char item[IDEM_UUID_STRING_SIZE],
                           char key[KEY_SIZE])
{
    idem_request req = extest_request("acme", op, ARGS);
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_outbox_batch *batch = NULL;

    req.tool = "queue_email";
    cr_assert_eq(idem_store_execute(&out, ex.store, &req, enqueue_email, item, &err), 0, "%s",
                 err.message);
    cr_assert_eq(idem_outbox_claim(&batch, ex.ext, "acme", NULL, 1, &err), 0, "%s", err.message);
    cr_assert_eq(idem_outbox_batch_count(batch), 1);
    snprintf(key, KEY_SIZE, "%s",
             idem_external_attempt_downstream_key(idem_outbox_batch_at(batch, 0)));
    fake_provider_script(provider, b, 1);
    cr_assert_eq(extest_dispatch(&out, idem_outbox_batch_at(batch, 0), provider), IDEM_EUNKNOWN);
    idem_outbox_batch_free(batch);
    idem_outcome_clear(&out);
}

Test(xprobe, an_outbox_item_not_done_is_due_again_with_the_same_key_and_one_done_is_completed)
{
    idem_external_probe_result r = IDEM_EXTERNAL_PROBE_RESULT_INIT;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_outbox_batch *batch = NULL;
    idem_external_history *h;
    char item[IDEM_UUID_STRING_SIZE], key[KEY_SIZE];

    use_resolver(ex.ext, ask_mail, PROBE_TIMEOUT_MS);
    outbox_unknown("order-1", FAKE_LOSE_REQUEST, item, key);
    cr_assert_eq(idem_external_probe(&r, ex.ext, "acme", item, &err), 0, "%s", err.message);
    cr_assert_eq(r.verdict, IDEM_PROBE_NOT_DONE);
    h = history(item);
    cr_assert_str_eq(idem_external_history_outbox_state(h), "queued");
    idem_external_history_free(h);
    cr_assert_eq(idem_outbox_claim(&batch, ex.ext, "acme", NULL, 1, &err), 0, "%s", err.message);
    cr_assert_eq(idem_outbox_batch_count(batch), 1, "due again");
    cr_assert_str_eq(idem_external_attempt_operation_id(idem_outbox_batch_at(batch, 0)), item);
    cr_assert_str_eq(idem_external_attempt_downstream_key(idem_outbox_batch_at(batch, 0)), key);
    cr_assert_eq(idem_external_attempt_number(idem_outbox_batch_at(batch, 0)), 2);
    cr_assert_eq(extest_dispatch(&out, idem_outbox_batch_at(batch, 0), provider), 0);
    idem_outbox_batch_free(batch);
    cr_assert_eq(fake_provider_acts_for(provider, key), 1);

    outbox_unknown("order-2", FAKE_LOSE_REPLY, item, key);
    cr_assert_eq(idem_external_probe(&r, ex.ext, "acme", item, &err), 0, "%s", err.message);
    cr_assert_eq(r.verdict, IDEM_PROBE_DONE);
    h = history(item);
    cr_assert_str_eq(idem_external_history_state(h), "completed");
    cr_assert_str_eq(idem_external_history_outbox_state(h), "completed");
    idem_external_history_free(h);
    cr_assert_eq(idem_outbox_claim(&batch, ex.ext, "acme", NULL, 1, &err), 0, "%s", err.message);
    cr_assert_eq(idem_outbox_batch_count(batch), 0, "nothing due");
    idem_outbox_batch_free(batch);
    cr_assert_eq(fake_provider_acts_for(provider, key), 1);
    idem_outcome_clear(&out);
}

static const char *state_of(const char *op)
{
    static char state[32];
    idem_external_history *h = history(op);

    snprintf(state, sizeof(state), "%s", idem_external_history_state(h));
    idem_external_history_free(h);
    return state;
}

Test(xprobe, probe_open_asks_about_open_unknowns_least_recently_asked_first_up_to_its_limit)
{
    idem_external_probe_summary s = IDEM_EXTERNAL_PROBE_SUMMARY_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char key[KEY_SIZE];

    make_unknown("op-a", FAKE_LOSE_REPLY, key);
    make_unknown("op-b", FAKE_LOSE_REQUEST, key);
    make_unknown("op-c", FAKE_LOSE_REPLY, key);
    cr_assert_eq(idem_external_probe_open(&s, ex.ext, "acme", 10, &err), 0, "%s", err.message);
    cr_assert_eq(s.asked, 0, "no tool has a resolver");
    use_resolver(ex.ext, ask_mail, PROBE_TIMEOUT_MS);
    fake_provider_script_status(provider, FAKE_STATUS_ERROR, 1);
    cr_assert_eq(idem_external_probe_open(&s, ex.ext, "acme", 2, &err), 0, "%s", err.message);
    cr_assert_eq(s.asked, 2);
    cr_assert_eq(s.settled, 1);
    cr_assert_eq(s.unknown, 1);
    cr_assert_str_eq(state_of("op-a"), "outcome_unknown", "asked first: the provider failed");
    cr_assert_str_eq(state_of("op-b"), "pending", "not done");
    cr_assert_str_eq(state_of("op-c"), "outcome_unknown", "beyond the limit");
    cr_assert_eq(fake_provider_status_requests(provider), 2);
    cr_assert_eq(idem_external_probe_open(&s, ex.ext, "acme", 1, &err), 0, "%s", err.message);
    cr_assert_eq(s.asked, 1);
    cr_assert_str_eq(state_of("op-c"), "completed", "never asked: before op-a");
    cr_assert_str_eq(state_of("op-a"), "outcome_unknown");
    cr_assert_eq(idem_external_probe_open(&s, ex.ext, "acme", 10, &err), 0, "%s", err.message);
    cr_assert_eq(s.asked, 1);
    cr_assert_eq(s.settled, 1);
    cr_assert_str_eq(state_of("op-a"), "completed");
    cr_assert_eq(idem_external_probe_open(&s, ex.ext, "acme", 10, &err), 0, "%s", err.message);
    cr_assert_eq(s.asked, 0, "nothing open");
    cr_assert_eq(idem_external_probe_open(&s, ex.ext, "globex", 10, &err), 0, "%s", err.message);
    cr_assert_eq(s.asked, 0, "another tenant's");
    cr_assert_eq(fake_provider_status_requests(provider), 4);
    cr_assert_eq(fake_provider_requests(provider), 2, "nothing dispatched");
    cr_assert_eq(idem_external_probe_open(&s, ex.ext, "acme", 0, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "limit");
    cr_assert_eq(idem_external_probe_open(&s, ex.ext, "acme", 1001, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "limit");
    cr_assert_eq(idem_external_probe_open(&s, NULL, "acme", 1, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "ext");
    cr_assert_eq(idem_external_probe_open(NULL, ex.ext, "acme", 1, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "out");
    s.version = 0;
    cr_assert_eq(idem_external_probe_open(&s, ex.ext, "acme", 1, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "out.version");
    cr_assert_eq(idem_external_probe_summary_init(&s, IDEM_EXTERNAL_PROBE_SUMMARY_VERSION), 0);
    cr_assert_eq(idem_external_probe_open(&s, ex.ext, "", 1, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "tenant");
}

/* A tool built for this version reads the history of a schema that has no answers yet. */
Test(xprobe, history_of_a_schema_before_0011_has_no_answers)
{
    char *conninfo = pgtest_new_database("xprobe10");
    PGconn *conn = pgtest_connect(conninfo);
    idem_external_history *h = NULL;
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_migrate_up(conn, 10, NULL, &err), 0, "%s", err.message);
    PQclear(pgtest_exec(conn,
                        "INSERT INTO idem.operations (tenant, operation_id, tool, payload_version,"
                        " fingerprint, state, claim_token, expires_at, forget_at, downstream_key,"
                        " attempts) VALUES ('acme', 'op-1', 'send_email', 1, sha256('x'),"
                        " 'outcome_unknown', gen_random_uuid(), now() + interval '1 day',"
                        " now() + interval '2 days', 'key-1', 1)"));
    cr_assert_eq(idem_external_history_get(&h, conn, "acme", "op-1", &err), 0, "%s", err.message);
    cr_assert_str_eq(idem_external_history_state(h), "outcome_unknown");
    cr_assert_eq(idem_external_history_probe_count(h), 0);
    cr_assert_eq(PQtransactionStatus(conn), PQTRANS_IDLE);
    idem_external_history_free(h);
    PQfinish(conn);
    free(conninfo);
}
