/* JSON-RPC 2.0 for MCP: the envelope's checks, then one method each. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "json_span.h"
#include "json_write.h"
#include "mcp.h"

static const char instructions[] =
    "Every call of these tools needs an operation ID: one per approved action, the same on "
    "every attempt of that action, retries included. The same ID never runs twice, and its "
    "retries get the first answer; never retry under a new operation ID. A tool whose input "
    "schema has an operation ID argument takes it there: generate a new UUID for each new "
    "action. Other tools take it as _meta[\"" GW_MCP_META_OPERATION_ID "\"]: allocate one "
    "with tools/call and _meta {\"" GW_MCP_META_ALLOCATE "\": true}, and store it with the "
    "action.";

/* The reply's text; steals @doc. A tools/call result's receipt is written as the JSON text
 * its string holds (gw_mcp_result()). */
static char *dump(json_t *doc)
{
    const json_t *sc = json_object_get(json_object_get(doc, "result"), "structuredContent");
    const json_t *receipt = json_object_get(sc, "receipt");
    char *text = gw_json_dump(doc, json_is_string(receipt) ? receipt : NULL);

    json_decref(doc);
    return text;
}

/* An error response for @id (borrowed; NULL: null). */
static char *error_reply(const json_t *id, int code, const char *message)
{
    return dump(json_pack("{s:s, s:O?, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error", "code",
                          code, "message", message));
}

/* An error response with @data (stolen; NULL: none). */
static char *error_reply_data(const json_t *id, int code, const char *message, json_t *data)
{
    return dump(json_pack("{s:s, s:O?, s:{s:i, s:s, s:o?}}", "jsonrpc", "2.0", "id", id, "error",
                          "code", code, "message", message, "data", data));
}

char *gw_mcp_error_text(int code, const char *message)
{
    return error_reply(NULL, code, message);
}

/* A result response; steals @result. */
static char *result_reply(const json_t *id, json_t *result)
{
    if (result == NULL)
        return NULL;
    return dump(json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result));
}

/* initialize (the 2025 era): the revision asked for when it is one of that era's. */
static json_t *initialize(const json_t *params)
{
    const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
    int legacy = gw_mcp_version_supported(asked) && strcmp(asked, GW_MCP_VERSION_MODERN) != 0;

    return json_pack("{s:s, s:{s:{s:b}}, s:o, s:s}", "protocolVersion",
                     legacy ? asked : GW_MCP_VERSION_LATEST, "capabilities", "tools", "listChanged",
                     0, "serverInfo", gw_mcp_server_info(), "instructions", instructions);
}

/* A request's valid _meta["traceparent"] (with its tracestate) as the trace context of
 * @m's request: the caller's trace closest to the call. An invalid one is ignored. */
static void trace_from_meta(const gw_mcp *m, const json_t *params)
{
    const json_t *meta = json_object_get(params, "_meta");
    const char *parent = json_string_value(json_object_get(meta, GW_MCP_META_TRACEPARENT));
    gw_trace probe;

    if (m->ctx != NULL && gw_trace_parse(&probe, parent) == 0)
        gw_trace_begin(&m->ctx->trace, parent,
                       json_string_value(json_object_get(meta, GW_MCP_META_TRACESTATE)));
}

/* One method each: the result (a new reference; NULL with @code 0: out of memory), or
 * @code with @why. */
static json_t *dispatch(int *code, const gw_mcp *m, const gw_tenant *tenant, const char *method,
                        const json_t *params, const gw_span *arguments, int modern, char *why,
                        size_t size)
{
    json_t *result = NULL;

    *code = 0;
    if (strcmp(method, "server/discover") == 0)
        return gw_mcp_discover(instructions);
    if (strcmp(method, "initialize") == 0 && !modern)
        return initialize(params);
    if (strcmp(method, "ping") == 0)
        return json_object();
    if (strcmp(method, "tools/list") == 0)
        return gw_mcp_tools_list(m->cfg);
    if (strcmp(method, "tools/call") == 0) {
        *code = gw_mcp_tools_call(&result, m, tenant, params, arguments, why, size);
        return result;
    }
    *code = GW_RPC_METHOD_NOT_FOUND;
    if (strcmp(method, "initialize") == 0)
        snprintf(why, size,
                 "method not found: initialize belongs to " GW_MCP_VERSION_LATEST
                 " and earlier; a " GW_MCP_VERSION_MODERN " client sends server/discover");
    else
        snprintf(why, size, "method not found: %.200s", method);
    return NULL;
}

/* A request (it has an id): its revision, then its method. @refused: 1 when the revision's
 * checks refuse it as a message. */
