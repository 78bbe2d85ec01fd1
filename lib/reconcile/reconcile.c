/* Reconciliation items (include/idem/sys/reconcile.h): recorded by the store, listed, shown
 * and resolved by operators. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "exec.h"
#include "idem/sys/reconcile.h"
#include "idem/validate.h"
#include "reconcile_check.h"
#include "reconcile_internal.h"
#include "tenant.h"

#define US(col) "(extract(epoch FROM " col ") * 1000000)::int8"

/* The columns of an item, in the order item_from_row() reads them. */
#define ITEM_COLUMNS                                                                               \
    "tenant, operation_id, kind, tool, encode(fingerprint, 'hex'),"                                \
    " CASE WHEN fingerprint_matches IS NULL THEN -1 WHEN fingerprint_matches THEN 1 ELSE 0 END,"   \
    " count, " US("first_seen") ", " US("last_seen") ", coalesce(" US(                             \
        "resolved_at") ", 0),"                                                                     \
                       " resolved_by, note"

/* The recorded items, and an open item of kind stalled_pending for each local record left
 * pending past IDEM_RECONCILE_STALLED_AFTER_S that has none recorded yet (no request came
 * for it since): read from the record, count 0, seen when it was claimed. */
#define ITEMS_AND_STALLED                                                                          \
    "(SELECT tenant, operation_id, kind, tool, fingerprint, fingerprint_matches, count,"           \
    " first_seen, last_seen, resolved_at, resolved_by, note FROM idem.reconciliation_items"        \
    " UNION ALL SELECT o.tenant, o.operation_id, '" IDEM__RECONCILE_STALLED "', o.tool,"           \
    " o.fingerprint, true, 0::int8, o.created_at, o.created_at, NULL::timestamptz, NULL::text,"    \
    " NULL::text FROM idem.operations o WHERE" IDEM__STALLED_SQL(                                  \
        "o") " AND NOT EXISTS (SELECT 1"                                                           \
             " FROM idem.reconciliation_items r WHERE r.tenant = o.tenant"                         \
             " AND r.operation_id = o.operation_id AND r.kind = '" IDEM__RECONCILE_STALLED         \
             "')) AS i"

/* $1 tenant, $2 operation_id, $3 kind (each NULL for any), $4 state (0 any, 1 open,
 * 2 resolved), $5 since (microseconds since the epoch), $6 limit (NULL for none). */
static const char SQL_LIST[] =
    "SELECT " ITEM_COLUMNS " FROM " ITEMS_AND_STALLED
    " WHERE ($1::text IS NULL OR tenant = $1) AND ($2::text IS NULL OR operation_id = $2)"
    " AND ($3::text IS NULL OR kind = $3)"
    " AND ($4::int4 = 0 OR ($4 = 1) = (resolved_at IS NULL))"
    " AND last_seen >= 'epoch'::timestamptz + $5::int8 * interval '1 microsecond'"
    " ORDER BY last_seen DESC, tenant, operation_id, kind LIMIT $6::int8";

static const char SQL_RECORD[] =
    "SELECT state, tool, payload_version, encode(fingerprint, 'hex'), response, trace_id,"
    " " US("created_at") ", coalesce(" US("completed_at") ", 0), " US(
        "expires_at") ","
                      " coalesce(" US("forget_at") ", 0), coalesce(" US(
                          "expired_at") ", 0)"
                                        " FROM idem.operations WHERE tenant = $1 AND operation_id "
                                        "= $2";

/* coalesce($5, current_user) as Citus takes it: no COALESCE around a function that is not
 * immutable. concat() skips NULLs, and the array's element 2 does not exist. */
#define RESOLVER "concat($5::text, (ARRAY[current_user::text])[1 + ($5 IS NOT NULL)::int])"

/* $1 tenant, $2 operation_id, $3 kind or NULL, $4 note, $5 by or NULL. Returns how many
 * were resolved, and how many match at all (to tell "already resolved" from "none"). */
static const char SQL_RESOLVE[] =
    "WITH done AS (UPDATE idem.reconciliation_items"
    " SET resolved_at = now(), resolved_by = " RESOLVER ", note = $4"
    " WHERE tenant = $1 AND operation_id = $2 AND ($3::text IS NULL OR kind = $3)"
    " AND resolved_at IS NULL RETURNING 1)"
    " SELECT (SELECT count(*) FROM done), (SELECT count(*) FROM idem.reconciliation_items"
    " WHERE tenant = $1 AND operation_id = $2 AND ($3::text IS NULL OR kind = $3))";

/* A repeated request keeps the earlier verdict on its fingerprint when it cannot be
 * compared any more (the tombstone is gone) but is the same request. */
