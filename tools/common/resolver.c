/* An `http` tool's resolver at work (resolver.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resolver.h"
#include "upstream.h"

#define REASON_MAX 1000 /* the longest reason the library records (external.h) */

struct gw_resolver_run {
    gw_upstream *up;         /* borrowed: the tool's client */
    const gw_resolver *decl; /* borrowed: up->decl->resolver */
    /* The status requests under way, waited for by gw_resolver_stop(): */
    pthread_mutex_t lock;
    pthread_cond_t idle;
    unsigned int running;
};

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

/* The library's callback: @ctx is the tool's gw_resolver_run. */
static int ask(idem_external_answer *answer, const idem_external_question *q, void *ctx)
{
    gw_resolver_run *run = ctx;
    const gw_http *h = run->up->decl;
    const gw_resolver *res = run->decl;
    gw_upstream_result up;
    idem_error err = IDEM_ERROR_INIT;
    char *url = NULL, why[REASON_MAX + 1];
    int rc;

    pthread_mutex_lock(&run->lock);
    run->running++;
    pthread_mutex_unlock(&run->lock);
    memset(&up, 0, sizeof(up));
    if (gw_upstream_key_url(&url, res->url, q->downstream_key) != 0) {
        rc = idem_external_answer_unknown(answer, "out of memory", &err);
        goto done;
    }
    /* The library's limit for this question, never 0: libcurl takes 0 for no limit. */
    gw_upstream_ask(&up, run->up, url,
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
    pthread_mutex_lock(&run->lock);
    if (--run->running == 0)
        pthread_cond_broadcast(&run->idle);
    pthread_mutex_unlock(&run->lock);
    return rc;
}

static gw_resolver_run *run_new(gw_upstream *u)
{
    gw_resolver_run *run = calloc(1, sizeof(*run));

    if (run == NULL)
        return NULL;
    run->up = u;
    run->decl = u->decl->resolver;
    pthread_mutex_init(&run->lock, NULL);
    pthread_cond_init(&run->idle, NULL);
    return run;
}

int gw_resolver_start(gw_resolver_run **out, gw_upstream *u, const char *tool, char *why,
                      size_t size)
{
    idem_external_resolver r = IDEM_EXTERNAL_RESOLVER_INIT;
    idem_error err = IDEM_ERROR_INIT;
    gw_resolver_run *run = run_new(u);
    char name[160];

    if (run == NULL)
        return snprintf(why, size, "cannot register its resolver: out of memory"), -1;
    snprintf(name, sizeof(name), "status request of %.128s", tool);
    r.probe = ask;
    r.ctx = run;
    r.name = strlen(name) <= 128 ? name : NULL;
    r.timeout_ms = run->decl->timeout_ms;
    if (idem_external_set_resolver(u->ext, tool, &r, &err) != 0) {
        snprintf(why, size, "cannot register its resolver: %s%s%s", err.field,
                 err.field[0] != '\0' ? ": " : "", err.message);
        gw_resolver_stop(run);
        return -1;
    }
    *out = run;
    return 0;
}

void gw_resolver_stop(gw_resolver_run *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->lock);
    while (r->running > 0)
        pthread_cond_wait(&r->idle, &r->lock);
    pthread_mutex_unlock(&r->lock);
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->idle);
    free(r);
}
