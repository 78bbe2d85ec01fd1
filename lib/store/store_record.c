/* What a key's record decides: the lookup (after a lost COMMIT reply, the resolution) and
 * its answer: the receipt replayed, a conflict with another intent, in progress or stalled,
 * a refusal replayed, outcome unknown, or a late retry past the key's memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "exec.h"
#include "jcs.h"
#include "reconcile_internal.h"
#include "store_internal.h"
#include "tenant.h"

/* The lookup's columns (and the claim's): fingerprint, state, response, whether the
 * response goes out canonical (receipt_canonical, migration 0013), the database's now(),
 * and after a lost COMMIT reply the claim token as text. */
#define COL_FINGERPRINT 0
#define COL_STATE       1
#define COL_RESPONSE    2
#define COL_CANONICAL   3
#define COL_NOW         4
#define COL_CLAIM       5

/* A binary timestamptz (microseconds since 2000-01-01) as milliseconds since 1970. */
static int64_t timestamptz_ms(const PGresult *res, int col)
{
    const unsigned char *p = (const unsigned char *)PQgetvalue(res, 0, col);
    uint64_t v = 0;

    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t)v / 1000 + IDEM__PG_EPOCH_MS;
}

int idem__store_receipt_out(idem_outcome *out, const char *bytes, size_t len, int canonical_form,
                            idem_error *err)
{
    idem__buf canonical = {NULL, 0, 0};
    idem_error ignored = IDEM_ERROR_INIT;
    /* The common receipt (strings without escapes, short integers, no name twice) in one
     * pass without allocating per member; the same bytes as idem__jcs_write_text(), which
     * takes the rest, its numbers copied as written. */
    int rc = canonical_form ? idem__jcs_arguments_fast(&canonical, bytes, len) : IDEM_EINVAL;

    if (rc == 0)
        rc = idem__jcs_write_text(&canonical, bytes, len, &ignored);
    else if (rc == 1)
        rc = 0;
    if (rc == IDEM_ENOMEM)
        return idem__error_set(err, IDEM_ENOMEM, "receipt: out of memory");
    /* As stored: a record whose first caller got these bytes, or not JSON (a record written
     * by hand), so that every answer is the same. */
    if (rc != 0) {
        canonical.len = 0;
        if (idem__buf_append(&canonical, bytes, len) != 0) {
            idem__buf_free(&canonical);
            return idem__error_set(err, IDEM_ENOMEM, "receipt: out of memory");
        }
    }
    out->receipt = canonical.data;
    out->receipt_len = canonical.len;
    return 0;
}

/* Whether a looked-up row's receipt goes out canonical: receipt_canonical (binary
 * boolean) is true. NULL (a record of an earlier version, or of a call whose receipt idem
 * serialized itself) goes out as stored. */
static int receipt_canonical(const PGresult *res)
{
    return !PQgetisnull(res, 0, COL_CANONICAL) && PQgetlength(res, 0, COL_CANONICAL) == 1 &&
           PQgetvalue(res, 0, COL_CANONICAL)[0] != 0;
}

/* Whether a looked-up row's fingerprint is the request's. */
static int same_fingerprint(const call *c, const PGresult *res)
{
    return PQgetlength(res, 0, COL_FINGERPRINT) == IDEM_FINGERPRINT_SIZE &&
           memcmp(PQgetvalue(res, 0, COL_FINGERPRINT), c->fp.bytes, IDEM_FINGERPRINT_SIZE) == 0;
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
    return PQntuples(claim) == 1 && strcmp(PQgetvalue(claim, 0, COL_STATE), "claimed") == 0;
}

/* A retry after the key's retention window: run nothing, record it for reconciliation
 * (the one extra statement of this rare path), answer expired. @matches: whether the
 * request's fingerprint equals the tombstone's (-1: no tombstone). */
