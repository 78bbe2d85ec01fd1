/* MCP over standard input and output (mcp.h): one JSON-RPC message per line each way, the
 * tenant fixed by the configuration (mcp.stdio_tenant), logs on standard error only. Each
 * message is answered in a thread of its own, so that a call waiting on PostgreSQL holds
 * up neither ping nor other calls. A line longer than max_body_bytes is answered with an
 * error and reading goes on. At the end of input, or on SIGTERM or SIGINT (the handlers are
 * installed here), the calls under way get mcp.stdio_grace_s to finish. */
#ifndef IDEM_GATEWAY_MCP_STDIO_H
#define IDEM_GATEWAY_MCP_STDIO_H

#include <idem/idem.h>
#include <stdio.h>

#include "config.h"
#include "runtime.h"

/* Serve @in and @out until @in ends. Returns 0 once every call has finished, or 1 when
 * some were still running at the end of the grace period (the caller must then exit
 * without freeing @rt: those calls still use it). */
int gw_mcp_stdio_serve(const gw_config *cfg, const gw_runtime *rt, FILE *in, FILE *out);

#endif
