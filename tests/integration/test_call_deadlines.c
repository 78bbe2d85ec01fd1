/* Every call on a pool-backed handle (the store, declared effects, the external path and its
 * outbox, durable intents) is done by its store's deadline_ms, counted from its start:
 * checking a connection out included, to the last reply. Each entry point meets a backend
 * stopped while it waits for its client, a lock held by another session, and a pool whose
 * one connection is taken; each ends `unavailable` (behind a lock, the external claim ends
 * `in_progress`) within the deadline plus max(2 s, the deadline), having waited at least
 * about as long as the deadline lets it, and with nothing of it written.
 *
 * Behind the lock: a row lock on the row the call writes; SHARE on the table for calls that
 * skip locked rows or insert (outbox claim, recovery, approval, the external claim), which
 * still lets a reader look; ACCESS EXCLUSIVE for calls that only read (nothing to look at
 * then: they write nothing). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "idem/idem.h"
#include "pgtest.h"
#include "stalltest.h"

#define DEADLINE_MS 2000
/* The longest a call may take: its deadline, plus max(2 s, the deadline) for a loaded
 * machine. */
#define UPPER_MS (DEADLINE_MS + (DEADLINE_MS > 2000 ? DEADLINE_MS : 2000))
#define TENANT   "acme"
#define TOOL     "bump"
#define PREP_OP  "op-prepared"
#define CALL_OP  "op-called"

/* A pool of one connection under two stores: one with the deadline the calls are held to,
 * one with the default for preparing what they need. */
static struct {
    char *conninfo;
    PGconn *check; /* looks, and holds the lock */
    idem_pool *pool;
    idem_store *store, *prep;
    idem_external *ext, *prep_ext;
    idem_declared *declared;
    idem_external_attempt *attempt;
    idem_intent *intent;
    idem_conn *held; /* the pool's one connection, taken by the test */
} f;

static void open_fixture(void)
{
    idem_pool_options popts = IDEM_POOL_OPTIONS_INIT;
    idem_store_options sopts = IDEM_STORE_OPTIONS_INIT;
    idem_external_options eopts = IDEM_EXTERNAL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;

    f.conninfo = pgtest_new_migrated_database("call_deadline");
    f.check = pgtest_connect(f.conninfo);
    PQclear(pgtest_exec(f.check, "CREATE TABLE public.deadline_rows (id int PRIMARY KEY, n int);"
                                 "INSERT INTO public.deadline_rows VALUES (1, 0)"));
    popts.max_size = 1;
    popts.min_idle = 1;
    popts.acquire_timeout_ms = 10 * UPPER_MS; /* the deadline bounds the wait, not this */
    cr_assert_eq(idem_pool_new(&f.pool, f.conninfo, &popts, &err), 0, "%s", err.message);
    cr_assert_eq(idem_store_new(&f.prep, f.pool, NULL, &err), 0, "%s", err.message);
    sopts.deadline_ms = DEADLINE_MS;
    cr_assert_eq(idem_store_new(&f.store, f.pool, &sopts, &err), 0, "%s", err.message);
    eopts.claim_wait_ms = 60000; /* the deadline bounds the claim's wait, not this */
    cr_assert_eq(idem_external_new(&f.ext, f.store, &eopts, &err), 0, "%s", err.message);
    cr_assert_eq(idem_external_new(&f.prep_ext, f.prep, NULL, &err), 0, "%s", err.message);
    cr_assert_eq(idem_declared_new(&f.declared,
                                   "UPDATE public.deadline_rows SET n = n + 1 WHERE id = 1"
                                   " RETURNING json_build_object('n', n)",
                                   NULL, 0, &err),
                 0, "%s", err.message);
}

static void close_fixture(void)
{
    stalltest_resume();
    idem_pool_release(f.held);
    idem_external_attempt_free(f.attempt);
    idem_intent_free(f.intent);
    idem_declared_free(f.declared);
    idem_external_free(f.ext);
    idem_external_free(f.prep_ext);
    idem_store_free(f.store);
    idem_store_free(f.prep);
    idem_pool_free(f.pool);
    PQfinish(f.check);
    free(f.conninfo);
    memset(&f, 0, sizeof(f));
}

