/* idem-gateway without a network: the answer table, each outcome as both adapters answer
 * it (the HTTP API's status, problem and headers; MCP's result), MCP's envelope and the
 * refusals it makes before any call, and the configuration's refusals, each naming its
 * place. Nothing here connects: a configuration's database is never reached, and every
 * call made here is refused before the store. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "answer.h"
#include "auth.h"
#include "config.h"
#include "http_api.h"
#include "mcp.h"
#include "run.h"
#include "reqlog.h"
#include "trace.h"

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
    static const idem_status status[GW_OUTCOME_COUNT] = {
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
    gw_mcp m = {cfg, NULL, NULL, NULL, NULL};
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

/* W3C Trace Context: each traceparent as the specification reads it. Arrays, not
 * pointers: Criterion copies the parameters into the test's process. */
typedef struct traceparent_case {
    char text[96];
    int valid;
} traceparent_case;

ParameterizedTestParameters(trace, traceparent_is_read_as_the_w3c_specification_says)
{
    static traceparent_case cases[] = {
        {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", 1},
        {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", 1},
        {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff", 1},
        /* a later version: its first four fields, and more after a dash */
        {"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", 1},
        {"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-says", 1},
        {"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", 0},
        /* version ff is forbidden; 00 is exactly 55 characters */
        {"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", 0},
        {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-", 0},
        {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1", 0},
        /* all-zero IDs are invalid */
        {"00-00000000000000000000000000000000-00f067aa0ba902b7-01", 0},
        {"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", 0},
        /* lowercase hex only, dashes where they belong */
        {"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", 0},
        {"00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01", 0},
        {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", 0},
        {"0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", 0},
        {"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", 0},
        {"00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01", 0},
        {"00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01", 0},
        {" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", 0},
        {"", 0},
    };

    return cr_make_param_array(traceparent_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(traceparent_case *c, trace, traceparent_is_read_as_the_w3c_specification_says)
{
    gw_trace t;

    memset(&t, 'x', sizeof(t));
    cr_assert_eq(gw_trace_parse(&t, c->text) == 0, c->valid, "\"%s\"", c->text);
    if (c->valid) {
        cr_assert_eq(strncmp(t.trace_id, c->text + 3, 32), 0);
        cr_assert_eq(strlen(t.trace_id), 32);
        cr_assert_eq(strncmp(t.parent_id, c->text + 36, 16), 0);
        cr_assert_eq(strncmp(t.flags, c->text + 53, 2), 0);
    } else {
        cr_assert_eq(t.trace_id[0], 'x', "an invalid traceparent left @out as it was");
    }
}

Test(trace, an_absent_traceparent_is_invalid_and_an_invalid_one_starts_a_new_trace)
{
    gw_trace a, b;

    cr_assert_eq(gw_trace_parse(&a, NULL), -1);
    gw_trace_begin(&a, "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "k=v");
    gw_trace_begin(&b, NULL, NULL);
    for (const gw_trace *t = &a; t != NULL; t = t == &a ? &b : NULL) {
        char header[GW_TRACEPARENT_LEN + 1];
        gw_trace back;

        cr_assert_eq(strlen(t->trace_id), 32);
        cr_assert_eq(strlen(t->span_id), 16);
        cr_assert_str_eq(t->parent_id, "");
        cr_assert_str_eq(t->flags, "00");
        cr_assert_str_eq(t->tracestate, "", "a tracestate without its traceparent is dropped");
        cr_assert_eq(gw_trace_parse(&back, gw_trace_header(header, t)), 0, "%s", header);
    }
    cr_assert_str_neq(a.trace_id, b.trace_id, "each new trace has a random trace-id");
}

Test(trace, a_valid_traceparent_keeps_its_trace_and_the_gateway_adds_its_span)
{
    static const char parent[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    char header[GW_TRACEPARENT_LEN + 1];
    gw_trace t, u;

    gw_trace_begin(&t, parent, "congo=t61rcWkgMzE, rojo=00f067aa0ba902b7");
    gw_trace_begin(&u, parent, NULL);
    cr_assert_str_eq(t.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
    cr_assert_str_eq(t.parent_id, "00f067aa0ba902b7");
    cr_assert_str_neq(t.span_id, t.parent_id);
    cr_assert_str_neq(t.span_id, u.span_id, "a new span for each request");
    cr_assert_str_eq(t.tracestate, "congo=t61rcWkgMzE, rojo=00f067aa0ba902b7");
    gw_trace_header(header, &t);
    cr_assert_eq(strncmp(header, "00-4bf92f3577b34da6a3ce929d0e0e4736-", 36), 0, "%s", header);
    cr_assert_eq(strncmp(header + 36, t.span_id, 16), 0, "%s", header);
    cr_assert_str_eq(header + 52, "-01", "the caller's flags are passed on");
}

Test(trace, a_tracestate_is_passed_on_only_when_well_formed)
{
    char long_state[GW_TRACESTATE_MAX + 2];

    cr_assert(gw_tracestate_ok("rojo=00f067aa0ba902b7"));
    cr_assert(gw_tracestate_ok("a=1,,b=2"));
    cr_assert_not(gw_tracestate_ok(NULL));
    cr_assert_not(gw_tracestate_ok(""));
    cr_assert_not(gw_tracestate_ok("novalue"));
    cr_assert_not(gw_tracestate_ok("a=1,=2"));
    cr_assert_not(gw_tracestate_ok("a=1\n"));
    memset(long_state, 'a', sizeof(long_state) - 1);
    long_state[1] = '=';
    long_state[sizeof(long_state) - 1] = '\0';
    cr_assert_not(gw_tracestate_ok(long_state), "longer than %d bytes", GW_TRACESTATE_MAX);
    long_state[sizeof(long_state) - 2] = '\0';
    cr_assert(gw_tracestate_ok(long_state), "%d bytes", GW_TRACESTATE_MAX);
}

/* @msg answered as over HTTP with the headers MCP-Protocol-Version @version and Mcp-Method
 * @method (NULL: absent), in the request context @ctx (NULL: none). */
static json_t *mcp_http(const char *msg, const char *version, const char *method, gw_call_ctx *ctx,
                        int *refused)
{
    gw_mcp m = {cfg, NULL, ctx, version, method};
    char *out = NULL;
    json_t *reply;

    cr_assert_eq(gw_mcp_handle(&out, refused, &m, cfg->stdio_tenant, msg, strlen(msg)), 0);
    cr_assert_not_null(out, "no reply to %s", msg);
    reply = json_loads(out, 0, NULL);
    free(out);
    cr_assert_not_null(reply);
    return reply;
}

#define ENVELOPE(v)                                                                                \
    "\"_meta\": {\"" GW_MCP_META_PROTOCOL_VERSION "\": \"" v "\", "                                \
    "\"io.modelcontextprotocol/clientCapabilities\": {}}"
#define MODERN(method, rest)                                                                       \
    "{\"jsonrpc\": \"2.0\", \"id\": 7, \"method\": \"" method                                      \
    "\", \"params\": {" ENVELOPE("2026-07-28") rest "}}"

static void assert_refused_rpc(json_t *reply, int refused, int code, const char *says)
{
    const json_t *error = json_object_get(reply, "error");
    const char *message = json_string_value(json_object_get(error, "message"));

    cr_assert_eq(refused, 1, "refused as a message (HTTP 400)");
    cr_assert_eq(json_integer_value(json_object_get(error, "code")), code, "%s", message);
    cr_assert_not_null(strstr(message, says), "%s", message);
    cr_assert_eq(json_integer_value(json_object_get(reply, "id")), 7);
}

Test(gateway, server_discover_offers_both_eras_without_a_session)
{
    int refused;
    json_t *reply =
        mcp_http(MODERN("server/discover", ""), "2026-07-28", "server/discover", NULL, &refused);
    const json_t *r = json_object_get(reply, "result");
    const json_t *v = json_object_get(r, "supportedVersions");

    cr_assert_eq(refused, 0);
    cr_assert_str_eq(json_string_value(json_array_get(v, 0)), GW_MCP_VERSION_MODERN);
    cr_assert_str_eq(json_string_value(json_array_get(v, 1)), GW_MCP_VERSION_LATEST);
    cr_assert_eq(json_array_size(v), 3);
    cr_assert(json_is_false(json_object_get(
        json_object_get(json_object_get(r, "capabilities"), "tools"), "listChanged")));
    cr_assert_str_eq(json_string_value(json_object_get(r, "resultType")), "complete");
    cr_assert_str_eq(
        json_string_value(json_object_get(
            json_object_get(json_object_get(r, "_meta"), GW_MCP_META_SERVER_INFO), "name")),
        "idem-gateway");
    cr_assert_not_null(
        strstr(json_string_value(json_object_get(r, "instructions")), GW_MCP_META_OPERATION_ID));
    json_decref(reply);
}

Test(gateway, a_2026_request_answers_with_that_eras_members)
{
    int refused;
    json_t *list = mcp_http(MODERN("tools/list", ""), "2026-07-28", "tools/list", NULL, &refused);
    json_t *ping = mcp_http(MODERN("ping", ""), NULL, NULL, NULL, &refused);
    json_t *old = mcp("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/list\"}", &refused);
    const json_t *r = json_object_get(list, "result");

    cr_assert_eq(json_integer_value(json_object_get(r, "ttlMs")), 0);
    cr_assert_str_eq(json_string_value(json_object_get(r, "cacheScope")), "private");
    cr_assert_str_eq(json_string_value(json_object_get(r, "resultType")), "complete");
    cr_assert_eq(json_array_size(json_object_get(r, "tools")), 2);
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(ping, "result"), "resultType")),
        "complete", "the envelope alone (stdio) makes the request 2026-07-28's");
    r = json_object_get(old, "result");
    cr_assert_null(json_object_get(r, "resultType"), "2025 answers are as they were");
    cr_assert_null(json_object_get(r, "ttlMs"));
    json_decref(list);
    json_decref(ping);
    json_decref(old);
}

Test(gateway, a_2026_request_that_contradicts_itself_is_refused_as_a_message)
{
    int refused;
    json_t *reply;
    const json_t *data;

    reply = mcp_http("{\"jsonrpc\": \"2.0\", \"id\": 7, \"method\": \"tools/list\"}", "2026-07-28",
                     "tools/list", NULL, &refused);
    assert_refused_rpc(reply, refused, GW_RPC_INVALID_PARAMS, "is missing");
    json_decref(reply);
    reply = mcp_http(MODERN("tools/list", ""), "2025-11-25", "tools/list", NULL, &refused);
    assert_refused_rpc(reply, refused, GW_RPC_HEADER_MISMATCH, "MCP-Protocol-Version");
    json_decref(reply);
    reply = mcp_http(MODERN("tools/list", ""), "2026-07-28", "tools/call", NULL, &refused);
    assert_refused_rpc(reply, refused, GW_RPC_HEADER_MISMATCH, "Mcp-Method");
    json_decref(reply);
    reply = mcp_http("{\"jsonrpc\": \"2.0\", \"id\": 7, \"method\": \"tools/list\", \"params\": "
                     "{" ENVELOPE("2027-01-01") "}}",
                     NULL, NULL, NULL, &refused);
    assert_refused_rpc(reply, refused, GW_RPC_UNSUPPORTED_REVISION, "\"2027-01-01\"");
    data = json_object_get(json_object_get(reply, "error"), "data");
    cr_assert_str_eq(json_string_value(json_object_get(data, "requested")), "2027-01-01");
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(data, "supported"), 0)),
                     GW_MCP_VERSION_MODERN);
    json_decref(reply);
    reply = mcp_http(MODERN("initialize", ", \"protocolVersion\": \"2026-07-28\""), NULL, NULL,
                     NULL, &refused);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(reply, "error"), "code")),
                 GW_RPC_METHOD_NOT_FOUND);
    json_decref(reply);
}

Test(gateway, initialize_never_answers_with_the_2026_revision)
{
    int refused;
    json_t *reply = mcp("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"initialize\", \"params\": "
                        "{\"protocolVersion\": \"2026-07-28\"}}",
                        &refused);

    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(reply, "result"), "protocolVersion")),
        GW_MCP_VERSION_LATEST);
    json_decref(reply);
}

