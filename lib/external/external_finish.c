/* External effects, step 3 (external.h): the holder reports, extends or releases its lease.
 * Each report is one statement; a report whose reply was lost is resolved by asking, on a
 * fresh connection, whether this attempt's token still holds the key. A holder whose lease
 * was taken over is answered from the record, as any other call on the key. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/jcs.h"

#include "core/clock.h"
#include "error.h"
#include "external_internal.h"
#include "log.h"
#include "reconcile_internal.h"

/* A report that failed for want of the database: a deployment error is misconfigured. */
static int settle(idem_outcome *out, int rc, idem_error *err)
{
    if (rc != 0 && out->status == IDEM_STATUS_UNAVAILABLE) {
        rc = idem__error_misconfigured(err, rc);
        out->status = idem_status_from_error(rc);
    }
    return rc;
}

/* One report in progress. */
typedef struct report {
    idem_external_attempt *a;
    const idem__stmt *stmt;
    const char *values[8];
    int lengths[8];
    int formats[8];
    idem_conn *conn;
    uint64_t deadline_ms; /* the call's (idem__store_deadline()) */
    idem_error *err;
} report;

/* Where the record stands for this attempt's token. */
enum held { HELD = 1, ENDED_BY_US = 0, NOT_OURS = -1 };

static void report_init(report *r, idem_external_attempt *a, const idem__stmt *stmt,
                        uint64_t deadline_ms, idem_error *err)
{
    memset(r, 0, sizeof(*r));
    r->a = a;
    r->stmt = stmt;
    r->deadline_ms = deadline_ms;
    r->err = err;
    r->values[0] = a->tenant;
    r->values[1] = a->operation_id;
    r->values[2] = a->token;
}

static int ask_held(report *r, enum held *out)
{
    PGresult *res = NULL;
    int rc = idem__tenant_exec(&res, r->conn, r->a->tenant, &idem__external_stmt_held, r->values,
                               NULL, NULL, 0, r->err);

    if (rc != 0)
        return rc;
    if (PQntuples(res) != 1 || strcmp(PQgetvalue(res, 0, 1), "t") != 0)
        *out = NOT_OURS;
    else if (strcmp(PQgetvalue(res, 0, 0), "pending") == 0 &&
             strcmp(PQgetvalue(res, 0, 2), "t") == 0)
        *out = HELD;
    else
        *out = ENDED_BY_US;
    PQclear(res);
    return 0;
}

/* Run the report's statement; *changed is 1 when it changed the record (this attempt held
 * the lease), 0 when the lease had been lost. After a lost reply, find out whether it
 * committed, and run it once more if it did not and the call's deadline has not passed. */
static int send(report *r, int *changed)
{
    PGresult *res = NULL;
    enum held held = HELD;
    int rc;

    for (int tries = 0; tries < 2 && held == HELD; tries++) {
        if (tries > 0 && idem__now_ms() >= r->deadline_ms)
            break;
        rc = idem__tenant_exec(&res, r->conn, r->a->tenant, r->stmt, r->values, r->lengths,
                               r->formats, 0, r->err);
        if (rc == 0) {
            *changed = strcmp(PQgetvalue(res, 0, 0), "0") != 0;
            PQclear(res);
            return 0;
        }
        if (rc != IDEM_EUNAVAIL && !idem__conn_failed(r->conn))
            return rc;
        idem_pool_release(r->conn);
        r->conn = NULL;
        if ((rc = idem__pool_checkout(&r->conn, r->a->ext->store->pool, r->deadline_ms, r->err)) !=
                0 ||
            (rc = ask_held(r, &held)) != 0)
            return idem__error_context(r->err, "the report's outcome could not be looked up; "
                                               "report again with the same attempt");
    }
    if (held == HELD)
        return idem__error_set(r->err, IDEM_EUNAVAIL,
                               "the report could not be made; report again with the same "
                               "attempt");
    *changed = held == ENDED_BY_US;
    return 0;
}

/* The lease had been taken over: answer from the record, as any call on the key, after
 * opening a reconciliation item when this attempt says the provider was called. */