static int late_retry(call *c, idem_conn *conn, int matches, const char *why)
{
    const idem_request *req = c->req;
    int rc = idem__reconcile_record(conn, req->tenant, req->operation_id, IDEM__RECONCILE_EXPIRED,
                                    req->tool, &c->fp, matches, c->err);

    if (rc != 0)
        return idem__error_context(c->err,
                                   "operation %s is past its retention window, but "
                                   "could not be recorded for reconciliation; retry "
                                   "later with the same key",
                                   req->operation_id);
    c->out->status = IDEM_STATUS_EXPIRED;
    COUNT(c->store, expired);
    return idem__error_set(c->err, IDEM_EEXPIRED,
                           "operation %s is past its retention window (%s): it was not executed "
                           "again, and is recorded for reconciliation (idem-reconcile show %s %s)",
                           req->operation_id, why, req->tenant, req->operation_id);
}

/* Whether the request's operation ID is a UUIDv7 older than its tool's key memory, plus
 * the clock skew allowance, on the database's clock (@now_ms): such a key would have been
 * forgotten, so its absence does not mean it is new. */
static int beyond_horizon(const call *c, int64_t now_ms)
{
    unsigned int retention_s, key_memory_s;
    uint64_t t;

    if (idem_uuid_v7_time_ms(&t, c->req->operation_id) != 0)
        return 0;
    idem__store_windows(c->store, c->req->tool, &retention_s, &key_memory_s);
    return (int64_t)t < now_ms - ((int64_t)key_memory_s + c->store->opts.clock_skew_s) * 1000;
}

/* How far the request's UUIDv7 is dated ahead of @now_ms, in ms (0 if not, or no UUIDv7). */
static int64_t dated_ms_ahead(const call *c, int64_t now_ms)
{
    uint64_t t;

    if (idem_uuid_v7_time_ms(&t, c->req->operation_id) != 0 || (int64_t)t <= now_ms)
        return 0;
    return (int64_t)t - now_ms;
}

int64_t idem__store_ahead_ms(const call *c, int64_t now_ms)
{
    int64_t ahead = dated_ms_ahead(c, now_ms);

    return ahead > (int64_t)c->store->opts.clock_skew_s * 1000 ? ahead : 0;
}

int idem__store_dated_ahead(call *c, int64_t ahead_ms)
{
    c->out->status = IDEM_STATUS_INVALID;
    COUNT(c->store, invalid);
    return idem__error_field(c->err, IDEM_EINVAL, "operation_id",
                             "%s is a UUIDv7 dated %lld s in the future on the database's clock, "
                             "more than the clock skew allowance (clock_skew_s, %u s): it is "
                             "refused, and nothing is written; make operation IDs with "
                             "idem_uuid_v7() on a clock in step with the database's",
                             c->req->operation_id, (long long)((ahead_ms + 999) / 1000),
                             c->store->opts.clock_skew_s);
}

/* Column 1 of stmt_get or stmt_conflict, read in binary: int4, big-endian. */
static int payload_version(const PGresult *res)
{
    const unsigned char *p = (const unsigned char *)PQgetvalue(res, 0, 1);

    return PQgetlength(res, 0, 1) == 4 ? (int)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
                                               ((uint32_t)p[2] << 8) | p[3])
                                       : -1;
}

/* The arguments differ, for a tool with an identity policy: name the first identity field
 * that differs (identity.h), when the record keeps its fields' digests (column 3 of
 * stmt_conflict) and is not a tombstone; else "arguments". */
static int arguments_differ(call *c, const PGresult *res)
{
    const char *op = c->req->operation_id;
    char pointer[IDEM_ERROR_MESSAGE_MAX / 2];

    if (c->identity == NULL || PQgetisnull(res, 0, 3) ||
        strcmp(PQgetvalue(res, 0, 2), "expired") == 0 ||
        !idem__identity_first_difference(
            pointer, sizeof(pointer), (const unsigned char *)PQgetvalue(res, 0, 3),
            (size_t)PQgetlength(res, 0, 3), (const unsigned char *)c->digests.data, c->digests.len))
        return idem__error_field(c->err, IDEM_ECONFLICT, "arguments",
                                 "operation ID %s was already used with different arguments", op);
    return idem__error_field(c->err, IDEM_ECONFLICT,
                             strlen(pointer) < IDEM_ERROR_FIELD_MAX ? pointer : "arguments",
                             "operation ID %s was already used with different arguments: "
                             "identity field %s differs",
                             op, pointer);
}

