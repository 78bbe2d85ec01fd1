/* The HTTP API's answers: a tool call's outcome (POST /v1/tools/{tool}) as the answer
 * table says (answer.h), a stored refusal of an http tool as the upstream gave it, and the
 * tool list (GET /v1/tools), and the OpenAPI document (GET /v1/openapi.json). */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "contract.h"
#include "http_api.h"
#include "openapi.h"

static void problem(gw_reply *r, unsigned int status, const char *type, const char *title,
                    const char *detail, json_t *extra)
{
    if (gw_problem(r, status, type, title, detail, extra) != 0)
        gw_internal_error(r);
}

/* A stored refusal of an http tool back into the upstream's status, Content-Type and bytes,
 * with Idem-Upstream-Status; 0, or -1 when the receipt is not one (a refusal an operator
 * resolved, say). */
static int gw_http_unwrap(gw_reply *r, const idem_outcome *out)
{
    json_t *env = json_loadb(out->receipt, out->receipt_len, 0, NULL);
    json_int_t status = json_integer_value(json_object_get(env, "status"));
    const char *type = json_string_value(json_object_get(env, "content_type"));
    const json_t *text = json_object_get(env, "body"), *b64 = json_object_get(env, "body_base64");
    unsigned char *bytes = NULL;
    int n = -1, rc = -1;

    if (status < 100 || status > 599 || (!json_is_string(text) && !json_is_string(b64)))
        goto done;
    if (json_is_string(text)) {
        rc = gw_reply_body(r, (unsigned int)status, NULL, json_string_value(text),
                           json_string_length(text));
    } else if ((bytes = malloc(json_string_length(b64) + 1)) != NULL) {
        n = EVP_DecodeBlock(bytes, (const unsigned char *)json_string_value(b64),
                            (int)json_string_length(b64));
        for (size_t i = json_string_length(b64);
             n > 0 && i > 0 && json_string_value(b64)[i - 1] == '='; i--)
            n--;
        rc = n < 0 ? -1 : gw_reply_body(r, (unsigned int)status, NULL, (char *)bytes, (size_t)n);
    }
    if (rc == 0) {
        gw_reply_header(r, "Content-Type", "%s", type != NULL ? type : "application/octet-stream");
        gw_reply_header(r, "Idem-Upstream-Status", "%d", (int)status);
    }
done:
    free(bytes);
    json_decref(env);
    return rc;
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
    case GW_OUTCOME_RATE_LIMITED:
        return json_pack("{s:s}", "budget", gw_run_budget(run));
    default:
        return NULL;
    }
}

/* RateLimit-Policy and RateLimit (draft-ietf-httpapi-ratelimit-headers) for the tenant's
 * budgets the call consulted: quota q and window w of each, and what remains r and when
 * it is whole again t. */
static void rate_limit_fields(gw_reply *r, const gw_run *run)
{
    char policy[160] = "", state[160] = "";
    size_t p = 0, n = 0;

    for (int k = 0; k < GW_BUDGET_KINDS; k++) {
        const gw_budget_view *v = &run->budget[k];
        const char *name = gw_budget_name((gw_budget_kind)k);

        if (!run->budgeted[k])
            continue;
        p += (size_t)snprintf(policy + p, sizeof(policy) - p, "%s\"%s\";q=%u;w=%u",
                              p > 0 ? ", " : "", name, v->quota, v->window_s);
        n += (size_t)snprintf(state + n, sizeof(state) - n, "%s\"%s\";r=%u;t=%u", n > 0 ? ", " : "",
                              name, v->remaining, v->reset_s);
    }
    if (p == 0)
        return;
    gw_reply_header(r, "RateLimit-Policy", "%s", policy);
    gw_reply_header(r, "RateLimit", "%s", state);
}

void gw_http_answer(gw_reply *r, const gw_config *cfg, const gw_tenant *tenant, const gw_tool *tool,
                    const char *key, const gw_run *run)
{
    gw_outcome o = gw_run_outcome(run);
    const gw_answer *a = gw_answer_of(o);
    const char *detail = run->err.message;

    gw_reply_header(r, "Idem-Operation-Id", "%s", key);
    gw_reply_header(r, "Idem-Status", "%s", gw_run_status(run));
    if (run->out_of_memory) {
        gw_internal_error(r);
        return;
    }
    rate_limit_fields(r, run);
    if (a->retry_after)
        gw_reply_header(r, "Retry-After", "%u", gw_run_retry_after(run, cfg));
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

void gw_call(gw_reply *r, const gw_config *cfg, const gw_runtime *rt, const gw_tenant *tenant,
             const gw_tool *tool, const char *key, const char *body, size_t len, gw_call_ctx *ctx)
{
    gw_run run;

    gw_run_call(&run, cfg, rt, tenant, tool, key, body, len, ctx);
    gw_http_answer(r, cfg, tenant, tool, key, &run);
    gw_run_clear(&run);
}

/* A tool's entry: its name, payload version and schema, the policy the store applies to it
 * (idem_store_tool_policy(): windows, stored failures, identity), and its contract as MCP's
 * tools/list publishes it (contract.h). */
static json_t *tool_entry(const gw_config *cfg, const gw_tool *t, const idem_store *store)
{
    json_t *policy = NULL, *entry;

    if (idem_store_tool_policy(&policy, store, t->name, NULL) != 0)
        return NULL;
    entry = json_pack("{s:s, s:i, s:O, s:O, s:O, s:b, s:O, s:O, s:O, s:o}", "name", t->name,
                      "payload_version", t->payload_version, "arguments", t->schema, "retention_s",
                      json_object_get(policy, "retention_s"), "key_memory_s",
                      json_object_get(policy, "key_memory_s"), "key_required", 1, "stored_failures",
                      json_object_get(policy, "stored_failures"), "unstored_failures",
                      json_object_get(policy, "unstored_failures"), "identity",
                      json_object_get(policy, "identity"), "contract", gw_contract(cfg, t));
    json_decref(policy);
    return entry;
}

/* @doc (stolen) as a 200 application/json answer, or a 500 when it is NULL or out of memory. */
static void json_answer(gw_reply *r, json_t *doc)
{
    char *text = doc != NULL ? json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

    if (text == NULL || gw_reply_body(r, 200, "application/json", text, strlen(text)) != 0)
        gw_internal_error(r);
    free(text);
    json_decref(doc);
}

void gw_list_tools(gw_reply *r, const gw_config *cfg, const idem_store *store)
{
    json_t *tools = json_array();

    for (size_t i = 0; tools != NULL && i < cfg->ntools; i++) {
        if (json_array_append_new(tools, tool_entry(cfg, &cfg->tools[i], store)) != 0) {
            json_decref(tools);
            tools = NULL;
        }
    }
    json_answer(r, tools != NULL ? json_pack("{s:o}", "tools", tools) : NULL);
}

void gw_list_openapi(gw_reply *r, const gw_config *cfg)
{
    json_answer(r, gw_openapi(cfg));
}
