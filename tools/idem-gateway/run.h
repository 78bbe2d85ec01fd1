/* One tool call's request context and outcome, whatever the transport: what the call
 * layer (call.h) fills in and the adapters answer from (http_api.h over HTTP, mcp.h over
 * MCP), each through the answer table (answer.h). */
#ifndef IDEM_GATEWAY_RUN_H
#define IDEM_GATEWAY_RUN_H

#include <idem/idem.h>
#include <stddef.h>

#include "answer.h"
#include "budget.h"
#include "config.h"
#include "trace.h"

/* What a request gives a call and learns from it, for its log line and the metrics. */
typedef struct gw_call_ctx {
    const char *trace_id; /* the request ID, stored as the operation's trace ID; NULL: none */
    const char *tool;     /* out: the tool's metrics label once the request names one */
    const char *status;   /* out: idem's status word once a call ran */
    char key[IDEM_OPERATION_ID_MAX + 1]; /* out: the operation ID ("" until one is taken) */
    gw_trace trace; /* the request's trace context (trace.h): the caller's, or a new trace */
} gw_call_ctx;

/* One tool call's outcome, whatever the transport (answered over HTTP by http_api.h, over MCP by
 * mcp.h). */
typedef struct gw_run {
    idem_outcome out;      /* status and receipt; cleared by gw_run_clear() */
    idem_error err;        /* why, for every status but created, replayed and rejected */
    int arguments_invalid; /* status invalid for the arguments (not JSON, the schema, a value) */
    char pointer[512];     /* then: the field as a JSON Pointer into the arguments ("" the whole) */
    int out_of_memory;     /* the gateway's own failure: answered as such, whatever the status */
    /* The tenant's budgets (budget.h): what each bucket holds after this call, for the
     * RateLimit fields; over_budget is the one that refused the call (nothing ran). */
    gw_budget_view budget[GW_BUDGET_KINDS];
    unsigned char budgeted[GW_BUDGET_KINDS]; /* 1: the tenant has this budget */
    const gw_budget_view *over_budget;       /* NULL: within its budgets */
    int new_token; /* a new operation's token was taken: given back unless it created */
} gw_run;

/* NULL is accepted. */
void gw_run_clear(gw_run *run);

/* @run invalid for its arguments at @pointer ("" the whole), its message @fmt (NULL: the
 * library's, already in run->err). */
void gw_run_invalid(gw_run *run, const char *pointer, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The status word of @run: Idem-Status, structuredContent.status and the metrics' label
 * ("rate_limited" over a budget, else idem's). */
const char *gw_run_status(const gw_run *run);

/* The budget that refused @run ("calls", "new_operations"), or NULL. */
const char *gw_run_budget(const gw_run *run);

/* The Retry-After of @run's answer in seconds: a budget's, else the configuration's. */
unsigned int gw_run_retry_after(const gw_run *run, const gw_config *cfg);

/* @run's row of the answer table (answer.h): its status, invalid told apart into the
 * operation ID's and the arguments'. */
gw_outcome gw_run_outcome(const gw_run *run);

/* A misconfigured call's cause on standard error, for the operator: the client is told only
 * that the log says what. */
void gw_log_misconfigured(const idem_error *err);

/* @req (initialized by the caller) for a call of @tool as @tenant under operation ID @key
 * with the arguments @body (@len bytes) and @trace_id (NULL: none); the strings are
 * borrowed. */
void gw_request(idem_request *req, const gw_tenant *tenant, const gw_tool *tool, const char *key,
                const char *body, size_t len, const char *trace_id);

#endif
