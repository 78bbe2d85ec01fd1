/* External effects: leases. One holder at a time, never a second dispatch while it holds;
 * only the holder can complete, extend or release; a lapsed lease is taken over exactly once,
 * with the same downstream key; an unknown outcome is never dispatched again. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "idem/sys/external.h"

#include "extest.h"
#include "pgtest.h"

#define ARGS    "{\"to\":\"ada@example.com\",\"subject\":\"Receipt\"}"
#define THREADS 16

/* A short lease, which still lasts through a few calls on a loaded machine; a heartbeat
 * renews it every HEARTBEAT_MS, leaving it PGTEST_LOAD_SLACK_MS to arrive. */
#define SHORT_LEASE_MS (PGTEST_LOAD_SLACK_MS + 500)
#define HEARTBEAT_MS   500

static fake_provider *provider;

static void open_all(void)
{
    extest_open("lease", 30000, 8);
    provider = fake_provider_new(1);
}

static void close_all(void)
{
    fake_provider_free(provider);
    extest_close();
}

TestSuite(lease, .init = open_all, .fini = close_all, .timeout = 60);

static idem_external_attempt *lease_of(idem_external *ext, const char *op)
{
    idem_request req = extest_request("acme", op, ARGS);
    idem_external_attempt *a = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_external_begin(&a, &out, ext, &req, &err), 0, "%s", err.message);
    cr_assert_not_null(a);
    idem_outcome_clear(&out);
    return a;
}

static idem_status answer(const char *op)
{
    idem_external_attempt *a = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_status status;

    extest_begin(&a, &out, "acme", op, ARGS);
    cr_assert_null(a, "no second lease");
    status = out.status;
    idem_outcome_clear(&out);
    return status;
}

/* Callers racing on one key: each begins once, and dispatches if it got the lease. */
typedef struct racer {
    pthread_t thread;
    pthread_barrier_t *start;
    const char *op;
    atomic_int *answered;
    idem_status status;
    int leased, number;
} racer;

static void *race(void *arg)
{
    racer *r = arg;
    idem_external_attempt *a = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;

    pthread_barrier_wait(r->start);
    extest_begin(&a, &out, "acme", r->op, ARGS);
    r->status = out.status;
    r->leased = a != NULL;
    if (a != NULL) {
        r->number = idem_external_attempt_number(a);
        extest_dispatch(&out, a, provider); /* hangs until the others have answered */
    } else {
        atomic_fetch_add(r->answered, 1);
    }
    idem_outcome_clear(&out);
    idem_external_attempt_free(a);
    return NULL;
}

/* Run THREADS racers on @op; the holder's dispatch hangs until every other has answered.
 * Returns how many got a lease; *number is the holder's attempt number. */
static int run_race(const char *op, int *number)
{
    racer r[THREADS];
    pthread_barrier_t start;
    atomic_int answered = 0;
    int leased = 0, in_progress = 0;

    fake_provider_script(provider, FAKE_HANG, 1);
    pthread_barrier_init(&start, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) {
        r[i] = (racer){.start = &start, .op = op, .answered = &answered};
        cr_assert_eq(pthread_create(&r[i].thread, NULL, race, &r[i]), 0);
    }
    for (int waited = 0; atomic_load(&answered) < THREADS - 1 && waited < 20000; waited += 10)
        usleep(10000);
    fake_provider_unhang(provider);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(r[i].thread, NULL);
        leased += r[i].leased;
        in_progress += !r[i].leased && r[i].status == IDEM_STATUS_IN_PROGRESS;
        if (r[i].leased)
            *number = r[i].number;
    }
    pthread_barrier_destroy(&start);
    cr_assert_eq(in_progress, THREADS - leased, "everyone else: in_progress while it is held");
    return leased;
}

Test(lease, many_callers_on_one_key_dispatch_once_while_the_lease_is_held)
{
    int number = 0;

    cr_assert_eq(run_race("op-1", &number), 1, "one lease");
    cr_assert_eq(number, 1);
    cr_assert_eq(fake_provider_requests(provider), 1, "never a second dispatch");
    cr_assert_eq(answer("op-1"), IDEM_STATUS_REPLAYED);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.external_attempts"), 1);
}

