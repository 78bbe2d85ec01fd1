/* An `http` tool's resolver (README.md in this folder, "Resolvers"): the library's callback
 * (include/idem/external.h, "Resolvers") that makes the declared status request about a
 * downstream key and reads its answer. The gateway registers it for its tools; idem-reconcile
 * and idem-sweep register the same for theirs (probe.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "upstream.h"

#define REASON_MAX 1000 /* the longest reason the library records (external.h) */

/* Whether the answer @doc meets the resolver's condition on a done answer. */
static int meets_condition(const gw_resolver *res, const json_t *doc)
{
    const json_t *v;

    if (res->done_value == NULL)
        return 1;
    v = doc != NULL ? gw_upstream_resolve(doc, res->done_pointer) : NULL;
    return v != NULL && json_equal(v, res->done_value);
}

/* A status in done_status: the receipt, or unknown when the answer does not hold it. */
static int answer_done(idem_external_answer *answer, const gw_http *h, const gw_upstream_result *up,
                       idem_error *err)
{
    const gw_resolver *res = h->resolver;
    json_t *doc = up->len > 0 ? json_loadb(up->body, up->len, JSON_DECODE_ANY, NULL) : NULL;
    json_t *receipt = NULL;
    char ref[GW_REFERENCE_MAX + 1], why[REASON_MAX + 1];
    int rc;

    if (!meets_condition(res, doc)) {
        snprintf(why, sizeof(why), "HTTP %ld, but the answer %s at %s", up->status,
                 doc == NULL ? "is not JSON, so holds no value" : "holds another value",
                 res->done_pointer);
        rc = idem_external_answer_unknown(answer, why, err);
    } else if (res->receipt != NULL &&
               (doc == NULL || gw_upstream_resolve(doc, res->receipt) == NULL)) {
        snprintf(why, sizeof(why), "HTTP %ld, but the answer %s %s", up->status,
                 doc == NULL ? "is not JSON: no receipt at" : "has nothing at", res->receipt);
        rc = idem_external_answer_unknown(answer, why, err);
    } else {
        receipt = res->receipt != NULL
                      ? json_incref((json_t *)gw_upstream_resolve(doc, res->receipt))
                      : gw_upstream_document(up, 0);
        rc = receipt == NULL ? idem_external_answer_unknown(answer, "out of memory", err)
                             : idem_external_answer_done(
                                   answer, gw_upstream_reference(ref, h, receipt), receipt, err);
    }
    json_decref(receipt);
    json_decref(doc);
    return rc;
}

static int answer_status(idem_external_answer *answer, const gw_http *h,
                         const gw_upstream_result *up, idem_error *err)
{
    json_t *doc = NULL;
    char what[REASON_MAX + 1];
    int rc;

    snprintf(what, sizeof(what), "HTTP %ld", up->status);
    switch (h->resolver->verdicts[up->status]) {
    case IDEM_PROBE_DONE:
        return answer_done(answer, h, up, err);
    case IDEM_PROBE_NOT_DONE:
        return idem_external_answer_not_done(answer, what, err);
    case IDEM_PROBE_FAILED:
        if ((doc = gw_upstream_document(up, 1)) == NULL)
            return idem_external_answer_unknown(answer, "out of memory", err);
        rc = idem_external_answer_failed(answer, NULL, doc, what, err);
        json_decref(doc);
        return rc;
    default:
        snprintf(what, sizeof(what),
                 "HTTP %ld, which is in none of done_status, not_done_status and failed_status",
                 up->status);
        return idem_external_answer_unknown(answer, what, err);
    }
}

/* The library's callback: @ctx is the tool's gw_http. */
static int ask(idem_external_answer *answer, const idem_external_question *q, void *ctx)
{
    gw_http *h = ctx;
    gw_resolver *res = h->resolver;
    gw_upstream_result up;
    idem_error err = IDEM_ERROR_INIT;
    char *url = NULL, why[REASON_MAX + 1];
    int rc;

    pthread_mutex_lock(&res->lock);
    res->running++;
    pthread_mutex_unlock(&res->lock);
    memset(&up, 0, sizeof(up));
    if (gw_upstream_key_url(&url, res->url, q->downstream_key) != 0) {
        rc = idem_external_answer_unknown(answer, "out of memory", &err);
        goto done;
    }
    /* The library's limit for this question, never 0: libcurl takes 0 for no limit. */
    gw_upstream_ask(&up, h, url,
                    q->timeout_ms == 0                ? 1
                    : q->timeout_ms < res->timeout_ms ? q->timeout_ms
                                                      : res->timeout_ms);
    if (up.status >= GW_STATUS_MIN && up.status <= GW_STATUS_MAX) {
        rc = answer_status(answer, h, &up, &err);
    } else {
        snprintf(why, sizeof(why), "the status request had no answer: %s",
                 up.status != 0 ? "an HTTP status out of range" : up.error);
        rc = idem_external_answer_unknown(answer, why, &err);
    }
done:
    gw_upstream_result_clear(&up);
    free(url);
    pthread_mutex_lock(&res->lock);
    if (--res->running == 0)
        pthread_cond_broadcast(&res->idle);
    pthread_mutex_unlock(&res->lock);
    return rc;
}

int gw_resolver_register(gw_http *h, const char *tool, char *why, size_t size)
{
    idem_external_resolver r = IDEM_EXTERNAL_RESOLVER_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char name[160];

    snprintf(name, sizeof(name), "status request of %.128s", tool);
    r.probe = ask;
    r.ctx = h;
    r.name = strlen(name) <= 128 ? name : NULL;
    r.timeout_ms = h->resolver->timeout_ms;
    if (idem_external_set_resolver(h->ext, tool, &r, &err) != 0)
        return snprintf(why, size, "cannot register its resolver: %s%s%s", err.field,
                        err.field[0] != '\0' ? ": " : "", err.message),
               -1;
    return 0;
}

void gw_resolver_wait(gw_resolver *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->lock);
    while (r->running > 0)
        pthread_cond_wait(&r->idle, &r->lock);
    pthread_mutex_unlock(&r->lock);
}

void gw_resolver_free(gw_resolver *r)
{
    if (r == NULL)
        return;
    gw_resolver_wait(r);
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->idle);
    free(r);
}
