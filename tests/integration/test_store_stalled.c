/* A local record left pending after its transaction ended (by an earlier version, or a
 * statement run by hand): a request for its key answers outcome_unknown and records a
 * stalled_pending item instead of in_progress for ever; the item is listed before any
 * request comes; the operator resolves it as completed or failed, and the effect never
 * runs again. Time passes by backdating created_at, never by sleeping. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/sys/external.h"
#include "idem/sys/reconcile.h"

#include "records.h"
#include "storetest.h"

TestSuite(store_stalled, .init = storetest_init, .fini = storetest_fini, .timeout = 240);

#define ARGS "{\"subject\":\"stalled\"}"

static void exec_check(const char *sql)
{
    PQclear(pgtest_exec(fx.check, sql));
}

/* Create the key's record, then put it back to pending as a transaction that committed
 * without finishing it would have left it, claimed @age ago ("2 minutes"). */
static void leave_pending(const char *op, const char *age)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char sql[512];

    cr_assert_eq(storetest_create_task(&out, "acme", op, ARGS, &err), 0, "%s", err.message);
    idem_outcome_clear(&out);
    snprintf(sql, sizeof(sql),
             "UPDATE idem.operations SET state = 'pending', response = NULL,"
             " completed_at = NULL, created_at = now() - interval '%s'"
             " WHERE tenant = 'acme' AND operation_id = '%s'",
             age, op);
    exec_check(sql);
}

static idem_reconcile_items *stalled_items(PGconn *conn, const char *op)
{
    idem_reconcile_filter f = IDEM_RECONCILE_FILTER_INIT;
    idem_reconcile_items *items = NULL;
    idem_error err = IDEM_ERROR_INIT;

    f.operation_id = op;
    f.kind = "stalled_pending";
    cr_assert_eq(idem_reconcile_list(&items, conn, &f, &err), 0, "%s", err.message);
    return items;
}

static int retry(idem_outcome *out, effect_counter *runs, const char *op, idem_error *err)
{
    idem_request req = storetest_request("acme", op, ARGS);

    req.attempt = 2;
    return idem_store_execute(out, fx.store, &req, counting_effect, runs, err);
}

Test(store_stalled, a_request_for_a_stalled_key_answers_outcome_unknown_and_records_it)
{
    effect_counter runs = {0};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_reconcile_items *items;
    PGconn *oper;

    storetest_open(NULL, 2);
    leave_pending("op-stalled", "2 minutes");
    for (int i = 1; i <= 2; i++) {
        cr_assert_eq(retry(&out, &runs, "op-stalled", &err), IDEM_EUNKNOWN, "%s", err.message);
        cr_assert_eq(out.status, IDEM_STATUS_OUTCOME_UNKNOWN);
        cr_assert(strstr(err.message, "left pending") != NULL, "%s", err.message);
        cr_assert(strstr(err.message, "idem-reconcile show acme op-stalled") != NULL, "%s",
                  err.message);
        idem_outcome_clear(&out);
    }
    cr_assert_eq(runs.runs, 0, "the effect may have committed: it never runs again");
    cr_assert_eq(storetest_tasks(), 1);
    oper = pgtest_connect_as(fx.conninfo, PGTEST_OPERATOR);
    items = stalled_items(oper, "op-stalled");
    cr_assert_eq(idem_reconcile_items_count(items), 1);
    cr_assert_eq(idem_reconcile_items_at(items, 0)->count, 2, "one item, counting the requests");
    cr_assert_eq(idem_reconcile_items_at(items, 0)->resolved_at, 0);
    idem_reconcile_items_free(items);
    PQfinish(oper);
}

/* Within the call's deadline the record may still be a live attempt's: in_progress, and
 * nothing listed or resolvable yet. */
