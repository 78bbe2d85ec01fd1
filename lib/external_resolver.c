/* Resolvers (external.h, "Resolvers"): registering one per tool, the answers a resolver
 * gives, and asking it in a thread of its own, waited for at most its time limit. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/jcs.h"

#include "clock.h"
#include "error.h"
#include "external_internal.h"

/* The longest time limit a resolver may ask for: ten minutes. */
#define MAX_RESOLVER_TIMEOUT_MS 600000u

static const idem_external_resolver resolver_defaults = IDEM_EXTERNAL_RESOLVER_INIT;

int idem_external_resolver_init(idem_external_resolver *resolver, unsigned int version)
{
    return idem__struct_init(resolver, &resolver_defaults, sizeof(resolver_defaults), version,
                             IDEM_EXTERNAL_RESOLVER_VERSION);
}

static int check_resolver(const idem_external_resolver *r, idem_error *err)
{
    int rc;

    if (r == NULL)
        return idem__error_field(err, IDEM_EINVAL, "resolver", "must not be NULL");
    if ((rc = idem__check_version(err, r->version, IDEM_EXTERNAL_RESOLVER_VERSION, "resolver")) !=
        0)
        return rc;
    if (r->probe == NULL)
        return idem__error_field(err, IDEM_EINVAL, "resolver.probe",
                                 "must not be NULL: the callback that asks the provider");
    if (r->timeout_ms == 0 || r->timeout_ms > MAX_RESOLVER_TIMEOUT_MS)
        return idem__error_field(err, IDEM_EINVAL, "resolver.timeout_ms", "must be 1 to %u, got %u",
                                 MAX_RESOLVER_TIMEOUT_MS, r->timeout_ms);
    return idem__external_check_text("resolver.name", r->name, IDEM__RESOLVER_NAME_MAX,
                                     IDEM__TEXT_UTF8, err);
}

/* The entry for @tool (locked); NULL when none. */
static idem__resolver *entry_for(idem_external *ext, const char *tool)
{
    for (size_t i = 0; i < ext->nresolvers; i++)
        if (strcmp(ext->resolvers[i].tool, tool) == 0)
            return &ext->resolvers[i];
    return NULL;
}

/* A new entry for @tool at the end (locked); NULL when out of memory. */
static idem__resolver *add_entry(idem_external *ext)
{
    idem__resolver *grown = realloc(ext->resolvers, (ext->nresolvers + 1) * sizeof(*grown));

    if (grown == NULL)
        return NULL;
    ext->resolvers = grown;
    return &ext->resolvers[ext->nresolvers++];
}

int idem_external_set_resolver(idem_external *ext, const char *tool,
                               const idem_external_resolver *resolver, idem_error *err)
{
    idem__resolver copy, *e;
    int rc;

    if (ext == NULL)
        return idem__error_field(err, IDEM_EINVAL, "ext", "must not be NULL");
    if ((rc = idem_validate_tool(tool, err)) != 0 || (rc = check_resolver(resolver, err)) != 0)
        return rc;
    memset(&copy, 0, sizeof(copy));
    snprintf(copy.tool, sizeof(copy.tool), "%s", tool);
    if (resolver->name != NULL)
        snprintf(copy.name, sizeof(copy.name), "%s", resolver->name);
    else
        snprintf(copy.name, sizeof(copy.name), "resolver of %s", tool);
    copy.probe = resolver->probe;
    copy.ctx = resolver->ctx;
    copy.timeout_ms = resolver->timeout_ms;
    pthread_mutex_lock(&ext->resolvers_lock);
    if ((e = entry_for(ext, tool)) == NULL)
        e = add_entry(ext);
    if (e != NULL)
        *e = copy;
    pthread_mutex_unlock(&ext->resolvers_lock);
    if (e == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "resolver: out of memory");
    return 0;
}

int idem__external_resolver_find(idem__resolver *out, idem_external *ext, const char *tool)
{
    const idem__resolver *e;

    pthread_mutex_lock(&ext->resolvers_lock);
    e = entry_for(ext, tool);
    if (e != NULL)
        *out = *e;
    pthread_mutex_unlock(&ext->resolvers_lock);
    return e != NULL;
}

char *idem__external_resolver_tools(idem_external *ext)
{
    char *list, *at;

    pthread_mutex_lock(&ext->resolvers_lock);
    list = malloc(ext->nresolvers * (IDEM_TOOL_MAX + 1) + 3);
    if (list != NULL) {
        at = list;
        *at++ = '{';
        for (size_t i = 0; i < ext->nresolvers; i++)
            at += sprintf(at, "%s%s", i > 0 ? "," : "", ext->resolvers[i].tool);
        strcpy(at, "}");
    }
    pthread_mutex_unlock(&ext->resolvers_lock);
    return list;
}

void idem__external_answer_clear(idem_external_answer *a)
{
    free(a->problem);
    free(a->provider_ref);
    free(a->result);
    free(a->reason);
    memset(a, 0, sizeof(*a));
}

