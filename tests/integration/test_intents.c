/* Durable intents: approving (idempotent on the approval reference), executing with the
 * stored operation ID and arguments, cancelling, needs_reconciliation, tenant scoping.
 * Against a real server, through the example tool. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/sys/reconcile.h"

#include "intenttest.h"
#include "storetest.h"

#define ARGS  "{\"subject\":\"Check delayed delivery\"}"
#define OTHER "{\"subject\":\"Cancel my order\"}"

static void open_store(void)
{
    storetest_init();
    storetest_open(NULL, 4);
}

TestSuite(intents, .init = open_store, .fini = storetest_fini, .timeout = 120);

static idem_intent *approve(const char *tenant, const char *ref, const char *args)
{
    return intenttest_approve(fx.store, tenant, ref, EXAMPLE_TOOL_NAME, args);
}

static int execute(idem_outcome *out, idem_intent *t, void *counter, idem_error *err)
{
    idem_outcome_clear(out);
    return idem_intent_execute(out, fx.store, t, counting_effect, counter, NULL, err);
}

Test(intents, approving_twice_with_the_same_reference_gives_one_intent_and_one_operation_id)
{
    idem_intent *first = approve("acme", "msg-1", ARGS);
    idem_intent *again = approve("acme", "msg-1", "{ \"subject\" : \"Check delayed delivery\" }");
    uint64_t ms = 0;

    cr_assert(idem_intent_is_new(first));
    cr_assert_not(idem_intent_is_new(again));
    cr_assert_str_eq(idem_intent_operation_id(again), idem_intent_operation_id(first));
    cr_assert_eq(idem_uuid_v7_time_ms(&ms, idem_intent_operation_id(first)), 0, "a UUIDv7");
    cr_assert_eq(idem_intent_current_state(first), IDEM_INTENT_APPROVED);
    cr_assert_str_eq(idem_intent_arguments(first), ARGS, "stored as canonical JSON");
    cr_assert_str_eq(idem_intent_approved_by(first), "alice");
    cr_assert_str_eq(idem_intent_tool(first), EXAMPLE_TOOL_NAME);
    cr_assert_gt(idem_intent_approved_at(first), 0);
    cr_assert_eq(intenttest_count(fx.check, NULL), 1);
    cr_assert_eq(storetest_operations(), 0, "approving runs nothing");
    idem_intent_free(first);
    idem_intent_free(again);
}

Test(intents, the_same_reference_with_other_arguments_is_a_conflict_and_writes_nothing)
{
    idem_intent_request req = IDEM_INTENT_REQUEST_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_intent *first = approve("acme", "msg-1", ARGS), *t = NULL;

    req.tenant = "acme";
    req.approval_ref = "msg-1";
    req.tool = EXAMPLE_TOOL_NAME;
    req.arguments = OTHER;
    req.arguments_len = strlen(OTHER);
    req.approved_by = "bob";
    cr_assert_eq(idem_intent_approve(&t, fx.store, &req, &err), IDEM_ECONFLICT);
    cr_assert_null(t);
    cr_assert_str_eq(err.field, "approval_ref");
    cr_assert(strstr(err.message, idem_intent_operation_id(first)) != NULL, "%s", err.message);
    cr_assert_eq(intenttest_count(fx.check, NULL), 1);
    cr_assert_eq(pgtest_scalar(fx.check, "SELECT count(*) FROM idem.intents WHERE approved_by = "
                                         "'alice' AND arguments LIKE '%delayed%'"),
                 1, "the first approval unchanged");
    idem_intent_free(first);
}

struct bad_approval {
    const char *tenant, *ref, *tool, *args, *by;
    int version;
    const char *field;
};

Test(intents, bad_input_names_the_field_and_writes_nothing)
{
    static char long_ref[IDEM_INTENT_REF_MAX + 2], long_by[IDEM_INTENT_BY_MAX + 2];
    const char *T = EXAMPLE_TOOL_NAME;
    const struct bad_approval cases[] = {
        {NULL, "m", T, ARGS, "a", 1, "tenant"},
        {"acme corp", "m", T, ARGS, "a", 1, "tenant"},
        {"acme", NULL, T, ARGS, "a", 1, "approval_ref"},
        {"acme", "", T, ARGS, "a", 1, "approval_ref"},
        {"acme", "msg 1", T, ARGS, "a", 1, "approval_ref"},
        {"acme", "msg\n", T, ARGS, "a", 1, "approval_ref"},
        {"acme", long_ref, T, ARGS, "a", 1, "approval_ref"},
        {"acme", "m", NULL, ARGS, "a", 1, "tool"},
        {"acme", "m", "Create", ARGS, "a", 1, "tool"},
        {"acme", "m", T, ARGS, "a", 0, "payload_version"},
        {"acme", "m", T, NULL, "a", 1, "arguments"},
        {"acme", "m", T, "{\"subject\":", "a", 1, "arguments"},
        {"acme", "m", T, "{\"id\":9007199254740993}", "a", 1, "arguments"},
        {"acme", "m", T, ARGS, NULL, 1, "approved_by"},
        {"acme", "m", T, ARGS, "", 1, "approved_by"},
        {"acme", "m", T, ARGS, "al\tice", 1, "approved_by"},
        {"acme", "m", T, ARGS, long_by, 1, "approved_by"},
    };

    memset(long_ref, 'r', sizeof(long_ref) - 1);
    memset(long_by, 'b', sizeof(long_by) - 1);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        idem_intent_request req = IDEM_INTENT_REQUEST_INIT;
        idem_error err = IDEM_ERROR_INIT;
        idem_intent *t = NULL;

        req.tenant = cases[i].tenant;
        req.approval_ref = cases[i].ref;
        req.tool = cases[i].tool;
        req.payload_version = cases[i].version;
        req.arguments = cases[i].args;
        req.arguments_len = cases[i].args != NULL ? strlen(cases[i].args) : 0;
        req.approved_by = cases[i].by;
        cr_assert_eq(idem_intent_approve(&t, fx.store, &req, &err), IDEM_EINVAL, "case %zu: %s", i,
                     err.message);
        cr_assert_null(t);
        cr_assert_str_eq(err.field, cases[i].field, "case %zu: %s", i, err.message);
    }
    cr_assert_eq(intenttest_count(fx.check, NULL), 0);
}

Test(intents, executing_runs_the_stored_request_once_and_moves_the_intent_to_done)
{
    idem_intent *t = approve("acme", "msg-1", ARGS);
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    effect_counter runs = {0};
    char *receipt;

    cr_assert_eq(execute(&out, t, &runs, &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(idem_intent_current_state(t), IDEM_INTENT_DONE, "updated in place");
    cr_assert_eq(idem_intent_attempts(t), 1);
    cr_assert_eq(idem_intent_result_attempt(t), 1);
    cr_assert_str_eq(idem_intent_result_status(t), "created");
    cr_assert_eq(idem_intent_lease_until(t), 0, "the lease given back");
    receipt = storetest_receipt("acme", idem_intent_operation_id(t));
    cr_assert_str_eq(out.receipt, receipt, "under the intent's operation ID");
    free(receipt);
    cr_assert_eq(execute(&out, t, &runs, &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED, "a done intent executed again replays");
    cr_assert_eq(idem_intent_current_state(t), IDEM_INTENT_DONE);
    cr_assert_str_eq(idem_intent_result_status(t), "created", "the result that finished it");
    cr_assert_eq(runs.runs, 1);
    cr_assert_eq(storetest_tasks(), 1);
    idem_outcome_clear(&out);
    idem_intent_free(t);
}

Test(intents, a_cancelled_intent_is_never_executed_nor_recovered)
{
    idem_intent *t = approve("acme", "msg-1", ARGS), *c = NULL;
    idem_intent_list *list = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    effect_counter runs = {0};

    cr_assert_eq(idem_intent_cancel(&c, fx.store, "acme", idem_intent_operation_id(t), "bob", &err),
                 0, "%s", err.message);
    cr_assert_eq(idem_intent_current_state(c), IDEM_INTENT_CANCELLED);
    cr_assert_eq(
        idem_intent_cancel(NULL, fx.store, "acme", idem_intent_operation_id(t), NULL, &err), 0,
        "cancelling again is fine: %s", err.message);
    cr_assert_eq(execute(&out, t, &runs, &err), IDEM_ECONFLICT);
    cr_assert_eq(out.status, IDEM_STATUS_CONFLICT);
    cr_assert_str_eq(err.field, "intent");
    cr_assert_eq(idem_intent_recover(&list, fx.store, "acme", NULL, &err), 0, "%s", err.message);
    cr_assert_eq(idem_intent_list_count(list), 0);
    cr_assert_eq(runs.runs, 0);
    cr_assert_eq(storetest_tasks(), 0);
    cr_assert_eq(storetest_operations(), 0);
    idem_intent_list_free(list);
    idem_intent_free(c);
    idem_intent_free(t);
}

Test(intents, an_intent_whose_effect_committed_cannot_be_cancelled)
{
    idem_intent *t = approve("acme", "msg-1", ARGS);
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    effect_counter runs = {0};

    cr_assert_eq(execute(&out, t, &runs, &err), 0, "%s", err.message);
    cr_assert_eq(
        idem_intent_cancel(NULL, fx.store, "acme", idem_intent_operation_id(t), "bob", &err),
        IDEM_ECONFLICT);
    cr_assert_str_eq(err.field, "intent");
    cr_assert_eq(intenttest_count(fx.check, "done"), 1);
    idem_outcome_clear(&out);
    idem_intent_free(t);
}

/* A cancel sent while the effect's transaction is open waits for the intent's row, which
 * the effect's mark holds. */
