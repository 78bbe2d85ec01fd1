/* Durable intents: approving an action, reading and cancelling an intent. */
#include "idem/validate.h"
#include "idem/jcs.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "external_internal.h"
#include "intent_internal.h"
#include "store_internal.h"

/* Approvals that race with another of the same reference: each try finds the winner. */
#define MAX_TRIES 3

static const idem_intent_request request_defaults = IDEM_INTENT_REQUEST_INIT;

int idem_intent_request_init(idem_intent_request *req, unsigned int version)
{
    return idem__struct_init(req, &request_defaults, sizeof(request_defaults), version,
                             IDEM_INTENT_REQUEST_VERSION);
}

/* An approval: checked, its arguments canonical, its new operation ID. */
typedef struct approval {
    call c;
    idem_request req;
    char operation_id[IDEM_UUID_STRING_SIZE];
    char version[16];
    char *canonical;
    size_t canonical_len;
} approval;

static int check_request(approval *a, idem_store *store, const idem_intent_request *r,
                         idem_error *err)
{
    int rc;

    if (r == NULL)
        return idem__error_field(err, IDEM_EINVAL, "request", "must not be NULL");
    if ((rc = idem__check_version(err, r->version, IDEM_INTENT_REQUEST_VERSION, "request")) != 0)
        return rc;
    if (r->approval_ref == NULL)
        return idem__error_field(err, IDEM_EINVAL, "approval_ref", "must not be NULL");
    if (r->approved_by == NULL)
        return idem__error_field(err, IDEM_EINVAL, "approved_by", "must not be NULL");
    if ((rc = idem__external_check_text("approval_ref", r->approval_ref, IDEM_INTENT_REF_MAX,
                                        IDEM__TEXT_ASCII, err)) != 0 ||
        (rc = idem__external_check_text("approved_by", r->approved_by, IDEM_INTENT_BY_MAX,
                                        IDEM__TEXT_UTF8, err)) != 0)
        return rc;
    if (strchr(r->approval_ref, ' ') != NULL)
        return idem__error_field(err, IDEM_EINVAL, "approval_ref", "must not contain a space");
    if ((rc = idem_uuid_v7(a->operation_id, err)) != 0)
        return rc;
    a->req = (idem_request)IDEM_REQUEST_INIT;
    a->req.tenant = r->tenant;
    a->req.operation_id = a->operation_id;
    a->req.tool = r->tool;
    a->req.payload_version = r->payload_version;
    a->req.arguments = r->arguments;
    a->req.arguments_len = r->arguments_len;
    a->c = (call){.store = store, .req = &a->req, .effect = idem__store_no_effect, .err = err};
    if ((rc = idem__store_validate(&a->c)) != 0)
        return rc;
    snprintf(a->version, sizeof(a->version), "%d", r->payload_version);
    return idem_jcs_serialize(&a->canonical, &a->canonical_len, a->c.arguments, err);
}

/* The row the approval found: its own, or an earlier approval's with the same content. */
static int answer(idem_intent **out, approval *a, const PGresult *res, idem_error *err)
{
    char hex[IDEM_FINGERPRINT_HEX_SIZE];
    idem_intent *t;

    idem_fingerprint_hex(hex, &a->c.fp);
    if (strcmp(PQgetvalue(res, 0, COL_FINGERPRINT_HEX), hex) != 0)
        return idem__error_field(err, IDEM_ECONFLICT, "approval_ref",
                                 "%s already names intent %s with another tool, version or "
                                 "arguments; nothing was written",
                                 PQgetvalue(res, 0, COL_APPROVAL_REF),
                                 PQgetvalue(res, 0, COL_OPERATION_ID));
    if ((t = idem__intent_new_from_row(res, 0)) == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "intent: out of memory");
    *out = t;
    return 0;
}