Test(lease, a_lapsed_lease_is_taken_over_exactly_once_under_concurrency)
{
    idem_external_attempt *crashed = lease_of(ex.ext, "op-1");
    int number = 0;

    extest_lapse("acme", "op-1");
    cr_assert_eq(run_race("op-1", &number), 1, "one takeover");
    cr_assert_eq(number, 2);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.external_attempts"), 2);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.external_attempts WHERE attempt = 1"
                               " AND outcome = 'lease_expired'"),
                 1, "the lapsed attempt is recorded");
    idem_external_attempt_free(crashed);
}

Test(lease, a_crash_after_dispatch_resumes_after_the_lease_with_the_same_key_and_acts_once)
{
    idem_external_options opts = IDEM_EXTERNAL_OPTIONS_INIT;
    idem_external *fast = NULL;
    idem_external_attempt *a, *b;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_external_history *h = NULL;
    idem_error err = IDEM_ERROR_INIT;
    char ref[FAKE_REF_SIZE], key[64];

    opts.lease_ms = SHORT_LEASE_MS;
    cr_assert_eq(idem_external_new(&fast, ex.store, &opts, &err), 0, "%s", err.message);
    a = lease_of(fast, "op-1");
    snprintf(key, sizeof(key), "%s", idem_external_attempt_downstream_key(a));
    cr_assert_eq(fake_provider_send(provider, key, "hello", ref), FAKE_SENT);
    idem_external_attempt_free(a); /* the worker dies before it reports */
    cr_assert_eq(answer("op-1"), IDEM_STATUS_IN_PROGRESS, "while the lease lasts");
    usleep((SHORT_LEASE_MS + 100) * 1000); /* the lease ends on the database's clock */
    b = lease_of(fast, "op-1");
    cr_assert_eq(idem_external_attempt_number(b), 2);
    cr_assert_str_eq(idem_external_attempt_downstream_key(b), key);
    cr_assert_eq(extest_dispatch(&out, b, provider), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_str_eq(out.receipt, "{\"message_id\":\"msg-1\"}", "the provider's first act");
    cr_assert_eq(fake_provider_requests(provider), 2);
    cr_assert_eq(fake_provider_acts(provider), 1, "a provider that honours the key acts once");
    cr_assert_eq(idem_external_history_get(&h, ex.check, "acme", "op-1", &err), 0);
    cr_assert_eq(idem_external_history_count(h), 2);
    cr_assert_str_eq(idem_external_history_at(h, 0)->outcome, "lease_expired");
    cr_assert_str_eq(idem_external_history_at(h, 1)->outcome, "completed");
    idem_external_history_free(h);
    idem_outcome_clear(&out);
    idem_external_attempt_free(b);
    idem_external_free(fast);
}

Test(lease, after_an_unknown_result_a_provider_that_ignores_keys_is_never_called_again)
{
    fake_provider *careless = fake_provider_new(0);
    idem_external_attempt *a = lease_of(ex.ext, "op-1");
    idem_outcome out = IDEM_OUTCOME_INIT;

    fake_provider_script(careless, FAKE_LOSE_REPLY, 1);
    cr_assert_eq(extest_dispatch(&out, a, careless), IDEM_EUNKNOWN);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(answer("op-1"), IDEM_STATUS_OUTCOME_UNKNOWN);
    /* UTC arithmetic: Citus refuses timestamptz - interval (stable) over a column. */
    extest_exec(
        "UPDATE idem.operations"
        " SET created_at = (created_at AT TIME ZONE 'UTC' - interval '1 day') AT TIME ZONE 'UTC'");
    cr_assert_eq(answer("op-1"), IDEM_STATUS_OUTCOME_UNKNOWN, "however long after");
    cr_assert_eq(fake_provider_requests(careless), 1, "no silent second call");
    cr_assert_eq(fake_provider_acts(careless), 1);
    idem_outcome_clear(&out);
    idem_external_attempt_free(a);
    fake_provider_free(careless);
}

Test(lease, an_attempt_that_lost_its_lease_cannot_extend_release_or_complete_it)
{
    idem_external_attempt *old = lease_of(ex.ext, "op-1"), *holder;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    json_t *response = json_pack("{s:s}", "message_id", "late");
    long lease;

    extest_lapse("acme", "op-1");
    holder = lease_of(ex.ext, "op-1");
    lease = extest_scalar("SELECT (extract(epoch FROM lease_expires_at) * 1e6)::int8"
                          " FROM idem.operations");
    cr_assert_eq(idem_external_extend(old, &err), IDEM_ELOCKED);
    cr_assert(strstr(err.message, "do not dispatch") != NULL, "%s", err.message);
    cr_assert_eq(idem_external_release(old, &err), IDEM_ELOCKED);
    cr_assert_eq(extest_scalar("SELECT (extract(epoch FROM lease_expires_at) * 1e6)::int8"
                               " FROM idem.operations"),
                 lease, "the holder's lease is untouched");
    /* A late report: written to its own history row, answered from the record (the new
     * holder has it), and flagged: the provider may have been called twice. */
    cr_assert_eq(idem_external_complete(&out, old, "late", response, &err), IDEM_EBUSY);
    cr_assert_eq(out.status, IDEM_STATUS_IN_PROGRESS);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.reconciliation_items"
                               " WHERE kind = 'lease_lost' AND resolved_at IS NULL"),
                 1);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.external_attempts WHERE attempt = 1"
                               " AND outcome = 'completed' AND provider_ref = 'late'"),
                 1);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.operations WHERE state = 'pending'"
                               " AND lease_expires_at > now()"),
                 1, "still the holder's");
    cr_assert_eq(extest_dispatch(&out, holder, provider), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    json_decref(response);
    idem_outcome_clear(&out);
    idem_external_attempt_free(old);
    idem_external_attempt_free(holder);
}