static int lease_lost(report *r, idem_outcome *out, int dispatched)
{
    idem_external_attempt *a = r->a;
    idem_request req;
    call c;
    int rc = 0, found;

    a->ended = 1;
    idem__log(a->ext->opts.log, a->ext->opts.log_ctx, IDEM_LOG_WARNING,
              "attempt %d of %s/%s reported after its lease was taken over", a->number, a->tenant,
              a->operation_id);
    if (dispatched &&
        idem__reconcile_record(r->conn, a->tenant, a->operation_id, IDEM__RECONCILE_LEASE_LOST,
                               a->tool, &a->fp, 1, r->err) != 0)
        return idem__error_context(r->err, "attempt %d lost its lease", a->number);
    idem__external_call_init(&c, &req, a, out, r->err);
    found = idem__store_lookup(&c, r->conn, &idem__store_stmt_lookup, &rc);
    if (found < 0)
        return found;
    if (found == 0) {
        out->status = IDEM_STATUS_UNAVAILABLE;
        return idem__error_set(r->err, IDEM_ELOCKED,
                               "attempt %d of operation %s lost its lease and the record is gone",
                               a->number, a->operation_id);
    }
    return rc;
}

/* Run a report on a pooled connection: 0 with *changed, or a failure. */
static int run(report *r, int *changed)
{
    int rc = idem__pool_checkout(&r->conn, r->a->ext->store->pool, r->deadline_ms, r->err);

    if (rc == 0)
        rc = send(r, changed);
    return rc;
}

static int finish(idem_outcome *out, report *r, char *receipt, size_t len, int failed)
{
    idem_request req;
    call c;
    int changed = 0, rc = run(r, &changed);

    if (rc == 0 && !changed)
        rc = lease_lost(r, out, !failed);
    else if (rc == 0) {
        r->a->ended = 1;
        out->receipt = receipt;
        out->receipt_len = len;
        receipt = NULL;
        out->status = IDEM_STATUS_CREATED;
        idem__external_call_init(&c, &req, r->a, out, r->err);
        if (failed)
            rc = idem__store_rejected(&c);
    }
    idem_pool_release(r->conn);
    free(receipt);
    return rc;
}

/* The receipt's exact bytes: canonical JSON within the store's limit. */
static int serialize(char **out, size_t *len, const idem_external_attempt *a,
                     const json_t *response, idem_error *err)
{
    int rc;

    if (response == NULL)
        return idem__error_field(err, IDEM_EINVAL, "response", "must not be NULL");
    if ((rc = idem_jcs_serialize(out, len, response, err)) != 0) {
        snprintf(err->field, sizeof(err->field), "response");
        return rc;
    }
    if (*len > a->ext->store->opts.max_response_bytes) {
        free(*out);
        return idem__error_field(err, IDEM_EINVAL, "response", "%zu bytes exceed the limit of %zu",
                                 *len, a->ext->store->opts.max_response_bytes);
    }
    return 0;
}

static int report_final(idem_outcome *out, idem_external_attempt *a, const char *state,
                        const char *provider_ref, const json_t *response, const char *error,
                        idem_error *err)
{
    char number[16], *receipt = NULL;
    size_t len = 0;
    report r;
    int rc;

    if ((rc = idem__external_check_text("provider_ref", provider_ref, IDEM__PROVIDER_REF_MAX,
                                        IDEM__TEXT_ASCII, err)) != 0 ||
        (rc = idem__external_check_text("error", error, IDEM__ERROR_TEXT_MAX, IDEM__TEXT_LINES,
                                        err)) != 0 ||
        (rc = serialize(&receipt, &len, a, response, err)) != 0) {
        out->status = IDEM_STATUS_INVALID;
        return rc;
    }
    snprintf(number, sizeof(number), "%d", a->number);
    report_init(&r, a, &idem__external_stmt_finish, idem__store_deadline(a->ext->store), err);
    r.values[3] = state;
    r.values[4] = receipt;
    r.lengths[4] = (int)len;
    r.formats[4] = 1;
    r.values[5] = provider_ref;
    r.values[6] = number;
    r.values[7] = error;
    return finish(out, &r, receipt, len, strcmp(state, "failed") == 0);
}

