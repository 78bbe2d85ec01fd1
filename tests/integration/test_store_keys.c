/* What a key is: (tenant, operation_id), bound to the intent it was first used for. */
#include <criterion/criterion.h>
#include <string.h>

#include "storetest.h"

TestSuite(store_keys, .init = storetest_init, .fini = storetest_fini, .timeout = 240);

Test(store_keys, changed_arguments_under_same_key_conflict_and_write_nothing)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    storetest_open(NULL, 2);

    cr_assert_eq(storetest_create_task(&out, "acme", "op-c", "{\"subject\":\"first\"}", &err), 0,
                 "%s", err.message);
    idem_outcome_clear(&out);
    cr_assert_eq(storetest_create_task(&out, "acme", "op-c", "{\"subject\":\"second\"}", &err),
                 IDEM_ECONFLICT);
    cr_assert_eq(out.status, IDEM_STATUS_CONFLICT);
    cr_assert_null(out.receipt, "a conflict never reveals the stored receipt");
    cr_assert_str_eq(err.field, "arguments");
    cr_assert(strstr(err.message, "different arguments") != NULL, "%s", err.message);

    /* Another tool name or payload version under the same key is changed intent too. */
    idem_request req = storetest_request("acme", "op-c", "{\"subject\":\"first\"}");
    req.payload_version = 2;
    cr_assert_eq(idem_store_execute(&out, fx.store, &req, example_create_support_task, NULL, &err),
                 IDEM_ECONFLICT);
    cr_assert_str_eq(err.field, "payload_version", "the conflict names what changed");
    cr_assert(strstr(err.message, "payload version 1, not 2") != NULL, "%s", err.message);
    req.payload_version = 1;
    req.tool = "create_support_ticket";
    cr_assert_eq(idem_store_execute(&out, fx.store, &req, example_create_support_task, NULL, &err),
                 IDEM_ECONFLICT);
    cr_assert_str_eq(err.field, "tool");
    cr_assert(strstr(err.message, "not create_support_ticket") != NULL, "%s", err.message);
    cr_assert_eq(storetest_tasks(), 1);
    cr_assert_eq(storetest_operations(), 1);

    /* Key order and whitespace are not changed intent. */
    cr_assert_eq(storetest_create_task(&out, "acme", "op-c", " { \"subject\" : \"first\" } ", &err),
                 0);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    idem_outcome_clear(&out);
}

Test(store_keys, two_intents_with_the_same_subject_create_two_tasks)
{
    idem_outcome a = IDEM_OUTCOME_INIT, b = IDEM_OUTCOME_INIT;
    storetest_open(NULL, 2);

    cr_assert_eq(storetest_create_task(&a, "acme", "op-1", "{\"subject\":\"Refund\"}", NULL), 0);
    cr_assert_eq(storetest_create_task(&b, "acme", "op-2", "{\"subject\":\"Refund\"}", NULL), 0);
    cr_assert_eq(a.status, IDEM_STATUS_CREATED);
    cr_assert_eq(b.status, IDEM_STATUS_CREATED);
    cr_assert_str_neq(a.receipt, b.receipt);
    cr_assert_eq(storetest_tasks(), 2);
    idem_outcome_clear(&a);
    idem_outcome_clear(&b);
}

Test(store_keys, same_operation_id_in_two_tenants_is_two_independent_keys)
{
    idem_outcome a = IDEM_OUTCOME_INIT, b = IDEM_OUTCOME_INIT;
    idem_operation *op = NULL;
    idem_error err = IDEM_ERROR_INIT;
    storetest_open(NULL, 2);

    cr_assert_eq(
        storetest_create_task(&a, "tenant-a", "shared-id", "{\"subject\":\"A's task\"}", NULL), 0);
    /* B cannot read A's record ... */
    cr_assert_eq(idem_store_get(&op, fx.store, "tenant-b", "shared-id", &err), IDEM_ENOTFOUND);
    cr_assert_null(op);
    /* ... nor replay A's result, even with A's exact arguments: it gets its own effect. */
    cr_assert_eq(
        storetest_create_task(&b, "tenant-b", "shared-id", "{\"subject\":\"A's task\"}", NULL), 0);
    cr_assert_eq(b.status, IDEM_STATUS_CREATED);
    cr_assert_str_neq(a.receipt, b.receipt);
    idem_outcome_clear(&b);
    /* Different arguments in B are no conflict with A either. */
    cr_assert_eq(
        storetest_create_task(&b, "tenant-c", "shared-id", "{\"subject\":\"other\"}", NULL), 0);
    cr_assert_eq(b.status, IDEM_STATUS_CREATED);
    cr_assert_eq(storetest_tasks(), 3);
    cr_assert_eq(pgtest_scalar(fx.check, "SELECT count(*) FROM idem_example.support_tasks"
                                         " WHERE tenant = 'tenant-a'"),
                 1);
    cr_assert_eq(idem_store_get(&op, fx.store, "tenant-a", "shared-id", &err), 0, "%s",
                 err.message);
    cr_assert_str_eq(idem_operation_tenant(op), "tenant-a");
    cr_assert_str_eq(idem_operation_receipt(op, NULL), a.receipt);
    idem_operation_free(op);
    idem_outcome_clear(&a);
    idem_outcome_clear(&b);
}