static const idem__stmt stmt_record = {
    "idem_reconcile_record",
    "INSERT INTO idem.reconciliation_items AS r"
    " (tenant, operation_id, kind, tool, fingerprint, fingerprint_matches)"
    " VALUES ($1, $2, $3, $4, $5, $6::bool)"
    " ON CONFLICT (tenant, operation_id, kind) DO UPDATE SET tool = EXCLUDED.tool,"
    " fingerprint = EXCLUDED.fingerprint,"
    " fingerprint_matches = CASE WHEN EXCLUDED.fingerprint_matches IS NULL"
    " AND EXCLUDED.fingerprint = r.fingerprint THEN r.fingerprint_matches"
    " ELSE EXCLUDED.fingerprint_matches END,"
    " last_seen = EXCLUDED.last_seen, count = r.count + 1, resolved_at = NULL,"
    " resolved_by = NULL",
    6};

struct idem_reconcile_items {
    PGresult *res; /* the items' strings point into it */
    idem_reconcile_item *items;
    size_t count;
};

struct idem_reconcile_key {
    PGresult *res; /* the record's strings point into it */
    idem_reconcile_record record;
    int has_record;
    char *receipt; /* the record's receipt, NUL-terminated */
    idem_reconcile_items *items;
};

int idem__reconcile_record(idem_conn *conn, const char *tenant, const char *operation_id,
                           const char *kind, const char *tool, const idem_fingerprint *fp,
                           int matches, idem_error *err)
{
    const char *values[6] = {tenant,
                             operation_id,
                             kind,
                             tool,
                             (const char *)fp->bytes,
                             matches < 0 ? NULL
                             : matches   ? "t"
                                         : "f"};
    const int lengths[6] = {0, 0, 0, 0, IDEM_FINGERPRINT_SIZE, 0};
    const int formats[6] = {0, 0, 0, 0, 1, 0};
    PGresult *res = NULL;
    int rc = idem__tenant_exec(&res, conn, tenant, &stmt_record, values, lengths, formats, 0, err);

    if (rc != 0)
        return idem__error_context(err, "recording the reconciliation item");
    PQclear(res);
    return 0;
}

/* ---- reading rows ---------------------------------------------------------------------- */

static const char *text_or_null(const PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? NULL : PQgetvalue(res, row, col);
}

static long long cell_ll(const PGresult *res, int row, int col)
{
    return strtoll(PQgetvalue(res, row, col), NULL, 10);
}

static void item_from_row(idem_reconcile_item *it, const PGresult *res, int row)
{
    it->tenant = PQgetvalue(res, row, 0);
    it->operation_id = PQgetvalue(res, row, 1);
    it->kind = PQgetvalue(res, row, 2);
    it->tool = PQgetvalue(res, row, 3);
    snprintf(it->fingerprint, sizeof(it->fingerprint), "%s", PQgetvalue(res, row, 4));
    it->fingerprint_matches = (int)cell_ll(res, row, 5);
    it->count = cell_ll(res, row, 6);
    it->first_seen = cell_ll(res, row, 7);
    it->last_seen = cell_ll(res, row, 8);
    it->resolved_at = cell_ll(res, row, 9);
    it->resolved_by = text_or_null(res, row, 10);
    it->note = text_or_null(res, row, 11);
}

/* Take ownership of @res (also on failure). */
static int items_from_result(idem_reconcile_items **out, PGresult *res, idem_error *err)
{
    idem_reconcile_items *list = calloc(1, sizeof(*list));
    size_t n = (size_t)PQntuples(res);

    if (list == NULL || (n > 0 && (list->items = calloc(n, sizeof(*list->items))) == NULL)) {
        free(list);
        PQclear(res);
        return idem__error_set(err, IDEM_ENOMEM, "reconciliation items: out of memory");
    }
    list->res = res;
    list->count = n;
    for (size_t i = 0; i < n; i++)
        item_from_row(&list->items[i], res, (int)i);
    *out = list;
    return 0;
}

static int query_items(idem_reconcile_items **out, PGconn *conn, const idem_reconcile_filter *f,
                       idem_error *err)
{
    char state[8], since[24], limit[16];
    const char *values[6] = {f->tenant, f->operation_id, f->kind,
                             state,     since,           f->limit > 0 ? limit : NULL};
    PGresult *res = NULL;
    int rc;

    snprintf(state, sizeof(state), "%d", (int)f->state);
    snprintf(since, sizeof(since), "%lld", (long long)f->since);
    snprintf(limit, sizeof(limit), "%u", f->limit);
    /* Across tenants only a role allowed it sees anything (idem_operator, see tenant.h). */
    if (f->tenant != NULL)
        rc = idem__tenant_pg_exec(&res, conn, f->tenant, SQL_LIST, 6, values, NULL, NULL, 0,
                                  "listing reconciliation items", err);
    else
        rc = idem__pg_exec(&res, conn, SQL_LIST, 6, values, NULL, NULL, 0,
                           "listing reconciliation items", err);
    if (rc != 0)
        return rc;
    return items_from_result(out, res, err);
}