struct racer {
    char op[IDEM_UUID_STRING_SIZE];
    pthread_t thread;
    int started, rc, runs;
};

static void *cancel_now(void *arg)
{
    struct racer *r = arg;
    idem_error err = IDEM_ERROR_INIT;

    r->rc = idem_intent_cancel(NULL, fx.store, "acme", r->op, "bob", &err);
    return NULL;
}

/* Start the cancel and wait until it waits for the effect's lock on the intent: on Citus
 * it waits on the worker that holds the intent's shard, which citus_stat_activity shows. */
#define CANCEL_WAITING(view)                                                                       \
    "SELECT count(*) FROM " view " WHERE wait_event_type = 'Lock'"                                 \
    " AND datname = current_database() AND query LIKE '%state = ''cancelled''%'"
static void start_cancel(struct racer *r)
{
    const char *waiting = pgtest_citus_workers() != NULL ? CANCEL_WAITING("citus_stat_activity")
                                                         : CANCEL_WAITING("pg_stat_activity");

    r->started = 1;
    cr_assert_eq(pthread_create(&r->thread, NULL, cancel_now, r), 0);
    while (pgtest_scalar(fx.check, waiting) == 0)
        pgtest_sleep_ms(5);
}

static int effect_racing_a_cancel(json_t **response, idem_tx *tx, const json_t *arguments,
                                  void *ctx, idem_error *err)
{
    struct racer *r = ctx;

    r->runs++;
    start_cancel(r);
    return example_create_support_task(response, tx, arguments, NULL, err);
}

