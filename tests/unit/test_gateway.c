/* idem-gateway without a network: the answer table, each outcome as both adapters answer
 * it (the HTTP API's status, problem and headers; MCP's result), MCP's envelope and the
 * refusals it makes before any call, and the configuration's refusals, each naming its
 * place. Nothing here connects: a configuration's database is never reached, and every
 * call made here is refused before the store. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "answer.h"
#include "config.h"
#include "http_api.h"
#include "mcp.h"
#include "run.h"

#define DIGEST "0000000000000000000000000000000000000000000000000000000000000000"

static const char base_config[] =
    "{\"http\": {\"address\": \"127.0.0.1\", \"port\": 0, \"retry_after_s\": 7},"
    " \"database\": {\"dsn\": \"dbname=never_reached\"},"
    " \"tenants\": {\"acme\": {\"tokens\": [\"" DIGEST "\"]}},"
    " \"mcp\": {\"stdio_tenant\": \"acme\"},"
    " \"tools\": {"
    "  \"note\": {\"arguments\": {\"type\": \"object\", \"required\": [\"text\"],"
    "    \"properties\": {\"text\": {\"type\": \"string\"}, \"n\": {\"type\": \"number\"}}},"
    "   \"sql\": {\"statement\": \"SELECT json_build_object('t', $1::text)\","
    "             \"params\": [\"/text\"]}},"
    "  \"note_with_id\": {\"operation_id_argument\": \"op\", \"arguments\": {\"type\": \"object\"},"
    "   \"sql\": {\"statement\": \"SELECT json_build_object('t', $1::text)\","
    "             \"params\": [\"/text\"]}}}}";

static gw_config *cfg;
static char dir[] = "/tmp/idem-gateway-unit.XXXXXX";

/* @text written to a file of the scratch folder; its path (static). */
static const char *write_config(const char *text)
{
    static char path[sizeof(dir) + 32];
    FILE *f;

    snprintf(path, sizeof(path), "%s/gateway.json", dir);
    cr_assert_not_null(f = fopen(path, "w"));
    fputs(text, f);
    fclose(f);
    return path;
}

static void setup(void)
{
    char why[1024];

    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(gw_config_load(&cfg, write_config(base_config), why, sizeof(why)), 0, "%s", why);
}

static void teardown(void)
{
    char path[sizeof(dir) + 32];

    gw_config_free(cfg);
    snprintf(path, sizeof(path), "%s/gateway.json", dir);
    unlink(path);
    rmdir(dir);
}

TestSuite(gateway, .init = setup, .fini = teardown);

/* A run that ended in @o, as the call layer leaves it. */
static void run_of(gw_run *run, gw_outcome o)
{
    static const idem_status status[] = {
        [GW_OUTCOME_CREATED] = IDEM_STATUS_CREATED,
        [GW_OUTCOME_REPLAYED] = IDEM_STATUS_REPLAYED,
        [GW_OUTCOME_INVALID_KEY] = IDEM_STATUS_INVALID,
        [GW_OUTCOME_INVALID_ARGUMENTS] = IDEM_STATUS_INVALID,
        [GW_OUTCOME_CONFLICT] = IDEM_STATUS_CONFLICT,
        [GW_OUTCOME_IN_PROGRESS] = IDEM_STATUS_IN_PROGRESS,
        [GW_OUTCOME_EXPIRED] = IDEM_STATUS_EXPIRED,
        [GW_OUTCOME_REJECTED] = IDEM_STATUS_REJECTED,
        [GW_OUTCOME_EFFECT_FAILED] = IDEM_STATUS_EFFECT_FAILED,
        [GW_OUTCOME_OUTCOME_UNKNOWN] = IDEM_STATUS_OUTCOME_UNKNOWN,
        [GW_OUTCOME_UNAVAILABLE] = IDEM_STATUS_UNAVAILABLE,
        [GW_OUTCOME_MISCONFIGURED] = IDEM_STATUS_MISCONFIGURED,
    };
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;

    memset(run, 0, sizeof(*run));
    run->out = out;
    run->err = err;
    run->out.status = status[o];
    snprintf(run->err.message, sizeof(run->err.message), "the words of outcome %d", (int)o);
    if (o == GW_OUTCOME_INVALID_KEY)
        snprintf(run->err.field, sizeof(run->err.field), "operation_id");
    if (o == GW_OUTCOME_CONFLICT)
        snprintf(run->err.field, sizeof(run->err.field), "/text");
    if (o == GW_OUTCOME_INVALID_ARGUMENTS) {
        run->arguments_invalid = 1;
        snprintf(run->pointer, sizeof(run->pointer), "/text");
    }
    if (o == GW_OUTCOME_EFFECT_FAILED)
        snprintf(run->err.sqlstate, sizeof(run->err.sqlstate), "22012");
    if (o == GW_OUTCOME_RATE_LIMITED) { /* the answer's Retry-After is the budget's */
        run->budgeted[GW_BUDGET_CALLS] = 1;
        run->budget[GW_BUDGET_CALLS] = (gw_budget_view){10, 60, 0, 60, 7};
        run->over_budget = &run->budget[GW_BUDGET_CALLS];
    }
    if (o == GW_OUTCOME_CREATED || o == GW_OUTCOME_REPLAYED || o == GW_OUTCOME_REJECTED) {
        run->out.receipt = strdup("{\"t\":\"x\"}");
        run->out.receipt_len = strlen(run->out.receipt);
    }
}