int idem_reconcile_filter_init(idem_reconcile_filter *filter, unsigned int version)
{
    static const idem_reconcile_filter defaults = IDEM_RECONCILE_FILTER_INIT;

    return idem__struct_init(filter, &defaults, sizeof(defaults), version,
                             IDEM_RECONCILE_FILTER_VERSION);
}

int idem_reconcile_list(idem_reconcile_items **out, PGconn *conn,
                        const idem_reconcile_filter *filter, idem_error *err)
{
    static const idem_reconcile_filter every = IDEM_RECONCILE_FILTER_INIT;
    int rc;

    if (out == NULL)
        return idem__error_field(err, IDEM_EINVAL, "out", "must not be NULL");
    if ((rc = idem__reconcile_check_conn(conn, err)) != 0)
        return rc;
    if (filter == NULL)
        filter = &every;
    if ((rc = idem__reconcile_check_filter(filter, err)) != 0)
        return rc;
    return query_items(out, conn, filter, err);
}

size_t idem_reconcile_items_count(const idem_reconcile_items *items)
{
    return items != NULL ? items->count : 0;
}

const idem_reconcile_item *idem_reconcile_items_at(const idem_reconcile_items *items, size_t i)
{
    return items != NULL && i < items->count ? &items->items[i] : NULL;
}

void idem_reconcile_items_free(idem_reconcile_items *items)
{
    if (items == NULL)
        return;
    PQclear(items->res);
    free(items->items);
    free(items);
}

/* ---- show ------------------------------------------------------------------------------ */

/* A bytea cell (text format) as its exact bytes, NUL-terminated; NULL when out of memory. */
static char *unescape(const PGresult *res, int col, size_t *len)
{
    unsigned char *bytes = PQunescapeBytea((const unsigned char *)PQgetvalue(res, 0, col), len);
    char *copy = bytes != NULL ? malloc(*len + 1) : NULL;

    if (copy != NULL) {
        memcpy(copy, bytes, *len);
        copy[*len] = '\0';
    }
    PQfreemem(bytes);
    return copy;
}

static int record_from_row(idem_reconcile_key *key, const char *tenant, const char *operation_id,
                           idem_error *err)
{
    const PGresult *res = key->res;
    idem_reconcile_record *r = &key->record;
    size_t len = 0;

    r->tenant = tenant;
    r->operation_id = operation_id;
    r->state = PQgetvalue(res, 0, 0);
    r->tool = PQgetvalue(res, 0, 1);
    r->payload_version = (int)cell_ll(res, 0, 2);
    snprintf(r->fingerprint, sizeof(r->fingerprint), "%s", PQgetvalue(res, 0, 3));
    if (!PQgetisnull(res, 0, 4) && (key->receipt = unescape(res, 4, &len)) == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "receipt: out of memory");
    r->receipt = key->receipt;
    r->receipt_len = len;
    r->trace_id = text_or_null(res, 0, 5);
    r->created_at = cell_ll(res, 0, 6);
    r->completed_at = cell_ll(res, 0, 7);
    r->expires_at = cell_ll(res, 0, 8);
    r->forget_at = cell_ll(res, 0, 9);
    r->expired_at = cell_ll(res, 0, 10);
    key->has_record = 1;
    return 0;
}

static int read_record(idem_reconcile_key *key, PGconn *conn, const char *tenant,
                       const char *operation_id, idem_error *err)
{
    const char *values[2] = {tenant, operation_id};
    int rc = idem__tenant_pg_exec(&key->res, conn, tenant, SQL_RECORD, 2, values, NULL, NULL, 0,
                                  "reading the operation record", err);

    if (rc != 0 || PQntuples(key->res) == 0)
        return rc;
    return record_from_row(key, tenant, operation_id, err);
}

