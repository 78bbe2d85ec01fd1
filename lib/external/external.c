/* External effects (include/idem/external.h): the path's object, its settings, attempts and
 * the checks every report shares. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "external_internal.h"
#include "jcs.h"

#define MAX_LEASE_MS 86400000u
#define MAX_WAIT_MS  60000u

static const idem_external_options external_defaults = IDEM_EXTERNAL_OPTIONS_INIT;

int idem_external_options_init(idem_external_options *opts, unsigned int version)
{
    return idem__struct_init(opts, &external_defaults, sizeof(external_defaults), version,
                             IDEM_EXTERNAL_OPTIONS_VERSION);
}

static int check_options(const idem_external_options *o, idem_error *err)
{
    int rc = idem__check_version(err, o->version, IDEM_EXTERNAL_OPTIONS_VERSION, "options");

    if (rc != 0)
        return rc;
    if (o->lease_ms < 100 || o->lease_ms > MAX_LEASE_MS)
        return idem__error_field(err, IDEM_EINVAL, "options.lease_ms", "must be 100 to %u, got %u",
                                 MAX_LEASE_MS, o->lease_ms);
    if (o->claim_wait_ms == 0 || o->claim_wait_ms > MAX_WAIT_MS)
        return idem__error_field(err, IDEM_EINVAL, "options.claim_wait_ms",
                                 "must be 1 to %u, got %u", MAX_WAIT_MS, o->claim_wait_ms);
    if (o->outbox_backoff_base_ms == 0 || o->outbox_backoff_max_ms < o->outbox_backoff_base_ms)
        return idem__error_field(err, IDEM_EINVAL, "options.outbox_backoff_base_ms",
                                 "must be > 0 and at most outbox_backoff_max_ms");
    return 0;
}

int idem_external_new(idem_external **out, idem_store *store, const idem_external_options *opts,
                      idem_error *err)
{
    idem_external *ext;
    int rc;

    if (out == NULL)
        return idem__error_field(err, IDEM_EINVAL, "out", "must not be NULL");
    if (store == NULL)
        return idem__error_field(err, IDEM_EINVAL, "store", "must not be NULL");
    if (opts == NULL)
        opts = &external_defaults;
    if ((rc = check_options(opts, err)) != 0)
        return rc;
    ext = calloc(1, sizeof(*ext));
    if (ext == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "external: out of memory");
    ext->store = store;
    ext->opts = *opts;
    ext->outbox_backoff = (idem_retry_policy){
        IDEM_RETRY_POLICY_VERSION, 0, opts->outbox_backoff_base_ms, opts->outbox_backoff_max_ms, 0};
    snprintf(ext->lease_ms, sizeof(ext->lease_ms), "%u", opts->lease_ms);
    pthread_mutex_init(&ext->resolvers_lock, NULL);
    *out = ext;
    return 0;
}

void idem_external_free(idem_external *ext)
{
    if (ext == NULL)
        return;
    pthread_mutex_destroy(&ext->resolvers_lock);
    free(ext->resolvers);
    free(ext);
}

idem_external_attempt *idem__external_attempt_new(idem_external *ext, const char *tenant,
                                                  const char *operation_id, const char *tool,
                                                  int payload_version, const idem_fingerprint *fp,
                                                  const char *downstream_key)
{
    idem_external_attempt *a = calloc(1, sizeof(*a));

    if (a == NULL)
        return NULL;
    a->ext = ext;
    a->tenant = strdup(tenant);
    a->operation_id = strdup(operation_id);
    a->tool = strdup(tool);
    a->downstream_key = strdup(downstream_key);
    a->payload_version = payload_version;
    a->fp = *fp;
    if (a->tenant == NULL || a->operation_id == NULL || a->tool == NULL ||
        a->downstream_key == NULL) {
        idem_external_attempt_free(a);
        return NULL;
    }
    return a;
}

void idem_external_attempt_free(idem_external_attempt *a)
{
    if (a == NULL)
        return;
    free(a->tenant);
    free(a->operation_id);
    free(a->tool);
    free(a->downstream_key);
    free(a->arguments);
    free(a);
}

const char *idem_external_attempt_tenant(const idem_external_attempt *a)
{
    return a != NULL ? a->tenant : NULL;
}

const char *idem_external_attempt_operation_id(const idem_external_attempt *a)
{
    return a != NULL ? a->operation_id : NULL;
}

const char *idem_external_attempt_downstream_key(const idem_external_attempt *a)
{
    return a != NULL ? a->downstream_key : NULL;
}

int idem_external_attempt_number(const idem_external_attempt *a)
{
    return a != NULL ? a->number : 0;
}

int64_t idem_external_attempt_lease_expires_at(const idem_external_attempt *a)
{
    return a != NULL ? a->lease_expires_at : 0;
}

const char *idem_external_attempt_tool(const idem_external_attempt *a)
{
    return a != NULL ? a->tool : NULL;
}

int idem_external_attempt_payload_version(const idem_external_attempt *a)
{
    return a != NULL ? a->payload_version : 0;
}

const char *idem_external_attempt_arguments(const idem_external_attempt *a)
{
    return a != NULL ? a->arguments : NULL;
}

int idem__external_check_text(const char *field, const char *text, size_t max, int kind,
                              idem_error *err)
{
    const unsigned char *u = (const unsigned char *)text;
    size_t n, i = 0, at;
    uint32_t cp;
    int bad;

    if (text == NULL)
        return 0;
    n = strnlen(text, max + 1);
    if (n == 0 || n > max)
        return idem__error_field(err, IDEM_EINVAL, field, "must be 1 to %zu bytes", max);
    while (i < n) {
        at = i;
        if (idem__utf8_next(u, n, &i, &cp) != 0)
            return idem__error_field(err, IDEM_EINVAL, field, "is not valid UTF-8 at offset %zu",
                                     at);
        if (cp < 0x20)
            bad = kind != IDEM__TEXT_LINES || (cp != '\n' && cp != '\t');
        else
            bad = cp == 0x7f || (kind == IDEM__TEXT_ASCII && cp > 0x7e);
        if (bad)
            return idem__error_field(err, IDEM_EINVAL, field,
                                     "character U+%04X at offset %zu is not allowed", (unsigned)cp,
                                     at);
    }
    return 0;
}

int idem__external_check_report(idem_outcome *out, const idem_external_attempt *a, idem_error *err)
{
    int rc;

    if (out == NULL)
        return idem__error_field(err, IDEM_EINVAL, "outcome", "must not be NULL");
    if ((rc = idem__check_version(err, out->version, IDEM_OUTCOME_VERSION, "outcome")) != 0)
        return rc;
    *out = (idem_outcome)IDEM_OUTCOME_INIT;
    out->status = IDEM_STATUS_INVALID;
    if (a == NULL)
        return idem__error_field(err, IDEM_EINVAL, "attempt", "must not be NULL");
    if (a->ended)
        return idem__error_field(err, IDEM_EINVAL, "attempt",
                                 "attempt %d of operation %s has already reported or lost its "
                                 "lease",
                                 a->number, a->operation_id);
    out->status = IDEM_STATUS_UNAVAILABLE;
    return 0;
}

void idem__external_call_init(call *c, idem_request *req, const idem_external_attempt *a,
                              idem_outcome *out, idem_error *err)
{
    *req = (idem_request)IDEM_REQUEST_INIT;
    req->tenant = a->tenant;
    req->operation_id = a->operation_id;
    req->tool = a->tool;
    req->payload_version = a->payload_version;
    memset(c, 0, sizeof(*c));
    c->store = a->ext->store;
    c->req = req;
    c->fp = a->fp;
    c->out = out;
    c->err = err;
}

int64_t idem__external_cell_us(const PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? 0 : strtoll(PQgetvalue(res, row, col), NULL, 10);
}