TestSuite(call_deadlines, .init = open_fixture, .fini = close_fixture, .timeout = 120);

static idem_request request(const char *op)
{
    idem_request req = IDEM_REQUEST_INIT;

    req.tenant = TENANT;
    req.operation_id = op;
    req.tool = TOOL;
    req.arguments = "{}";
    req.arguments_len = 2;
    return req;
}

/* The effect: one row of the application's bumped. */
static int bump(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx, idem_error *err)
{
    PGresult *res = NULL;
    int rc = idem_tx_exec(&res, tx, "UPDATE public.deadline_rows SET n = n + 1 WHERE id = 1", 0,
                          NULL, err);

    (void)arguments, (void)ctx;
    if (rc != 0)
        return rc;
    PQclear(res);
    *response = json_pack("{s:b}", "bumped", 1);
    return IDEM_EFFECT_OK;
}

/* The effect that enqueues one outbox item. */
static int enqueue(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                   idem_error *err)
{
    json_t *item = json_pack("{s:s}", "to", "ada@example.com");
    int rc = idem_tx_enqueue(NULL, tx, "send_email", 1, item, NULL, err);

    (void)arguments, (void)ctx;
    json_decref(item);
    if (rc != 0)
        return rc;
    *response = json_pack("{s:b}", "queued", 1);
    return IDEM_EFFECT_OK;
}

/* The dispatch of an external intent: the provider answers at once. */
static int dispatch(idem_outcome *out, idem_external_attempt *a, const json_t *arguments, void *ctx,
                    idem_error *err)
{
    json_t *response = json_pack("{s:s}", "ref", "r-1");
    int rc = idem_external_complete(out, a, "r-1", response, err);

    (void)arguments, (void)ctx;
    json_decref(response);
    return rc;
}

/* --- what each call needs in place, run with the default deadline ---------------------- */

static void prepare_record(void)
{
    idem_request req = request(PREP_OP);
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_store_execute(&out, f.prep, &req, bump, NULL, &err), 0, "%s", err.message);
    idem_outcome_clear(&out);
}

static void prepare_attempt(void)
{
    idem_request req = request(PREP_OP);
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;

    /* Begun through the deadline's store: its reports take their deadline from there. */
    cr_assert_eq(idem_external_begin(&f.attempt, &out, f.ext, &req, &err), 0, "%s", err.message);
    cr_assert_not_null(f.attempt);
    idem_outcome_clear(&out);
}

static void prepare_outbox_item(void)
{
    idem_request req = request(PREP_OP);
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_store_execute(&out, f.prep, &req, enqueue, NULL, &err), 0, "%s", err.message);
    idem_outcome_clear(&out);
}

static void prepare_intent(void)
{
    idem_intent_request req = IDEM_INTENT_REQUEST_INIT;
    idem_error err = IDEM_ERROR_INIT;

    req.tenant = TENANT;
    req.approval_ref = "approval-prepared";
    req.tool = TOOL;
    req.arguments = "{}";
    req.arguments_len = 2;
    req.approved_by = "alice";
    cr_assert_eq(idem_intent_approve(&f.intent, f.prep, &req, &err), 0, "%s", err.message);
}

/* --- the calls: each returns its code, its outcome's status in *status when it has one
 * (-1 otherwise) ------------------------------------------------------------------------ */

static int call_execute(int *status, idem_error *err)
{
    idem_request req = request(CALL_OP);
    idem_outcome out = IDEM_OUTCOME_INIT;
    int rc = idem_store_execute(&out, f.store, &req, bump, NULL, err);

    *status = (int)out.status;
    idem_outcome_clear(&out);
    return rc;
}

static int call_declared(int *status, idem_error *err)
{
    idem_request req = request(CALL_OP);
    idem_outcome out = IDEM_OUTCOME_INIT;
    int rc = idem_store_execute_declared(&out, f.store, &req, f.declared, err);

    *status = (int)out.status;
    idem_outcome_clear(&out);
    return rc;
}

static int call_get(int *status, idem_error *err)
{
    idem_operation *op = NULL;
    int rc = idem_store_get(&op, f.store, TENANT, PREP_OP, err);

    *status = -1;
    idem_operation_free(op);
    return rc;
}

