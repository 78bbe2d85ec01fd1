/* The call layer: one tool call, whatever the transport, from a request (tenant, tool,
 * operation ID, the argument bytes as received, trace context) to an outcome (run.h): the
 * arguments checked (arguments.c), then the effect, declared through the store or an http
 * tool's upstream call (http_call.c). The adapters answer the outcome: http_api.c over HTTP,
 * mcp_result.c over MCP. */
#include <stdio.h>
#include <string.h>

#include "call.h"
#include "metrics.h"

static void execute(gw_run *run, const gw_config *cfg, const gw_runtime *rt,
                    const gw_tenant *tenant, const gw_tool *tool, const char *key, const char *body,
                    size_t len, const char *trace_id)
{
    idem_request req = IDEM_REQUEST_INIT;

    if (gw_check_arguments(run, cfg, tool, body, len) != 0)
        return;
    if (tool->http != NULL) {
        gw_http_run(run, cfg, gw_runtime_upstream(rt, tool), tenant, tool, key, body, len,
                    trace_id);
        return;
    }
    gw_request(&req, tenant, tool, key, body, len, trace_id);
    idem_store_execute_declared(&run->out, rt->store, &req, tool->effect, &run->err);
    if (run->out.status == IDEM_STATUS_INVALID && strcmp(run->err.field, "arguments") == 0)
        gw_run_invalid(run, "", NULL); /* the library's refusal of a value: the whole */
}

void gw_run_call(gw_run *run, const gw_config *cfg, const gw_runtime *rt, const gw_tenant *tenant,
                 const gw_tool *tool, const char *key, const char *body, size_t len,
                 gw_call_ctx *ctx)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    const char *status;

    memset(run, 0, sizeof(*run));
    run->out = out;
    run->err = err;
    gw_metrics_in_flight(1);
    execute(run, cfg, rt, tenant, tool, key, body, len, ctx != NULL ? ctx->trace_id : NULL);
    gw_metrics_in_flight(-1);
    status = idem_status_name(run->out.status);
    gw_metrics_call(tool->name, status);
    if (ctx != NULL) {
        ctx->tool = tool->name;
        ctx->status = status;
        snprintf(ctx->key, sizeof(ctx->key), "%s", key);
    }
}
