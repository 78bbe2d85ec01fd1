/* idem-gateway's contract, machine-readable, without a network: each tool's contract
 * (contract.h) from the configuration, the same object in MCP's tools/list _meta, and the
 * OpenAPI document (openapi.h) built from it and from the answer table. Nothing here
 * connects: the configuration's database is never reached. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "answer.h"
#include "config.h"
#include "contract.h"
#include "mcp.h"
#include "openapi.h"

#define DIGEST "0000000000000000000000000000000000000000000000000000000000000000"
#define SQL                                                                                        \
    "\"sql\": {\"statement\": \"SELECT json_build_object('t', $1::text)\", \"params\": [\"/t\"]}"

static const char config_text[] =
    "{\"http\": {\"port\": 0}, \"database\": {\"dsn\": \"dbname=never_reached\","
    " \"clock_skew_s\": 90},"
    " \"tenants\": {\"acme\": {\"tokens\": [\"" DIGEST "\"]}},"
    " \"tools\": {"
    "  \"short\": {\"retention_s\": 60, \"key_memory_s\": 120, \"identity\": {\"only\": [\"/t\"]},"
    "   \"arguments\": {\"type\": \"object\", \"properties\": {\"t\": {\"type\": \"string\"},"
    "    \"at\": {\"type\": \"string\"}}}, " SQL "},"
    "  \"long\": {\"retention_s\": 4000000, \"operation_id_argument\": \"op\","
    "   \"arguments\": {\"type\": \"object\", \"required\": [\"t\"]}, " SQL "},"
    "  \"mail\": {\"arguments\": {\"type\": \"object\"}, \"http\": {\"url\":"
    "   \"http://127.0.0.1:9/m\", \"statuses\": {\"500\": \"final\", \"404\": \"transient\"}}}}}";

static gw_config *cfg;
static char dir[] = "/tmp/idem-gateway-contract.XXXXXX";
static char path[sizeof(dir) + 32];

static void setup(void)
{
    char why[1024];
    FILE *f;

    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/gateway.json", dir);
    cr_assert_not_null(f = fopen(path, "w"));
    fputs(config_text, f);
    fclose(f);
    cr_assert_eq(gw_config_load(&cfg, path, why, sizeof(why)), 0, "%s", why);
}

static void teardown(void)
{
    gw_config_free(cfg);
    unlink(path);
    rmdir(dir);
}

TestSuite(contract, .init = setup, .fini = teardown);

static const gw_tool *tool(const char *name)
{
    const gw_tool *t = gw_config_tool(cfg, name, strlen(name));

    cr_assert_not_null(t, "%s", name);
    return t;
}

/* @doc's member at the slash-separated @path (no escapes), or NULL. */
static json_t *at(json_t *doc, const char *where)
{
    char copy[256], *save = NULL;

    snprintf(copy, sizeof(copy), "%s", where);
    for (char *p = strtok_r(copy, "/", &save); doc != NULL && p != NULL;
         p = strtok_r(NULL, "/", &save))
        doc = json_is_array(doc) ? json_array_get(doc, strtoul(p, NULL, 10))
                                 : json_object_get(doc, p);
    return doc;
}

static json_int_t integer_at(json_t *doc, const char *where)
{
    cr_assert(json_is_integer(at(doc, where)), "%s is not an integer", where);
    return json_integer_value(at(doc, where));
}

static const char *string_at(json_t *doc, const char *where)
{
    cr_assert(json_is_string(at(doc, where)), "%s is not a string", where);
    return json_string_value(at(doc, where));
}