int idem_external_complete(idem_outcome *out, idem_external_attempt *a, const char *provider_ref,
                           const json_t *response, idem_error *err)
{
    idem_error local = IDEM_ERROR_INIT;
    int rc;

    err = err != NULL ? err : &local;
    idem_error_clear(err);
    if ((rc = idem__external_check_report(out, a, err)) != 0)
        return rc;
    return settle(out, report_final(out, a, "completed", provider_ref, response, NULL, err), err);
}

/* A transient failure: the lease goes back, the outbox item is rescheduled. */
static int release(idem_external_attempt *a, const char *outcome, const char *error, int *changed,
                   uint64_t deadline_ms, idem_error *err)
{
    char number[16], backoff[16];
    report r;
    int rc;

    snprintf(number, sizeof(number), "%d", a->number);
    snprintf(backoff, sizeof(backoff), "%u",
             idem_retry_backoff_ms(&a->ext->outbox_backoff, (unsigned int)a->number));
    report_init(&r, a, &idem__external_stmt_release, deadline_ms, err);
    r.values[3] = outcome;
    r.values[4] = error;
    r.values[5] = number;
    r.values[6] = backoff;
    rc = run(&r, changed);
    idem_pool_release(r.conn);
    if (rc == 0 && *changed)
        a->ended = 1;
    return rc;
}

static int report_transient(idem_outcome *out, idem_external_attempt *a, const char *error,
                            idem_error *err)
{
    uint64_t deadline_ms = idem__store_deadline(a->ext->store);
    int changed = 0, rc;

    if ((rc = idem__external_check_text("error", error, IDEM__ERROR_TEXT_MAX, IDEM__TEXT_LINES,
                                        err)) != 0) {
        out->status = IDEM_STATUS_INVALID;
        return rc;
    }
    rc = release(a, "retry", error, &changed, deadline_ms, err);
    if (rc != 0)
        return rc;
    if (!changed) {
        report r;

        report_init(&r, a, NULL, deadline_ms, err);
        rc = idem__pool_checkout(&r.conn, a->ext->store->pool, deadline_ms, err);
        if (rc == 0)
            rc = lease_lost(&r, out, 0);
        idem_pool_release(r.conn);
        return rc;
    }
    out->status = IDEM_STATUS_EFFECT_FAILED;
    return idem__error_set(err, IDEM_EEFFECT,
                           "attempt %d of operation %s failed%s%s; the lease is released and a "
                           "later attempt may dispatch again with the same downstream key",
                           a->number, a->operation_id, error != NULL ? ": " : "",
                           error != NULL ? error : "");
}

int idem_external_fail(idem_outcome *out, idem_external_attempt *a, idem_external_failure how,
                       const json_t *response, const char *error, idem_error *err)
{
    idem_error local = IDEM_ERROR_INIT;
    int rc;

    err = err != NULL ? err : &local;
    idem_error_clear(err);
    if ((rc = idem__external_check_report(out, a, err)) != 0)
        return rc;
    if (how == IDEM_EXTERNAL_FINAL)
        return settle(out, report_final(out, a, "failed", NULL, response, error, err), err);
    if (how == IDEM_EXTERNAL_TRANSIENT)
        return settle(out, report_transient(out, a, error, err), err);
    out->status = IDEM_STATUS_INVALID;
    return idem__error_field(err, IDEM_EINVAL, "how",
                             "must be IDEM_EXTERNAL_FINAL or IDEM_EXTERNAL_TRANSIENT");
}

