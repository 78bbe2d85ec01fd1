/* MCP's Streamable HTTP transport at /mcp (mcp.h), stateless: POST one JSON-RPC message,
 * answered with application/json (202 and no body when nothing is due); no Mcp-Session-Id,
 * so that a retry survives a restart of the gateway. server.c routes to it and makes the
 * checks it shares with the HTTP API (the token: 401; the media type: 415). */
#ifndef IDEM_GATEWAY_MCP_HTTP_H
#define IDEM_GATEWAY_MCP_HTTP_H

#include <stddef.h>

#include "mcp.h"
#include "reply.h"

#define GW_MCP_PATH "/mcp"

/* Whether a request with @origin (the Origin header, NULL when absent) may be served: no
 * Origin (not a browser), or one listed in mcp.allowed_origins. 1 or 0. */
int gw_mcp_http_origin_allowed(const gw_config *cfg, const char *origin);

/* An HTTP refusal before the message: @status (400, 403, 405, 413, 415) with a JSON-RPC
 * error of a null id (@code, @message) as the body. */
void gw_mcp_http_refuse(gw_reply *r, unsigned int status, int code, const char *message);

/* Answer the message @body (@len bytes) for @tenant into @r. */
void gw_mcp_http_answer(gw_reply *r, const gw_mcp *m, const gw_tenant *tenant, const char *body,
                        size_t len);

#endif