static int call_begin(int *status, idem_error *err)
{
    idem_request req = request(CALL_OP);
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_external_attempt *a = NULL;
    int rc = idem_external_begin(&a, &out, f.ext, &req, err);

    *status = (int)out.status;
    idem_outcome_clear(&out);
    idem_external_attempt_free(a);
    return rc;
}

static int call_complete(int *status, idem_error *err)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    json_t *response = json_pack("{s:s}", "ref", "r-1");
    int rc = idem_external_complete(&out, f.attempt, "r-1", response, err);

    *status = (int)out.status;
    json_decref(response);
    idem_outcome_clear(&out);
    return rc;
}

static int call_fail(int *status, idem_error *err)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    json_t *response = json_pack("{s:s}", "refused", "no");
    int rc = idem_external_fail(&out, f.attempt, IDEM_EXTERNAL_FINAL, response, "refused", err);

    *status = (int)out.status;
    json_decref(response);
    idem_outcome_clear(&out);
    return rc;
}

static int call_fail_transient(int *status, idem_error *err)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    int rc = idem_external_fail(&out, f.attempt, IDEM_EXTERNAL_TRANSIENT, NULL, "busy", err);

    *status = (int)out.status;
    idem_outcome_clear(&out);
    return rc;
}

static int call_unknown(int *status, idem_error *err)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    int rc = idem_external_unknown(&out, f.attempt, NULL, "no answer", err);

    *status = (int)out.status;
    idem_outcome_clear(&out);
    return rc;
}

static int call_extend(int *status, idem_error *err)
{
    *status = -1;
    return idem_external_extend(f.attempt, err);
}

static int call_release(int *status, idem_error *err)
{
    *status = -1;
    return idem_external_release(f.attempt, err);
}

static int call_outbox_claim(int *status, idem_error *err)
{
    idem_outbox_batch *b = NULL;
    int rc = idem_outbox_claim(&b, f.ext, TENANT, NULL, 10, err);

    *status = -1;
    idem_outbox_batch_free(b);
    return rc;
}

static int call_approve(int *status, idem_error *err)
{
    idem_intent_request req = IDEM_INTENT_REQUEST_INIT;
    idem_intent *t = NULL;
    int rc;

    req.tenant = TENANT;
    req.approval_ref = "approval-called";
    req.tool = TOOL;
    req.arguments = "{}";
    req.arguments_len = 2;
    req.approved_by = "alice";
    rc = idem_intent_approve(&t, f.store, &req, err);
    *status = -1;
    idem_intent_free(t);
    return rc;
}

static int call_intent_get(int *status, idem_error *err)
{
    idem_intent *t = NULL;
    int rc = idem_intent_get(&t, f.store, TENANT, idem_intent_operation_id(f.intent), err);

    *status = -1;
    idem_intent_free(t);
    return rc;
}

static int call_cancel(int *status, idem_error *err)
{
    *status = -1;
    return idem_intent_cancel(NULL, f.store, TENANT, idem_intent_operation_id(f.intent), "bob",
                              err);
}

static int call_intent_execute(int *status, idem_error *err)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    int rc = idem_intent_execute(&out, f.store, f.intent, bump, NULL, NULL, err);

    *status = (int)out.status;
    idem_outcome_clear(&out);
    return rc;
}

static int call_intent_external(int *status, idem_error *err)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    int rc = idem_intent_execute_external(&out, f.ext, f.intent, dispatch, NULL, NULL, err);

    *status = (int)out.status;
    idem_outcome_clear(&out);
    return rc;
}

static int call_recover(int *status, idem_error *err)
{
    idem_intent_list *list = NULL;
    int rc = idem_intent_recover(&list, f.store, TENANT, NULL, err);

    *status = -1;
    idem_intent_list_free(list);
    return rc;
}

/* --- the entry points ------------------------------------------------------------------ */

/* Row locks name the tenant: on Citus a FOR UPDATE must run on one shard. */
#define LOCK_RECORD                                                                                \
    "SELECT 1 FROM idem.operations WHERE tenant = '" TENANT "' AND operation_id = '" PREP_OP       \
    "' FOR UPDATE"