/* The fingerprint differs: say what differs, the tool, its payload version or the
 * arguments, from the record (read again, in the tenant: a conflict is rare, and worth a
 * clear answer); when that read fails, the fingerprint's three parts together. */
static int conflict(call *c, idem_conn *conn)
{
    const char *values[2] = {c->req->tenant, c->req->operation_id};
    const char *op = c->req->operation_id;
    const idem__stmt *stmt =
        c->identity != NULL ? &idem__store_stmt_conflict : &idem__store_stmt_get;
    PGresult *res = NULL;
    int rc = IDEM_ECONFLICT;

    if (idem__tenant_exec(&res, conn, c->req->tenant, stmt, values, NULL, NULL, 1, NULL) != 0 ||
        PQntuples(res) != 1)
        rc = idem__error_field(c->err, rc, "arguments",
                               "operation ID %s was already used with a different tool, payload "
                               "version or arguments",
                               op);
    else if (strcmp(PQgetvalue(res, 0, 0), c->req->tool) != 0)
        rc = idem__error_field(c->err, rc, "tool",
                               "operation ID %s was already used with tool %s, not %s", op,
                               PQgetvalue(res, 0, 0), c->req->tool);
    else if (payload_version(res) != c->req->payload_version)
        rc = idem__error_field(c->err, rc, "payload_version",
                               "operation ID %s was already used with payload version %d, not %d",
                               op, payload_version(res), c->req->payload_version);
    else
        rc = arguments_differ(c, res);
    PQclear(res);
    return rc;
}

/* Whether the key's pending record is a local one left pending past its claim plus the
 * call's deadline (stmt_stalled): 1, 0, or a negative code. */
static int stalled(call *c, idem_conn *conn)
{
    const char *values[3] = {c->req->tenant, c->req->operation_id, NULL};
    char deadline[24];
    PGresult *res = NULL;
    int rc;

    snprintf(deadline, sizeof(deadline), "%u", c->store->opts.deadline_ms);
    values[2] = deadline;
    rc = idem__tenant_exec(&res, conn, c->req->tenant, &idem__store_stmt_stalled, values, NULL,
                           NULL, 0, c->err);
    if (rc != 0)
        return rc;
    rc = PQntuples(res) == 1;
    PQclear(res);
    return rc;
}

/* A pending record. An external effect's, or a local one inside its claim's transaction
 * (committed meanwhile, or not yet): another attempt holds it, in_progress. A local one
 * still pending past its claim plus the deadline was left so by an attempt whose
 * transaction ended without its record (an earlier version's, or a statement run by hand):
 * its effect may have committed, so it never runs again. It is recorded for reconciliation
 * (kind stalled_pending), and the call answers outcome_unknown until an operator resolves
 * it (idem-reconcile resolve --as). */
static int pending(call *c, idem_conn *conn)
{
    const idem_request *req = c->req;
    int rc = stalled(c, conn);

    if (rc < 0)
        return rc;
    if (rc == 0) {
        c->out->status = IDEM_STATUS_IN_PROGRESS;
        COUNT(c->store, in_progress);
        return idem__error_set(c->err, IDEM_EBUSY,
                               "operation %s is in progress in another attempt; retry later "
                               "with the same key",
                               req->operation_id);
    }
    rc = idem__reconcile_record(conn, req->tenant, req->operation_id, IDEM__RECONCILE_STALLED,
                                req->tool, &c->fp, 1, c->err);
    if (rc != 0)
        return idem__error_context(c->err,
                                   "operation %s was left pending, but could not be "
                                   "recorded for reconciliation; retry later with the "
                                   "same key",
                                   req->operation_id);
    c->out->status = IDEM_STATUS_OUTCOME_UNKNOWN;
    return idem__error_set(c->err, IDEM_EUNKNOWN,
                           "operation %s was left pending by an attempt whose transaction ended "
                           "without its record: its effect may have committed, so it is not run "
                           "again until it is reconciled (idem-reconcile show %s %s)",
                           req->operation_id, req->tenant, req->operation_id);
}