Test(lease, a_heartbeat_keeps_the_lease_through_a_long_dispatch)
{
    idem_external_options opts = IDEM_EXTERNAL_OPTIONS_INIT;
    idem_external *fast = NULL;
    idem_external_attempt *a;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    int64_t before;

    opts.lease_ms = SHORT_LEASE_MS;
    cr_assert_eq(idem_external_new(&fast, ex.store, &opts, &err), 0);
    a = lease_of(fast, "op-1");
    for (int i = 0; i < 2 * SHORT_LEASE_MS / HEARTBEAT_MS; i++) { /* twice the lease in all */
        usleep(HEARTBEAT_MS * 1000);
        before = idem_external_attempt_lease_expires_at(a);
        cr_assert_eq(idem_external_extend(a, &err), 0, "%s", err.message);
        cr_assert_gt(idem_external_attempt_lease_expires_at(a), before);
        cr_assert_eq(answer("op-1"), IDEM_STATUS_IN_PROGRESS);
    }
    cr_assert_eq(extest_dispatch(&out, a, provider), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.external_attempts"), 1);
    idem_outcome_clear(&out);
    idem_external_attempt_free(a);
    idem_external_free(fast);
}

Test(lease, a_holder_whose_lease_lapsed_unclaimed_can_renew_it_and_report)
{
    idem_external_attempt *a = lease_of(ex.ext, "op-1");
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;

    extest_lapse("acme", "op-1");
    cr_assert_eq(idem_external_extend(a, &err), 0, "%s", err.message);
    cr_assert_eq(answer("op-1"), IDEM_STATUS_IN_PROGRESS, "renewed: held again");
    cr_assert_eq(extest_dispatch(&out, a, provider), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    idem_outcome_clear(&out);
    idem_external_attempt_free(a);
}

Test(lease, release_gives_the_key_to_the_next_caller_at_once)
{
    idem_external_attempt *a = lease_of(ex.ext, "op-1"), *b;
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_external_release(a, &err), 0, "%s", err.message);
    cr_assert_eq(idem_external_release(a, &err), IDEM_ELOCKED, "once");
    b = lease_of(ex.ext, "op-1");
    cr_assert_eq(idem_external_attempt_number(b), 2);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.external_attempts WHERE attempt = 1"
                               " AND outcome = 'released'"),
                 1);
    idem_external_attempt_free(a);
    idem_external_attempt_free(b);
}