#define LOCK_INTENT "SELECT 1 FROM idem.intents WHERE tenant = '" TENANT "' FOR UPDATE"
#define LOCK_APP    "SELECT 1 FROM public.deadline_rows WHERE id = 1 FOR UPDATE"

typedef struct entry {
    const char *name;
    void (*prepare)(void);
    int (*call)(int *status, idem_error *err);
    const char *lock;  /* held by another session while the call runs */
    int lock_readers;  /* the lock keeps readers out too: nothing to look at then */
    int locked_status; /* what the call answers behind the lock */
} entry;

static const entry entries[] = {
    {"idem_store_execute", NULL, call_execute, LOCK_APP, 0, IDEM_STATUS_UNAVAILABLE},
    {"idem_store_execute_declared", NULL, call_declared, LOCK_APP, 0, IDEM_STATUS_UNAVAILABLE},
    {"idem_store_get", prepare_record, call_get,
     "LOCK TABLE idem.operations IN ACCESS EXCLUSIVE MODE", 1, IDEM_STATUS_UNAVAILABLE},
    /* The claim's lock wait ends on the server before the deadline: in_progress. */
    {"idem_external_begin", NULL, call_begin, "LOCK TABLE idem.operations IN SHARE MODE", 0,
     IDEM_STATUS_IN_PROGRESS},
    {"idem_external_complete", prepare_attempt, call_complete, LOCK_RECORD, 0,
     IDEM_STATUS_UNAVAILABLE},
    {"idem_external_fail (final)", prepare_attempt, call_fail, LOCK_RECORD, 0,
     IDEM_STATUS_UNAVAILABLE},
    {"idem_external_fail (transient)", prepare_attempt, call_fail_transient, LOCK_RECORD, 0,
     IDEM_STATUS_UNAVAILABLE},
    {"idem_external_unknown", prepare_attempt, call_unknown, LOCK_RECORD, 0,
     IDEM_STATUS_UNAVAILABLE},
    {"idem_external_extend", prepare_attempt, call_extend, LOCK_RECORD, 0, IDEM_STATUS_UNAVAILABLE},
    {"idem_external_release", prepare_attempt, call_release, LOCK_RECORD, 0,
     IDEM_STATUS_UNAVAILABLE},
    {"idem_outbox_claim", prepare_outbox_item, call_outbox_claim,
     "LOCK TABLE idem.outbox IN SHARE MODE", 0, IDEM_STATUS_UNAVAILABLE},
    {"idem_intent_approve", NULL, call_approve, "LOCK TABLE idem.intents IN SHARE MODE", 0,
     IDEM_STATUS_UNAVAILABLE},
    {"idem_intent_get", prepare_intent, call_intent_get,
     "LOCK TABLE idem.intents IN ACCESS EXCLUSIVE MODE", 1, IDEM_STATUS_UNAVAILABLE},
    {"idem_intent_cancel", prepare_intent, call_cancel, LOCK_INTENT, 0, IDEM_STATUS_UNAVAILABLE},
    {"idem_intent_execute", prepare_intent, call_intent_execute, LOCK_INTENT, 0,
     IDEM_STATUS_UNAVAILABLE},
    {"idem_intent_execute_external", prepare_intent, call_intent_external, LOCK_INTENT, 0,
     IDEM_STATUS_UNAVAILABLE},
    {"idem_intent_recover", prepare_intent, call_recover, "LOCK TABLE idem.intents IN SHARE MODE",
     0, IDEM_STATUS_UNAVAILABLE},
};
#define NENTRIES (sizeof(entries) / sizeof(entries[0]))

/* Everything a call could write, as one digest. */
static char *written(void)
{
    PGresult *res = pgtest_exec(
        f.check,
        "SELECT md5(concat_ws('|',"
        " (SELECT string_agg(t::text, ',' ORDER BY t::text) FROM idem.operations t),"
        " (SELECT string_agg(t::text, ',' ORDER BY t::text) FROM idem.external_attempts t),"
        " (SELECT string_agg(t::text, ',' ORDER BY t::text) FROM idem.outbox t),"
        " (SELECT string_agg(t::text, ',' ORDER BY t::text) FROM idem.intents t),"
        " (SELECT string_agg(t::text, ',' ORDER BY t::text)"
        "  FROM idem.reconciliation_items t),"
        " (SELECT string_agg(t::text, ',' ORDER BY t::text) FROM public.deadline_rows t)))");
    char *digest = strdup(PQgetvalue(res, 0, 0));

    PQclear(res);
    return digest;
}

