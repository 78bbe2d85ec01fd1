/* tools/list and tools/call: the configured tools, the operation ID (from _meta or the
 * tool's operation ID argument), and the call through gw_run_call() as over HTTP. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "contract.h"
#include "json_span.h"
#include "mcp.h"
#include "metrics.h"
#include "reply.h"

static json_t *tool_entry(const gw_config *cfg, const gw_tool *t)
{
    json_t *entry =
        json_pack("{s:s, s:O, s:{s:b, s:b, s:b, s:b}}", "name", t->name, "inputSchema",
                  t->input_schema, "annotations", "readOnlyHint", 0, "idempotentHint", 1,
                  "destructiveHint", t->destructive, "openWorldHint", t->http != NULL);

    if (entry != NULL && t->title != NULL) {
        json_object_set_new(entry, "title", json_string(t->title));
        json_object_set_new(json_object_get(entry, "annotations"), "title", json_string(t->title));
    }
    if (entry != NULL && t->description != NULL)
        json_object_set_new(entry, "description", json_string(t->description));
    if (entry != NULL && json_object_set_new(entry, "_meta", gw_contract_meta(cfg, t)) != 0) {
        json_decref(entry); /* out of memory */
        return NULL;
    }
    return entry;
}

json_t *gw_mcp_tools_list(const gw_config *cfg)
{
    json_t *tools = json_array();

    for (size_t i = 0; tools != NULL && i < cfg->ntools; i++) {
        if (json_array_append_new(tools, tool_entry(cfg, &cfg->tools[i])) != 0) {
            json_decref(tools);
            return NULL;
        }
    }
    return tools != NULL ? json_pack("{s:o}", "tools", tools) : NULL;
}

/* How a model sends @tool's operation ID, for the texts ({how}, {channel}): in the tool's
 * operation ID argument, a UUID it makes per action; else in _meta, allocated here. */
static void channel(gw_answer_vars *v, const gw_tool *tool, char *how, size_t hsize, char *where,
                    size_t wsize)
{
    const char *arg = tool->operation_id_argument;

    if (arg != NULL) {
        snprintf(where, wsize, "\"%s\"", arg);
        snprintf(how, hsize,
                 "Generate a new UUID for each new action and send the same one in \"%s\" on "
                 "every retry of that action; never a new one for a retry.",
                 arg);
    } else {
        snprintf(where, wsize, "_meta[\"" GW_MCP_META_OPERATION_ID "\"]");
        snprintf(
            how, hsize,
            "Allocate one per approved action (tools/call with _meta {\"" GW_MCP_META_ALLOCATE
            "\": true}), store it with the action, and send it as _meta[\"" GW_MCP_META_OPERATION_ID
            "\"] on this call and on every retry of it; never a new one for a retry.");
    }
    v->how = how;
    v->channel = where;
}

static json_t *allocate(const gw_tool *tool)
{
    char id[IDEM_UUID_STRING_SIZE], text[600], how[300], where[IDEM_OPERATION_ID_MAX + 64];
    gw_answer_vars v = {0};
    idem_error err = IDEM_ERROR_INIT;

    if (idem_uuid_v7(id, &err) != 0)
        return NULL;
    channel(&v, tool, how, sizeof(how), where, sizeof(where));
    v.key = id;
    gw_answer_text(text, sizeof(text), gw_answer_of(GW_OUTCOME_ALLOCATED), &v);
    return json_pack("{s:[{s:s, s:s}], s:{s:s, s:s}, s:{s:s, s:s}}", "content", "type", "text",
                     "text", text, "structuredContent", "status",
                     gw_answer_of(GW_OUTCOME_ALLOCATED)->status, "operation_id", id, "_meta",
                     GW_MCP_META_OPERATION_ID, id, GW_MCP_META_OPERATION_ID_OLD, id);
}

/* The call's parts, taken apart from params. */
typedef struct call_parts {
    const gw_tool *tool;
    gw_span sent;    /* the arguments' bytes as the client sent them (borrowed) */
    char *arguments; /* owned: those bytes without the operation ID argument */
    size_t arguments_len;
    const json_t *meta;
    const json_t *key;   /* _meta's operation ID, under either spelling (borrowed; NULL: none) */
    const char *key_at;  /* the spelling it was sent under */
    const json_t *alloc; /* _meta's allocation flag, under either spelling (borrowed; NULL) */
} call_parts;

/* _meta's member @name, or its older spelling @old: @out (borrowed; NULL: neither) and
 * @at (the spelling found). -1 with @why when both are sent with different values. */