/* Execute @t with @effect while a cancel races it; returns the execution's code. */
static int race(struct racer *r, idem_intent *t, idem_effect_fn effect)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    int rc;

    snprintf(r->op, sizeof(r->op), "%s", idem_intent_operation_id(t)); /* execute renews t */
    rc = idem_intent_execute(&out, fx.store, t, effect, r, NULL, &err);
    cr_assert(r->started);
    pthread_join(r->thread, NULL);
    idem_outcome_clear(&out);
    return rc;
}

Test(intents, a_cancel_waiting_for_the_effect_is_refused_once_the_effect_commits)
{
    idem_intent *t = approve("acme", "msg-1", ARGS);
    struct racer r = {"", 0, 0, 1, 0};

    cr_assert_eq(race(&r, t, effect_racing_a_cancel), 0);
    cr_assert_eq(r.rc, IDEM_ECONFLICT, "the cancel lost: %s", idem_err_name(r.rc));
    cr_assert_eq(intenttest_count(fx.check, "done"), 1);
    cr_assert_eq(storetest_tasks(), 1);
    idem_intent_free(t);
}

/* The first run lets a cancel queue for the intent's row, then fails with a serialization
 * failure: the rollback lets the cancel through, and the store runs the effect again. Either
 * the cancel commits first, and the rerun finds the intent cancelled and runs nothing, or
 * the rerun's mark takes the row first, and the cancel is refused; never both. */
