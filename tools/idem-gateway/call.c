/* A tool call: arguments against the schema, the declared effect through the store, and
 * the status to HTTP. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "metrics.h"

void gw_internal_error(gw_reply *r)
{
    static const char body[] = "{\"type\":\"" GW_PROBLEM_PREFIX "internal\",\"title\":\"Internal "
                               "error\",\"status\":500,\"detail\":\"the gateway ran out of "
                               "memory\"}";

    if (gw_reply_body(r, 500, "application/problem+json", body, sizeof(body) - 1) != 0)
        r->status = 500; /* no body: libmicrohttpd's empty answer */
}

static void problem(gw_reply *r, unsigned int status, const char *type, const char *title,
                    const char *detail, json_t *extra)
{
    if (gw_problem(r, status, type, title, detail, extra) != 0)
        gw_internal_error(r);
}

static void execute(gw_run *run, const gw_config *cfg, idem_store *store, const gw_tenant *tenant,
                    const gw_tool *tool, const char *key, const char *body, size_t len,
                    const char *trace_id)
{
    idem_request req = IDEM_REQUEST_INIT;

    if (gw_check_arguments(run, cfg, tool, body, len) != 0)
        return;
    if (tool->http != NULL) {
        gw_http_run(run, cfg, tenant, tool, key, body, len, trace_id);
        return;
    }
    gw_request(&req, tenant, tool, key, body, len, trace_id);
    idem_store_execute_declared(&run->out, store, &req, tool->effect, &run->err);
    if (run->out.status == IDEM_STATUS_INVALID && strcmp(run->err.field, "arguments") == 0)
        gw_run_invalid(run, "", NULL); /* the library's refusal of a value: the whole */
}

void gw_run_call(gw_run *run, const gw_config *cfg, idem_store *store, const gw_tenant *tenant,
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
    execute(run, cfg, store, tenant, tool, key, body, len, ctx != NULL ? ctx->trace_id : NULL);
    gw_metrics_in_flight(-1);
    status = idem_status_name(run->out.status);
    gw_metrics_call(tool->name, status);
    if (ctx != NULL) {
        ctx->tool = tool->name;
        ctx->status = status;
        snprintf(ctx->key, sizeof(ctx->key), "%s", key);
    }
}

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

static void receipt(gw_reply *r, unsigned int status, const idem_outcome *out, int replayed)
{
    if (gw_reply_body(r, status, "application/json", out->receipt, out->receipt_len) != 0) {
        gw_internal_error(r);
        return;
    }
    if (replayed)
        gw_reply_header(r, "Idempotent-Replayed", "true");
}

/* The members an outcome's problem carries beyond type, title, status and detail (README.md
 * in this folder, "Statuses"); a new reference, or NULL for none. */
static json_t *members(gw_outcome o, const gw_run *run, const gw_tenant *tenant, const char *key)
{
    char show[300];

    switch (o) {
    case GW_OUTCOME_CONFLICT:
        return json_pack("{s:s}", "changed", run->err.field);
    case GW_OUTCOME_INVALID_KEY:
        return json_pack("{s:s}", "field", run->err.field);
    case GW_OUTCOME_INVALID_ARGUMENTS:
        return json_pack("{s:s}", "pointer", run->pointer);
    case GW_OUTCOME_EXPIRED:
        snprintf(show, sizeof(show), "idem-reconcile show %s %s", tenant->name, key);
        return json_pack("{s:{s:s, s:s, s:s, s:s}}", "reconciliation", "kind", "expired", "tenant",
                         tenant->name, "operation_id", key, "show", show);
    case GW_OUTCOME_EFFECT_FAILED:
        return json_pack("{s:s}", "sqlstate", run->err.sqlstate);
    default:
        return NULL;
    }
}

/* @run's answer, as the answer table has it (answer.h). */
static void answer(gw_reply *r, const gw_config *cfg, const gw_tenant *tenant, const gw_tool *tool,
                   const char *key, const gw_run *run)
{
    gw_outcome o = gw_run_outcome(run);
    const gw_answer *a = gw_answer_of(o);
    const char *detail = run->err.message;

    if (a->retry_after)
        gw_reply_header(r, "Retry-After", "%u", cfg->retry_after_s);
    if (o == GW_OUTCOME_REJECTED && tool->http != NULL && gw_http_unwrap(r, &run->out) == 0) {
        gw_reply_header(r, "Idempotent-Replayed", "true");
        return;
    }
    if (a->problem == NULL) {
        receipt(r, a->http, &run->out, a->replayed);
        return;
    }
    if (o == GW_OUTCOME_MISCONFIGURED) { /* the log says what; the client learns no more */
        gw_log_misconfigured(&run->err);
        detail = "an operator must fix the database or the configuration; the gateway's log "
                 "says what";
    }
    problem(r, a->http, a->problem, a->title, detail, members(o, run, tenant, key));
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

void gw_call(gw_reply *r, const gw_config *cfg, idem_store *store, const gw_tenant *tenant,
             const gw_tool *tool, const char *key, const char *body, size_t len, gw_call_ctx *ctx)
{
    gw_run run;

    gw_reply_header(r, "Idem-Operation-Id", "%s", key);
    gw_run_call(&run, cfg, store, tenant, tool, key, body, len, ctx);
    gw_reply_header(r, "Idem-Status", "%s", idem_status_name(run.out.status));
    if (run.out_of_memory)
        gw_internal_error(r);
    else
        answer(r, cfg, tenant, tool, key, &run);
    gw_run_clear(&run);
}

/* A tool's entry: its name, payload version and schema, and the policy the store applies
 * to it (idem_store_tool_policy(): windows, stored failures, identity). */
static json_t *tool_entry(const gw_tool *t, const idem_store *store)
{
    json_t *policy = NULL, *entry;

    if (idem_store_tool_policy(&policy, store, t->name, NULL) != 0)
        return NULL;
    entry = json_pack("{s:s, s:i, s:O, s:O, s:O, s:b, s:O, s:O, s:O}", "name", t->name,
                      "payload_version", t->payload_version, "arguments", t->schema, "retention_s",
                      json_object_get(policy, "retention_s"), "key_memory_s",
                      json_object_get(policy, "key_memory_s"), "key_required", 1, "stored_failures",
                      json_object_get(policy, "stored_failures"), "unstored_failures",
                      json_object_get(policy, "unstored_failures"), "identity",
                      json_object_get(policy, "identity"));
    json_decref(policy);
    return entry;
}

void gw_list_tools(gw_reply *r, const gw_config *cfg, const idem_store *store)
{
    json_t *tools = json_array(), *doc = NULL;
    char *text = NULL;

    for (size_t i = 0; tools != NULL && i < cfg->ntools; i++) {
        if (json_array_append_new(tools, tool_entry(&cfg->tools[i], store)) != 0) {
            json_decref(tools);
            tools = NULL;
        }
    }
    if (tools != NULL)
        doc = json_pack("{s:o}", "tools", tools);
    if (doc != NULL)
        text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (text == NULL || gw_reply_body(r, 200, "application/json", text, strlen(text)) != 0)
        gw_internal_error(r);
    free(text);
    json_decref(doc);
}
