/* Numbers through the store: a receipt is stored and replayed exactly as the effect built
 * it, and arguments a double would change are refused before anything runs. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "idem/idem.h"
#include "pgtest.h"

static idem_pool *pool;
static idem_store *store;

static void open_store(void)
{
    idem_error err = IDEM_ERROR_INIT;
    char *conninfo;

    conninfo = pgtest_new_migrated_database("numbers");
    cr_assert_eq(idem_pool_new(&pool, conninfo, NULL, &err), 0, "%s", err.message);
    cr_assert_eq(idem_store_new(&store, pool, NULL, &err), 0, "%s", err.message);
    free(conninfo);
}

static void close_store(void)
{
    idem_store_free(store);
    idem_pool_free(pool);
}

TestSuite(store_numbers, .init = open_store, .fini = close_store);

/* Answers with a 64-bit order ID; counts its runs. */
static int place_order(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                       idem_error *err)
{
    int *runs = ctx;

    (void)tx, (void)arguments, (void)err;
    ++*runs;
    *response =
        json_pack("{s:I,s:s}", "order_id", (json_int_t)1234567890123456789LL, "state", "placed");
    return IDEM_EFFECT_OK;
}

static int execute(idem_outcome *out, const char *operation_id, const char *arguments, int *runs,
                   idem_error *err)
{
    idem_request req = IDEM_REQUEST_INIT;

    req.tenant = "acme";
    req.operation_id = operation_id;
    req.tool = "place_order";
    req.arguments = arguments;
    req.arguments_len = strlen(arguments);
    idem_outcome_clear(out);
    return idem_store_execute(out, store, &req, place_order, runs, err);
}

Test(store_numbers, a_64_bit_id_in_the_receipt_is_stored_and_replayed_exactly)
{
    const char *expected = "{\"order_id\":1234567890123456789,\"state\":\"placed\"}";
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    int runs = 0;

    cr_assert_eq(execute(&out, "op-id-64", "{\"sku\": 7}", &runs, &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_str_eq(out.receipt, expected);
    cr_assert_eq(execute(&out, "op-id-64", "{\"sku\": 7}", &runs, &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_str_eq(out.receipt, expected);
    cr_assert_eq(runs, 1);
    idem_outcome_clear(&out);
}

Test(store_numbers, arguments_with_integers_beyond_2_53_are_invalid_never_merged)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    int runs = 0;

    cr_assert_eq(execute(&out, "op-big", "{\"customer\": 1234567890123456789}", &runs, &err),
                 IDEM_EINVAL, "%s", idem_status_name(out.status));
    cr_assert_eq(out.status, IDEM_STATUS_INVALID);
    cr_assert_str_eq(err.field, "arguments");
    cr_assert_not_null(strstr(err.message, "as a string"), "%s", err.message);
    cr_assert_eq(execute(&out, "op-big", "{\"customer\": 1234567890123456788}", &runs, &err),
                 IDEM_EINVAL, "%s", idem_status_name(out.status));
    cr_assert_eq(out.status, IDEM_STATUS_INVALID);
    cr_assert_eq(runs, 0);
    /* Sent as strings, the two are two intents: the second is a conflict. */
    cr_assert_eq(execute(&out, "op-big", "{\"customer\": \"1234567890123456789\"}", &runs, &err), 0,
                 "%s", err.message);
    cr_assert_eq(execute(&out, "op-big", "{\"customer\": \"1234567890123456788\"}", &runs, &err),
                 IDEM_ECONFLICT, "%s", idem_status_name(out.status));
    cr_assert_eq(runs, 1);
    idem_outcome_clear(&out);
}
