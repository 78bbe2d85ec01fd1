/* Declared effects' parameters as JSON Pointers (RFC 6901) into the arguments: nested
 * members, array elements, escaped names, what names nothing, and pointers refused when
 * declared. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "storetest.h"

TestSuite(store_declared_pointer, .init = storetest_init, .fini = storetest_fini, .timeout = 240);

static const char arguments[] = "{\"order\":{\"id\":42,\"note\":null},"
                                "\"items\":[{\"sku\":\"x\"},{\"sku\":\"y\"}],"
                                "\"a/b\":\"slash\",\"m~n\":\"tilde\",\"\":\"empty\",\"flag\":true}";

/* Declare @sql with @params, run it once as a new key and return its receipt, parsed. */
static json_t *run_once(const char *sql, const char *const *params, size_t nparams, const char *op)
{
    idem_request req = storetest_request("acme", op, arguments);
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_declared *d = NULL;
    json_error_t jerr;
    json_t *receipt;

    cr_assert_eq(idem_declared_new(&d, sql, params, nparams, &err), 0, "%s", err.message);
    req.attempt = 1;
    cr_assert_eq(idem_store_execute_declared(&out, fx.store, &req, d, &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    receipt = json_loads(out.receipt, 0, &jerr);
    cr_assert_not_null(receipt, "%s", out.receipt);
    idem_outcome_clear(&out);
    idem_declared_free(d);
    return receipt;
}

static void expect_member(const json_t *receipt, const char *key, const char *want)
{
    const char *got = json_string_value(json_object_get(receipt, key));

    cr_assert_not_null(got, "%s missing", key);
    cr_assert_str_eq(got, want, "%s", key);
}

Test(store_declared_pointer, pointers_bind_nested_members_array_elements_and_escaped_names)
{
    static const char *const params[] = {"/order/id", "/items/1/sku", "/a~1b",  "/m~0n", "/order",
                                         "/",         "/flag",        "$tenant"};
    json_t *receipt;
    storetest_open(NULL, 2);

    receipt = run_once("SELECT json_build_object('id', $1::text, 'sku', $2::text, 'slash',"
                       " $3::text, 'tilde', $4::text, 'order', $5::text, 'empty', $6::text,"
                       " 'flag', $7::text, 'tenant', $8::text)",
                       params, 8, "op-ptr");
    expect_member(receipt, "id", "42");
    expect_member(receipt, "sku", "y");
    expect_member(receipt, "slash", "slash");
    expect_member(receipt, "tilde", "tilde");
    expect_member(receipt, "order", "{\"id\":42,\"note\":null}");
    expect_member(receipt, "empty", "empty");
    expect_member(receipt, "flag", "true");
    expect_member(receipt, "tenant", "acme");
    json_decref(receipt);
}

Test(store_declared_pointer, pointers_that_name_nothing_bind_sql_null)
{
    static const char *const params[] = {"/missing",    "/items/2",      "/items/-",
                                         "/items/01",   "/items/x",      "/order/id/deeper",
                                         "/order/note", "/items/0/sku/0"};
    json_t *receipt;
    storetest_open(NULL, 2);

    receipt = run_once("SELECT json_build_object('nulls', num_nulls($1::text, $2::text,"
                       " $3::text, $4::text, $5::text, $6::text, $7::text, $8::text)::text)",
                       params, 8, "op-none");
    expect_member(receipt, "nulls", "8");
    json_decref(receipt);
}

Test(store_declared_pointer, a_pointer_and_a_member_of_the_same_name_are_different_parameters)
{
    static const char *const params[] = {"/order/id", "order/id"};
    json_t *receipt;
    storetest_open(NULL, 2);

    /* Without the leading '/', "order/id" is a member's name, which these arguments lack. */
    receipt = run_once("SELECT json_build_object('ptr', $1::text, 'member', coalesce($2::text,"
                       " 'none'))",
                       params, 2, "op-same");
    expect_member(receipt, "ptr", "42");
    expect_member(receipt, "member", "none");
    json_decref(receipt);
}

/* idem_declared_new() refuses @pointer as parameter $2: IDEM_EINVAL, field "params". */
static void expect_bad_pointer(const char *pointer, const char *says)
{
    const char *params[] = {"$tenant", pointer};
    idem_error err = IDEM_ERROR_INIT;
    idem_declared *d = NULL;
    char want[128];

    cr_assert_eq(
        idem_declared_new(&d, "SELECT json_build_object('a', $1, 'b', $2)", params, 2, &err),
        IDEM_EINVAL, "%s accepted", pointer);
    cr_assert_null(d);
    cr_assert_str_eq(err.field, "params");
    snprintf(want, sizeof(want), "parameter $2 is \"%s\", not a JSON Pointer", pointer);
    cr_assert_not_null(strstr(err.message, want), "'%s' lacks '%s'", err.message, want);
    cr_assert_not_null(strstr(err.message, says), "'%s' lacks '%s'", err.message, says);
}

Test(store_declared_pointer, a_tilde_not_followed_by_0_or_1_is_refused_when_declared)
{
    expect_bad_pointer("/a~2", "'~' must be followed by '0'");
    expect_bad_pointer("/a~", "'~' must be followed by '0'");
    expect_bad_pointer("/~x/b", "'~' must be followed by '0'");
    expect_bad_pointer("/ok/~", "'~' must be followed by '0'");
}

/* A string with a NUL character (\u0000, which strict JSON allows) cannot be a statement's
 * text parameter: refused naming the pointer, nothing written (it was once cut at the NUL,
 * the effect storing "a" for "a\u0000b" under the fingerprint of the whole). */
Test(store_declared_pointer, a_string_holding_nul_is_refused_and_nothing_is_written)
{
    static const char *const params[] = {"$tenant", "/text", "$operation_id"};
    idem_request req = storetest_request("acme", "op-nul", "{\"text\":\"a\\u0000b\"}");
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_declared *d = NULL;

    storetest_open(NULL, 1);
    cr_assert_eq(idem_declared_new(&d,
                                   "INSERT INTO idem_example.support_tasks"
                                   " (tenant, subject, operation_id) VALUES ($1, $2, $3)"
                                   " RETURNING json_build_object('task_id', task_id)",
                                   params, 3, &err),
                 0, "%s", err.message);
    req.attempt = 1;
    cr_assert_eq(idem_store_execute_declared(&out, fx.store, &req, d, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "arguments");
    cr_assert_not_null(strstr(err.message, "/text: holds a NUL character"), "%s", err.message);
    cr_assert_eq(storetest_tasks(), 0);
    cr_assert_eq(storetest_operations(), 0);
    idem_outcome_clear(&out);
    idem_declared_free(d);
}

/* One call of @d as a new key on @args, with the arguments parsed by the caller (@parsed:
 * the store binds from that tree) or not (it binds names from their canonical text); its
 * receipt, which the caller frees. */
static char *receipt_of(const idem_declared *d, const char *args, const char *op, int parsed)
{
    idem_request req = storetest_request("acme", op, args);
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_arguments *tree = NULL;
    char *receipt;

    if (parsed) {
        cr_assert_eq(idem_arguments_parse(&tree, args, strlen(args), NULL, &err), 0, "%s",
                     err.message);
        req.parsed = tree;
    }
    req.attempt = 1;
    cr_assert_eq(idem_store_execute_declared(&out, fx.store, &req, d, &err), 0, "%s: %s", op,
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    receipt = strdup(out.receipt);
    idem_outcome_clear(&out);
    idem_arguments_free(tree);
    return receipt;
}

/* Names of top-level members bind the same values whether the store reads them from the
 * arguments' canonical text or from their tree: strings (UTF-8, empty, holding JSON's own
 * punctuation), numbers, true, false, null, objects and arrays in canonical form, a name
 * that another begins with, and names that match nothing. */
Test(store_declared_pointer, names_bind_the_same_from_the_text_as_from_the_tree)
{
    static const char *const params[] = {"s", "utf8", "empty", "punct",   "n",   "neg",
                                         "z", "t",    "f",     "nul",     "obj", "arr",
                                         "a", "ab",   "none",  "$tenant", "b",   "eo"};
    static const char args[] =
        "{ \"utf8\": \"\xc3\xa9t\xc3\xa9 \xe2\x82\xac\", \"s\": \"plain\", \"empty\": \"\","
        " \"punct\": \"{[,:]}\", \"n\": 123456789012345, \"neg\": -7, \"z\": 0,"
        " \"t\": true, \"f\": false, \"nul\": null,"
        " \"obj\": {\"z\": [1, {\"y\": \"}\", \"x\": []}], \"a\": {}},"
        " \"arr\": [\"a,b\", 2, null, [true]], \"ab\": \"second\", \"a\": \"first\","
        " \"b\": [], \"eo\": {} }";
    static const char sql[] =
        "SELECT json_build_array($1::text, $2::text, $3::text, $4::text, $5::text, $6::text,"
        " $7::text, $8::text, $9::text, $10::text, $11::text, $12::text, $13::text, $14::text,"
        " $15::text, $16::text, $17::text, $18::text)";
    idem_error err = IDEM_ERROR_INIT;
    idem_declared *d = NULL;
    char *from_text, *from_tree;

    storetest_open(NULL, 2);
    cr_assert_eq(idem_declared_new(&d, sql, params, 18, &err), 0, "%s", err.message);
    from_text = receipt_of(d, args, "op-text", 0);
    from_tree = receipt_of(d, args, "op-tree", 1);
    cr_assert_str_eq(from_text, from_tree);
    cr_assert_str_eq(from_text,
                     "[\"plain\",\"\xc3\xa9t\xc3\xa9 \xe2\x82\xac\",\"\",\"{[,:]}\","
                     "\"123456789012345\",\"-7\",\"0\",\"true\",\"false\",null,"
                     "\"{\\\"a\\\":{},\\\"z\\\":[1,{\\\"x\\\":[],\\\"y\\\":\\\"}\\\"}]}\","
                     "\"[\\\"a,b\\\",2,null,[true]]\",\"first\",\"second\",null,"
                     "\"acme\",\"[]\",\"{}\"]");
    free(from_text);
    free(from_tree);
    idem_declared_free(d);
}