static int effect_rolled_back_under_a_cancel(json_t **response, idem_tx *tx,
                                             const json_t *arguments, void *ctx, idem_error *err)
{
    struct racer *r = ctx;
    PGresult *res = NULL;
    int rc;

    if (r->runs++ > 0)
        return example_create_support_task(response, tx, arguments, NULL, err);
    start_cancel(r);
    rc =
        idem_tx_exec(&res, tx, "DO $$BEGIN RAISE EXCEPTION 'forced' USING ERRCODE = '40001'; END$$",
                     0, NULL, err);
    PQclear(res);
    return rc != 0 ? rc : IDEM_EDB;
}

Test(intents, a_cancel_and_a_rerun_of_the_effect_never_both_win)
{
    idem_intent *t = approve("acme", "msg-1", ARGS);
    struct racer r = {"", 0, 0, 1, 0};
    int rc = race(&r, t, effect_rolled_back_under_a_cancel);

    if (r.rc == 0) {
        cr_assert_eq(rc, IDEM_ECONFLICT, "cancelled: the rerun refused (%s)", idem_err_name(rc));
        cr_assert_eq(r.runs, 1, "the effect ran once, rolled back");
        cr_assert_eq(intenttest_count(fx.check, "cancelled"), 1);
        cr_assert_eq(storetest_tasks(), 0);
        cr_assert_eq(storetest_operations(), 0);
    } else {
        cr_assert_eq(r.rc, IDEM_ECONFLICT, "the cancel: %s", idem_err_name(r.rc));
        cr_assert_eq(rc, 0, "the rerun committed (%s)", idem_err_name(rc));
        cr_assert_eq(intenttest_count(fx.check, "done"), 1);
        cr_assert_eq(storetest_tasks(), 1);
    }
    idem_intent_free(t);
}

Test(intents, an_intent_cancelled_while_its_attempt_started_runs_no_effect)
{
    idem_intent *t = approve("acme", "msg-1", ARGS);
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    effect_counter runs = {0};

    /* The intent was attempted (a worker started and died before its effect) and is
     * cancelled after: the cancel wins, and a later execution runs nothing. */
    PQclear(pgtest_exec(fx.check, "UPDATE idem.intents SET state = 'attempted', attempts = 1"));
    cr_assert_eq(
        idem_intent_cancel(NULL, fx.store, "acme", idem_intent_operation_id(t), "bob", &err), 0,
        "%s", err.message);
    cr_assert_eq(execute(&out, t, &runs, &err), IDEM_ECONFLICT);
    cr_assert_eq(runs.runs, 0);
    cr_assert_eq(storetest_operations(), 0);
    idem_intent_free(t);
}

Test(intents, an_expired_operation_moves_the_intent_to_reconciliation_and_lists_it)
{
    idem_intent *t = approve("acme", "msg-1", ARGS);
    idem_reconcile_filter filter = IDEM_RECONCILE_FILTER_INIT;
    idem_reconcile_items *items = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    effect_counter runs = {0};
    const char *old = "01700000-0000-7000-8000-000000000000"; /* a UUIDv7 of 2019 */
    char sql[200];

    snprintf(sql, sizeof(sql), "UPDATE idem.intents SET operation_id = '%s'", old);
    PQclear(pgtest_exec(fx.check, sql));
    idem_intent_free(t);
    t = intenttest_get(fx.store, "acme", old);
    cr_assert_eq(execute(&out, t, &runs, &err), IDEM_EEXPIRED, "%s", err.message);
    cr_assert_eq(idem_intent_current_state(t), IDEM_INTENT_NEEDS_RECONCILIATION);
    cr_assert_str_eq(idem_intent_result_status(t), "expired");
    cr_assert_eq(runs.runs, 0);
    filter.kind = "intent";
    cr_assert_eq(idem_reconcile_list(&items, fx.check, &filter, &err), 0, "%s", err.message);
    cr_assert_eq(idem_reconcile_items_count(items), 1);
    cr_assert_str_eq(idem_reconcile_items_at(items, 0)->operation_id, old);
    cr_assert_str_eq(idem_reconcile_items_at(items, 0)->tenant, "acme");
    idem_reconcile_items_free(items);
    idem_intent_free(t);
}