int idem_reconcile_show(idem_reconcile_key **out, PGconn *conn, const char *tenant,
                        const char *operation_id, idem_error *err)
{
    idem_reconcile_filter filter = IDEM_RECONCILE_FILTER_INIT;
    idem_reconcile_key *key = NULL;
    int rc;

    if (out == NULL)
        return idem__error_field(err, IDEM_EINVAL, "out", "must not be NULL");
    if ((rc = idem__reconcile_check_conn(conn, err)) != 0 ||
        (rc = idem_validate_tenant(tenant, err)) != 0 ||
        (rc = idem_validate_operation_id(operation_id, err)) != 0)
        return rc;
    key = calloc(1, sizeof(*key));
    if (key == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "reconciliation: out of memory");
    filter.tenant = tenant;
    filter.operation_id = operation_id;
    filter.limit = 0;
    rc = read_record(key, conn, tenant, operation_id, err);
    if (rc == 0)
        rc = query_items(&key->items, conn, &filter, err);
    if (rc == 0 && !key->has_record && key->items->count == 0)
        rc = idem__error_set(err, IDEM_ENOTFOUND,
                             "no record, tombstone or reconciliation item for operation %s in "
                             "tenant %s",
                             operation_id, tenant);
    if (rc != 0) {
        idem_reconcile_key_free(key);
        return rc;
    }
    *out = key;
    return 0;
}

const idem_reconcile_record *idem_reconcile_key_record(const idem_reconcile_key *key)
{
    return key != NULL && key->has_record ? &key->record : NULL;
}

const idem_reconcile_items *idem_reconcile_key_items(const idem_reconcile_key *key)
{
    return key != NULL ? key->items : NULL;
}

void idem_reconcile_key_free(idem_reconcile_key *key)
{
    if (key == NULL)
        return;
    PQclear(key->res);
    free(key->receipt);
    idem_reconcile_items_free(key->items);
    free(key);
}

/* ---- resolve --------------------------------------------------------------------------- */

int idem_reconcile_resolution_init(idem_reconcile_resolution *res, unsigned int version)
{
    static const idem_reconcile_resolution defaults = IDEM_RECONCILE_RESOLUTION_INIT;

    return idem__struct_init(res, &defaults, sizeof(defaults), version,
                             IDEM_RECONCILE_RESOLUTION_VERSION);
}

static int check_resolution(const char *tenant, const char *operation_id,
                            const idem_reconcile_resolution *r, idem_error *err)
{
    int rc;

    if ((rc = idem_validate_tenant(tenant, err)) != 0 ||
        (rc = idem_validate_operation_id(operation_id, err)) != 0)
        return rc;
    if (r == NULL)
        return idem__error_field(err, IDEM_EINVAL, "resolution", "must not be NULL");
    if ((rc = idem__check_version(err, r->version, IDEM_RECONCILE_RESOLUTION_VERSION,
                                  "resolution")) != 0)
        return rc;
    if (r->kind != NULL && (rc = idem__reconcile_check_kind("resolution.kind", r->kind, err)) != 0)
        return rc;
    if (r->note == NULL)
        return idem__error_field(err, IDEM_EINVAL, "resolution.note",
                                 "is missing (NULL): say what was found or done");
    if ((rc = idem__reconcile_check_text("resolution.note", r->note, IDEM_RECONCILE_NOTE_MAX, 1,
                                         err)) != 0)
        return rc;
    return r->by != NULL
               ? idem__reconcile_check_text("resolution.by", r->by, IDEM_RECONCILE_BY_MAX, 0, err)
               : 0;
}

int idem_reconcile_resolve_items(unsigned int *out, PGconn *conn, const char *tenant,
                                 const char *operation_id,
                                 const idem_reconcile_resolution *resolution, idem_error *err)
{
    const char *values[5] = {tenant, operation_id, NULL, NULL, NULL};
    const char *kind;
    PGresult *res = NULL;
    long long resolved, matching;
    int rc;

    if ((rc = idem__reconcile_check_conn(conn, err)) != 0 ||
        (rc = check_resolution(tenant, operation_id, resolution, err)) != 0)
        return rc;
    kind = values[2] = resolution->kind;
    values[3] = resolution->note;
    values[4] = resolution->by;
    rc = idem__tenant_pg_exec(&res, conn, tenant, SQL_RESOLVE, 5, values, NULL, NULL, 0,
                              "resolving reconciliation items", err);
    if (rc != 0)
        return rc;
    resolved = cell_ll(res, 0, 0);
    matching = cell_ll(res, 0, 1);
    PQclear(res);
    if (resolved == 0)
        return idem__error_set(err, IDEM_ENOTFOUND,
                               "no open reconciliation item%s%s for "
                               "operation %s in tenant %s%s",
                               kind != NULL ? " of kind " : "", kind != NULL ? kind : "",
                               operation_id, tenant, matching > 0 ? " (already resolved)" : "");
    if (out != NULL)
        *out = (unsigned int)resolved;
    return 0;
}
