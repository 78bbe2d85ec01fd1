/* Tools' identity policies (identity.h): drift in a field left out replays, a change in an
 * identity field is a conflict naming it (callback and declared paths), absent and null
 * differ, the record keeps per-field digests and no arguments, a tombstone keeps none, bad
 * pointers are refused when the store is made, and the published policy is the store's. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/sys/sweep.h"
#include "storetest.h"

static idem_declared *create_task;

static void identity_init(void)
{
    storetest_init();
    create_task = storetest_declared_task();
}

static void identity_fini(void)
{
    idem_declared_free(create_task);
    create_task = NULL;
    storetest_fini();
}

TestSuite(store_identity, .init = identity_init, .fini = identity_fini, .timeout = 240);

/* fx.store with one policy for the example tool, its pool's statement_timeout_ms @cap_ms
 * (0: none). */
static void open_capped(idem_identity_mode mode, const char *const *fields, size_t nfields,
                        unsigned int cap_ms)
{
    idem_store_options opts = IDEM_STORE_OPTIONS_INIT;
    idem_tool_identity id = IDEM_TOOL_IDENTITY_INIT;
    const idem_tool_identity *ids[] = {&id};

    id.tool = EXAMPLE_TOOL_NAME;
    id.mode = mode;
    id.fields = fields;
    id.nfields = nfields;
    opts.identities = ids;
    opts.nidentities = 1;
    if (cap_ms > 0)
        storetest_open_statement_timeout(&opts, cap_ms);
    else
        storetest_open(&opts, 2);
}

static void open_with(idem_identity_mode mode, const char *const *fields, size_t nfields)
{
    open_capped(mode, fields, nfields, 0);
}

/* One call of the example tool: callback (@declared 0) or declared, a retry (attempt 0). */
static int call(idem_outcome *out, int declared, const char *op, const char *args, idem_error *err)
{
    idem_request req = storetest_request("acme", op, args);
    effect_counter counter = {0};

    idem_outcome_clear(out);
    idem_error_clear(err);
    if (declared)
        return idem_store_execute_declared(out, fx.store, &req, create_task, err);
    return idem_store_execute(out, fx.store, &req, counting_effect, &counter, err);
}

static void expect_status(int declared, const char *op, const char *args, idem_status want,
                          idem_error *err)
{
    idem_outcome out = IDEM_OUTCOME_INIT;

    call(&out, declared, op, args, err);
    cr_assert_eq(out.status, want, "%s: %s, not %s: %s", args, idem_status_name(out.status),
                 idem_status_name(want), err->message);
    idem_outcome_clear(&out);
}

static void drift_in_an_excluded_field_replays(int declared)
{
    static const char *const except[] = {"/requested_at"};
    idem_error err = IDEM_ERROR_INIT;

    open_with(IDEM_IDENTITY_EXCEPT, except, 1);
    expect_status(declared, "op-drift",
                  "{\"subject\":\"printer\",\"requested_at\":\"2026-12-01T10:00:00Z\"}",
                  IDEM_STATUS_CREATED, &err);
    expect_status(declared, "op-drift",
                  "{\"subject\":\"printer\",\"requested_at\":\"2026-12-01T10:00:07Z\"}",
                  IDEM_STATUS_REPLAYED, &err);
    expect_status(declared, "op-drift", "{\"subject\":\"printer\"}", IDEM_STATUS_REPLAYED, &err);
    cr_assert_eq(storetest_tasks(), 1, "the effect ran once");
}

Test(store_identity, drift_in_an_excluded_field_replays_callback)
{
    drift_in_an_excluded_field_replays(0);
}

Test(store_identity, drift_in_an_excluded_field_replays_declared)
{
    drift_in_an_excluded_field_replays(1);
}

/* Two identity fields changed: the first in member order is named ("/order/id" sorts
 * before "/subject"; "/order" before "/order_x", token by token). */
static void changed_identity_field_is_named(int declared, unsigned int cap_ms)
{
    static const char *const only[] = {"/subject", "/order_x", "/order/id"};
    idem_error err = IDEM_ERROR_INIT;

    open_capped(IDEM_IDENTITY_ONLY, only, 3, cap_ms);
    expect_status(declared, "op-id", "{\"subject\":\"a\",\"order\":{\"id\":1},\"order_x\":0}",
                  IDEM_STATUS_CREATED, &err);
    expect_status(declared, "op-id", "{\"subject\":\"b\",\"order\":{\"id\":2},\"order_x\":0}",
                  IDEM_STATUS_CONFLICT, &err);
    cr_assert_str_eq(err.field, "/order/id", "%s", err.message);
    cr_assert_not_null(strstr(err.message, "identity field /order/id differs"), "%s", err.message);
    expect_status(declared, "op-id", "{\"subject\":\"b\",\"order\":{\"id\":1},\"order_x\":1}",
                  IDEM_STATUS_CONFLICT, &err);
    cr_assert_str_eq(err.field, "/order_x", "%s", err.message);
    expect_status(declared, "op-id",
                  "{\"subject\":\"a\",\"order\":{\"id\":1},\"order_x\":0,"
                  "\"other\":true}",
                  IDEM_STATUS_REPLAYED, &err);
    cr_assert_eq(storetest_tasks(), 1);
}