Test(gateway, the_operation_id_is_read_under_both_spellings_of_its_meta_key)
{
    json_t *sc;

    /* Both refused before the store the same way: the key is read under either name. */
    assert_result(CALL("{\"text\": 5}", "{\"" GW_MCP_META_OPERATION_ID "\": \"k1\"}"), "invalid",
                  "pointer", "/text");
    assert_result(CALL("{\"text\": 5}", "{\"" GW_MCP_META_OPERATION_ID_OLD "\": \"k1\"}"),
                  "invalid", "pointer", "/text");
    assert_result(CALL("{\"text\": 5}",
                       "{\"" GW_MCP_META_OPERATION_ID "\": \"k1\", \"" GW_MCP_META_OPERATION_ID_OLD
                       "\": \"k1\"}"),
                  "invalid", "pointer", "/text");
    assert_rpc_error(CALL("{\"text\": \"x\"}",
                          "{\"" GW_MCP_META_OPERATION_ID
                          "\": \"k1\", \"" GW_MCP_META_OPERATION_ID_OLD "\": \"k2\"}"),
                     GW_RPC_INVALID_PARAMS, "hold different values");
    assert_rpc_error(
        CALL("{}", "{\"" GW_MCP_META_ALLOCATE "\": true, \"" GW_MCP_META_ALLOCATE_OLD "\": false}"),
        GW_RPC_INVALID_PARAMS, "hold different values");
    assert_rpc_error(CALL("{}", "{\"" GW_MCP_META_OPERATION_ID_OLD "\": 5}"), GW_RPC_INVALID_PARAMS,
                     "[\"" GW_MCP_META_OPERATION_ID_OLD "\"] must be a string");
    sc = result_of(CALL("{}", "{\"" GW_MCP_META_ALLOCATE_OLD "\": true}"));
    cr_assert_str_eq(json_string_value(json_object_get(sc, "status")), "allocated");
    json_decref(sc);
}