/* What the resolver gave cannot be used: keep the first reason why. */
static void unusable(idem_external_answer *a, const char *why)
{
    if (a->problem == NULL)
        a->problem = strdup(why);
}

/* A copy of @s, or NULL for NULL; *failed set when out of memory. */
static char *copy_or_null(const char *s, int *failed)
{
    char *c = s != NULL ? strdup(s) : NULL;

    *failed |= s != NULL && c == NULL;
    return c;
}

/* Check and copy one answer into @a; what cannot be used makes @a unusable, saying why. */
static int answer(idem_external_answer *a, idem_external_verdict verdict, const char *provider_ref,
                  const json_t *result, const char *reason, idem_error *err)
{
    int rc = 0, failed = 0;

    if (a->given || a->problem != NULL)
        rc = idem__error_field(err, IDEM_EINVAL, "answer", "was already given: answer once");
    else if ((verdict == IDEM_PROBE_DONE || verdict == IDEM_PROBE_FAILED) && result == NULL)
        rc = idem__error_field(err, IDEM_EINVAL, "result",
                               "must not be NULL: it is stored as the receipt");
    else if (verdict == IDEM_PROBE_UNKNOWN && reason == NULL)
        rc = idem__error_field(err, IDEM_EINVAL, "reason",
                               "must not be NULL: say why it is unknown");
    if (rc == 0)
        rc = idem__external_check_text("provider_ref", provider_ref, IDEM__PROVIDER_REF_MAX,
                                       IDEM__TEXT_ASCII, err);
    if (rc == 0)
        rc = idem__external_check_text("reason", reason, IDEM__ERROR_TEXT_MAX, IDEM__TEXT_LINES,
                                       err);
    if (rc == 0 && result != NULL &&
        (rc = idem_jcs_serialize(&a->result, &a->result_len, result, err)) != 0)
        idem__error_context(err, "result");
    if (rc != 0) {
        unusable(a, err->message);
        return rc;
    }
    a->provider_ref = copy_or_null(provider_ref, &failed);
    a->reason = copy_or_null(reason, &failed);
    if (failed)
        return idem__error_set(err, IDEM_ENOMEM, "answer: out of memory");
    a->verdict = verdict;
    a->given = 1;
    return 0;
}

/* The answer calls' common entry: @err may be NULL. */
static int give(idem_external_answer *a, idem_external_verdict verdict, const char *provider_ref,
                const json_t *result, const char *reason, idem_error *err)
{
    idem_error local = IDEM_ERROR_INIT;

    err = err != NULL ? err : &local;
    if (a == NULL)
        return idem__error_field(err, IDEM_EINVAL, "answer", "must not be NULL");
    return answer(a, verdict, provider_ref, result, reason, err);
}

int idem_external_answer_done(idem_external_answer *a, const char *provider_ref,
                              const json_t *result, idem_error *err)
{
    return give(a, IDEM_PROBE_DONE, provider_ref, result, NULL, err);
}

int idem_external_answer_failed(idem_external_answer *a, const char *provider_ref,
                                const json_t *result, const char *reason, idem_error *err)
{
    return give(a, IDEM_PROBE_FAILED, provider_ref, result, reason, err);
}

int idem_external_answer_not_done(idem_external_answer *a, const char *reason, idem_error *err)
{
    return give(a, IDEM_PROBE_NOT_DONE, NULL, NULL, reason, err);
}

int idem_external_answer_unknown(idem_external_answer *a, const char *reason, idem_error *err)
{
    return give(a, IDEM_PROBE_UNKNOWN, NULL, NULL, reason, err);
}

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
    k->tenant = copy_or_null(q->tenant, &failed);
    k->operation_id = copy_or_null(q->operation_id, &failed);
    k->tool = copy_or_null(q->tool, &failed);
    k->downstream_key = copy_or_null(q->downstream_key, &failed);
    k->provider_ref = copy_or_null(q->provider_ref, &failed);
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

/* An unknown answer saying @fmt. */
static int unknown(idem_external_answer *out, const char *why)
{
    idem__external_answer_clear(out);
    out->verdict = IDEM_PROBE_UNKNOWN;
    out->reason = strdup(why);
    return out->reason != NULL ? 0 : IDEM_ENOMEM;
}

/* Take the finished question's answer into *out (locked). */
static int take_answer(idem_external_answer *out, asking *k)
{
    char why[IDEM__ERROR_TEXT_MAX];

    if (k->rc != 0) {
        snprintf(why, sizeof(why), "resolver %s failed (it returned %d)", k->r.name, k->rc);
        return unknown(out, why);
    }
    if (k->answer.problem != NULL) {
        snprintf(why, sizeof(why), "resolver %s answered what cannot be used: %s", k->r.name,
                 k->answer.problem);
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

/* Wait for @k until @timeout_ms from @start; then take its answer, or say there was none. */
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