int idem_intent_approve(idem_intent **out, idem_store *store, const idem_intent_request *r,
                        idem_error *err)
{
    idem_error local = IDEM_ERROR_INIT;
    const char *values[8] = {NULL};
    int lengths[8] = {0}, formats[8] = {0};
    idem__pipe_cmd cmd = {&idem__intent_stmt_approve, NULL, 0, values, lengths, formats, 0, NULL};
    uint64_t deadline_ms;
    approval a;
    PGresult *res = NULL;
    int rc;

    err = err != NULL ? err : &local;
    idem_error_clear(err);
    if (out == NULL || store == NULL)
        return idem__error_field(err, IDEM_EINVAL, out == NULL ? "out" : "store",
                                 "must not be NULL");
    memset(&a, 0, sizeof(a));
    if ((rc = check_request(&a, store, r, err)) != 0)
        goto done;
    values[0] = r->tenant;
    values[1] = a.operation_id;
    values[2] = r->approval_ref;
    values[3] = r->tool;
    values[4] = a.version;
    values[5] = a.canonical;
    values[6] = (const char *)a.c.fp.bytes;
    values[7] = r->approved_by;
    lengths[6] = IDEM_FINGERPRINT_SIZE;
    formats[6] = 1;
    deadline_ms = idem__store_deadline(store);
    for (int tries = 0; rc == 0 && res == NULL; tries++) {
        if (tries > 0 && (rc = idem__store_deadline_passed(store, deadline_ms, err)) != 0)
            break;
        if (tries == MAX_TRIES) {
            rc = idem__error_set(err, IDEM_EUNAVAIL,
                                 "approval %s was being recorded by another call; try again",
                                 r->approval_ref);
            break;
        }
        rc = idem__intent_run(&res, store, deadline_ms, r->tenant, &cmd, 1, err);
        if (rc == 0 && PQntuples(res) == 0) {
            PQclear(res);
            res = NULL;
        }
    }
    if (rc == 0)
        rc = answer(out, &a, res, err);
done:
    PQclear(res);
    idem__store_call_clear(&a.c);
    free(a.canonical);
    return rc;
}

/* The intent, read under the call's @deadline_ms. */
static int get_intent(idem_intent **out, idem_store *store, uint64_t deadline_ms,
                      const char *tenant, const char *operation_id, idem_error *err)
{
    const char *values[2] = {tenant, operation_id};
    PGresult *res = NULL;
    idem_intent *t;
    int rc;

    if ((rc = idem__intent_run1(&res, store, deadline_ms, tenant, &idem__intent_stmt_get, values,
                                err)) != 0)
        return rc;
    if (PQntuples(res) == 0)
        rc =
            idem__error_set(err, IDEM_ENOTFOUND, "no intent %s in tenant %s", operation_id, tenant);
    else if ((t = idem__intent_new_from_row(res, 0)) == NULL)
        rc = idem__error_set(err, IDEM_ENOMEM, "intent: out of memory");
    else
        *out = t;
    PQclear(res);
    return rc;
}

int idem_intent_get(idem_intent **out, idem_store *store, const char *tenant,
                    const char *operation_id, idem_error *err)
{
    int rc;

    if (out == NULL || store == NULL)
        return idem__error_field(err, IDEM_EINVAL, out == NULL ? "out" : "store",
                                 "must not be NULL");
    if ((rc = idem__intent_check_key(tenant, operation_id, err)) != 0)
        return rc;
    return get_intent(out, store, idem__store_deadline(store), tenant, operation_id, err);
}

/* Why a cancel changed nothing; 0 when the intent was already cancelled. */
static int not_cancelled(idem_intent **out, idem_store *store, uint64_t deadline_ms,
                         const char *tenant, const char *operation_id, idem_error *err)
{
    idem_intent *t = NULL;
    int rc = get_intent(&t, store, deadline_ms, tenant, operation_id, err);

    if (rc != 0)
        return rc;
    if (t->state != IDEM_INTENT_CANCELLED) {
        rc = idem__error_field(err, IDEM_ECONFLICT, "intent",
                               "intent %s is %s and its effect has begun; it cannot be cancelled "
                               "(execute or recover it to learn its outcome)",
                               operation_id, idem_intent_state_name(t->state));
        idem_intent_free(t);
        return rc;
    }
    if (out != NULL)
        *out = t;
    else
        idem_intent_free(t);
    return 0;
}

int idem_intent_cancel(idem_intent **out, idem_store *store, const char *tenant,
                       const char *operation_id, const char *by, idem_error *err)
{
    const char *values[3] = {tenant, operation_id, by};
    PGresult *res = NULL;
    idem_intent *t = NULL;
    uint64_t deadline_ms;
    int rc;

    if (store == NULL)
        return idem__error_field(err, IDEM_EINVAL, "store", "must not be NULL");
    if ((rc = idem__intent_check_key(tenant, operation_id, err)) != 0 ||
        (rc = idem__external_check_text("by", by, IDEM_INTENT_BY_MAX, IDEM__TEXT_UTF8, err)) != 0)
        return rc;
    deadline_ms = idem__store_deadline(store);
    rc =
        idem__intent_run1(&res, store, deadline_ms, tenant, &idem__intent_stmt_cancel, values, err);
    if (rc == 0 && PQntuples(res) == 0)
        rc = not_cancelled(out, store, deadline_ms, tenant, operation_id, err);
    else if (rc == 0 && out != NULL && (t = idem__intent_new_from_row(res, 0)) == NULL)
        rc = idem__error_set(err, IDEM_ENOMEM, "intent: out of memory");
    else if (rc == 0 && out != NULL)
        *out = t;
    PQclear(res);
    return rc;
}