Test(gateway, a_traceparent_in_meta_becomes_the_requests_trace_context)
{
    gw_call_ctx ctx;
    int refused;
    json_t *reply;
    char before[33];

    memset(&ctx, 0, sizeof(ctx));
    gw_trace_begin(&ctx.trace, "00-11111111111111111111111111111111-2222222222222222-01", NULL);
    reply =
        mcp_http("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"ping\", \"params\": {\"_meta\": "
                 "{\"traceparent\": \"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\","
                 " \"tracestate\": \"rojo=1\"}}}",
                 NULL, NULL, &ctx, &refused);
    cr_assert_str_eq(ctx.trace.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
    cr_assert_str_eq(ctx.trace.parent_id, "00f067aa0ba902b7");
    cr_assert_str_eq(ctx.trace.tracestate, "rojo=1");
    json_decref(reply);
    memcpy(before, ctx.trace.trace_id, sizeof(before));
    reply =
        mcp_http("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"ping\", \"params\": {\"_meta\": "
                 "{\"traceparent\": \"00-00000000000000000000000000000000-00f067aa0ba902b7-01\"}}}",
                 NULL, NULL, &ctx, &refused);
    cr_assert_str_eq(ctx.trace.trace_id, before, "an invalid traceparent is ignored");
    cr_assert_eq(refused, 0);
    cr_assert_not_null(json_object_get(reply, "result"), "and is no error");
    json_decref(reply);
}

/* Tokens token-a (tenant acme) and token-b (tenant beta), by their SHA-256. */
#define TOKEN_A_DIGEST "a70bf50e531ce1a817561f2f5d5b6645d4e806becf58ccc5e8cf6b8045a090a8"
#define TOKEN_B_DIGEST "49e2bb7eab54cf09b409ffafd3fa8a8a955a60eb972faacaefbed3dbd3207132"
static const char auth_config[] =
    "{\"http\": {\"address\": \"127.0.0.1\", \"port\": 0},"
    " \"database\": {\"dsn\": \"dbname=never_reached\"},"
    " \"tenants\": {"
    "  \"acme\": {\"tokens\": "
    "[\"4f7d6b4a64ad6f4f6a7d2c5d3d1b0a2b7f0c3a7a6a3b8a8f0a8a4a0d1c5b2e9a\","
    "   \"" TOKEN_A_DIGEST "\"]},"
    "  \"beta\": {\"tokens\": [\"" TOKEN_B_DIGEST "\"]}},"
    " \"tools\": {\"note\": {\"arguments\": {\"type\": \"object\"},"
    "  \"sql\": {\"statement\": \"SELECT json_build_object('t', $1::text)\","
    "           \"params\": [\"/text\"]}}}}";

/* The thread remembers the digest of the token it saw last (a connection's requests carry
 * the same one): a different token, however alike, is digested and decided anew. */
Test(gateway, each_request_s_token_decides_its_tenant_whatever_the_thread_saw_before)
{
    gw_config *auth = NULL;
    char why[1024];
    const gw_tenant *t;

    cr_assert_eq(gw_config_load(&auth, write_config(auth_config), why, sizeof(why)), 0, "%s", why);
    for (int round = 0; round < 2; round++) {
        cr_assert_not_null(t = gw_auth_tenant(auth, "Bearer token-a"));
        cr_assert_str_eq(t->name, "acme");
        cr_assert_null(gw_auth_tenant(auth, "Bearer token-c"),
                       "an unknown token of the same length");
        cr_assert_null(gw_auth_tenant(auth, "Bearer token-aa"));
        cr_assert_null(gw_auth_tenant(auth, "Bearer token-"));
        cr_assert_not_null(t = gw_auth_tenant(auth, "Bearer  token-a  "));
        cr_assert_str_eq(t->name, "acme");
        cr_assert_not_null(t = gw_auth_tenant(auth, "Bearer token-b"));
        cr_assert_str_eq(t->name, "beta");
        cr_assert_null(gw_auth_tenant(auth, "Basic token-b"));
        cr_assert_null(gw_auth_tenant(auth, NULL));
    }
    gw_config_free(auth);
}

/* The request log's plain line, built without printf, reads as printf would write it
 * (each field, "-" for a missing one, the milliseconds to one decimal), and a line longer
 * than its buffer comes out whole the other way. */
/* One request's log entry, each field set. */
static const gw_log_entry log_sample = {
    "req-1",           "call", "acme",
    "create_task",     "op-1", 201,
    "created",         0.0,    "4bf92f3577b34da6a3ce929d0e0e4736",
    "00f067aa0ba902b7"};

static void logged_as(char *out, size_t size, const gw_log_entry *e, int json)
{
    int fds[2], saved = dup(STDERR_FILENO);
    ssize_t n;

    cr_assert_eq(pipe(fds), 0);
    fflush(stderr);
    dup2(fds[1], STDERR_FILENO);
    gw_log_request(e, json);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(fds[1]);
    n = read(fds[0], out, size - 1);
    close(fds[0]);
    cr_assert_gt(n, 0);
    out[n] = '\0';
}

static void logged(char *out, size_t size, const gw_log_entry *e)
{
    logged_as(out, size, e, 0);
}

static void printf_line(char *out, size_t size, const gw_log_entry *e)
{
    snprintf(out, size,
             "idem-gateway: request id=%s route=%s tenant=%s tool=%s key=%s code=%u status=%s "
             "ms=%.1f trace=%s span=%s\n",
             e->id, e->route, e->tenant != NULL ? e->tenant : "-", e->tool,
             e->key != NULL ? e->key : "-", e->code, e->status != NULL ? e->status : "-",
             e->seconds * 1000.0, e->trace_id != NULL ? e->trace_id : "-",
             e->span_id != NULL ? e->span_id : "-");
}

Test(gateway, the_plain_request_log_line_reads_as_printf_would_write_it)
{
    static char key[1500], got[4096], want[4096];
    const double seconds[] = {0.0, 0.0123, 1.5, 0.000449, 12.34567};
    gw_log_entry e = log_sample;

    for (size_t i = 0; i < sizeof(seconds) / sizeof(seconds[0]); i++) {
        e.seconds = seconds[i];
        logged(got, sizeof(got), &e);
        printf_line(want, sizeof(want), &e);
        cr_assert_str_eq(got, want);
    }
    e.tenant = e.key = e.status = e.trace_id = e.span_id = NULL;
    logged(got, sizeof(got), &e);
    printf_line(want, sizeof(want), &e);
    cr_assert_str_eq(got, want, "missing fields are '-'");
    memset(key, 'k', sizeof(key) - 1);
    e.key = key;
    logged(got, sizeof(got), &e);
    printf_line(want, sizeof(want), &e);
    cr_assert_str_eq(got, want, "a line over the buffer comes out whole");
}

/* The JSON line as jansson wrote it before the line was built by hand: the same members in
 * the same order, null for a missing field; "time" and "seconds" are compared apart. */
static json_t *jansson_line(const gw_log_entry *e, const char *when)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s?, s:s, s:s?, s:i, s:s?, s:f, s:s?, s:s?}", "time",
                     when, "msg", "request", "id", e->id, "route", e->route, "tenant", e->tenant,
                     "tool", e->tool, "key", e->key, "code", (int)e->code, "status", e->status,
                     "seconds", e->seconds, "trace_id", e->trace_id, "span_id", e->span_id);
}

