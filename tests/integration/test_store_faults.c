/* Failures around the commit, injected where they happen: a lost reply, a failure before
 * the commit, a connection that drops before or during it. One effect commits, once. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "storetest.h"
#include "store_internal.h"

TestSuite(store_faults, .init = storetest_init, .fini = storetest_fini, .timeout = 240);

Test(store_faults, lost_response_retry_through_new_connection_returns_same_receipt)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    storetest_open(NULL, 2);

    idem__store_inject_fault(fx.store, IDEM__FAULT_REPLY_LOST_AFTER_COMMIT, 1);
    int rc = storetest_create_task(&out, "acme", "op-lost-1",
                                   "{\"subject\":\"Check delayed delivery\"}", &err);
    cr_assert_eq(rc, IDEM_EUNAVAIL);
    cr_assert_eq(out.status, IDEM_STATUS_UNAVAILABLE);
    cr_assert_null(out.receipt);
    cr_assert_eq(storetest_tasks(), 1);
    cr_assert_eq(storetest_operations(), 1);

    /* The retry comes through a brand-new pool, so a new connection. */
    storetest_close();
    storetest_open(NULL, 1);
    rc = storetest_create_task(&out, "acme", "op-lost-1",
                               "{\"subject\":\"Check delayed delivery\"}", &err);
    cr_assert_eq(rc, 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_str_eq(out.receipt, "{\"status\":\"created\",\"task_id\":1}");
    char *stored = storetest_receipt("acme", "op-lost-1");
    cr_assert_eq(out.receipt_len, strlen(stored));
    cr_assert_eq(memcmp(out.receipt, stored, out.receipt_len), 0);
    free(stored);
    cr_assert_eq(storetest_tasks(), 1);
    cr_assert_eq(storetest_operations(), 1);
    idem_outcome_clear(&out);
}

Test(store_faults, rollback_before_commit_stores_nothing_and_retry_creates_one_task)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    storetest_open(NULL, 2);

    idem__store_inject_fault(fx.store, IDEM__FAULT_FAIL_BEFORE_COMMIT, 1);
    cr_assert_eq(storetest_create_task(&out, "acme", "op-rb", "{\"subject\":\"s\"}", &err),
                 IDEM_EUNAVAIL);
    cr_assert_eq(storetest_tasks(), 0);
    cr_assert_eq(storetest_operations(), 0);
    cr_assert_eq(storetest_create_task(&out, "acme", "op-rb", "{\"subject\":\"s\"}", &err), 0, "%s",
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(storetest_tasks(), 1);
    cr_assert_eq(storetest_operations(), 1);
    idem_outcome_clear(&out);
}

Test(store_faults, connection_dropped_before_commit_reaches_server_is_retried_cleanly)
{
    effect_counter cnt = {0};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = storetest_request("acme", "op-drop-before", "{\"subject\":\"s\"}");
    storetest_open(NULL, 2);

    idem__store_inject_fault(fx.store, IDEM__FAULT_DROP_BEFORE_COMMIT, 1);
    cr_assert_eq(idem_store_execute(&out, fx.store, &req, counting_effect, &cnt, &err), 0, "%s",
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(cnt.runs, 2, "the first run was rolled back, the second committed");
    idem_store_stats st = IDEM_STORE_STATS_INIT;
    idem_store_stats_get(&st, fx.store);
    cr_assert_eq(st.ambiguous_commits, 1);
    cr_assert_eq(storetest_tasks(), 1);
    cr_assert_eq(storetest_operations(), 1);
    char *stored = storetest_receipt("acme", "op-drop-before");
    cr_assert_str_eq(out.receipt, stored);
    free(stored);
    idem_outcome_clear(&out);
}

Test(store_faults, connection_dropped_after_commit_was_sent_resolves_to_created)
{
    effect_counter cnt = {0};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = storetest_request("acme", "op-drop-during", "{\"subject\":\"s\"}");
    storetest_open(NULL, 2);

    idem__store_inject_fault(fx.store, IDEM__FAULT_DROP_DURING_COMMIT, 1);
    cr_assert_eq(idem_store_execute(&out, fx.store, &req, counting_effect, &cnt, &err), 0, "%s",
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED,
                 "this call's own commit, found on a fresh connection: %s",
                 idem_status_name(out.status));
    /* Directly, the server reads the COMMIT before the closed socket: it commits, and the
     * lookup finds this call's own record. Through PgBouncer the pooler may drop the
     * COMMIT with the client: nothing committed, and the call's next attempt commits. */
    if (pgtest_through_pgbouncer())
        cr_assert(cnt.runs == 1 || cnt.runs == 2, "runs %d", cnt.runs);
    else
        cr_assert_eq(cnt.runs, 1, "the effect committed once and never ran again");
    idem_store_stats st = IDEM_STORE_STATS_INIT;
    idem_store_stats_get(&st, fx.store);
    cr_assert_eq(st.ambiguous_commits, 1);
    cr_assert_eq(storetest_tasks(), 1, "one effect committed, whichever way");
    char *stored = storetest_receipt("acme", "op-drop-during");
    cr_assert_str_eq(out.receipt, stored);
    free(stored);
    idem_outcome_clear(&out);
}
