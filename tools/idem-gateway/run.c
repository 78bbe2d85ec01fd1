/* A call's outcome: the request it was made of, its row of the answer table, and the
 * refusal of its arguments. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "run.h"

void gw_request(idem_request *req, const gw_tenant *tenant, const gw_tool *tool, const char *key,
                const char *body, size_t len, const char *trace_id)
{
    req->tenant = tenant->name;
    req->operation_id = key;
    req->tool = tool->name;
    req->payload_version = tool->payload_version;
    req->arguments = body;
    req->arguments_len = len;
    req->trace_id = trace_id;
}

void gw_run_clear(gw_run *run)
{
    if (run != NULL)
        idem_outcome_clear(&run->out);
}

const char *gw_run_status(const gw_run *run)
{
    return run->over_budget != NULL ? gw_answer_of(GW_OUTCOME_RATE_LIMITED)->status
                                    : idem_status_name(run->out.status);
}

const char *gw_run_budget(const gw_run *run)
{
    if (run->over_budget == NULL)
        return NULL;
    return gw_budget_name(run->over_budget == &run->budget[GW_BUDGET_NEW] ? GW_BUDGET_NEW
                                                                          : GW_BUDGET_CALLS);
}

unsigned int gw_run_retry_after(const gw_run *run, const gw_config *cfg)
{
    return run->over_budget != NULL ? run->over_budget->retry_s : cfg->retry_after_s;
}

gw_outcome gw_run_outcome(const gw_run *run)
{
    static const gw_outcome of[] = {
        [IDEM_STATUS_CREATED] = GW_OUTCOME_CREATED,
        [IDEM_STATUS_REPLAYED] = GW_OUTCOME_REPLAYED,
        [IDEM_STATUS_CONFLICT] = GW_OUTCOME_CONFLICT,
        [IDEM_STATUS_INVALID] = GW_OUTCOME_INVALID_ARGUMENTS,
        [IDEM_STATUS_IN_PROGRESS] = GW_OUTCOME_IN_PROGRESS,
        [IDEM_STATUS_UNAVAILABLE] = GW_OUTCOME_UNAVAILABLE,
        [IDEM_STATUS_EXPIRED] = GW_OUTCOME_EXPIRED,
        [IDEM_STATUS_OUTCOME_UNKNOWN] = GW_OUTCOME_OUTCOME_UNKNOWN,
        [IDEM_STATUS_EFFECT_FAILED] = GW_OUTCOME_EFFECT_FAILED,
        [IDEM_STATUS_REJECTED] = GW_OUTCOME_REJECTED,
        [IDEM_STATUS_MISCONFIGURED] = GW_OUTCOME_MISCONFIGURED,
    };
    unsigned int st = (unsigned int)run->out.status;

    if (run->over_budget != NULL)
        return GW_OUTCOME_RATE_LIMITED;
    if (run->out.status == IDEM_STATUS_INVALID && !run->arguments_invalid &&
        strcmp(run->err.field, "operation_id") == 0)
        return GW_OUTCOME_INVALID_KEY;
    return st < sizeof(of) / sizeof(of[0]) ? of[st] : GW_OUTCOME_UNAVAILABLE;
}

void gw_log_misconfigured(const idem_error *err)
{
    fprintf(stderr, "idem-gateway: misconfigured: %s%s%s\n", err->message,
            err->hint[0] != '\0' ? "; hint: " : "", err->hint);
}

void gw_run_invalid(gw_run *run, const char *pointer, const char *fmt, ...)
{
    va_list ap;

    run->out.status = IDEM_STATUS_INVALID;
    run->arguments_invalid = 1;
    snprintf(run->pointer, sizeof(run->pointer), "%s", pointer);
    if (fmt == NULL)
        return; /* the library's words, already in run->err */
    va_start(ap, fmt);
    vsnprintf(run->err.message, sizeof(run->err.message), fmt, ap);
    va_end(ap);
    snprintf(run->err.field, sizeof(run->err.field), "arguments");
}