static int meta_member(const json_t **out, const char **at, const json_t *meta, const char *name,
                       const char *old, char *why, size_t size)
{
    const json_t *now = json_object_get(meta, name), *before = json_object_get(meta, old);

    if (now != NULL && before != NULL && !json_equal(now, before)) {
        snprintf(why, size,
                 "tools/call: params._meta[\"%s\"] and its older spelling params._meta[\"%s\"] "
                 "hold different values; send one of them",
                 name, old);
        return -1;
    }
    *out = now != NULL ? now : before;
    *at = now != NULL ? name : old;
    return 0;
}

/* _meta's operation ID and allocation flag, each under either spelling: 0, or -1 with @why
 * (two spellings that differ, a value of the wrong type). */
static int meta_parts(call_parts *c, char *why, size_t size)
{
    const char *alloc_at;

    if (meta_member(&c->key, &c->key_at, c->meta, GW_MCP_META_OPERATION_ID,
                    GW_MCP_META_OPERATION_ID_OLD, why, size) != 0 ||
        meta_member(&c->alloc, &alloc_at, c->meta, GW_MCP_META_ALLOCATE, GW_MCP_META_ALLOCATE_OLD,
                    why, size) != 0)
        return -1;
    if (c->key != NULL && !json_is_string(c->key)) {
        snprintf(why, size, "tools/call: params._meta[\"%s\"] must be a string", c->key_at);
        return -1;
    }
    if (c->alloc != NULL && !json_is_boolean(c->alloc)) {
        snprintf(why, size, "tools/call: params._meta[\"%s\"] must be true or false", alloc_at);
        return -1;
    }
    return 0;
}

/* params' shape: -32602 when it is not a tools/call's. */
static int take_apart(call_parts *c, const gw_mcp *m, const json_t *params, const gw_span *sent,
                      char *why, size_t size)
{
    const json_t *name = json_object_get(params, "name");
    const json_t *args = json_object_get(params, "arguments");

    c->meta = json_object_get(params, "_meta");
    if (!json_is_string(name)) {
        snprintf(why, size, "tools/call: params.name must be the tool's name, a string");
        return GW_RPC_INVALID_PARAMS;
    }
    c->tool = gw_config_tool(m->cfg, json_string_value(name), json_string_length(name));
    if (m->ctx != NULL) /* the metrics' label, whatever comes next */
        m->ctx->tool = c->tool != NULL ? c->tool->name : GW_METRICS_UNKNOWN_TOOL;
    if (c->tool == NULL) {
        char shown[65];

        snprintf(why, size, "unknown tool: no tool is called \"%s\"; tools/list lists them",
                 gw_printable(shown, sizeof(shown), json_string_value(name)));
        return GW_RPC_INVALID_PARAMS;
    }
    if (meta_parts(c, why, size) != 0)
        return GW_RPC_INVALID_PARAMS;
    if ((args != NULL && !json_is_object(args)) || (c->meta != NULL && !json_is_object(c->meta))) {
        snprintf(why, size, "tools/call: params.%s must be an object",
                 args != NULL && !json_is_object(args) ? "arguments" : "_meta");
        return GW_RPC_INVALID_PARAMS;
    }
    if (args != NULL && sent == NULL) { /* cannot be: an object the parser read is walked */
        snprintf(why, size, "tools/call: params.arguments could not be read as sent");
        return GW_RPC_INVALID_PARAMS;
    }
    c->sent.at = sent != NULL ? sent->at : "{}";
    c->sent.len = sent != NULL ? sent->len : 2;
    return 0;
}

/* The operation ID argument's string @v decoded into @key (@size bytes); @why when it is
 * not a string or holds a NUL. */
static void argument_key(char *key, size_t size, gw_span v, const char *arg, char *why,
                         size_t wsize)
{
    long n = gw_span_string(key, size, v);

    if (v.at[0] != '"')
        snprintf(why, wsize, "/%s: the operation ID must be a string", arg);
    else if (n < 0)
        snprintf(why, wsize, "/%s: the operation ID must be a string of at most %d bytes", arg,
                 IDEM_OPERATION_ID_MAX);
    else if ((size_t)n != strlen(key))
        snprintf(why, wsize, "/%s: the operation ID must not hold a NUL character (\\u0000)", arg);
}

/* The operation ID from _meta, else the tool's argument, into @key (@size bytes): 1, or 0
 * when none was sent, or -1 with @why when one is malformed. */