Test(contract, holds_each_tools_own_windows_and_what_a_retry_meets_after_them)
{
    json_t *s = gw_contract(cfg, tool("short")), *l = gw_contract(cfg, tool("long"));

    cr_assert_eq(integer_at(s, "version"), GW_CONTRACT_VERSION);
    cr_assert_eq(integer_at(s, "retention/seconds"), 60);
    cr_assert_eq(integer_at(s, "key_memory/seconds"), 120);
    cr_assert_eq(integer_at(l, "retention/seconds"), 4000000);
    /* No key_memory_s: the store's default (30 days) is shorter, so the retention. */
    cr_assert_eq(integer_at(l, "key_memory/seconds"), 4000000);
    cr_assert_eq(integer_at(s, "key_memory/clock_skew_s"), 90);
    cr_assert_str_eq(string_at(s, "retention/within"), "replayed");
    cr_assert_str_eq(string_at(s, "retention/after"), "expired");
    cr_assert_str_eq(string_at(s, "key_memory/after/uuidv7"), "expired");
    cr_assert_str_eq(string_at(s, "key_memory/after/other"), "new");
    json_decref(s);
    json_decref(l);
}

Test(contract, names_where_the_key_and_the_tenant_come_from_on_each_transport)
{
    json_t *s = gw_contract(cfg, tool("short")), *l = gw_contract(cfg, tool("long"));

    cr_assert_str_eq(string_at(s, "key/requirement"), GW_KEY_REQUIRED);
    cr_assert_str_eq(string_at(s, "key/http/0/header"), "Idempotency-Key");
    cr_assert_eq(integer_at(s, "key/max_bytes"), IDEM_OPERATION_ID_MAX);
    cr_assert_str_eq(string_at(s, "key/mcp/0/meta"), GW_MCP_META_OPERATION_ID);
    cr_assert_null(at(s, "key/mcp/1"), "a tool without an operation ID argument lists none");
    cr_assert_str_eq(string_at(l, "key/mcp/1/argument"), "op");
    cr_assert_str_eq(string_at(l, "key/allocation/mcp/meta"), GW_MCP_META_ALLOCATE);
    cr_assert(json_is_false(at(s, "tenant/from_arguments")));
    cr_assert_str_eq(string_at(s, "tenant/http/scheme"), "Bearer");
    cr_assert_str_eq(string_at(s, "tenant/mcp_stdio/config"), "mcp.stdio_tenant");
    json_decref(s);
    json_decref(l);
}

Test(contract, states_the_identity_policy_as_configured)
{
    json_t *s = gw_contract(cfg, tool("short")), *l = gw_contract(cfg, tool("long"));

    cr_assert_str_eq(string_at(s, "identity/mode"), "only");
    cr_assert_str_eq(string_at(s, "identity/fields/0"), "/t");
    cr_assert_eq(json_array_size(at(s, "identity/fields")), 1);
    cr_assert_str_eq(string_at(l, "identity/mode"), "all");
    cr_assert_null(at(l, "identity/fields"));
    json_decref(s);
    json_decref(l);
}

Test(contract, is_each_tools_meta_in_tools_list)
{
    json_t *list = gw_mcp_tools_list(cfg);

    cr_assert_eq(json_array_size(at(list, "tools")), cfg->ntools);
    for (size_t i = 0; i < cfg->ntools; i++) {
        json_t *entry = json_array_get(at(list, "tools"), i);
        json_t *want = gw_contract(cfg, &cfg->tools[i]);

        cr_assert(json_equal(json_object_get(at(entry, "_meta"), GW_CONTRACT_META), want), "%s",
                  cfg->tools[i].name);
        json_decref(want);
    }
    json_decref(list);
}

/* The responses of POST /v1/tools/@name in @doc. */
static json_t *responses_of(json_t *doc, const char *name)
{
    char key[100];

    snprintf(key, sizeof(key), "/v1/tools/%s", name);
    return at(json_object_get(at(doc, "paths"), key), "post/responses");
}

/* The body of media type @type in @response (media types hold a slash). */
static json_t *media(json_t *response, const char *type)
{
    return json_object_get(json_object_get(response, "content"), type);
}

/* The problem types @doc lists for @name's answer @code. */
static json_t *problem_types(json_t *doc, const char *name, const char *code)
{
    json_t *r = json_object_get(responses_of(doc, name), code);

    return at(media(r, "application/problem+json"), "schema/allOf/1/properties/type/enum");
}

