/* A tools/call's result for each of idem's statuses (README.md in this folder, "MCP"):
 * structuredContent for programs, a text for models saying what to do next, and isError
 * for every status but created and replayed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "mcp.h"

#define TEXT_MAX 2048

json_t *gw_mcp_refusal(const char *status, const char *key, const char *text, json_t *extra)
{
    json_t *sc = json_pack("{s:s, s:s?, s:b, s:n}", "status", status, "operation_id", key,
                           "replayed", 0, "receipt");
    json_t *result = NULL;

    if (sc != NULL && (extra == NULL || json_object_update(sc, extra) == 0))
        result = json_pack("{s:[{s:s, s:s}], s:O, s:b}", "content", "type", "text", "text", text,
                           "structuredContent", sc, "isError", 1);
    json_decref(sc);
    json_decref(extra);
    return result;
}

/* The stored answers: created, replayed, rejected. */
static void stored_text(char *text, size_t size, const gw_run *run, const char *key)
{
    if (run->out.status == IDEM_STATUS_CREATED)
        snprintf(text, size, "Done: the tool ran once under operation ID %s. Receipt: %.1500s", key,
                 run->out.receipt);
    else if (run->out.status == IDEM_STATUS_REPLAYED)
        snprintf(text, size,
                 "Already done: operation ID %s ran before; nothing ran again. The first "
                 "receipt: %.1500s",
                 key, run->out.receipt);
    else
        snprintf(text, size,
                 "Refused, finally: operation ID %s was refused and the refusal is stored; every "
                 "retry gets the same answer. Report it; do not retry under a new operation ID. "
                 "The refusal: %.1500s",
                 key, run->out.receipt);
}

/* Nobody knows whether it ran: expired, outcome_unknown. */
static void reconcile_text(char *text, size_t size, const gw_run *run, const gw_tenant *tenant,
                           const char *key)
{
    if (run->out.status == IDEM_STATUS_EXPIRED)
        snprintf(text, size,
                 "Expired, nothing ran: operation ID %s is older than the tool remembers, so "
                 "whether it ran cannot be told. Do not retry under a new operation ID; a person "
                 "must reconcile it (idem-reconcile show %s %s).",
                 key, tenant->name, key);
    else
        snprintf(text, size,
                 "Outcome unknown: the effect of operation ID %s may or may not have happened. "
                 "Do not retry under a new operation ID; a person must reconcile it "
                 "(idem-reconcile show %s %s). Until then every retry gets this answer.",
                 key, tenant->name, key);
}

/* The request was wrong: invalid, conflict. */
static void request_text(char *text, size_t size, const gw_run *run, const char *key)
{
    if (run->out.status == IDEM_STATUS_INVALID)
        snprintf(text, size,
                 "Invalid request, nothing ran: %.1000s. Fix the arguments and call again with "
                 "the same operation ID.",
                 run->err.message);
    else
        snprintf(text, size,
                 "Conflict, nothing ran: operation ID %s was already used for a different "
                 "request (%s changed). If this is the same action, send exactly its original "
                 "arguments; if it is a new action, allocate a new operation ID for it.",
                 key, run->err.field[0] != '\0' ? run->err.field : "the request");
}

/* Nothing stored, and a retry with the same ID may do: in_progress, effect_failed,
 * misconfigured, unavailable. */
static void retry_text(char *text, size_t size, const gw_run *run, const gw_config *cfg,
                       const char *key)
{
    if (run->out.status == IDEM_STATUS_IN_PROGRESS)
        snprintf(text, size,
                 "In progress: operation ID %s is running in another attempt. Retry in %u "
                 "seconds with the same operation ID; never with a new one.",
                 key, cfg->retry_after_s);
    else if (run->out.status == IDEM_STATUS_EFFECT_FAILED)
        snprintf(text, size,
                 "Failed, nothing was stored: %.1000s. A retry with the same operation ID runs "
                 "it again; retry only once the cause is fixed.",
                 run->err.message);
    else if (run->out.status == IDEM_STATUS_MISCONFIGURED)
        snprintf(text, size,
                 "The gateway's deployment is misconfigured; nothing ran. An operator must fix "
                 "it (the gateway's log says what); retrying now cannot help.");
    else
        snprintf(text, size,
                 "Unavailable, nothing ran: %.1000s. Retry in %u seconds with the same "
                 "operation ID; never with a new one.",
                 run->err.message, cfg->retry_after_s);
}

