/* The gateway's tools over the Model Context Protocol (README.md in this folder, "MCP"):
 * JSON-RPC 2.0 messages, whatever carries them (mcp_http.c: Streamable HTTP at /mcp;
 * mcp_stdio.c: standard input and output). Stateless: every message stands alone, so that
 * a retry survives a restart of the gateway. Two eras of the protocol: 2025-11-25 (and
 * 2025-06-18), opened by initialize; and the stateless 2026-07-28, where server/discover
 * replaces initialize and each request names its revision in its _meta envelope
 * (io.modelcontextprotocol/protocolVersion). Methods: server/discover, initialize (2025
 * only), ping, tools/list, tools/call; notifications are accepted and answer nothing
 * (notifications/cancelled, like a closed connection, does not stop a call under way: it
 * finishes and is stored, and a retry replays it). */
#ifndef IDEM_GATEWAY_MCP_H
#define IDEM_GATEWAY_MCP_H

#include <idem/idem.h>
#include <jansson.h>
#include <stddef.h>

#include "answer.h"
#include "config.h"
#include "runtime.h"

/* The revisions spoken. initialize answers a client asking for another with
 * GW_MCP_VERSION_LATEST; server/discover lists all three. */
#define GW_MCP_VERSION_MODERN "2026-07-28"
#define GW_MCP_VERSION_LATEST "2025-11-25"
#define GW_MCP_VERSION_PREV   "2025-06-18"

/* JSON-RPC 2.0 error codes. */
#define GW_RPC_PARSE_ERROR      -32700
#define GW_RPC_INVALID_REQUEST  -32600
#define GW_RPC_METHOD_NOT_FOUND -32601
#define GW_RPC_INVALID_PARAMS   -32602
#define GW_RPC_INTERNAL_ERROR   -32603
/* MCP 2026-07-28's: a header that disagrees with the body, and a revision not spoken. */
#define GW_RPC_HEADER_MISMATCH      -32020
#define GW_RPC_UNSUPPORTED_REVISION -32022

/* The meta keys of a tools/call, reverse-DNS prefixed as MCP asks; the older spellings
 * are still read (the same value in both is one; different values are refused). */
#define GW_MCP_META_OPERATION_ID     "dev.idem/operation_id"
#define GW_MCP_META_ALLOCATE         "dev.idem/allocate_operation_id"
#define GW_MCP_META_OPERATION_ID_OLD "idem/operation_id"
#define GW_MCP_META_ALLOCATE_OLD     "idem/allocate_operation_id"
/* MCP's own _meta keys: the request envelope's revision (2026-07-28), the server's
 * identity on a result, and W3C Trace Context (trace.h). */
#define GW_MCP_META_PROTOCOL_VERSION "io.modelcontextprotocol/protocolVersion"
#define GW_MCP_META_SERVER_INFO      "io.modelcontextprotocol/serverInfo"
#define GW_MCP_META_TRACEPARENT      "traceparent"
#define GW_MCP_META_TRACESTATE       "tracestate"

struct gw_call_ctx; /* call.h */

typedef struct gw_mcp {
    const gw_config *cfg;     /* borrowed; outlives it */
    const gw_runtime *rt;     /* borrowed; outlives it */
    struct gw_call_ctx *ctx;  /* the one request's or message's (call.h); NULL: none */
    const char *http_version; /* over HTTP, the MCP-Protocol-Version header; NULL: none */
    const char *http_method;  /* over HTTP, the Mcp-Method header; NULL: none */
} gw_mcp;

/* Answer one message, @len bytes of JSON text, from a client acting for @tenant. @out:
 * the reply's JSON text (caller frees), or NULL when none is due (a notification, a
 * response). @refused: 1 when the message itself is refused (not JSON, a batch, not an
 * object, an id of another type: an error with a null id; and a 2026-07-28 request whose
 * envelope is missing, names a revision not spoken, or disagrees with the headers), else
 * 0. A valid _meta["traceparent"] of a request replaces @m->ctx's trace context. Returns
 * 0, or -1 when out of memory. Safe to call from several threads. */
int gw_mcp_handle(char **out, int *refused, const gw_mcp *m, const gw_tenant *tenant,
                  const char *msg, size_t len);

/* A JSON-RPC error response with a null id: @code and @message. Caller frees; NULL when
 * out of memory. */
char *gw_mcp_error_text(int code, const char *message);

/* Whether @version is a revision spoken here (either era): 1 or 0. */
int gw_mcp_version_supported(const char *version);

/* The revision of the request @method with @params, as sent with @m's headers
 * (mcp_revision.c): 0 with @modern (1: 2026-07-28, its envelope in _meta; 0: the 2025 era,
 * no envelope); or a JSON-RPC error code with @why (of @size bytes) and @data (a new
 * reference, or NULL: none) when the request is refused as a message: an envelope that is
 * missing under MCP-Protocol-Version: 2026-07-28 or malformed (-32602), a header that
 * disagrees with the body (-32020), a revision not spoken (-32022, data {supported,
 * requested}). */
int gw_mcp_revision(int *modern, json_t **data, const gw_mcp *m, const char *method,
                    const json_t *params, char *why, size_t size);

/* The server's identity {name, title, version}; a new reference, or NULL (memory). */
json_t *gw_mcp_server_info(void);

/* server/discover's result with @instructions; a new reference, or NULL (memory). */
json_t *gw_mcp_discover(const char *instructions);

/* @result of @method (changed in place) as 2026-07-28 answers it: resultType "complete",
 * the server's identity in _meta, and for tools/list its cache hints (ttlMs, cacheScope).
 * 0, or -1 when out of memory. */
int gw_mcp_modern_result(json_t *result, const char *method);

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
 * reference, or NULL when out of memory. structuredContent's receipt is a string holding
 * the receipt's JSON text, which the answer writes as that text (gw_mcp_handle()), so that
 * its numbers reach the client as the tool wrote them; null when there is none or it is not
 * JSON. */
struct gw_run;
json_t *gw_mcp_result(const struct gw_run *run, const gw_config *cfg, const gw_tenant *tenant,
                      const char *key);

/* A refusal before any call (mcp_result.c): outcome @o's answer (answer.h) with @v's
 * values in its text, @extra members of structuredContent (stolen; NULL for none). */
json_t *gw_mcp_refusal(gw_outcome o, const char *key, const gw_answer_vars *v, json_t *extra);

#endif