Test(store_identity, a_changed_identity_field_is_a_conflict_naming_it_callback)
{
    changed_identity_field_is_named(0, 0);
}

Test(store_identity, a_changed_identity_field_is_a_conflict_naming_it_declared)
{
    changed_identity_field_is_named(1, 0);
}

/* Where the session holds the pool's cap, a declared create makes its settings in its own
 * statement (the form with the session's check, store_declared.c), which writes the digests
 * from a parameter of its own place: a conflict still names the field. */
Test(store_identity, a_changed_identity_field_is_named_where_the_session_has_the_cap)
{
    changed_identity_field_is_named(1, 8000);
}

Test(store_identity, an_absent_field_and_null_differ)
{
    static const char *const only[] = {"/subject", "/note"};
    idem_error err = IDEM_ERROR_INIT;

    open_with(IDEM_IDENTITY_ONLY, only, 2);
    expect_status(0, "op-null", "{\"subject\":\"a\"}", IDEM_STATUS_CREATED, &err);
    expect_status(0, "op-null", "{\"subject\":\"a\",\"note\":null}", IDEM_STATUS_CONFLICT, &err);
    cr_assert_str_eq(err.field, "/note", "%s", err.message);
}

Test(store_identity, except_names_the_top_level_member_that_differs)
{
    static const char *const except[] = {"/meta/requested_at"};
    idem_error err = IDEM_ERROR_INIT;

    open_with(IDEM_IDENTITY_EXCEPT, except, 1);
    expect_status(0, "op-ex", "{\"subject\":\"a\",\"meta\":{\"requested_at\":1,\"by\":\"x\"}}",
                  IDEM_STATUS_CREATED, &err);
    expect_status(0, "op-ex", "{\"subject\":\"a\",\"meta\":{\"requested_at\":2,\"by\":\"x\"}}",
                  IDEM_STATUS_REPLAYED, &err);
    expect_status(0, "op-ex", "{\"subject\":\"a\",\"meta\":{\"requested_at\":2,\"by\":\"y\"}}",
                  IDEM_STATUS_CONFLICT, &err);
    cr_assert_str_eq(err.field, "/meta", "%s", err.message);
}

/* The record keeps a digest per field present, and no argument's value. */
Test(store_identity, the_record_keeps_field_digests_not_arguments)
{
    static const char *const only[] = {"/subject", "/missing"};
    idem_error err = IDEM_ERROR_INIT;
    PGresult *res;

    open_with(IDEM_IDENTITY_ONLY, only, 2);
    expect_status(0, "op-dig", "{\"subject\":\"secret-subject\"}", IDEM_STATUS_CREATED, &err);
    res = pgtest_exec(fx.check, "SELECT octet_length(identity_digests),"
                                " position('secret'::bytea IN identity_digests),"
                                " position('/subject'::bytea IN identity_digests)"
                                " FROM idem.operations WHERE operation_id = 'op-dig'");
    cr_assert_eq(atoi(PQgetvalue(res, 0, 0)), 2 + 8 + 16, "one entry: length, pointer, digest");
    cr_assert_eq(atoi(PQgetvalue(res, 0, 1)), 0, "no argument's value");
    cr_assert_eq(atoi(PQgetvalue(res, 0, 2)), 3);
    PQclear(res);
    res = pgtest_exec(fx.check, "SELECT f.field, octet_length(f.digest) FROM idem.operations o,"
                                " idem.identity_fields(o.identity_digests) f"
                                " WHERE o.operation_id = 'op-dig'");
    cr_assert_eq(PQntuples(res), 1);
    cr_assert_str_eq(PQgetvalue(res, 0, 0), "/subject");
    cr_assert_str_eq(PQgetvalue(res, 0, 1), "16");
    PQclear(res);
}

/* A tool with no policy writes no digests, and its fingerprint is idem_fingerprint_compute()'s,
 * whatever other tools' policies are. */
