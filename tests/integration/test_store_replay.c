/* What a retry gets back: the stored receipt, failures included, and the record behind
 * it; never the current state. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "storetest.h"

TestSuite(store_replay, .init = storetest_init, .fini = storetest_fini, .timeout = 240);

Test(store_replay, final_failure_response_is_stored_and_replayed)
{
    idem_outcome out = IDEM_OUTCOME_INIT, again = IDEM_OUTCOME_INIT;
    storetest_open(NULL, 1);

    cr_assert_eq(storetest_create_task(&out, "acme", "op-final", "{\"subject\":\"\"}", NULL),
                 IDEM_EREJECTED, "a refusal never returns success");
    cr_assert_eq(out.status, IDEM_STATUS_REJECTED);
    cr_assert_eq(idem_status_next_step(out.status), IDEM_NEXT_RETURN_TO_CALLER);
    cr_assert(strstr(out.receipt, "\"status\":\"rejected\"") != NULL, "%s", out.receipt);
    cr_assert_eq(storetest_create_task(&again, "acme", "op-final", "{\"subject\":\"\"}", NULL),
                 IDEM_EREJECTED);
    cr_assert_eq(again.status, IDEM_STATUS_REJECTED, "the retry gets the same refusal");
    cr_assert_str_eq(again.receipt, out.receipt);
    cr_assert_eq(storetest_tasks(), 0);
    cr_assert_eq(
        pgtest_scalar(fx.check, "SELECT count(*) FROM idem.operations WHERE state = 'failed'"), 1);
    idem_outcome_clear(&out);
    idem_outcome_clear(&again);
}

Test(store_replay, get_returns_the_record_with_its_receipt_and_trace_id)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_operation *op = NULL;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = storetest_request("acme", "op-get", "{\"subject\":\"s\"}");
    req.trace_id = "call_abc123";
    storetest_open(NULL, 1);

    cr_assert_eq(idem_store_execute(&out, fx.store, &req, example_create_support_task, NULL, &err),
                 0);
    cr_assert_eq(idem_store_get(&op, fx.store, "acme", "op-get", &err), 0, "%s", err.message);
    cr_assert_str_eq(idem_operation_id(op), "op-get");
    cr_assert_str_eq(idem_operation_tool(op), EXAMPLE_TOOL_NAME);
    cr_assert_eq(idem_operation_payload_version(op), 1);
    cr_assert_eq(idem_operation_state(op), IDEM_STATE_COMPLETED);
    cr_assert_str_eq(idem_state_name(idem_operation_state(op)), "completed");
    cr_assert_str_eq(idem_operation_trace_id(op), "call_abc123");
    size_t len = 0;
    const char *r = idem_operation_receipt(op, &len);
    cr_assert_eq(len, out.receipt_len);
    cr_assert_eq(memcmp(r, out.receipt, len), 0);
    idem_fingerprint fp;
    cr_assert_eq(idem_fingerprint_compute_text(&fp, EXAMPLE_TOOL_NAME, 1, req.arguments,
                                               req.arguments_len, NULL, NULL),
                 0);
    cr_assert_eq(memcmp(idem_operation_fingerprint(op)->bytes, fp.bytes, sizeof(fp.bytes)), 0);
    cr_assert_gt(idem_operation_created_at(op), 1700000000LL * 1000000);
    cr_assert_geq(idem_operation_completed_at(op), idem_operation_created_at(op));
    int64_t week = 604800LL * 1000000;
    int64_t window = idem_operation_expires_at(op) - idem_operation_created_at(op);
    cr_assert(window >= week - 1000000 && window <= week + 1000000, "window %lld",
              (long long)window);
    idem_operation_free(op);
    idem_outcome_clear(&out);
    /* A retry's trace ID is not the key: another tool-call ID still replays. */
    req.trace_id = "call_other";
    cr_assert_eq(idem_store_execute(&out, fx.store, &req, example_create_support_task, NULL, &err),
                 0);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_eq(idem_store_get(&op, fx.store, "acme", "op-missing", &err), IDEM_ENOTFOUND);
    cr_assert_eq(idem_store_get(&op, fx.store, "bad tenant", "op-get", &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "tenant");
    idem_outcome_clear(&out);
}

Test(store_replay, receipt_is_what_happened_not_the_current_state)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char status[16];
    storetest_open(NULL, 1);

    cr_assert_eq(storetest_create_task(&out, "acme", "op-r", "{\"subject\":\"s\"}", &err), 0);
    json_t *receipt = json_loads(out.receipt, 0, NULL);
    long long task_id = json_integer_value(json_object_get(receipt, "task_id"));
    json_decref(receipt);
    cr_assert_eq(example_support_task_close(fx.pool, "acme", task_id, &err), 0, "%s", err.message);
    cr_assert_eq(
        example_support_task_status(status, sizeof(status), fx.pool, "acme", task_id, &err), 0);
    cr_assert_str_eq(status, "closed");
    char *first = strdup(out.receipt);
    idem_outcome_clear(&out);
    cr_assert_eq(storetest_create_task(&out, "acme", "op-r", "{\"subject\":\"s\"}", &err), 0);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_str_eq(out.receipt, first, "the replay is the original receipt");
    cr_assert_eq(storetest_tasks(), 1, "no replacement task");
    /* Another tenant cannot see the task's state either. */
    cr_assert_eq(
        example_support_task_status(status, sizeof(status), fx.pool, "other", task_id, &err),
        IDEM_ENOTFOUND);
    free(first);
    idem_outcome_clear(&out);
}
