/* Resolvers (external.h, "Resolvers"): registering one per tool, and the answers a
 * resolver gives. Asking one is external_ask.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/jcs.h"

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

char *idem__external_copy_or_null(const char *s, int *failed)
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
    a->provider_ref = idem__external_copy_or_null(provider_ref, &failed);
    a->reason = idem__external_copy_or_null(reason, &failed);
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
