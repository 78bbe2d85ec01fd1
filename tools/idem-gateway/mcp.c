/* JSON-RPC 2.0 for MCP: the envelope's checks, then one method each. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_span.h"
#include "mcp.h"

#define DUMP_FLAGS (JSON_COMPACT | JSON_PRESERVE_ORDER)

static const char instructions[] =
    "Every call of these tools needs an operation ID: one per approved action, the same on "
    "every attempt of that action, retries included. The same ID never runs twice, and its "
    "retries get the first answer; never retry under a new operation ID. A tool whose input "
    "schema has an operation ID argument takes it there: generate a new UUID for each new "
    "action. Other tools take it as _meta[\"" GW_MCP_META_OPERATION_ID "\"]: allocate one "
    "with tools/call and _meta {\"" GW_MCP_META_ALLOCATE "\": true}, and store it with the "
    "action.";

int gw_mcp_version_supported(const char *version)
{
    return version != NULL && (strcmp(version, GW_MCP_VERSION_LATEST) == 0 ||
                               strcmp(version, GW_MCP_VERSION_PREV) == 0);
}

/* The reply's text; steals @doc. */
static char *dump(json_t *doc)
{
    char *text = doc != NULL ? json_dumps(doc, DUMP_FLAGS) : NULL;

    json_decref(doc);
    return text;
}

/* An error response for @id (borrowed; NULL: null). */
static char *error_reply(const json_t *id, int code, const char *message)
{
    return dump(json_pack("{s:s, s:O?, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error", "code",
                          code, "message", message));
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

static json_t *initialize(const json_t *params)
{
    const char *asked = json_string_value(json_object_get(params, "protocolVersion"));

    return json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion",
                     gw_mcp_version_supported(asked) ? asked : GW_MCP_VERSION_LATEST,
                     "capabilities", "tools", "listChanged", 0, "serverInfo", "name",
                     "idem-gateway", "title", "idem gateway", "version", idem_version(),
                     "instructions", instructions);
}

/* A request (it has an id): one method each. */
static char *request(const gw_mcp *m, const gw_tenant *tenant, const json_t *id, const char *method,
                     const json_t *params, const gw_span *arguments)
{
    char why[512];
    json_t *result = NULL;
    int code;

    if (params != NULL && !json_is_object(params))
        return error_reply(id, GW_RPC_INVALID_PARAMS, "params must be an object");
    if (strcmp(method, "initialize") == 0)
        return result_reply(id, initialize(params));
    if (strcmp(method, "ping") == 0)
        return result_reply(id, json_object());
    if (strcmp(method, "tools/list") == 0)
        return result_reply(id, gw_mcp_tools_list(m->cfg));
    if (strcmp(method, "tools/call") != 0) {
        snprintf(why, sizeof(why), "method not found: %.200s", method);
        return error_reply(id, GW_RPC_METHOD_NOT_FOUND, why);
    }
    code = gw_mcp_tools_call(&result, m, tenant, params, arguments, why, sizeof(why));
    return code == 0 ? result_reply(id, result) : error_reply(id, code, why);
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
        *out = request(m, tenant, id, json_string_value(method), json_object_get(msg, "params"),
                       arguments);
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