Test(store_stalled, a_pending_record_within_the_deadline_is_in_progress)
{
    effect_counter runs = {0};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_resolution r = IDEM_RESOLUTION_INIT;
    idem_reconcile_items *items;

    storetest_open(NULL, 2);
    leave_pending("op-young", "1 second");
    cr_assert_eq(retry(&out, &runs, "op-young", &err), IDEM_EBUSY, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_IN_PROGRESS);
    items = stalled_items(fx.check, "op-young");
    cr_assert_eq(idem_reconcile_items_count(items), 0);
    idem_reconcile_items_free(items);
    r.note = "too early";
    cr_assert_eq(idem_external_resolve(fx.check, "acme", "op-young", &r, &err), IDEM_EBUSY);
    cr_assert(strstr(err.message, "stalled_pending") != NULL, "%s", err.message);
    cr_assert_eq(records_count(fx.check, "pending"), 1);
}

/* Listed before any request meets it; resolved as completed by the oper, with the
 * note kept; the next request replays the oper's receipt; resolving again is refused. */
Test(store_stalled, it_is_listed_and_resolved_as_completed_without_running_again)
{
    static const char receipt[] = "{\"task_id\":42}";
    effect_counter runs = {0};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_resolution r = IDEM_RESOLUTION_INIT;
    idem_reconcile_items *items;
    const idem_reconcile_item *it;
    PGconn *oper;

    storetest_open(NULL, 2);
    leave_pending("op-listed", "5 minutes");
    oper = pgtest_connect_as(fx.conninfo, PGTEST_OPERATOR);
    items = stalled_items(oper, "op-listed");
    cr_assert_eq(idem_reconcile_items_count(items), 1, "listed before any request");
    it = idem_reconcile_items_at(items, 0);
    cr_assert_str_eq(it->kind, "stalled_pending");
    cr_assert_eq(it->count, 0);
    cr_assert_eq(it->resolved_at, 0);
    idem_reconcile_items_free(items);

    r.receipt = receipt;
    r.receipt_len = strlen(receipt);
    r.note = "the task exists: found by hand";
    r.by = "oncall";
    cr_assert_eq(idem_external_resolve(oper, "acme", "op-listed", &r, &err), 0, "%s", err.message);
    items = stalled_items(oper, "op-listed");
    cr_assert_eq(idem_reconcile_items_count(items), 1);
    it = idem_reconcile_items_at(items, 0);
    cr_assert_neq(it->resolved_at, 0);
    cr_assert_str_eq(it->resolved_by, "oncall");
    cr_assert_str_eq(it->note, "the task exists: found by hand");
    idem_reconcile_items_free(items);

    cr_assert_eq(retry(&out, &runs, "op-listed", &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_eq(out.receipt_len, strlen(receipt));
    cr_assert_str_eq(out.receipt, receipt);
    cr_assert_eq(runs.runs, 0);
    idem_outcome_clear(&out);
    cr_assert_eq(idem_external_resolve(oper, "acme", "op-listed", &r, &err), IDEM_ENOTFOUND);
    cr_assert(strstr(err.message, "already completed") != NULL, "%s", err.message);
    PQfinish(oper);
}

/* Resolved as failed after a request recorded it: the item recorded then is the one
 * resolved, and later requests are rejected with the receipt. */
Test(store_stalled, resolved_as_failed_later_requests_are_rejected)
{
    effect_counter runs = {0};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_resolution r = IDEM_RESOLUTION_INIT;
    idem_reconcile_items *items;

    storetest_open(NULL, 2);
    leave_pending("op-failed", "2 minutes");
    cr_assert_eq(retry(&out, &runs, "op-failed", &err), IDEM_EUNKNOWN, "%s", err.message);
    idem_outcome_clear(&out);
    r.as = IDEM_RESOLVE_FAILED;
    r.note = "no task was written";
    cr_assert_eq(idem_external_resolve(fx.check, "acme", "op-failed", &r, &err), 0, "%s",
                 err.message);
    items = stalled_items(fx.check, "op-failed");
    cr_assert_eq(idem_reconcile_items_count(items), 1);
    cr_assert_eq(idem_reconcile_items_at(items, 0)->count, 1);
    cr_assert_neq(idem_reconcile_items_at(items, 0)->resolved_at, 0);
    idem_reconcile_items_free(items);
    cr_assert_eq(retry(&out, &runs, "op-failed", &err), IDEM_EREJECTED, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_REJECTED);
    cr_assert(strstr(out.receipt, "no task was written") != NULL, "%s", out.receipt);
    cr_assert_eq(runs.runs, 0);
    idem_outcome_clear(&out);
}