int idem__store_decide(call *c, idem_conn *conn, const PGresult *res, int *mine)
{
    const char *state = PQgetvalue(res, 0, COL_STATE);
    int same = same_fingerprint(c, res);

    *mine = PQnfields(res) > COL_CLAIM && strcmp(PQgetvalue(res, 0, COL_CLAIM), c->claim) == 0;
    if (strcmp(state, "expired") == 0)
        return late_retry(c, conn, same, "its record has expired into a tombstone");
    if (!same) {
        c->out->status = IDEM_STATUS_CONFLICT;
        COUNT(c->store, conflicts);
        return conflict(c, conn);
    }
    if (strcmp(state, "outcome_unknown") == 0)
        return outcome_unknown(c);
    if (strcmp(state, "pending") == 0)
        return pending(c, conn);
    if (idem__store_receipt_out(c->out, PQgetvalue(res, 0, COL_RESPONSE),
                                (size_t)PQgetlength(res, 0, COL_RESPONSE), receipt_canonical(res),
                                c->err) != 0) {
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

/* The form of @stmt that sets the tenant itself (tenant.h). */
static const idem__stmt *lookup_as(const idem__stmt *stmt)
{
    if (stmt == &idem__store_stmt_resolve)
        return &idem__store_stmt_resolve_as;
    return stmt == &idem__store_stmt_replay ? &idem__store_stmt_replay_as
                                            : &idem__store_stmt_lookup_as;
}

/* Look the key up with @stmt (stmt_lookup, stmt_resolve, or stmt_replay, which reads no
 * clock: a key without a record is then looked up again with stmt_lookup). Returns 1 when
 * a row, or the absence of one for a key beyond the horizon, decided the call (c->out set,
 * *rc its code), 0 when the key is free (or, with c->resume_pending, pending under the
 * request's fingerprint), or a negative code on a database failure. */
int idem__store_lookup(call *c, idem_conn *conn, const idem__stmt *stmt, int *rc)
{
    const char *values[2] = {c->req->tenant, c->req->operation_id};
    PGresult *res = NULL;
    int mine, decided = 1;
    int64_t ahead;
    int erc;

    if (c->fp_text.data != NULL) /* a retry: its fingerprint hashed while the lookup travels */
        idem__conn_while_waiting(conn, idem__store_fingerprint_while_waiting, c);
    erc = idem__tenant_exec_either(&res, conn, c->req->tenant, stmt, lookup_as(stmt), values, NULL,
                                   NULL, 1, c->err);
    idem__conn_while_waiting(conn, NULL, NULL);
    if (erc == 0 && (erc = idem__store_fingerprint(c)) != 0)
        PQclear(res);
    if (erc != 0)
        return erc;
    if (PQntuples(res) != 1) {
        int n = PQntuples(res);

        PQclear(res);
        return idem__error_set(c->err, IDEM_EDB, "lookup: expected one row, got %d", n);
    }
    if (!PQgetisnull(res, 0, COL_STATE) && c->resume_pending &&
        strcmp(PQgetvalue(res, 0, COL_STATE), "pending") == 0 && same_fingerprint(c, res))
        decided = 0; /* the external claim decides: the lease may have lapsed */
    else if (!PQgetisnull(res, 0, COL_STATE)) {
        if (c->lost_claim) /* the claim before this lookup met this record */
            COUNT(c->store, claim_races);
        *rc = idem__store_decide(c, conn, res, &mine);
    } else if (PQnfields(res) <= COL_NOW) { /* stmt_replay: no record; the clock decides */
        PQclear(res);
        return idem__store_lookup(c, conn, &idem__store_stmt_lookup, rc);
    } else if (beyond_horizon(c, timestamptz_ms(res, COL_NOW)))
        *rc = late_retry(c, conn, -1, "its UUIDv7 is older than the key memory of its tool");
    else if ((ahead = idem__store_ahead_ms(c, timestamptz_ms(res, COL_NOW))) > 0)
        *rc = idem__store_dated_ahead(c, ahead);
    else
        decided = 0;
    c->lost_claim = 0;
    PQclear(res);
    return decided;
}