int idem_external_unknown(idem_outcome *out, idem_external_attempt *a, const char *provider_ref,
                          const char *error, idem_error *err)
{
    idem_error local = IDEM_ERROR_INIT;
    char number[16];
    report r;
    int changed = 0, rc;

    err = err != NULL ? err : &local;
    idem_error_clear(err);
    if ((rc = idem__external_check_report(out, a, err)) != 0)
        return rc;
    if ((rc = idem__external_check_text("provider_ref", provider_ref, IDEM__PROVIDER_REF_MAX,
                                        IDEM__TEXT_ASCII, err)) != 0 ||
        (rc = idem__external_check_text("error", error, IDEM__ERROR_TEXT_MAX, IDEM__TEXT_LINES,
                                        err)) != 0) {
        out->status = IDEM_STATUS_INVALID;
        return rc;
    }
    snprintf(number, sizeof(number), "%d", a->number);
    report_init(&r, a, &idem__external_stmt_unknown, idem__store_deadline(a->ext->store), err);
    r.values[3] = provider_ref;
    r.values[4] = number;
    r.values[5] = error;
    rc = run(&r, &changed);
    if (rc == 0 && !changed)
        rc = lease_lost(&r, out, 1);
    else if (rc == 0) {
        a->ended = 1;
        out->status = IDEM_STATUS_OUTCOME_UNKNOWN;
        rc = idem__error_set(err, IDEM_EUNKNOWN,
                             "operation %s: the result of attempt %d is not known; it is "
                             "recorded for reconciliation (idem-reconcile show %s %s) and is not "
                             "dispatched again until it is resolved",
                             a->operation_id, a->number, a->tenant, a->operation_id);
    }
    idem_pool_release(r.conn);
    return settle(out, rc, err);
}

static int not_held(const idem_external_attempt *a, idem_error *err)
{
    return idem__error_set(err, IDEM_ELOCKED,
                           "attempt %d of operation %s does not hold the lease any more (another "
                           "attempt took it over, or it has reported); do not dispatch",
                           a->number, a->operation_id);
}

int idem_external_release(idem_external_attempt *a, idem_error *err)
{
    idem_error local = IDEM_ERROR_INIT;
    int changed = 0, rc;

    err = err != NULL ? err : &local;
    idem_error_clear(err);
    if (a == NULL)
        return idem__error_field(err, IDEM_EINVAL, "attempt", "must not be NULL");
    if (a->ended)
        return not_held(a, err);
    rc = release(a, "released", NULL, &changed, idem__store_deadline(a->ext->store), err);
    if (rc == 0 && !changed)
        rc = not_held(a, err);
    return idem__error_misconfigured(err, rc);
}

int idem_external_extend(idem_external_attempt *a, idem_error *err)
{
    idem_error local = IDEM_ERROR_INIT;
    report r;
    PGresult *res = NULL;
    int rc = 0;

    err = err != NULL ? err : &local;
    idem_error_clear(err);
    if (a == NULL)
        return idem__error_field(err, IDEM_EINVAL, "attempt", "must not be NULL");
    if (a->ended)
        return not_held(a, err);
    report_init(&r, a, &idem__external_stmt_extend, idem__store_deadline(a->ext->store), err);
    r.values[3] = a->ext->lease_ms;
    /* Renewing twice does no harm: after a lost reply, renew again on a fresh connection,
     * while the call's deadline has not passed. */
    for (int tries = 0; tries < 2; tries++) {
        if (tries > 0 && (rc = idem__store_deadline_passed(a->ext->store, r.deadline_ms, err)) != 0)
            break;
        if (r.conn == NULL &&
            (rc = idem__pool_checkout(&r.conn, a->ext->store->pool, r.deadline_ms, err)) != 0)
            break;
        rc = idem__tenant_exec(&res, r.conn, a->tenant, r.stmt, r.values, NULL, NULL, 0, err);
        if (rc == 0 || (rc != IDEM_EUNAVAIL && !idem__conn_failed(r.conn)))
            break;
        idem_pool_release(r.conn);
        r.conn = NULL;
    }
    idem_pool_release(r.conn);
    if (rc != 0)
        return idem__error_misconfigured(err, rc);
    if (PQntuples(res) == 1)
        a->lease_expires_at = idem__external_cell_us(res, 0, 0);
    else
        rc = not_held(a, err);
    PQclear(res);
    return rc;
}
