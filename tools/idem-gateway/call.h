/* The call layer (call.c): one tool call, its key and tenant already known, from the
 * argument bytes as received to an outcome (run.h), the same for HTTP and MCP. */
#ifndef IDEM_GATEWAY_CALL_H
#define IDEM_GATEWAY_CALL_H

#include <idem/idem.h>
#include <stddef.h>

#include "config.h"
#include "run.h"
#include "runtime.h"

/* Run a call of @tool as @tenant under operation ID @key with the arguments @body (@len
 * bytes of JSON text): parsed and validated against the tool's schema, then executed
 * through @rt's store or client. @run is filled (what it held is ignored); its status says how it
 * went; free it with gw_run_clear(). @rt is the configuration's runtime (runtime.h). @ctx (NULL:
 * none) gives the trace ID and is told the tool, the key and the status. Counted in the metrics
 * (metrics.h). Never fails itself. */
void gw_run_call(gw_run *run, const gw_config *cfg, const gw_runtime *rt, const gw_tenant *tenant,
                 const gw_tool *tool, const char *key, const char *body, size_t len,
                 gw_call_ctx *ctx);

/* The arguments of a call of @tool, @len bytes of JSON text (arguments.c): read by the
 * library's parser (I-JSON), validated against the tool's schema, and for a sql tool the
 * values its statement binds checked. 0, the parse in *parsed (the caller frees it with
 * idem_arguments_free(); the store takes its tree instead of parsing again), or -1 with
 * @run invalid (gw_run_invalid()) and nothing in *parsed. */
int gw_check_arguments(idem_arguments **parsed, gw_run *run, const gw_config *cfg,
                       const gw_tool *tool, const char *body, size_t len);

/* An http tool's call (http_call.c), its arguments valid against its schema: the upstream
 * call as an external effect through the tool's @client (runtime.h), its outcome into @run
 * (set up by gw_run_call()); a transient answer retried until the tool's policy is spent ends
 * unavailable. @ctx (NULL: none) gives the trace ID stored with the operation and the trace
 * context sent upstream (traceparent with the gateway's span as the parent, and tracestate). */
void gw_http_run(gw_run *run, const gw_config *cfg, gw_upstream *client, const gw_tenant *tenant,
                 const gw_tool *tool, const char *key, const char *body, size_t len,
                 const gw_call_ctx *ctx);

#endif