enum scenario {
    STALLED,   /* the pool's one backend stopped while it waits for its client */
    LOCKED,    /* another session holds the lock the call needs */
    EXHAUSTED, /* the pool's one connection is taken */
};

static const char *const scenario_names[] = {"a stalled backend", "a held lock",
                                             "an exhausted pool"};

struct call_case {
    size_t entry;
    enum scenario scenario;
};

/* The least a call waited: the deadline; behind a lock, the lock timeout the deadline sets
 * (at least three quarters of it). */
static uint64_t lower_bound(enum scenario s)
{
    return s == LOCKED ? DEADLINE_MS / 2 : DEADLINE_MS - 50;
}

/* Set the scenario up; returns whether the witness can look while the call waits. */
static int set_up(const entry *e, enum scenario s)
{
    idem_error err = IDEM_ERROR_INIT;

    switch (s) {
    case STALLED:
        stalltest_stop(stalltest_pooled_backend(f.pool), f.conninfo);
        return 1;
    case LOCKED:
        PQclear(pgtest_exec(f.check, "BEGIN"));
        PQclear(pgtest_exec(f.check, e->lock));
        return !e->lock_readers;
    default:
        cr_assert_eq(idem_pool_acquire(&f.held, f.pool, &err), 0, "%s", err.message);
        return 1;
    }
}

/* Stalled or out of connections, a call ends IDEM_EUNAVAIL; behind a lock, the server ends
 * the wait first (lock_timeout, 55P03), and the call answers as its code says: unavailable,
 * or in_progress for the external claim. */
static void check_answer(const entry *e, enum scenario s, int rc, int status, const idem_error *err)
{
    int want = s == LOCKED ? e->locked_status : IDEM_STATUS_UNAVAILABLE;

    if (s != LOCKED)
        cr_assert_eq(rc, IDEM_EUNAVAIL, "%s with %s: %s (%s)", e->name, scenario_names[s],
                     idem_err_name(rc), err->message);
    cr_assert_eq(idem_status_from_error(rc), want, "%s with %s: %s (%s)", e->name,
                 scenario_names[s], idem_err_name(rc), err->message);
    if (status >= 0)
        cr_assert_eq(status, want, "%s with %s: %s", e->name, scenario_names[s],
                     idem_status_name((idem_status)status));
    if (s == EXHAUSTED)
        cr_assert_not_null(strstr(err->message, "pool exhausted"), "%s", err->message);
}

ParameterizedTestParameters(call_deadlines, a_call_ends_by_its_deadline)
{
    static struct call_case cases[NENTRIES * 3];

    for (size_t i = 0; i < NENTRIES * 3; i++)
        cases[i] = (struct call_case){i / 3, (enum scenario)(i % 3)};
    return cr_make_param_array(struct call_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct call_case *cc, call_deadlines, a_call_ends_by_its_deadline)
{
    const entry *e = &entries[cc->entry];
    idem_error err = IDEM_ERROR_INIT;
    char *before, *after;
    uint64_t start, elapsed;
    int rc, status = -1, look;

    if (e->prepare != NULL)
        e->prepare();
    before = written();
    look = set_up(e, cc->scenario);
    start = idem__now_ms();
    rc = e->call(&status, &err);
    elapsed = idem__now_ms() - start;
    check_answer(e, cc->scenario, rc, status, &err);
    cr_assert(elapsed >= lower_bound(cc->scenario) && elapsed < UPPER_MS,
              "%s with %s returned after %llu ms (deadline %u ms)", e->name,
              scenario_names[cc->scenario], (unsigned long long)elapsed, DEADLINE_MS);
    if (look) {
        after = written();
        cr_assert_str_eq(after, before, "%s with %s wrote something", e->name,
                         scenario_names[cc->scenario]);
        free(after);
    }
    free(before);
}
