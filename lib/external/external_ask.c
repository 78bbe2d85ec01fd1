/* Asking a resolver (external.h, "Resolvers"): in a thread of its own, waited for at most
 * its time limit; one that overruns it is left to finish alone, its answer discarded. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "error.h"
#include "external_internal.h"

/* One question, shared by the thread that runs the resolver and the caller that waits for
 * it: the last of the two to let go frees it (a caller that stops waiting leaves it to the
 * thread). */
typedef struct asking {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int refs;
    int finished;
    int rc; /* the resolver's return */
    idem__resolver r;
    char *tenant, *operation_id, *tool, *downstream_key, *provider_ref;
    idem_external_question q;
    idem_external_answer answer;
} asking;

static void asking_free(asking *k)
{
    pthread_cond_destroy(&k->cond);
    pthread_mutex_destroy(&k->lock);
    idem__external_answer_clear(&k->answer);
    free(k->tenant);
    free(k->operation_id);
    free(k->tool);
    free(k->downstream_key);
    free(k->provider_ref);
    free(k);
}

static void let_go(asking *k)
{
    int last;

    pthread_mutex_lock(&k->lock);
    last = --k->refs == 0;
    pthread_mutex_unlock(&k->lock);
    if (last)
        asking_free(k);
}

static void *run_resolver(void *arg)
{
    asking *k = arg;
    int rc = k->r.probe(&k->answer, &k->q, k->r.ctx);

    pthread_mutex_lock(&k->lock);
    k->rc = rc;
    k->finished = 1;
    pthread_cond_signal(&k->cond);
    pthread_mutex_unlock(&k->lock);
    let_go(k);
    return NULL;
}

/* A question with copies of @q's strings; NULL when out of memory. */
static asking *asking_new(const idem__resolver *r, const idem_external_question *q,
                          unsigned int timeout_ms)
{
    asking *k = calloc(1, sizeof(*k));
    pthread_condattr_t attr;
    int failed = 0;

    if (k == NULL)
        return NULL;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&k->cond, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&k->lock, NULL);
    k->r = *r;
    k->tenant = idem__external_copy_or_null(q->tenant, &failed);
    k->operation_id = idem__external_copy_or_null(q->operation_id, &failed);
    k->tool = idem__external_copy_or_null(q->tool, &failed);
    k->downstream_key = idem__external_copy_or_null(q->downstream_key, &failed);
    k->provider_ref = idem__external_copy_or_null(q->provider_ref, &failed);
    k->q = (idem_external_question){IDEM_EXTERNAL_QUESTION_VERSION,
                                    k->tenant,
                                    k->operation_id,
                                    k->tool,
                                    q->payload_version,
                                    k->downstream_key,
                                    k->provider_ref,
                                    timeout_ms};
    if (failed) {
        asking_free(k);
        return NULL;
    }
    return k;
}

/* An unknown answer saying @why. */
static int unknown(idem_external_answer *out, const char *why)
{
    idem__external_answer_clear(out);
    out->verdict = IDEM_PROBE_UNKNOWN;
    out->reason = strdup(why);
    return out->reason != NULL ? 0 : IDEM_ENOMEM;
}

/* Take the finished question's answer into *out (locked): what made it unusable first. */
static int take_answer(idem_external_answer *out, asking *k)
{
    char why[IDEM__ERROR_TEXT_MAX];

    if (k->answer.problem != NULL) {
        snprintf(why, sizeof(why), "resolver %s answered what cannot be used: %s", k->r.name,
                 k->answer.problem);
        return unknown(out, why);
    }
    if (k->rc != 0) {
        snprintf(why, sizeof(why), "resolver %s failed (it returned %d)", k->r.name, k->rc);
        return unknown(out, why);
    }
    if (!k->answer.given) {
        snprintf(why, sizeof(why), "resolver %s returned without an answer", k->r.name);
        return unknown(out, why);
    }
    *out = k->answer;
    memset(&k->answer, 0, sizeof(k->answer));
    return 0;
}

/* Wait for @k at most @timeout_ms; then take its answer, or say there was none. */
static int wait_answer(idem_external_answer *out, asking *k, unsigned int timeout_ms)
{
    char why[IDEM__ERROR_TEXT_MAX];
    struct timespec until;
    int rc;

    idem__deadline_after(&until, timeout_ms);
    pthread_mutex_lock(&k->lock);
    while (!k->finished && pthread_cond_timedwait(&k->cond, &k->lock, &until) != ETIMEDOUT)
        ;
    if (k->finished) {
        rc = take_answer(out, k);
    } else {
        snprintf(why, sizeof(why), "resolver %s gave no answer within %u ms", k->r.name,
                 timeout_ms);
        rc = unknown(out, why);
    }
    pthread_mutex_unlock(&k->lock);
    return rc;
}

int idem__external_ask(idem_external_answer *out, const idem__resolver *r,
                       const idem_external_question *q, unsigned int timeout_ms, idem_error *err)
{
    asking *k = asking_new(r, q, timeout_ms);
    uint64_t start = idem__now_ms();
    pthread_attr_t attr;
    pthread_t thread;
    char why[IDEM__ERROR_TEXT_MAX];
    int rc;

    memset(out, 0, sizeof(*out));
    if (k == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "resolver: out of memory");
    k->refs = 2;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&thread, &attr, run_resolver, k);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        asking_free(k);
        snprintf(why, sizeof(why), "resolver %s could not be started: %s", r->name, strerror(rc));
        rc = unknown(out, why);
    } else {
        rc = wait_answer(out, k, timeout_ms);
        let_go(k);
    }
    out->took_ms = (unsigned int)(idem__now_ms() - start);
    if (rc != 0)
        return idem__error_set(err, IDEM_ENOMEM, "resolver: out of memory");
    return 0;
}
