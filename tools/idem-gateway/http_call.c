/* An `http` tool's call as an idem external effect: begin (the key claimed, the
 * downstream key made, a lease taken), one dispatch upstream, the report; transient
 * answers retried with the same downstream key by the tool's retry policy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "core/clock.h"
#include "metrics.h"
#include "upstream.h"

/* Reports that could not be made (the database unavailable) are made again this often,
 * after 200 ms, then 400 ms: the store's deadline bounds each. */
#define REPORT_TRIES      3
#define REPORT_BACKOFF_MS 100U

/* @out and @err as @run's outcome; @run takes @out's receipt (@out is left empty). */
static void settle(gw_run *run, idem_outcome *out, const idem_error *err)
{
    idem_outcome empty = IDEM_OUTCOME_INIT;

    idem_outcome_clear(&run->out);
    run->out = *out;
    *out = empty;
    run->err = *err;
}

/* What went back and forth, on standard error: the status or libcurl's words, never a
 * header or a body. */
static void log_attempt(const gw_tool *tool, const gw_tenant *tenant, const char *key, int n,
                        const gw_upstream_result *res)
{
    static const char *const names[] = {"", "success", "final", "transient", "unknown"};

    if (res->status != 0)
        fprintf(stderr, "idem-gateway: %s: %s %s: attempt %d: HTTP %ld (%s)\n", tool->name,
                tenant->name, key, n, res->status, names[res->cls]);
    else
        fprintf(stderr, "idem-gateway: %s: %s %s: attempt %d: no answer (%s): %s\n", tool->name,
                tenant->name, key, n, names[res->cls], res->error);
}

/* One report of @res, made again while the database is unavailable. */
static int report(idem_outcome *out, idem_external_attempt *a, const gw_http *h,
                  const gw_upstream_result *res, idem_error *err)
{
    json_t *doc = NULL;
    char what[sizeof(res->error) + 32], ref[GW_REFERENCE_MAX + 1];
    int rc = IDEM_EUNAVAIL;

    if (res->cls == GW_CLASS_SUCCESS || res->cls == GW_CLASS_FINAL)
        if ((doc = gw_upstream_document(res, res->cls == GW_CLASS_FINAL)) == NULL)
            return IDEM_ENOMEM;
    if (res->status != 0)
        snprintf(what, sizeof(what), "HTTP %ld", res->status);
    else
        snprintf(what, sizeof(what), "%s", res->error);
    for (int i = 0; i < REPORT_TRIES && rc == IDEM_EUNAVAIL; i++) {
        if (i > 0)
            idem__sleep_ms(REPORT_BACKOFF_MS << i);
        idem_outcome_clear(out);
        if (res->cls == GW_CLASS_SUCCESS)
            rc = idem_external_complete(out, a, gw_upstream_reference(ref, h, doc), doc, err);
        else if (res->cls == GW_CLASS_FINAL)
            rc = idem_external_fail(out, a, IDEM_EXTERNAL_FINAL, doc, what, err);
        else if (res->cls == GW_CLASS_TRANSIENT)
            rc = idem_external_fail(out, a, IDEM_EXTERNAL_TRANSIENT, NULL, what, err);
        else
            rc = idem_external_unknown(out, a, NULL, what, err);
    }
    json_decref(doc);
    return rc;
}

static void spent(gw_run *run, const gw_upstream_result *res, unsigned int attempts)
{
    run->out.status = IDEM_STATUS_UNAVAILABLE;
    if (res->status != 0)
        snprintf(run->err.message, sizeof(run->err.message),
                 "the upstream answered HTTP %ld to %u attempt%s; nothing was done: retry later "
                 "with the same key",
                 res->status, attempts, attempts == 1 ? "" : "s");
    else
        snprintf(run->err.message, sizeof(run->err.message),
                 "the upstream could not be reached in %u attempt%s (%.300s); nothing was sent: "
                 "retry later with the same key",
                 attempts, attempts == 1 ? "" : "s", res->error);
}

