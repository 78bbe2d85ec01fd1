/* The call layer: one tool call, whatever the transport, from a request (tenant, tool,
 * operation ID, the argument bytes as received, trace context) to an outcome (run.h): the
 * arguments checked (arguments.c), then the effect, declared through the store or an http
 * tool's upstream call (http_call.c). The adapters answer the outcome: http_api.c over HTTP,
 * mcp_result.c over MCP. */
#include <stdio.h>
#include <string.h>

#include "call.h"
#include "metrics.h"
#include "seen.h"

/* Take a token of @tenant's @kind budget for @run: 1 taken (or no such budget), 0 spent. */
static int take(gw_run *run, const gw_tenant *tenant, gw_budget_kind kind, const gw_rate *rate)
{
    if (rate->per_minute == 0)
        return 1;
    run->budgeted[kind] = 1;
    return gw_budget_take(tenant->name, kind, rate, &run->budget[kind]) == 1;
}

/* Whether @key names an operation @tenant already has: a call of it creates nothing. */
static int known(const gw_runtime *rt, const gw_tenant *tenant, const char *key)
{
    idem_operation *op = NULL;
    idem_error err = IDEM_ERROR_INIT;

    if (idem_store_get(&op, rt->store, tenant->name, key, &err) != 0)
        return 0; /* not there, or not known now: counted as new */
    idem_operation_free(op);
    return 1;
}

/* The tenant's budgets (budget.h) before a call: every call takes a token of its calls
 * budget; one that may create an operation a token of its new operations budget, or, when
 * that is spent, runs only if its key is known. 0, or -1 with @run over budget. */
static int within_budgets(gw_run *run, const gw_runtime *rt, const gw_tenant *tenant,
                          const char *key)
{
    gw_budget_kind over = GW_BUDGET_CALLS;

    if (take(run, tenant, GW_BUDGET_CALLS, &tenant->calls)) {
        if (take(run, tenant, GW_BUDGET_NEW, &tenant->new_operations)) {
            run->new_token = tenant->new_operations.per_minute > 0;
            return 0;
        }
        if (known(rt, tenant, key))
            return 0;
        over = GW_BUDGET_NEW;
        if (tenant->calls.per_minute > 0) /* the call did not run: its token is not spent */
            gw_budget_give_back(tenant->name, GW_BUDGET_CALLS, &tenant->calls);
    }
    gw_budget_refused(tenant->name, over);
    run->over_budget = &run->budget[over];
    snprintf(run->err.message, sizeof(run->err.message),
             "tenant %s has spent its budget of %s (%u a minute, %u at once); a token comes "
             "back in %u s",
             tenant->name, gw_budget_name(over),
             over == GW_BUDGET_NEW ? tenant->new_operations.per_minute : tenant->calls.per_minute,
             run->budget[over].quota, run->budget[over].retry_s);
    return -1;
}

static void execute(gw_run *run, const gw_config *cfg, const gw_runtime *rt,
                    const gw_tenant *tenant, const gw_tool *tool, const char *key, const char *body,
                    size_t len, const gw_call_ctx *ctx)
{
    idem_request req = IDEM_REQUEST_INIT;
    const char *trace_id = ctx != NULL ? ctx->trace_id : NULL;
    idem_arguments *parsed = NULL;

    if (gw_check_arguments(&parsed, run, cfg, tool, body, len) != 0)
        return;
    if (tool->http != NULL) {
        idem_arguments_free(parsed);
        gw_http_run(run, cfg, gw_runtime_upstream(rt, tool), tenant, tool, key, body, len, ctx);
        return;
    }
    gw_request(&req, tenant, tool, key, body, len, trace_id);
    req.attempt = gw_seen(tenant->name, key) ? 2 : 1; /* the cheaper way in (seen.h) */
    req.parsed = parsed;                              /* parsed once: the store takes the tree */
    idem_store_execute_declared(&run->out, rt->store, &req, tool->effect, &run->err);
    idem_arguments_free(parsed);
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
    if (within_budgets(run, rt, tenant, key) == 0) {
        gw_metrics_in_flight(1);
        execute(run, cfg, rt, tenant, tool, key, body, len, ctx);
        gw_metrics_in_flight(-1);
        if (run->new_token && run->out.status != IDEM_STATUS_CREATED)
            gw_budget_give_back(tenant->name, GW_BUDGET_NEW, &tenant->new_operations);
    }
    status = gw_run_status(run);
    gw_metrics_call(tool->name, status);
    if (ctx != NULL) {
        ctx->tool = tool->name;
        ctx->status = status;
        size_t n = strnlen(key, sizeof(ctx->key) - 1);

        memcpy(ctx->key, key, n);
        ctx->key[n] = '\0';
    }
}