static const char *header(const gw_reply *r, const char *name)
{
    for (size_t i = 0; i < r->nheaders; i++)
        if (strcmp(r->headers[i].name, name) == 0)
            return r->headers[i].value;
    return NULL;
}

Test(gateway, every_outcome_of_a_call_is_answered_as_its_row_says_on_both_transports)
{
    const gw_tenant *tenant = cfg->stdio_tenant;
    const gw_tool *tool = gw_config_tool(cfg, "note", 4);

    for (int o = 0; o < GW_OUTCOME_COUNT; o++) {
        const gw_answer *a = gw_answer_of((gw_outcome)o);
        gw_reply r = {0};
        gw_run run;
        json_t *body, *result, *sc;

        if (o == GW_OUTCOME_KEY_MISSING || o == GW_OUTCOME_ALLOCATED)
            continue; /* answered before any call */
        run_of(&run, (gw_outcome)o);
        cr_assert_eq(gw_run_outcome(&run), (gw_outcome)o, "%s", a->name);
        gw_http_answer(&r, cfg, tenant, tool, "key-1", &run);
        cr_assert_eq(r.status, a->http, "%s: HTTP %u", a->name, r.status);
        cr_assert_str_eq(header(&r, "Idem-Operation-Id"), "key-1");
        cr_assert_eq(header(&r, "Retry-After") != NULL, a->retry_after, "%s", a->name);
        if (a->retry_after)
            cr_assert_str_eq(header(&r, "Retry-After"), "7");
        cr_assert_eq(header(&r, "Idempotent-Replayed") != NULL, a->replayed, "%s", a->name);
        body = json_loadb(r.body, r.len, 0, NULL);
        cr_assert_not_null(body, "%s: body not JSON", a->name);
        if (a->problem != NULL) {
            cr_assert_str_eq(json_string_value(json_object_get(body, "type")) +
                                 strlen(GW_PROBLEM_PREFIX),
                             a->problem);
            cr_assert_str_eq(json_string_value(json_object_get(body, "title")), a->title);
            cr_assert_str_eq(r.content_type, "application/problem+json");
        } else {
            cr_assert_str_eq(json_string_value(json_object_get(body, "t")), "x");
        }
        if (o == GW_OUTCOME_INVALID_ARGUMENTS)
            cr_assert_str_eq(json_string_value(json_object_get(body, "pointer")), "/text");

        result = gw_mcp_result(&run, cfg, tenant, "key-1");
        cr_assert_not_null(result);
        sc = json_object_get(result, "structuredContent");
        cr_assert_eq(json_is_true(json_object_get(result, "isError")), a->is_error, "%s", a->name);
        cr_assert_str_eq(json_string_value(json_object_get(sc, "status")), a->status);
        cr_assert_eq(json_object_get(sc, "retry_after") != NULL, a->retry_after, "%s", a->name);
        cr_assert_eq(json_is_true(json_object_get(sc, "replayed")), a->replayed, "%s", a->name);
        cr_assert_not_null(
            strstr(json_string_value(json_object_get(
                       json_array_get(json_object_get(result, "content"), 0), "text")),
                   a->retry_after ? "Retry in 7 seconds" : ""),
            "%s", a->name);
        json_decref(result);
        json_decref(body);
        gw_reply_clear(&r);
        gw_run_clear(&run);
    }
}