/* One attempt: begin, send, report. 1 when a transient answer may be retried (@res filled),
 * 0 when @run holds the outcome. */
static int attempt(gw_run *run, gw_upstream *client, const gw_tenant *tenant, const gw_tool *tool,
                   const idem_request *req, const gw_upstream_request *up, gw_upstream_result *res)
{
    idem_external_attempt *a = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    int rc, again = 0;

    idem_external_begin(&a, &out, client->ext, req, &err);
    if (a == NULL) {
        settle(run, &out, &err);
        goto done;
    }
    gw_upstream_send(res, client, up, idem_external_attempt_downstream_key(a));
    gw_metrics_upstream(tool->name, res->status != 0 ? "sent"
                                    : res->timed_out ? "timeout"
                                                     : "error");
    if (res->cls != GW_CLASS_SUCCESS)
        log_attempt(tool, tenant, req->operation_id, idem_external_attempt_number(a), res);
    rc = report(&out, a, tool->http, res, &err);
    if (rc == IDEM_EEFFECT && res->cls == GW_CLASS_TRANSIENT)
        again = 1;
    else if (rc == IDEM_ENOMEM)
        run->out_of_memory = 1;
    else
        settle(run, &out, &err);
done:
    idem_external_attempt_free(a);
    idem_outcome_clear(&out);
    return again;
}

static void dispatch(gw_run *run, gw_upstream *client, const gw_tenant *tenant, const gw_tool *tool,
                     const idem_request *req, const gw_upstream_request *up)
{
    gw_upstream_result res;
    idem_retry_state st;
    unsigned int delay;

    memset(&res, 0, sizeof(res));
    idem_retry_state_init(&st);
    while (attempt(run, client, tenant, tool, req, up, &res)) {
        if (!idem_retry_next(&delay, &st, &tool->http->retry, NULL, IDEM_STATUS_UNAVAILABLE)) {
            spent(run, &res, st.attempts);
            gw_upstream_result_clear(&res);
            return;
        }
        gw_upstream_result_clear(&res);
        idem__sleep_ms(delay);
    }
    gw_upstream_result_clear(&res);
}

/* The trace context the upstream request carries: @ctx's trace with the gateway's span as
 * the parent. 0, or -1 when out of memory. */
static int trace_upstream(gw_upstream_request *up, const gw_call_ctx *ctx)
{
    char parent[GW_TRACEPARENT_LEN + 1];

    if (ctx == NULL)
        return 0;
    return gw_upstream_trace(up, gw_trace_header(parent, &ctx->trace),
                             ctx->trace.tracestate[0] != '\0' ? ctx->trace.tracestate : NULL);
}

void gw_http_run(gw_run *run, const gw_config *cfg, gw_upstream *client, const gw_tenant *tenant,
                 const gw_tool *tool, const char *key, const char *body, size_t len,
                 const gw_call_ctx *ctx)
{
    idem_request req = IDEM_REQUEST_INIT;
    idem_json_options opts = IDEM_JSON_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    gw_upstream_request up = {NULL, NULL, NULL, NULL};
    json_t *args = NULL;
    gw_pointer at;
    char why[600];

    gw_pointer_init(&at);
    opts.max_bytes = cfg->max_body_bytes;
    if (idem_json_parse_arguments(&args, body, len, &opts, &err) != 0 ||
        gw_upstream_prepare(&up, tool->http, args, &at, why, sizeof(why)) != 0) {
        gw_run_invalid(run, at.text, "%.500s", args == NULL ? err.message : why);
        json_decref(args);
        return;
    }
    json_decref(args);
    if (trace_upstream(&up, ctx) != 0) {
        run->out_of_memory = 1;
        gw_upstream_request_clear(&up);
        return;
    }
    gw_request(&req, tenant, tool, key, body, len, ctx != NULL ? ctx->trace_id : NULL);
    dispatch(run, client, tenant, tool, &req, &up);
    gw_upstream_request_clear(&up);
    if (run->out.status == IDEM_STATUS_OUTCOME_UNKNOWN)
        gw_metrics_upstream(tool->name, "unknown");
}
