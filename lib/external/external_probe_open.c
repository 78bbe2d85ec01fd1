/* Asking the provider about a tenant's open unknown outcomes, a batch at a time
 * (external.h, idem_external_probe_open()): list them, then idem_external_probe() each. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "external_internal.h"

#define MAX_LIMIT 1000u

/* The open outcome_unknown items of tenant $1 whose records are still unknown and whose
 * tools ($2, text[]) have a resolver, those asked least recently first: at most $3. Both
 * tables are read by tenant, which Citus routes to one shard. */
static const idem__stmt stmt_open = {
    "idem_external_probe_open",
    "SELECT o.operation_id FROM idem.reconciliation_items r"
    " JOIN idem.operations o ON o.tenant = r.tenant AND o.operation_id = r.operation_id"
    " WHERE r.tenant = $1 AND r.kind = '" IDEM__RECONCILE_OUTCOME_UNKNOWN "'"
    " AND r.resolved_at IS NULL AND o.tenant = $1 AND o.state = 'outcome_unknown'"
    " AND o.attempts IS NOT NULL AND o.tool = ANY ($2::text[])"
    " ORDER BY (SELECT max(p.answered_at) FROM idem.external_probes p"
    " WHERE p.tenant = $1 AND p.operation_id = o.operation_id) NULLS FIRST,"
    " r.first_seen, o.operation_id LIMIT $3::int8",
    3};

int idem_external_probe_summary_init(idem_external_probe_summary *summary, unsigned int version)
{
    static const idem_external_probe_summary defaults = IDEM_EXTERNAL_PROBE_SUMMARY_INIT;

    return idem__struct_init(summary, &defaults, sizeof(defaults), version,
                             IDEM_EXTERNAL_PROBE_SUMMARY_VERSION);
}

/* The operations to ask about, into *out. */
static int list_open(PGresult **out, idem_external *ext, const char *tenant, unsigned int limit,
                     idem_error *err)
{
    char *tools = idem__external_resolver_tools(ext), max[16];
    const char *values[3] = {tenant, tools, max};
    idem_conn *conn = NULL;
    int rc;

    if (tools == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "probe: out of memory");
    snprintf(max, sizeof(max), "%u", limit);
    rc = idem__pool_checkout(&conn, ext->store->pool, idem__store_deadline(ext->store), err);
    if (rc == 0)
        rc = idem__tenant_exec(out, conn, tenant, &stmt_open, values, NULL, NULL, 0, err);
    idem_pool_release(conn);
    free(tools);
    return idem__error_misconfigured(err, rc);
}

/* Ask about one; an operation settled meanwhile (or whose resolver went) is passed over. */
static int probe_one(idem_external_probe_summary *out, idem_external *ext, const char *tenant,
                     const char *operation_id, idem_error *err)
{
    idem_external_probe_result r = IDEM_EXTERNAL_PROBE_RESULT_INIT;
    int rc = idem_external_probe(&r, ext, tenant, operation_id, err);

    if (rc == IDEM_ECONFLICT || rc == IDEM_ENOTFOUND)
        return 0;
    if (rc != 0 && rc != IDEM_EUNKNOWN)
        return rc;
    out->asked++;
    if (rc == 0)
        out->settled++;
    else
        out->unknown++;
    return 0;
}

int idem_external_probe_open(idem_external_probe_summary *out, idem_external *ext,
                             const char *tenant, unsigned int limit, idem_error *err)
{
    idem_error local = IDEM_ERROR_INIT;
    PGresult *res = NULL;
    int rc;

    err = err != NULL ? err : &local;
    idem_error_clear(err);
    if (out == NULL)
        return idem__error_field(err, IDEM_EINVAL, "out", "must not be NULL");
    if ((rc = idem__check_version(err, out->version, IDEM_EXTERNAL_PROBE_SUMMARY_VERSION, "out")) !=
        0)
        return rc;
    *out = (idem_external_probe_summary)IDEM_EXTERNAL_PROBE_SUMMARY_INIT;
    if (ext == NULL)
        return idem__error_field(err, IDEM_EINVAL, "ext", "must not be NULL");
    if ((rc = idem_validate_tenant(tenant, err)) != 0)
        return rc;
    if (limit == 0 || limit > MAX_LIMIT)
        return idem__error_field(err, IDEM_EINVAL, "limit", "must be 1 to %u, got %u", MAX_LIMIT,
                                 limit);
    if ((rc = list_open(&res, ext, tenant, limit, err)) != 0)
        return rc;
    for (int i = 0; rc == 0 && i < PQntuples(res); i++)
        rc = probe_one(out, ext, tenant, PQgetvalue(res, i, 0), err);
    if (rc == 0)
        idem_error_clear(err);
    PQclear(res);
    return rc;
}