static int operation_id(char *key, size_t size, const call_parts *c, char *why, size_t wsize)
{
    const char *meta = json_string_value(c->key);
    const char *arg = c->tool->operation_id_argument;
    char sent[IDEM_OPERATION_ID_MAX + 2] = "";
    gw_span v, whole;
    int n = arg != NULL ? gw_span_member(c->sent, arg, strlen(arg), &v, &whole) : 0;

    if (n == 1 && v.len == 4 && memcmp(v.at, "null", 4) == 0)
        n = 0; /* null is absent (a strict schema makes every member required but nullable) */

    why[0] = key[0] = '\0';
    if (n < 0 && meta == NULL)
        snprintf(why, wsize, "the arguments are not a JSON object, so /%s cannot be read", arg);
    else if (n > 1)
        snprintf(why, wsize, "/%s: sent more than once in the arguments", arg);
    else if (n == 1)
        argument_key(sent, sizeof(sent), v, arg, why, wsize);
    if (why[0] == '\0' && meta != NULL && n == 1 && strcmp(meta, sent) != 0)
        snprintf(why, wsize,
                 "/%s: two different operation IDs were sent, in _meta and in the arguments", arg);
    if (why[0] != '\0')
        return -1;
    snprintf(key, size, "%s", meta != NULL ? meta : sent);
    return meta != NULL || n == 1;
}

/* c->arguments: the bytes sent, less the member named as the tool's operation ID argument
 * (the others as written, in their order). 0, or -1 when out of memory. */
static int without_key_argument(call_parts *c)
{
    const char *arg = c->tool->operation_id_argument;
    gw_span_iter it;
    gw_span key, v, whole, found;
    size_t n = 1;

    if ((c->arguments = malloc(c->sent.len + 1)) == NULL)
        return -1;
    if (arg == NULL || gw_span_member(c->sent, arg, strlen(arg), &v, &found) != 1 ||
        gw_span_iter_init(&it, c->sent) != 0) {
        memcpy(c->arguments, c->sent.at, c->sent.len);
        c->arguments_len = c->sent.len;
        return 0;
    }
    c->arguments[0] = '{';
    while (gw_span_next(&it, &key, &v, &whole) == 1) {
        if (whole.at == found.at)
            continue;
        if (n > 1)
            c->arguments[n++] = ',';
        memcpy(c->arguments + n, whole.at, whole.len);
        n += whole.len;
    }
    c->arguments[n++] = '}';
    c->arguments_len = n;
    return 0;
}

static json_t *invalid_key(const gw_tool *tool, const char *why)
{
    char how[300], where[IDEM_OPERATION_ID_MAX + 64];
    gw_answer_vars v = {0};

    channel(&v, tool, how, sizeof(how), where, sizeof(where));
    v.detail = why;
    return gw_mcp_refusal(GW_OUTCOME_INVALID_KEY, NULL, &v,
                          json_pack("{s:s}", "field", "operation_id"));
}

static json_t *missing_key(const gw_tool *tool)
{
    char how[300], where[IDEM_OPERATION_ID_MAX + 64];
    gw_answer_vars v = {0};

    channel(&v, tool, how, sizeof(how), where, sizeof(where));
    return gw_mcp_refusal(GW_OUTCOME_KEY_MISSING, NULL, &v, NULL);
}

/* Run it: the arguments' bytes through the same path as HTTP's calls. */
static json_t *run(const gw_mcp *m, const gw_tenant *tenant, const call_parts *c, const char *key)
{
    json_t *result;
    gw_run r;

    gw_run_call(&r, m->cfg, m->rt, tenant, c->tool, key, c->arguments, c->arguments_len, m->ctx);
    result = gw_mcp_result(&r, m->cfg, tenant, key);
    gw_run_clear(&r);
    return result;
}

static json_t *call(const gw_mcp *m, const gw_tenant *tenant, call_parts *c)
{
    idem_error err = IDEM_ERROR_INIT;
    char why[300], key[IDEM_OPERATION_ID_MAX + 2];

    if (json_is_true(c->alloc))
        return allocate(c->tool);
    int sent = operation_id(key, sizeof(key), c, why, sizeof(why));

    if (sent < 0)
        return invalid_key(c->tool, why);
    if (sent == 0)
        return missing_key(c->tool);
    if (idem_validate_operation_id(key, &err) != 0)
        return invalid_key(c->tool, err.message);
    if (without_key_argument(c) != 0)
        return NULL;
    return run(m, tenant, c, key);
}

int gw_mcp_tools_call(json_t **result, const gw_mcp *m, const gw_tenant *tenant,
                      const json_t *params, const gw_span *arguments, char *why, size_t size)
{
    call_parts c = {0};
    int code;

    if (params == NULL) {
        snprintf(why, size, "tools/call needs params: the tool's name and its arguments");
        return GW_RPC_INVALID_PARAMS;
    }
    if ((code = take_apart(&c, m, params, arguments, why, size)) != 0)
        return code;
    if ((*result = call(m, tenant, &c)) == NULL) {
        snprintf(why, size, "the gateway ran out of memory");
        code = GW_RPC_INTERNAL_ERROR;
    }
    free(c.arguments);
    return code;
}