static void json_line_is_janssons(const gw_log_entry *e)
{
    static char got[4096];
    json_error_t jerr;
    json_t *line, *want;
    const char *when;
    char *a, *b;
    size_t len;

    logged_as(got, sizeof(got), e, 1);
    len = strlen(got);
    cr_assert(len > 0 && got[len - 1] == '\n' && strchr(got, '\n') == got + len - 1, "one line: %s",
              got);
    line = json_loads(got, 0, &jerr);
    cr_assert_not_null(line, "not JSON (%s): %s", jerr.text, got);
    when = json_string_value(json_object_get(line, "time"));
    cr_assert(when != NULL && strlen(when) == 24 && when[4] == '-' && when[10] == 'T' &&
                  when[19] == '.' && when[23] == 'Z',
              "time: %s", got);
    cr_assert(json_is_real(json_object_get(line, "seconds")), "seconds: %s", got);
    cr_assert_float_eq(json_real_value(json_object_get(line, "seconds")), e->seconds, 0.51e-6,
                       "seconds to the microsecond: %s", got);
    want = jansson_line(e, when);
    cr_assert_not_null(want);
    json_object_set_new(want, "seconds", json_real(0.5));
    json_object_set_new(line, "seconds", json_real(0.5));
    a = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER);
    b = json_dumps(want, JSON_COMPACT | JSON_PRESERVE_ORDER);
    cr_assert_str_eq(a, b);
    free(a);
    free(b);
    json_decref(line);
    json_decref(want);
}

/* The request log's JSON line, built by hand, is the line jansson wrote: strings escaped
 * (quotes, backslashes, control characters), UTF-8 as it is, null for a missing field, the
 * seconds to the microsecond; a line over the buffer goes through jansson. */
Test(gateway, the_json_request_log_line_reads_as_jansson_would_write_it)
{
    static char key[1500];
    const double seconds[] = {0.0, 0.0123, 1.5, 0.000449, 12.34567, 2.0, 4e-7, 0.0253125, 3600.25};
    gw_log_entry e = log_sample;

    for (size_t i = 0; i < sizeof(seconds) / sizeof(seconds[0]); i++) {
        e.seconds = seconds[i];
        json_line_is_janssons(&e);
    }
    e.id = "a\"b\\c/d\x01\x1f\x7f\b\f\n\r\t~";
    json_line_is_janssons(&e);
    e.tenant = e.key = e.status = e.trace_id = e.span_id = NULL;
    json_line_is_janssons(&e);
    e.key = "cl\xc3\xa9-1"; /* UTF-8 outside ASCII */
    json_line_is_janssons(&e);
    memset(key, 'k', sizeof(key) - 1);
    e.key = key; /* over the buffer: jansson's */
    json_line_is_janssons(&e);
}
