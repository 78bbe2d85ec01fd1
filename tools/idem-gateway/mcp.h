/* The gateway's tools over the Model Context Protocol (README.md in this folder, "MCP"):
 * JSON-RPC 2.0 messages, whatever carries them (mcp_http.c: Streamable HTTP at /mcp;
 * mcp_stdio.c: standard input and output). Stateless: every message stands alone, so that
 * a retry survives a restart of the gateway. Methods: initialize, ping, tools/list,
 * tools/call; notifications are accepted and answer nothing (notifications/cancelled does
 * not stop a call under way: it finishes and is stored, and a retry replays it). */
#ifndef IDEM_GATEWAY_MCP_H
#define IDEM_GATEWAY_MCP_H

#include <idem/idem.h>
#include <jansson.h>
#include <stddef.h>

#include "answer.h"
#include "config.h"
#include "runtime.h"

/* The revisions spoken; a client asking for another is answered with the first. */
#define GW_MCP_VERSION_LATEST "2025-11-25"
#define GW_MCP_VERSION_PREV   "2025-06-18"

/* JSON-RPC 2.0 error codes. */
#define GW_RPC_PARSE_ERROR      -32700
#define GW_RPC_INVALID_REQUEST  -32600
#define GW_RPC_METHOD_NOT_FOUND -32601
#define GW_RPC_INVALID_PARAMS   -32602
#define GW_RPC_INTERNAL_ERROR   -32603

/* The meta keys of a tools/call. */
#define GW_MCP_META_OPERATION_ID "idem/operation_id"
#define GW_MCP_META_ALLOCATE     "idem/allocate_operation_id"

struct gw_call_ctx; /* call.h */

typedef struct gw_mcp {
    const gw_config *cfg;    /* borrowed; outlives it */
    const gw_runtime *rt;    /* borrowed; outlives it */
    struct gw_call_ctx *ctx; /* over HTTP, the one request's (call.h); NULL on stdio */
} gw_mcp;

/* Answer one message, @len bytes of JSON text, from a client acting for @tenant. @out:
 * the reply's JSON text (caller frees), or NULL when none is due (a notification, a
 * response). @refused: 1 when the message itself is refused (not JSON, a batch, not an
 * object, an id of another type: an error with a null id), else 0. Returns 0, or -1 when
 * out of memory. Safe to call from several threads. */
int gw_mcp_handle(char **out, int *refused, const gw_mcp *m, const gw_tenant *tenant,
                  const char *msg, size_t len);

/* A JSON-RPC error response with a null id: @code and @message. Caller frees; NULL when
 * out of memory. */
char *gw_mcp_error_text(int code, const char *message);

/* Whether @version is a revision spoken here: 1 or 0. */
int gw_mcp_version_supported(const char *version);

/* tools/list's result (mcp_call.c); a new reference, or NULL when out of memory. */
json_t *gw_mcp_tools_list(const gw_config *cfg);

/* tools/call (mcp_call.c): 0 with @result (a new reference), or a JSON-RPC error code
 * with @why (of @size bytes) saying what is wrong with @params. @arguments: the bytes of
 * params.arguments as the client sent them, when they are an object (then @params holds an
 * empty object in their place), else NULL. */
struct gw_span;
int gw_mcp_tools_call(json_t **result, const gw_mcp *m, const gw_tenant *tenant,
                      const json_t *params, const struct gw_span *arguments, char *why,
                      size_t size);

/* A tools/call result for @run (mcp_result.c): content, structuredContent, isError. A new
 * reference, or NULL when out of memory. */
struct gw_run;
json_t *gw_mcp_result(const struct gw_run *run, const gw_config *cfg, const gw_tenant *tenant,
                      const char *key);

/* A refusal before any call (mcp_result.c): outcome @o's answer (answer.h) with @v's
 * values in its text, @extra members of structuredContent (stolen; NULL for none). */
json_t *gw_mcp_refusal(gw_outcome o, const char *key, const gw_answer_vars *v, json_t *extra);

#endif