/* The next step for a model, from the status table. */
static void next_step(char *text, size_t size, const gw_run *run, const gw_config *cfg,
                      const gw_tenant *tenant, const char *key)
{
    switch (run->out.status) {
    case IDEM_STATUS_CREATED:
    case IDEM_STATUS_REPLAYED:
    case IDEM_STATUS_REJECTED:
        stored_text(text, size, run, key);
        return;
    case IDEM_STATUS_EXPIRED:
    case IDEM_STATUS_OUTCOME_UNKNOWN:
        reconcile_text(text, size, run, tenant, key);
        return;
    case IDEM_STATUS_INVALID:
    case IDEM_STATUS_CONFLICT:
        request_text(text, size, run, key);
        return;
    default:
        retry_text(text, size, run, cfg, key);
        return;
    }
}

/* structuredContent's members beyond status, operation_id, replayed and receipt. */
static int details(json_t *sc, const gw_run *run, const gw_config *cfg, const gw_tenant *tenant,
                   const char *key)
{
    idem_status st = run->out.status;
    char show[300];
    int rc = 0;

    if (st == IDEM_STATUS_IN_PROGRESS || st == IDEM_STATUS_UNAVAILABLE)
        rc |= json_object_set_new(sc, "retry_after", json_integer(cfg->retry_after_s));
    if (st == IDEM_STATUS_EXPIRED || st == IDEM_STATUS_OUTCOME_UNKNOWN) {
        snprintf(show, sizeof(show), "idem-reconcile show %s %s", tenant->name, key);
        rc |= json_object_set_new(sc, "reconciliation",
                                  json_pack("{s:s, s:s, s:s, s:s}", "kind", idem_status_name(st),
                                            "tenant", tenant->name, "operation_id", key, "show",
                                            show));
    }
    if (st == IDEM_STATUS_INVALID && run->arguments_invalid)
        rc |= json_object_set_new(sc, "pointer", json_string(run->pointer));
    else if (st == IDEM_STATUS_INVALID || st == IDEM_STATUS_CONFLICT)
        rc |= json_object_set_new(sc, "field", json_string(run->err.field));
    if (st == IDEM_STATUS_EFFECT_FAILED)
        rc |= json_object_set_new(sc, "sqlstate", json_string(run->err.sqlstate));
    if (st != IDEM_STATUS_CREATED && st != IDEM_STATUS_REPLAYED && st != IDEM_STATUS_REJECTED &&
        st != IDEM_STATUS_MISCONFIGURED)
        rc |= json_object_set_new(sc, "detail", json_string(run->err.message));
    return rc;
}

/* The receipt as JSON (it is JSON: the tool's SQL returned it), or null. */
static json_t *receipt(const gw_run *run)
{
    json_t *v = NULL;

    if (run->out.receipt != NULL)
        v = json_loadb(run->out.receipt, run->out.receipt_len, JSON_DECODE_ANY, NULL);
    return v != NULL ? v : json_null();
}

json_t *gw_mcp_result(const gw_run *run, const gw_config *cfg, const gw_tenant *tenant,
                      const char *key)
{
    idem_status st = run->out.status;
    int ok = st == IDEM_STATUS_CREATED || st == IDEM_STATUS_REPLAYED;
    char *text = malloc(TEXT_MAX);
    json_t *sc, *result = NULL;

    if (st == IDEM_STATUS_MISCONFIGURED)
        fprintf(stderr, "idem-gateway: misconfigured: %s%s%s\n", run->err.message,
                run->err.hint[0] != '\0' ? "; hint: " : "", run->err.hint);
    sc = json_pack("{s:s, s:s, s:b, s:o}", "status", idem_status_name(st), "operation_id", key,
                   "replayed", st == IDEM_STATUS_REPLAYED || st == IDEM_STATUS_REJECTED, "receipt",
                   receipt(run));
    if (text != NULL && sc != NULL && details(sc, run, cfg, tenant, key) == 0) {
        next_step(text, TEXT_MAX, run, cfg, tenant, key);
        result = json_pack("{s:[{s:s, s:s}], s:O, s:b}", "content", "type", "text", "text", text,
                           "structuredContent", sc, "isError", !ok);
    }
    json_decref(sc);
    free(text);
    return result;
}