Test(store_identity, a_tool_without_a_policy_is_fingerprinted_as_before)
{
    static const char *const only[] = {"/x"};
    idem_store_options opts = IDEM_STORE_OPTIONS_INIT;
    idem_tool_identity id = IDEM_TOOL_IDENTITY_INIT;
    const idem_tool_identity *ids[] = {&id};
    const char *args = "{\"subject\":\"s\",\"requested_at\":\"t\"}";
    idem_error err = IDEM_ERROR_INIT;
    idem_fingerprint fp;
    char hex[IDEM_FINGERPRINT_HEX_SIZE], sql[256];
    PGresult *res;

    id.tool = "another_tool";
    id.mode = IDEM_IDENTITY_ONLY;
    id.fields = only;
    id.nfields = 1;
    opts.identities = ids;
    opts.nidentities = 1;
    storetest_open(&opts, 2);
    expect_status(0, "op-plain", args, IDEM_STATUS_CREATED, &err);
    cr_assert_eq(idem_fingerprint_compute_text(&fp, EXAMPLE_TOOL_NAME, EXAMPLE_TOOL_VERSION, args,
                                               strlen(args), NULL, &err),
                 0);
    idem_fingerprint_hex(hex, &fp);
    snprintf(sql, sizeof(sql),
             "SELECT encode(fingerprint, 'hex') = '%s' AND identity_digests IS NULL"
             " FROM idem.operations WHERE operation_id = 'op-plain'",
             hex);
    res = pgtest_exec(fx.check, sql);
    cr_assert_str_eq(PQgetvalue(res, 0, 0), "t");
    PQclear(res);
    expect_status(0, "op-plain", "{\"subject\":\"s\",\"requested_at\":\"u\"}", IDEM_STATUS_CONFLICT,
                  &err);
    cr_assert_str_eq(err.field, "arguments");
}

/* Without digests (a tombstone's, a record from before migration 0012) a conflict says
 * "arguments"; the sweeper drops them with the receipt. */
Test(store_identity, without_digests_the_conflict_says_arguments)
{
    static const char *const only[] = {"/subject"};
    idem_error err = IDEM_ERROR_INIT;

    open_with(IDEM_IDENTITY_ONLY, only, 1);
    expect_status(0, "op-nod", "{\"subject\":\"a\"}", IDEM_STATUS_CREATED, &err);
    PQclear(pgtest_exec(fx.check, "UPDATE idem.operations SET identity_digests = NULL"
                                  " WHERE operation_id = 'op-nod'"));
    expect_status(0, "op-nod", "{\"subject\":\"b\"}", IDEM_STATUS_CONFLICT, &err);
    cr_assert_str_eq(err.field, "arguments", "%s", err.message);
}

Test(store_identity, a_tombstone_keeps_no_digests_and_names_no_field)
{
    static const char *const only[] = {"/subject"};
    idem_sweep_options so = IDEM_SWEEP_OPTIONS_INIT;
    idem_sweep_result r = IDEM_SWEEP_RESULT_INIT;
    idem_error err = IDEM_ERROR_INIT;

    open_with(IDEM_IDENTITY_ONLY, only, 1);
    expect_status(0, "op-tomb", "{\"subject\":\"a\"}", IDEM_STATUS_CREATED, &err);
    PQclear(pgtest_exec(fx.check, "UPDATE idem.operations SET expires_at = now() - interval '1 s'"
                                  " WHERE operation_id = 'op-tomb'"));
    cr_assert_eq(idem_sweep_run(&r, fx.check, &so, &err), 0, "%s", err.message);
    cr_assert_eq(pgtest_scalar(fx.check, "SELECT count(*) FROM idem.operations WHERE"
                                         " operation_id = 'op-tomb' AND state = 'expired'"
                                         " AND identity_digests IS NULL"),
                 1);
    expect_status(0, "op-tomb", "{\"subject\":\"b\"}", IDEM_STATUS_EXPIRED, &err);
    cr_assert_null(strstr(err.message, "/subject"), "%s", err.message);
}

/* Policies refused when the store is made, naming the option and the pointer. */
struct refusal {
    idem_identity_mode mode;
    const char *fields[3];
    size_t nfields;
    const char *field;
    const char *says;
};

static const struct refusal refusals[] = {
    {IDEM_IDENTITY_ONLY, {"/a", "note"}, 2, "options.identities[0].fields[1]", "starts with '/'"},
    {IDEM_IDENTITY_ONLY, {""}, 1, "options.identities[0].fields[0]", "mode all"},
    {IDEM_IDENTITY_EXCEPT, {"/items/0"}, 1, "options.identities[0].fields[0]", "into an array"},
    {IDEM_IDENTITY_EXCEPT, {"/items/-/sku"}, 1, "options.identities[0].fields[0]", "into an array"},
    {IDEM_IDENTITY_ONLY, {"/a~2"}, 1, "options.identities[0].fields[0]", "'~'"},
    {IDEM_IDENTITY_ONLY,
     {"/order", "/x", "/order/id"},
     3,
     "options.identities[0].fields",
     "inside the first"},
    {IDEM_IDENTITY_ONLY, {"/x", "/x"}, 2, "options.identities[0].fields", "the same field twice"},
    {IDEM_IDENTITY_ONLY, {NULL}, 0, "options.identities[0].fields", "at least one field"},
    {IDEM_IDENTITY_ALL, {"/x"}, 1, "options.identities[0].fields", "takes no fields"},
};