/* A UUIDv7 operation ID made @offset_s seconds from now on the database's clock. */
static void uuid_at(char out[IDEM_UUID_STRING_SIZE], long offset_s)
{
    pgtest_uuid_v7_at(out, ex.check, offset_s);
}

/* An external path over the fixture's pool whose keys are remembered for a minute (and the
 * default five minutes of clock skew): a key made a day ago is past its memory there. */
static void open_forgetful(idem_store **store, idem_external **ext)
{
    idem_store_options sopts = IDEM_STORE_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;

    sopts.retention_s = 60;
    sopts.key_memory_s = 60;
    cr_assert_eq(idem_store_new(store, ex.pool, &sopts, &err), 0, "%s", err.message);
    cr_assert_eq(idem_external_new(ext, *store, NULL, &err), 0, "%s", err.message);
}

Test(lease, a_new_key_past_its_memory_is_not_claimed_and_nothing_is_written)
{
    idem_store *store = NULL;
    idem_external *forgetful = NULL;
    idem_external_attempt *a = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char op[IDEM_UUID_STRING_SIZE];
    idem_request req;

    open_forgetful(&store, &forgetful);
    uuid_at(op, -86400);
    req = extest_request("acme", op, ARGS);
    cr_assert_eq(idem_external_begin(&a, &out, forgetful, &req, &err), IDEM_EEXPIRED, "%s",
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_EXPIRED);
    cr_assert_null(a);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.operations"), 0);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.external_attempts"), 0);
    idem_outcome_clear(&out);
    idem_external_free(forgetful);
    idem_store_free(store);
}

/* A UUIDv7 dated further ahead than the clock skew allowance (300 s) is refused, whether
 * the claim (a first attempt) or the lookup (a retry) meets it: once its tombstone were
 * purged, the horizon could never catch its late retry. */
Test(lease, a_new_key_dated_ahead_of_the_skew_is_invalid_and_nothing_is_written)
{
    idem_external_attempt *a = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char op[IDEM_UUID_STRING_SIZE];
    idem_request req;

    for (unsigned int attempt = 0; attempt <= 1; attempt++) {
        uuid_at(op, 3600);
        req = extest_request("acme", op, ARGS);
        req.attempt = attempt;
        cr_assert_eq(idem_external_begin(&a, &out, ex.ext, &req, &err), IDEM_EINVAL,
                     "attempt %u: %s", attempt, err.message);
        cr_assert_eq(out.status, IDEM_STATUS_INVALID);
        cr_assert_str_eq(err.field, "operation_id");
        cr_assert_not_null(strstr(err.message, "s in the future on the database's clock"), "%s",
                           err.message);
        cr_assert_null(a);
    }
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.operations"), 0);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.external_attempts"), 0);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.reconciliation_items"), 0);
    uuid_at(op, 200); /* within the allowance */
    a = lease_of(ex.ext, op);
    idem_external_attempt_free(a);
    idem_outcome_clear(&out);
}

Test(lease, a_lapsed_lease_is_taken_over_whatever_the_key_s_age)
{
    idem_store *store = NULL;
    idem_external *forgetful = NULL;
    idem_external_attempt *a = NULL, *b = NULL;
    char op[IDEM_UUID_STRING_SIZE];

    open_forgetful(&store, &forgetful);
    uuid_at(op, -86400);
    a = lease_of(ex.ext, op); /* a day is within the default key memory */
    extest_lapse("acme", op);
    b = lease_of(forgetful, op);
    cr_assert_eq(idem_external_attempt_number(b), 2);
    cr_assert_str_eq(idem_external_attempt_downstream_key(b),
                     idem_external_attempt_downstream_key(a), "the same downstream key");
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.external_attempts"
                               " WHERE attempt = 1 AND outcome = 'lease_expired'"),
                 1);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.external_attempts"
                               " WHERE attempt = 2 AND ended_at IS NULL"),
                 1);
    idem_external_attempt_free(a);
    idem_external_attempt_free(b);
    idem_external_free(forgetful);
    idem_store_free(store);
}
