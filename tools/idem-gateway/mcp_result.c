/* A tools/call's result for each of idem's statuses (README.md in this folder, "MCP"):
 * structuredContent for programs, a text for models saying what to do next, and isError
 * for every status but created and replayed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"
#include "mcp.h"

#define TEXT_MAX 2048

json_t *gw_mcp_refusal(gw_outcome o, const char *key, const gw_answer_vars *v, json_t *extra)
{
    const gw_answer *a = gw_answer_of(o);
    json_t *sc = json_pack("{s:s, s:s?, s:b, s:n}", "status", a->status, "operation_id", key,
                           "replayed", a->replayed, "receipt");
    json_t *result = NULL;
    char text[TEXT_MAX];

    gw_answer_text(text, sizeof(text), a, v);
    if (sc != NULL && (extra == NULL || json_object_update(sc, extra) == 0))
        result = json_pack("{s:[{s:s, s:s}], s:O, s:b}", "content", "type", "text", "text", text,
                           "structuredContent", sc, "isError", a->is_error);
    json_decref(sc);
    json_decref(extra);
    return result;
}

/* structuredContent's members beyond status, operation_id, replayed and receipt. */
static int details(json_t *sc, gw_outcome o, const gw_run *run, const gw_config *cfg,
                   const gw_tenant *tenant, const char *key)
{
    const gw_answer *a = gw_answer_of(o);
    char show[300];
    int rc = 0;

    if (a->retry_after)
        rc |= json_object_set_new(sc, "retry_after", json_integer(gw_run_retry_after(run, cfg)));
    if (o == GW_OUTCOME_EXPIRED || o == GW_OUTCOME_OUTCOME_UNKNOWN) {
        snprintf(show, sizeof(show), "idem-reconcile show %s %s", tenant->name, key);
        rc |= json_object_set_new(sc, "reconciliation",
                                  json_pack("{s:s, s:s, s:s, s:s}", "kind", a->status, "tenant",
                                            tenant->name, "operation_id", key, "show", show));
    }
    if (o == GW_OUTCOME_INVALID_ARGUMENTS)
        rc |= json_object_set_new(sc, "pointer", json_string(run->pointer));
    else if (o == GW_OUTCOME_INVALID_KEY || o == GW_OUTCOME_CONFLICT)
        rc |= json_object_set_new(sc, "field", json_string(run->err.field));
    if (o == GW_OUTCOME_EFFECT_FAILED)
        rc |= json_object_set_new(sc, "sqlstate", json_string(run->err.sqlstate));
    if (o == GW_OUTCOME_RATE_LIMITED)
        rc |= json_object_set_new(sc, "budget", json_string(gw_run_budget(run)));
    if (a->is_error && o != GW_OUTCOME_REJECTED && o != GW_OUTCOME_MISCONFIGURED)
        rc |= json_object_set_new(sc, "detail", json_string(run->err.message));
    return rc;
}

/* The receipt's JSON text as a string, written into the answer as that text (mcp.h): a
 * parse would round its numbers, and refuse an integer beyond 64 bits. The text is checked
 * to be JSON as the parser took it before (its integers read as reals, so that one too big
 * for 64 bits passes); null when there is no receipt or it is not JSON. */
static json_t *receipt(const gw_run *run)
{
    json_t *parsed = NULL, *text = NULL;

    if (run->out.receipt != NULL)
        parsed = json_loadb(run->out.receipt, run->out.receipt_len,
                            JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, NULL);
    if (parsed != NULL)
        text = json_stringn(run->out.receipt, run->out.receipt_len);
    json_decref(parsed);
    return text != NULL ? text : json_null();
}

json_t *gw_mcp_result(const gw_run *run, const gw_config *cfg, const gw_tenant *tenant,
                      const char *key)
{
    gw_outcome o = gw_run_outcome(run);
    const gw_answer *a = gw_answer_of(o);
    gw_answer_vars v = {
        key,  tenant->name, run->err.message, NULL, run->out.receipt, gw_run_retry_after(run, cfg),
        NULL, NULL};
    char *text = malloc(TEXT_MAX);
    json_t *sc, *result = NULL;

    v.field = run->err.field[0] != '\0' ? run->err.field : "the request";
    if (o == GW_OUTCOME_MISCONFIGURED)
        gw_log_misconfigured(&run->err);
    sc = json_pack("{s:s, s:s, s:b, s:o}", "status", gw_run_status(run), "operation_id", key,
                   "replayed", a->replayed, "receipt", receipt(run));
    if (text != NULL && sc != NULL && details(sc, o, run, cfg, tenant, key) == 0) {
        gw_answer_text(text, TEXT_MAX, a, &v);
        result = json_pack("{s:[{s:s, s:s}], s:O, s:b}", "content", "type", "text", "text", text,
                           "structuredContent", sc, "isError", a->is_error);
    }
    json_decref(sc);
    free(text);
    return result;
}