Test(store_identity, invalid_pointers_are_refused_naming_the_field)
{
    storetest_open(NULL, 1);
    for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
        const struct refusal *t = &refusals[i];
        idem_store_options opts = IDEM_STORE_OPTIONS_INIT;
        idem_tool_identity id = IDEM_TOOL_IDENTITY_INIT;
        const idem_tool_identity *ids[] = {&id};
        idem_error err = IDEM_ERROR_INIT;
        idem_store *store = NULL;

        id.tool = EXAMPLE_TOOL_NAME;
        id.mode = t->mode;
        id.fields = t->fields;
        id.nfields = t->nfields;
        opts.identities = ids;
        opts.nidentities = 1;
        cr_assert_eq(idem_store_new(&store, fx.pool, &opts, &err), IDEM_EINVAL, "case %zu", i);
        cr_assert_null(store);
        cr_assert_str_eq(err.field, t->field, "case %zu: %s", i, err.message);
        cr_assert_not_null(strstr(err.message, t->says), "case %zu: %s", i, err.message);
    }
}

Test(store_identity, a_tool_with_two_policies_is_refused)
{
    idem_store_options opts = IDEM_STORE_OPTIONS_INIT;
    idem_tool_identity a = IDEM_TOOL_IDENTITY_INIT, b = IDEM_TOOL_IDENTITY_INIT;
    const idem_tool_identity *ids[] = {&a, &b};
    idem_error err = IDEM_ERROR_INIT;
    idem_store *store = NULL;

    storetest_open(NULL, 1);
    a.tool = b.tool = "t";
    opts.identities = ids;
    opts.nidentities = 2;
    cr_assert_eq(idem_store_new(&store, fx.pool, &opts, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "options.identities[1].tool", "%s", err.message);
}

Test(store_identity, the_published_policy_is_the_stores)
{
    static const char *const except[] = {"/requested_at", "/meta/trace"};
    idem_store_options opts = IDEM_STORE_OPTIONS_INIT;
    idem_tool_retention windows[] = {{EXAMPLE_TOOL_NAME, 3600, 7200}};
    idem_tool_identity id = IDEM_TOOL_IDENTITY_INIT;
    const idem_tool_identity *ids[] = {&id};
    idem_error err = IDEM_ERROR_INIT;
    json_t *policy = NULL;
    char *text;

    id.tool = EXAMPLE_TOOL_NAME;
    id.mode = IDEM_IDENTITY_EXCEPT;
    id.fields = except;
    id.nfields = 2;
    opts.tools = windows;
    opts.ntools = 1;
    opts.identities = ids;
    opts.nidentities = 1;
    storetest_open(&opts, 1);
    cr_assert_eq(idem_store_tool_policy(&policy, fx.store, EXAMPLE_TOOL_NAME, &err), 0, "%s",
                 err.message);
    text = json_dumps(policy, JSON_COMPACT | JSON_SORT_KEYS);
    cr_assert_str_eq(text, "{\"identity\":{\"fields\":[\"/meta/trace\",\"/requested_at\"],"
                           "\"mode\":\"except\"},\"key_memory_s\":7200,\"retention_s\":3600,"
                           "\"stored_failures\":[\"rejected\"],\"tool\":\"create_support_task\","
                           "\"unstored_failures\":[\"invalid\",\"conflict\",\"in_progress\","
                           "\"effect_failed\",\"unavailable\",\"misconfigured\"],\"version\":1}");
    free(text);
    json_decref(policy);
    cr_assert_eq(idem_store_tool_policy(&policy, fx.store, "other_tool", &err), 0);
    cr_assert_eq(json_integer_value(json_object_get(policy, "retention_s")), opts.retention_s);
    cr_assert_eq(json_integer_value(json_object_get(policy, "key_memory_s")), opts.key_memory_s);
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(policy, "identity"), "mode")), "all");
    cr_assert_null(json_object_get(json_object_get(policy, "identity"), "fields"));
    json_decref(policy);
    policy = NULL;
    cr_assert_eq(idem_store_tool_policy(&policy, fx.store, "Bad Name", &err), IDEM_EINVAL);
    cr_assert_null(policy);
    cr_assert_str_eq(err.field, "tool");
}