/* Whether @array holds the string @s. */
static int holds(json_t *array, const char *s)
{
    size_t i;
    json_t *v;

    json_array_foreach(array, i, v)
    {
        if (json_is_string(v) && strcmp(json_string_value(v), s) == 0)
            return 1;
    }
    return 0;
}

Test(contract, openapi_lists_every_answer_of_the_table_for_every_tool)
{
    json_t *doc = gw_openapi(cfg);
    char code[16], type[96];

    cr_assert_not_null(doc);
    cr_assert_str_eq(string_at(doc, "openapi"), GW_OPENAPI_VERSION);
    for (size_t i = 0; i < cfg->ntools; i++) {
        for (int o = 0; o < GW_OUTCOME_COUNT; o++) {
            const gw_answer *a = gw_answer_of((gw_outcome)o);

            if (a->problem == NULL)
                continue;
            snprintf(code, sizeof(code), "%u", a->http);
            snprintf(type, sizeof(type), GW_PROBLEM_PREFIX "%s", a->problem);
            cr_assert(holds(problem_types(doc, cfg->tools[i].name, code), type), "%s: %s %s",
                      cfg->tools[i].name, code, type);
        }
    }
    json_decref(doc);
}

Test(contract, openapi_takes_the_request_schema_and_the_key_from_the_configuration)
{
    json_t *doc = gw_openapi(cfg);
    json_t *op = at(json_object_get(at(doc, "paths"), "/v1/tools/long"), "post");
    json_t *contract = gw_contract(cfg, tool("long"));

    cr_assert_not_null(op);
    cr_assert(json_equal(
        json_object_get(json_object_get(at(op, "requestBody/content"), "application/json"),
                        "schema"),
        tool("long")->schema));
    cr_assert_str_eq(string_at(op, "parameters/0/name"), "Idempotency-Key");
    cr_assert(json_is_true(at(op, "parameters/0/required")));
    cr_assert(json_equal(at(op, "x-idem-contract"), contract));
    json_decref(contract);
    json_decref(doc);
}

Test(contract, openapi_lists_an_http_tools_final_statuses_as_its_stored_refusals)
{
    static const char *const explicit_4xx[] = {"400", "401", "405", "410", "413", "415", "422"};
    json_t *doc = gw_openapi(cfg);
    json_t *mail = responses_of(doc, "mail"), *sql = responses_of(doc, "short");
    size_t n4xx = json_array_size(at(mail, "4XX/x-idem-upstream-statuses"));

    /* 500 classed final: the gateway's own 500 lists it too; 404 transient: not listed. */
    cr_assert_eq(json_array_size(at(mail, "500/x-idem-upstream-statuses")), 1);
    cr_assert_eq(integer_at(mail, "500/x-idem-upstream-statuses/0"), 500);
    cr_assert_not_null(media(json_object_get(mail, "500"), "*/*"));
    cr_assert_null(at(mail, "404/x-idem-upstream-statuses"));
    for (size_t i = 0; i < sizeof(explicit_4xx) / sizeof(explicit_4xx[0]); i++) {
        char where[64];

        snprintf(where, sizeof(where), "%s/x-idem-upstream-statuses", explicit_4xx[i]);
        n4xx += json_array_size(at(mail, where));
    }
    cr_assert_eq(n4xx, 100 - 4, "4xx but 404, 408, 409 and 429: %zu", n4xx);
    cr_assert_eq(json_array_size(at(mail, "3XX/x-idem-upstream-statuses")), 100);
    /* An http tool's refusal never takes a sql tool's 422 receipt; a sql tool's does. */
    cr_assert_null(media(json_object_get(mail, "422"), "application/json"));
    cr_assert_not_null(media(json_object_get(sql, "422"), "application/json"));
    cr_assert_null(at(sql, "4XX"));
    json_decref(doc);
}