static char *request(int *refused, const gw_mcp *m, const gw_tenant *tenant, const json_t *id,
                     const char *method, const json_t *params, const gw_span *arguments)
{
    char why[512];
    json_t *result, *data = NULL;
    int code, modern;

    if (params != NULL && !json_is_object(params))
        return error_reply(id, GW_RPC_INVALID_PARAMS, "params must be an object");
    if ((code = gw_mcp_revision(&modern, &data, m, method, params, why, sizeof(why))) != 0) {
        *refused = 1;
        return error_reply_data(id, code, why, data);
    }
    trace_from_meta(m, params);
    result = dispatch(&code, m, tenant, method, params, arguments, modern, why, sizeof(why));
    if (code != 0)
        return error_reply(id, code, why);
    if (result != NULL && modern && gw_mcp_modern_result(result, method) != 0) {
        json_decref(result);
        result = NULL;
    }
    return result_reply(id, result);
}

/* A valid id: a string or an integer (null, numbers with fractions, booleans, arrays and
 * objects are refused). */
static int valid_id(const json_t *id)
{
    return json_is_string(id) || json_is_integer(id);
}

/* The envelope: an object, "jsonrpc": "2.0", a method (a request or a notification) or a
 * result or error (a response, which is ignored). */
static int envelope(char **out, int *refused, const gw_mcp *m, const gw_tenant *tenant,
                    const json_t *msg, const gw_span *arguments)
{
    const json_t *id = json_object_get(msg, "id");
    const json_t *method = json_object_get(msg, "method");
    const json_t *jsonrpc = json_object_get(msg, "jsonrpc");

    *out = NULL;
    *refused = json_is_array(msg) || !json_is_object(msg) || (id != NULL && !valid_id(id));
    if (json_is_array(msg))
        *out = error_reply(NULL, GW_RPC_INVALID_REQUEST,
                           "batches are not supported: send one JSON-RPC message at a time");
    else if (!json_is_object(msg))
        *out = error_reply(NULL, GW_RPC_INVALID_REQUEST, "a message must be a JSON object");
    else if (id != NULL && !valid_id(id))
        *out = error_reply(NULL, GW_RPC_INVALID_REQUEST, "id must be a string or an integer");
    else if (!json_is_string(jsonrpc) || strcmp(json_string_value(jsonrpc), "2.0") != 0)
        *out = error_reply(id, GW_RPC_INVALID_REQUEST, "jsonrpc must be \"2.0\"");
    else if (method == NULL && id != NULL &&
             (json_object_get(msg, "result") != NULL || json_object_get(msg, "error") != NULL))
        return 0; /* a response: the gateway sends no requests, so nothing answers it */
    else if (!json_is_string(method))
        *out = error_reply(id, GW_RPC_INVALID_REQUEST, "method must be a string");
    else if (id == NULL)
        return 0; /* a notification: nothing to answer */
    else
        *out = request(refused, m, tenant, id, json_string_value(method),
                       json_object_get(msg, "params"), arguments);
    return *out != NULL ? 0 : -1;
}

/* The bytes of params.arguments in @msg when they are an object: 1 with @out, else 0 (none,
 * not an object, or a message that is not JSON text, which the parser then refuses). */
static int find_arguments(gw_span *out, const char *msg, size_t len)
{
    gw_span whole, params, w;

    if (gw_span_value(&whole, msg, len) != 0 || whole.at[0] != '{' ||
        gw_span_member(whole, "params", 6, &params, &w) != 1 || params.at[0] != '{' ||
        gw_span_member(params, "arguments", 9, out, &w) != 1)
        return 0;
    return out->at[0] == '{' && gw_span_well_formed(*out) == 0;
}

/* @msg parsed with its arguments (@args, NULL: none) read as an empty object: they are
 * taken as sent, never through the parser, which would round their numbers. */
static json_t *parse(const char *msg, size_t len, const gw_span *args, json_error_t *jerr)
{
    size_t before = args != NULL ? (size_t)(args->at - msg) : 0, after;
    json_t *doc;
    char *text;

    if (args == NULL)
        return json_loadb(msg, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, jerr);
    after = len - before - args->len;
    if ((text = malloc(before + 2 + after)) == NULL) {
        snprintf(jerr->text, sizeof(jerr->text), "out of memory");
        jerr->position = 0;
        return NULL;
    }
    memcpy(text, msg, before);
    memcpy(text + before, "{}", 2);
    memcpy(text + before + 2, args->at + args->len, after);
    doc = json_loadb(text, before + 2 + after, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, jerr);
    if (doc == NULL && (size_t)jerr->position > before + 2) /* a byte of @msg's */
        jerr->position += (int)args->len - 2;
    free(text);
    return doc;
}

int gw_mcp_handle(char **out, int *refused, const gw_mcp *m, const gw_tenant *tenant,
                  const char *msg, size_t len)
{
    json_error_t jerr;
    gw_span args;
    int found = find_arguments(&args, msg, len);
    json_t *doc = parse(msg, len, found ? &args : NULL, &jerr);
    char why[256];
    int rc;

    if (doc == NULL) {
        snprintf(why, sizeof(why), "parse error: not JSON: %s (at byte %d)", jerr.text,
                 jerr.position);
        *out = error_reply(NULL, GW_RPC_PARSE_ERROR, why);
        *refused = 1;
        return *out != NULL ? 0 : -1;
    }
    rc = envelope(out, refused, m, tenant, doc, found ? &args : NULL);
    json_decref(doc);
    return rc;
}