Test(intents, intents_are_scoped_to_their_tenant)
{
    idem_intent *a = approve("acme", "msg-1", ARGS), *b = approve("globex", "msg-1", ARGS);
    idem_intent *seen = NULL;
    idem_intent_list *list = NULL;
    idem_error err = IDEM_ERROR_INIT;
    const char *op = idem_intent_operation_id(a);

    cr_assert_str_neq(idem_intent_operation_id(b), op, "the same reference elsewhere: its own");
    cr_assert_eq(idem_intent_get(&seen, fx.store, "globex", op, &err), IDEM_ENOTFOUND);
    cr_assert_null(seen);
    cr_assert_eq(idem_intent_cancel(NULL, fx.store, "globex", op, NULL, &err), IDEM_ENOTFOUND);
    cr_assert_eq(idem_intent_recover(&list, fx.store, "globex", NULL, &err), 0, "%s", err.message);
    cr_assert_eq(idem_intent_list_count(list), 1);
    cr_assert_str_eq(idem_intent_tenant(idem_intent_list_at(list, 0)), "globex");
    cr_assert_str_eq(idem_intent_operation_id(idem_intent_list_at(list, 0)),
                     idem_intent_operation_id(b));
    idem_intent_list_free(list);
    cr_assert_eq(intenttest_count(fx.check, "approved"), 2, "acme's untouched");
    idem_intent_free(a);
    idem_intent_free(b);
}

Test(intents, null_handles_and_bad_options_are_refused)
{
    idem_intent *t = approve("acme", "msg-1", ARGS);
    idem_intent_exec_options opts = IDEM_INTENT_EXEC_OPTIONS_INIT;
    idem_intent_recover_options ropts = IDEM_INTENT_RECOVER_OPTIONS_INIT;
    idem_intent_list *list = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_intent_execute(&out, fx.store, NULL, counting_effect, NULL, NULL, &err),
                 IDEM_EINVAL);
    cr_assert_str_eq(err.field, "intent");
    cr_assert_eq(out.status, IDEM_STATUS_INVALID);
    cr_assert_eq(idem_intent_execute(&out, NULL, t, counting_effect, NULL, NULL, &err),
                 IDEM_EINVAL);
    cr_assert_eq(idem_intent_execute(NULL, fx.store, t, counting_effect, NULL, NULL, &err),
                 IDEM_EINVAL);
    opts.lease_s = 86401; /* 0 is the default: the recovery's lease, or 60 s */
    cr_assert_eq(idem_intent_execute(&out, fx.store, t, counting_effect, NULL, &opts, &err),
                 IDEM_EINVAL);
    cr_assert_str_eq(err.field, "options.lease_s");
    ropts.max = 0;
    cr_assert_eq(idem_intent_recover(&list, fx.store, NULL, &ropts, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "options.max");
    cr_assert_eq(idem_intent_recover(&list, fx.store, "bad tenant", NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "tenant");
    cr_assert_eq(idem_intent_approve(NULL, fx.store, NULL, &err), IDEM_EINVAL);
    cr_assert_null(idem_intent_tenant(NULL));
    cr_assert_eq(idem_intent_list_count(NULL), 0);
    idem_intent_list_free(NULL);
    idem_intent_free(NULL);
    cr_assert_str_eq(idem_intent_state_name(IDEM_INTENT_NEEDS_RECONCILIATION),
                     "needs_reconciliation");
    cr_assert_eq(intenttest_count(fx.check, "approved"), 1, "nothing moved");
    idem_intent_free(t);
}
