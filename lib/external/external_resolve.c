/* Resolving an external operation whose outcome was not known (external.h): its record,
 * its outbox item and its reconciliation items change in one statement. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "external_internal.h"
#include "idem/sys/reconcile.h"
#include "idem/validate.h"
#include "idem/jcs.h"
#include "idem/sys/external.h"
#include "reconcile_internal.h"

/* $1 tenant, $2 operation_id, $3 'completed' or 'failed', $4 the receipt (binary), $5
 * provider_ref, $6 note, $7 by (resolver_name()). Only an external record that is outcome_unknown,
 * or pending without a live lease, changes; or a local record left pending (stalled_pending,
 * reconcile.h), whose resolution is kept as a resolved item of that kind even when none was
 * recorded. Returns whether it changed, how many items were resolved, and the record as it
 * was (state, external, lease live, stalled) to say why not. */
#define STALLED IDEM__STALLED_SQL("o")

static const char SQL_RESOLVE[] =
    "WITH target AS (SELECT o.state, o.attempts IS NOT NULL AS external,"
    " (o.lease_expires_at IS NOT NULL AND o.lease_expires_at > now()) AS live,"
    " (" STALLED ") AS stalled FROM idem.operations o"
    " WHERE o.tenant = $1 AND o.operation_id = $2),"
    " done AS (UPDATE idem.operations o SET state = $3, response = $4, completed_at = now(),"
    " provider_ref = coalesce($5, o.provider_ref), lease_expires_at = NULL," IDEM__WINDOWS_FROM_NOW
    " WHERE o.tenant = $1 AND o.operation_id = $2 AND ((o.attempts IS NOT NULL"
    " AND (o.state = 'outcome_unknown' OR (o.state = 'pending'"
    " AND (o.lease_expires_at IS NULL OR o.lease_expires_at <= now())))) OR (" STALLED "))"
    " RETURNING o.attempts IS NOT NULL AS external, o.tool, o.fingerprint),"
    " lapsed AS (UPDATE idem.external_attempts a SET ended_at = now(), outcome = 'lease_expired'"
    " FROM done WHERE a.tenant = $1 AND a.operation_id = $2 AND a.ended_at IS NULL),"
    " box AS (UPDATE idem.outbox b SET state = $3, updated_at = now() FROM done"
    " WHERE b.tenant = $1 AND b.operation_id = $2),"
    " items AS (UPDATE idem.reconciliation_items r SET resolved_at = now(),"
    " resolved_by = $7, note = $6 FROM done"
    " WHERE done.external AND r.tenant = $1 AND r.operation_id = $2 AND r.resolved_at IS NULL"
    " AND r.kind IN ('" IDEM__RECONCILE_OUTCOME_UNKNOWN "', '" IDEM__RECONCILE_OUTBOX_EXHAUSTED
    "', '" IDEM__RECONCILE_LEASE_LOST "') RETURNING 1),"
    " stalled AS (INSERT INTO idem.reconciliation_items AS r (tenant, operation_id, kind, tool,"
    " fingerprint, fingerprint_matches, resolved_at, resolved_by, note)"
    " SELECT $1, $2, '" IDEM__RECONCILE_STALLED "', done.tool, done.fingerprint, true, now(),"
    " $7, $6 FROM done WHERE NOT done.external"
    " ON CONFLICT (tenant, operation_id, kind) DO UPDATE SET resolved_at = EXCLUDED.resolved_at,"
    " resolved_by = EXCLUDED.resolved_by, note = EXCLUDED.note RETURNING 1)"
    " SELECT (SELECT count(*) FROM done),"
    " (SELECT count(*) FROM items) + (SELECT count(*) FROM stalled),"
    " (SELECT state FROM target), (SELECT external FROM target), (SELECT live FROM target),"
    " (SELECT stalled FROM target)";

static const char *const resolution_names[] = {"completed", "failed", "abandoned"};

int idem_resolution_init(idem_resolution *res, unsigned int version)
{
    static const idem_resolution defaults = IDEM_RESOLUTION_INIT;

    return idem__struct_init(res, &defaults, sizeof(defaults), version, IDEM_RESOLUTION_VERSION);
}

static int check_resolution(const idem_resolution *r, idem_error *err)
{
    int rc = idem__check_version(err, r->version, IDEM_RESOLUTION_VERSION, "resolution");

    if (rc != 0)
        return rc;
    if ((unsigned)r->as > IDEM_RESOLVE_ABANDONED)
        return idem__error_field(err, IDEM_EINVAL, "resolution.as",
                                 "must be COMPLETED, FAILED or ABANDONED, got %d", (int)r->as);
    if (r->note == NULL)
        return idem__error_field(err, IDEM_EINVAL, "resolution.note",
                                 "is missing (NULL): say what was found or done");
    if ((rc = idem__external_check_text("resolution.note", r->note, IDEM_RECONCILE_NOTE_MAX,
                                        IDEM__TEXT_LINES, err)) != 0 ||
        (rc = idem__external_check_text("resolution.by", r->by, IDEM_RECONCILE_BY_MAX,
                                        IDEM__TEXT_UTF8, err)) != 0 ||
        (rc = idem__external_check_text("resolution.provider_ref", r->provider_ref,
                                        IDEM__PROVIDER_REF_MAX, IDEM__TEXT_ASCII, err)) != 0)
        return rc;
    if (r->receipt == NULL && r->receipt_len != 0)
        return idem__error_field(err, IDEM_EINVAL, "resolution.receipt",
                                 "is NULL but receipt_len is %zu", r->receipt_len);
    return 0;
}