Test(gateway, a_template_fills_its_placeholders_and_fits_its_buffer)
{
    gw_answer_vars v = {"op-1", "acme", "why", "/a", "{}", 9, "send it.", "_meta"};
    char text[2048], small[16];

    for (int o = 0; o < GW_OUTCOME_COUNT; o++) {
        const gw_answer *a = gw_answer_of((gw_outcome)o);

        gw_answer_text(text, sizeof(text), a, &v);
        cr_assert_null(strstr(text, "{key}"), "%s: %s", a->name, text);
        cr_assert_null(strstr(text, "{retry}"), "%s: %s", a->name, text);
        cr_assert_null(strstr(text, "{detail}"), "%s: %s", a->name, text);
        if (strstr(a->text, "{key}") != NULL)
            cr_assert_not_null(strstr(text, "op-1"), "%s", a->name);
    }
    gw_answer_text(small, sizeof(small), gw_answer_of(GW_OUTCOME_CREATED), &v);
    cr_assert_eq(strlen(small), sizeof(small) - 1);
    cr_assert_eq(gw_answer_of(GW_OUTCOME_COUNT), gw_answer_of(GW_OUTCOME_UNAVAILABLE));
}

/* @msg answered by the MCP adapter as the stdio tenant, with no store: the reply, parsed. */
static json_t *mcp(const char *msg, int *refused)
{
    gw_mcp m = {cfg, NULL, NULL};
    char *out = NULL;
    json_t *reply;

    cr_assert_eq(gw_mcp_handle(&out, refused, &m, cfg->stdio_tenant, msg, strlen(msg)), 0);
    cr_assert_not_null(out, "no reply to %s", msg);
    reply = json_loads(out, 0, NULL);
    free(out);
    cr_assert_not_null(reply);
    return reply;
}

static void assert_rpc_error(const char *msg, int code, const char *says)
{
    int refused;
    json_t *reply = mcp(msg, &refused);
    const json_t *error = json_object_get(reply, "error");

    cr_assert_eq(json_integer_value(json_object_get(error, "code")), code, "%s", msg);
    cr_assert_not_null(strstr(json_string_value(json_object_get(error, "message")), says), "%s: %s",
                       msg, json_string_value(json_object_get(error, "message")));
    json_decref(reply);
}

#define CALL(args, meta)                                                                           \
    "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/call\", \"params\": {\"name\": "        \
    "\"note\", \"_meta\": " meta ", \"arguments\": " args "}}"

Test(gateway, mcp_messages_that_are_not_requests_get_json_rpc_errors)
{
    assert_rpc_error("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ", GW_RPC_PARSE_ERROR,
                     "not JSON");
    assert_rpc_error("[{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"ping\"}]",
                     GW_RPC_INVALID_REQUEST, "batches");
    assert_rpc_error("{\"jsonrpc\": \"2.0\", \"id\": true, \"method\": \"ping\"}",
                     GW_RPC_INVALID_REQUEST, "id must be");
    assert_rpc_error("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"nope\"}",
                     GW_RPC_METHOD_NOT_FOUND, "nope");
    assert_rpc_error("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/call\", \"params\": "
                     "{\"name\": \"missing\"}}",
                     GW_RPC_INVALID_PARAMS, "no tool is called \"missing\"");
    assert_rpc_error(CALL("[1]", "{}"), GW_RPC_INVALID_PARAMS,
                     "params.arguments must be an object");
    assert_rpc_error(CALL("{\"text\": 1, }", "{}"), GW_RPC_PARSE_ERROR, "not JSON");
    assert_rpc_error(CALL("{}", "{\"" GW_MCP_META_OPERATION_ID "\": 5}"), GW_RPC_INVALID_PARAMS,
                     "must be a string");
}

/* The structuredContent of the result of @msg. */
static json_t *result_of(const char *msg)
{
    int refused;
    json_t *reply = mcp(msg, &refused);
    json_t *sc =
        json_incref(json_object_get(json_object_get(reply, "result"), "structuredContent"));

    cr_assert_eq(refused, 0);
    cr_assert_not_null(sc, "no result for %s", msg);
    json_decref(reply);
    return sc;
}

