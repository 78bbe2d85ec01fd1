#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "exec.h"
#include "store_internal.h"

static int set_receipt(idem_outcome *out, const char *bytes, size_t len, idem_error *err)
{
    char *copy = malloc(len + 1);

    if (copy == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "receipt: out of memory");
    memcpy(copy, bytes, len);
    copy[len] = '\0';
    out->receipt = copy;
    out->receipt_len = len;
    return 0;
}

/* Whether a looked-up row's fingerprint is the request's. */
static int same_fingerprint(const call *c, const PGresult *res)
{
    return PQgetlength(res, 0, 0) == IDEM_FINGERPRINT_SIZE &&
           memcmp(PQgetvalue(res, 0, 0), c->fp.bytes, IDEM_FINGERPRINT_SIZE) == 0;
}

/* An external dispatch whose result is not known: nothing runs until it is reconciled. */
static int outcome_unknown(call *c)
{
    c->out->status = IDEM_STATUS_OUTCOME_UNKNOWN;
    return idem__error_set(c->err, IDEM_EUNKNOWN,
                           "operation %s was dispatched to an external service and its result "
                           "is not known; it is not dispatched again until it is reconciled "
                           "(idem-reconcile show %s %s)",
                           c->req->operation_id, c->req->tenant, c->req->operation_id);
}

int idem__store_claimed(const PGresult *claim)
{
    return PQntuples(claim) == 1 && strcmp(PQgetvalue(claim, 0, 1), "claimed") == 0;
}

int idem__store_decide(call *c, const PGresult *res, int *mine)
{
    const char *state = PQgetvalue(res, 0, 1);
    int same = same_fingerprint(c, res);

    *mine = PQnfields(res) == 4 && strcmp(PQgetvalue(res, 0, 3), c->claim) == 0;
    if (!same) {
        c->out->status = IDEM_STATUS_CONFLICT;
        COUNT(c->store, conflicts);
        return idem__error_field(c->err, IDEM_ECONFLICT, "arguments",
                                 "operation ID %s was already used with different arguments",
                                 c->req->operation_id);
    }
    if (strcmp(state, "outcome_unknown") == 0)
        return outcome_unknown(c);
    if (strcmp(state, "pending") == 0) {
        c->out->status = IDEM_STATUS_IN_PROGRESS;
        COUNT(c->store, in_progress);
        return idem__error_set(c->err, IDEM_EBUSY,
                               "operation %s is in progress in another attempt; retry later "
                               "with the same key",
                               c->req->operation_id);
    }
    if (set_receipt(c->out, PQgetvalue(res, 0, 2), (size_t)PQgetlength(res, 0, 2), c->err) != 0) {
        c->out->status = IDEM_STATUS_UNAVAILABLE;
        return IDEM_ENOMEM;
    }
    if (strcmp(state, "failed") == 0)
        return idem__store_rejected(c);
    c->out->status = *mine ? IDEM_STATUS_CREATED : IDEM_STATUS_REPLAYED;
    if (*mine)
        COUNT(c->store, created);
    else
        COUNT(c->store, replayed);
    return 0;
}

int idem__store_rejected(call *c)
{
    c->out->status = IDEM_STATUS_REJECTED;
    COUNT(c->store, rejected);
    return idem__error_set(c->err, IDEM_EREJECTED,
                           "operation %s was refused by the effect; the receipt says why, and "
                           "every retry of this key gets the same refusal",
                           c->req->operation_id);
}

/* Look the key up with @stmt (stmt_lookup or stmt_resolve). Returns 1 when a row decided
 * the call (c->out set, *rc its code), 0 when the key is free, or a negative code on a
 * database failure. */
int idem__store_lookup(call *c, idem_conn *conn, const idem__stmt *stmt, int *rc)
{
    const char *values[2] = {c->req->tenant, c->req->operation_id};
    PGresult *res = NULL;
    int mine, found;

    int erc = idem__conn_exec_prepared(&res, conn, stmt, values, NULL, NULL, 1, c->err);
    if (erc != 0)
        return erc;
    found = PQntuples(res) == 1;
    if (found && c->resume_pending && strcmp(PQgetvalue(res, 0, 1), "pending") == 0 &&
        same_fingerprint(c, res))
        found = 0; /* the external claim decides: the lease may have lapsed */
    else if (found)
        *rc = idem__store_decide(c, res, &mine);
    PQclear(res);
    return found;
}