/* The receipt later calls get: the resolver's JSON, or one saying how it was resolved; as
 * canonical JSON. */
static int make_receipt(char **out, size_t *len, const idem_resolution *r, idem_error *err)
{
    json_t *doc;
    int rc;

    if (r->receipt != NULL) {
        rc = idem_jcs_canonicalize(out, len, r->receipt, r->receipt_len, NULL, err);
        if (rc == IDEM_EINVAL) {
            idem__error_context(err, "resolution.receipt");
            snprintf(err->field, sizeof(err->field), "resolution.receipt");
        }
        return rc;
    }
    doc = json_pack("{s:s, s:s}", "resolution", resolution_names[r->as], "note", r->note);
    if (doc != NULL && r->provider_ref != NULL)
        json_object_set_new(doc, "provider_ref", json_string(r->provider_ref));
    if (doc == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "receipt: out of memory");
    rc = idem_jcs_serialize(out, len, doc, err);
    json_decref(doc);
    return rc;
}

/* Why nothing changed, from the record as it was. */
static int refused(const PGresult *res, const char *tenant, const char *operation_id,
                   idem_error *err)
{
    int external = strcmp(PQgetvalue(res, 0, 3), "t") == 0;

    if (PQgetisnull(res, 0, 2))
        return idem__error_set(err, IDEM_ENOTFOUND, "no operation %s in tenant %s", operation_id,
                               tenant);
    if (!external && strcmp(PQgetvalue(res, 0, 2), "pending") == 0)
        return idem__error_set(err, IDEM_EBUSY,
                               "operation %s is pending for less than %d s: an attempt may still "
                               "be running; resolve it once it is listed as stalled_pending",
                               operation_id, IDEM_RECONCILE_STALLED_AFTER_S);
    if (!external)
        return idem__error_set(err, IDEM_ENOTFOUND,
                               "no external operation or stalled local record %s in tenant %s: "
                               "it is a local record, already %s",
                               operation_id, tenant, PQgetvalue(res, 0, 2));
    if (strcmp(PQgetvalue(res, 0, 4), "t") == 0)
        return idem__error_set(err, IDEM_EBUSY,
                               "operation %s has a live lease: an attempt is running; resolve it "
                               "after it reports or its lease lapses",
                               operation_id);
    return idem__error_set(err, IDEM_ECONFLICT,
                           "operation %s is already %s; only an unknown or abandoned outcome is "
                           "resolved",
                           operation_id, PQgetvalue(res, 0, 2));
}

/* Who resolves: @by, or else the database role, read first (Citus refuses a function that
 * is not immutable inside COALESCE in these statements). @name holds the role. */
static int resolver_name(const char **out, char *name, size_t size, PGconn *conn, const char *by,
                         idem_error *err)
{
    PGresult *res = NULL;
    int rc;

    *out = by;
    if (by != NULL)
        return 0;
    rc = idem__pg_exec(&res, conn, "SELECT current_user::text", 0, NULL, NULL, NULL, 0,
                       "reading the resolving role", err);
    if (rc != 0)
        return rc;
    snprintf(name, size, "%s", PQntuples(res) == 1 ? PQgetvalue(res, 0, 0) : "");
    PQclear(res);
    *out = name;
    return 0;
}

int idem_external_resolve(PGconn *conn, const char *tenant, const char *operation_id,
                          const idem_resolution *r, idem_error *err)
{
    idem_error local = IDEM_ERROR_INIT;
    const char *values[7] = {tenant, operation_id, NULL, NULL, NULL, NULL, NULL};
    int lengths[7] = {0}, formats[7] = {0};
    char *receipt = NULL;
    size_t len = 0;
    PGresult *res = NULL;
    char role[IDEM_RECONCILE_BY_MAX + 1];
    int rc;

    err = err != NULL ? err : &local;
    if (conn == NULL || PQstatus(conn) != CONNECTION_OK)
        return idem__error_field(err, IDEM_EINVAL, "conn", "must be an open connection");
    if (r == NULL)
        return idem__error_field(err, IDEM_EINVAL, "resolution", "must not be NULL");
    if ((rc = idem_validate_tenant(tenant, err)) != 0 ||
        (rc = idem_validate_operation_id(operation_id, err)) != 0 ||
        (rc = check_resolution(r, err)) != 0 || (rc = make_receipt(&receipt, &len, r, err)) != 0)
        return rc;
    values[2] = r->as == IDEM_RESOLVE_COMPLETED ? "completed" : "failed";
    values[3] = receipt;
    lengths[3] = (int)len;
    formats[3] = 1;
    values[4] = r->provider_ref;
    values[5] = r->note;
    if ((rc = resolver_name(&values[6], role, sizeof(role), conn, r->by, err)) != 0) {
        free(receipt);
        return rc;
    }
    rc = idem__tenant_pg_exec(&res, conn, tenant, SQL_RESOLVE, 7, values, lengths, formats, 0,
                              "resolving the external operation", err);
    free(receipt);
    if (rc != 0)
        return rc;
    if (strcmp(PQgetvalue(res, 0, 0), "0") == 0)
        rc = refused(res, tenant, operation_id, err);
    PQclear(res);
    return rc;
}