static void assert_result(const char *msg, const char *status, const char *member,
                          const char *value)
{
    json_t *sc = result_of(msg);

    cr_assert_str_eq(json_string_value(json_object_get(sc, "status")), status, "%s", msg);
    if (member != NULL)
        cr_assert_str_eq(json_string_value(json_object_get(sc, member)), value, "%s", msg);
    json_decref(sc);
}

Test(gateway, mcp_calls_refused_before_the_store_answer_from_the_table)
{
    json_t *sc;

    assert_result(CALL("{\"text\": \"x\"}", "{}"), "operation_id_required", NULL, NULL);
    assert_result(CALL("{\"text\": \"x\"}", "{\"" GW_MCP_META_OPERATION_ID "\": \"\"}"), "invalid",
                  "field", "operation_id");
    /* The arguments as sent: a number a double would round is refused at its place. */
    assert_result(
        CALL("{\"text\": \"x\", \"n\": 1e-400}", "{\"" GW_MCP_META_OPERATION_ID "\": \"k1\"}"),
        "invalid", "pointer", "/n");
    assert_result(CALL("{\"text\": 5}", "{\"" GW_MCP_META_OPERATION_ID "\": \"k1\"}"), "invalid",
                  "pointer", "/text");
    assert_result(CALL("{\"text\": \"a\\u0000b\"}", "{\"" GW_MCP_META_OPERATION_ID "\": \"k1\"}"),
                  "invalid", "pointer", "/text");
    sc = result_of(CALL("{}", "{\"" GW_MCP_META_ALLOCATE "\": true}"));
    cr_assert_str_eq(json_string_value(json_object_get(sc, "status")), "allocated");
    cr_assert_eq(strlen(json_string_value(json_object_get(sc, "operation_id"))), 36);
    json_decref(sc);
}

Test(gateway, the_operation_id_argument_is_read_from_the_bytes_sent)
{
    static const char two[] =
        "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/call\", \"params\": {\"name\": "
        "\"note_with_id\", \"arguments\": {\"op\": \"k1\", \"\\u006fp\": \"k1\"}}}";
    static const char not_string[] =
        "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/call\", \"params\": {\"name\": "
        "\"note_with_id\", \"arguments\": {\"op\": 7}}}";
    static const char differs[] =
        "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/call\", \"params\": {\"name\": "
        "\"note_with_id\", \"_meta\": {\"" GW_MCP_META_OPERATION_ID "\": \"k2\"}, \"arguments\": "
        "{\"op\": \"k1\"}}}";

    assert_result(two, "invalid", "field", "operation_id");
    assert_result(not_string, "invalid", "field", "operation_id");
    assert_result(differs, "invalid", "field", "operation_id");
}

/* The base configuration with @from replaced by @to is refused, naming @says. */
static void assert_refused(const char *from, const char *to, const char *says)
{
    char text[sizeof(base_config) + 512], why[1024];
    const char *at = strstr(base_config, from);
    gw_config *other = NULL;

    cr_assert_not_null(at, "%s", from);
    snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - base_config), base_config, to,
             at + strlen(from));
    cr_assert_eq(gw_config_load(&other, write_config(text), why, sizeof(why)), GW_EXIT_DATAERR,
                 "accepted: %s", to);
    cr_assert_null(other);
    cr_assert_not_null(strstr(why, says), "<%s> lacks <%s>", why, says);
}

Test(gateway, every_refusal_of_the_configuration_names_its_place)
{
    assert_refused("\"stdio_tenant\": \"acme\"", "\"stdio_tenant\": \"nobody\"",
                   "/mcp/stdio_tenant: \"nobody\" is not one of the tenants");
    assert_refused("\"operation_id_argument\": \"op\"", "\"operation_id_argument\": 5",
                   "/tools/note_with_id/operation_id_argument");
    assert_refused("\"port\": 0", "\"port\": 70000", "/http/port");
    assert_refused("\"retry_after_s\": 7", "\"retry_after_s\": -1", "/http/retry_after_s");
    assert_refused("\"params\": [\"/text\"]}}}}", "\"params\": []}}}}", "/tools/note_with_id/sql");
    assert_refused("\"http\": {", "\"surprise\": 1, \"http\": {", "/surprise: unknown member");
    assert_refused("\"tokens\": [\"" DIGEST "\"]", "\"tokens\": [\"short\"]",
                   "/tenants/acme/tokens/0");
    assert_refused("{\"type\": \"string\"}, \"n\"", "{\"type\": \"strung\"}, \"n\"",
                   "/tools/note/arguments/properties/text/type");
    assert_refused("\"dsn\": \"dbname=never_reached\"", "\"dsn\": 5", "/database/dsn");
}

/* The text of the result of @msg (parsed reply's first content). */
static char *text_of(const char *msg)
{
    int refused;
    json_t *reply = mcp(msg, &refused);
    const char *t = json_string_value(json_object_get(
        json_array_get(json_object_get(json_object_get(reply, "result"), "content"), 0), "text"));
    char *copy = strdup(t != NULL ? t : "");

    json_decref(reply);
    return copy;
}

#define CALL_WITH_ID(args)                                                                         \
    "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/call\", \"params\": {\"name\": "        \
    "\"note_with_id\", \"arguments\": " args "}}"

Test(gateway, the_texts_a_model_reads_name_the_channel_the_tool_uses)
{
    char *meta = text_of(CALL("{\"text\": \"x\"}", "{}"));
    char *arg = text_of(CALL_WITH_ID("{\"text\": \"x\"}"));
    char *bad = text_of(CALL_WITH_ID("{\"op\": \"\", \"text\": \"x\"}"));
    char *alloc =
        text_of("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/call\", \"params\": "
                "{\"name\": \"note_with_id\", \"_meta\": {\"" GW_MCP_META_ALLOCATE "\": true}}}");

    cr_assert_not_null(strstr(meta, "[operation_id_required] "), "%s", meta);
    cr_assert_not_null(strstr(meta, "_meta[\"" GW_MCP_META_OPERATION_ID "\"]"), "%s", meta);
    cr_assert_not_null(strstr(arg, "Generate a new UUID for each new action"), "%s", arg);
    cr_assert_not_null(strstr(arg, "in \"op\" on every retry"), "%s", arg);
    cr_assert_null(strstr(arg, "_meta"), "%s", arg);
    cr_assert_not_null(strstr(bad, "[invalid] "), "%s", bad);
    cr_assert_not_null(strstr(bad, "in \"op\""), "%s", bad);
    cr_assert_null(strstr(bad, "_meta"), "%s", bad);
    cr_assert_not_null(strstr(alloc, "send it as \"op\""), "%s", alloc);
    free(meta);
    free(arg);
    free(bad);
    free(alloc);
}

Test(gateway, an_operation_id_argument_sent_as_null_is_absent)
{
    assert_result(CALL_WITH_ID("{\"op\": null, \"text\": \"x\"}"), "operation_id_required", NULL,
                  NULL);
}

Test(gateway, every_result_text_carries_the_status_and_the_operation_id)
{
    const gw_tenant *tenant = cfg->stdio_tenant;

    for (int o = 0; o < GW_OUTCOME_COUNT; o++) {
        const gw_answer *a = gw_answer_of((gw_outcome)o);
        char want[64];
        gw_run run;
        json_t *result;
        const char *t;

        if (o == GW_OUTCOME_KEY_MISSING || o == GW_OUTCOME_ALLOCATED || o == GW_OUTCOME_INVALID_KEY)
            continue; /* no operation ID to carry, or answered before any call */
        run_of(&run, (gw_outcome)o);
        result = gw_mcp_result(&run, cfg, tenant, "key-1");
        t = json_string_value(
            json_object_get(json_array_get(json_object_get(result, "content"), 0), "text"));
        snprintf(want, sizeof(want), "[%s] ", a->status);
        cr_assert_eq(strncmp(t, want, strlen(want)), 0, "%s: %s", a->name, t);
        cr_assert_not_null(strstr(t, "key-1"), "%s: %s", a->name, t);
        json_decref(result);
        gw_run_clear(&run);
    }
}

Test(gateway, initialize_tells_both_channels)
{
    int refused;
    json_t *reply = mcp("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"initialize\", \"params\": "
                        "{\"protocolVersion\": \"2025-06-18\"}}",
                        &refused);
    const char *t =
        json_string_value(json_object_get(json_object_get(reply, "result"), "instructions"));

    cr_assert_not_null(strstr(t, "generate a new UUID for each new action"), "%s", t);
    cr_assert_not_null(strstr(t, "_meta[\"" GW_MCP_META_OPERATION_ID "\"]"), "%s", t);
    json_decref(reply);
}
