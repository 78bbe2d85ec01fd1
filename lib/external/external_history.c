/* An external operation's state and attempt history (external.h), on a connection the
 * caller lends: for idem-reconcile show and an operator's own tools. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "external_internal.h"
#include "idem/validate.h"
#include "idem/sys/external.h"

#define US(col) "coalesce((extract(epoch FROM " col ") * 1000000)::int8, 0)"

/* $1 tenant, $2 operation_id. */
static const char SQL_RECORD[] = "SELECT o.state, o.downstream_key, o.provider_ref, " US(
    "o.lease_expires_at") ","
                          " (o.lease_expires_at IS NOT NULL AND o.lease_expires_at > now()), "
                          "b.state,"
                          " CASE WHEN b.state = 'queued' THEN " US(
                              "b.next_attempt_at") " ELSE 0 END"
                                                   " FROM idem.operations o LEFT JOIN idem.outbox "
                                                   "b ON b.tenant = o.tenant"
                                                   " AND b.operation_id = o.operation_id"
                                                   " WHERE o.tenant = $1 AND o.operation_id = $2 "
                                                   "AND o.attempts IS NOT NULL";

static const char SQL_ATTEMPTS[] = "SELECT attempt, " US("started_at") ", " US(
    "ended_at") ", outcome, provider_ref, error"
                " FROM idem.external_attempts WHERE tenant = $1 AND operation_id = $2 ORDER BY "
                "attempt";

/* The SQLSTATE of a table that does not exist. */
#define UNDEFINED_TABLE "42P01"

/* The questions resolvers asked the provider, oldest first (migration 0011). */
static const char SQL_PROBES[] =
    "SELECT " US("answered_at") ", took_ms, asked_by, resolver, answer, provider_ref, result,"
                                " reason, changed FROM idem.external_probes WHERE tenant = $1 AND "
                                "operation_id = $2"
                                " ORDER BY probe_id";

struct idem_external_history {
    PGresult *record;   /* the record's strings point into it */
    PGresult *attempts; /* and the attempts' */
    PGresult *probes;   /* and the questions' */
    idem_external_attempt_record *items;
    size_t count;
    idem_external_probe_record *probe_items;
    size_t probe_count;
};

static const char *text_or_null(const PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? NULL : PQgetvalue(res, row, col);
}

static int read_attempts(idem_external_history *h, PGconn *conn, const char *const *values,
                         idem_error *err)
{
    int rc = idem__tenant_pg_exec(&h->attempts, conn, values[0], SQL_ATTEMPTS, 2, values, NULL,
                                  NULL, 0, "reading the attempt history", err);
    size_t n;

    if (rc != 0)
        return rc;
    n = (size_t)PQntuples(h->attempts);
    if (n > 0 && (h->items = calloc(n, sizeof(*h->items))) == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "attempt history: out of memory");
    for (size_t i = 0; i < n; i++) {
        idem_external_attempt_record *r = &h->items[i];

        r->number = (int)strtol(PQgetvalue(h->attempts, (int)i, 0), NULL, 10);
        r->started_at = idem__external_cell_us(h->attempts, (int)i, 1);
        r->ended_at = idem__external_cell_us(h->attempts, (int)i, 2);
        r->outcome = text_or_null(h->attempts, (int)i, 3);
        r->provider_ref = text_or_null(h->attempts, (int)i, 4);
        r->error = text_or_null(h->attempts, (int)i, 5);
    }
    h->count = n;
    return 0;
}

static int read_probes(idem_external_history *h, PGconn *conn, const char *const *values,
                       idem_error *err)
{
    int rc = idem__tenant_pg_exec(&h->probes, conn, values[0], SQL_PROBES, 2, values, NULL, NULL, 0,
                                  "reading the provider's answers", err);
    size_t n;

    if ((rc == IDEM_EDB || rc == IDEM_ESCHEMA) && strcmp(err->sqlstate, UNDEFINED_TABLE) == 0 &&
        PQtransactionStatus(conn) == PQTRANS_IDLE) {
        idem_error_clear(err); /* a schema before migration 0011: no answers recorded */
        return 0;
    }
    if (rc != 0)
        return rc;
    n = (size_t)PQntuples(h->probes);
    if (n > 0 && (h->probe_items = calloc(n, sizeof(*h->probe_items))) == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "attempt history: out of memory");
    for (size_t i = 0; i < n; i++) {
        idem_external_probe_record *r = &h->probe_items[i];
        const PGresult *res = h->probes;

        r->answered_at = idem__external_cell_us(res, (int)i, 0);
        r->took_ms = (int)strtol(PQgetvalue(res, (int)i, 1), NULL, 10);
        r->asked_by = PQgetvalue(res, (int)i, 2);
        r->resolver = PQgetvalue(res, (int)i, 3);
        r->answer = PQgetvalue(res, (int)i, 4);
        r->provider_ref = text_or_null(res, (int)i, 5);
        r->result = text_or_null(res, (int)i, 6);
        r->reason = text_or_null(res, (int)i, 7);
        r->changed = strcmp(PQgetvalue(res, (int)i, 8), "t") == 0;
    }
    h->probe_count = n;
    return 0;
}

int idem_external_history_get(idem_external_history **out, PGconn *conn, const char *tenant,
                              const char *operation_id, idem_error *err)
{
    const char *values[2] = {tenant, operation_id};
    idem_external_history *h = NULL;
    idem_error local = IDEM_ERROR_INIT;
    int rc;

    err = err != NULL ? err : &local;
    if (out == NULL)
        return idem__error_field(err, IDEM_EINVAL, "out", "must not be NULL");
    if (conn == NULL || PQstatus(conn) != CONNECTION_OK)
        return idem__error_field(err, IDEM_EINVAL, "conn", "must be an open connection");
    if ((rc = idem_validate_tenant(tenant, err)) != 0 ||
        (rc = idem_validate_operation_id(operation_id, err)) != 0)
        return rc;
    if ((h = calloc(1, sizeof(*h))) == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "attempt history: out of memory");
    rc = idem__tenant_pg_exec(&h->record, conn, tenant, SQL_RECORD, 2, values, NULL, NULL, 0,
                              "reading the external operation", err);
    if (rc == 0 && PQntuples(h->record) != 1)
        rc = idem__error_set(err, IDEM_ENOTFOUND, "no external operation %s in tenant %s",
                             operation_id, tenant);
    if (rc == 0)
        rc = read_attempts(h, conn, values, err);
    if (rc == 0)
        rc = read_probes(h, conn, values, err);
    if (rc != 0) {
        idem_external_history_free(h);
        return rc;
    }
    *out = h;
    return 0;
}

const char *idem_external_history_state(const idem_external_history *h)
{
    return h != NULL ? PQgetvalue(h->record, 0, 0) : NULL;
}

const char *idem_external_history_downstream_key(const idem_external_history *h)
{
    return h != NULL ? PQgetvalue(h->record, 0, 1) : NULL;
}

const char *idem_external_history_provider_ref(const idem_external_history *h)
{
    return h != NULL ? text_or_null(h->record, 0, 2) : NULL;
}

int64_t idem_external_history_lease_expires_at(const idem_external_history *h)
{
    return h != NULL ? idem__external_cell_us(h->record, 0, 3) : 0;
}

int idem_external_history_lease_live(const idem_external_history *h)
{
    return h != NULL && strcmp(PQgetvalue(h->record, 0, 4), "t") == 0;
}

const char *idem_external_history_outbox_state(const idem_external_history *h)
{
    return h != NULL ? text_or_null(h->record, 0, 5) : NULL;
}

int64_t idem_external_history_next_attempt_at(const idem_external_history *h)
{
    return h != NULL ? idem__external_cell_us(h->record, 0, 6) : 0;
}

size_t idem_external_history_count(const idem_external_history *h)
{
    return h != NULL ? h->count : 0;
}

const idem_external_attempt_record *idem_external_history_at(const idem_external_history *h,
                                                             size_t i)
{
    return h != NULL && i < h->count ? &h->items[i] : NULL;
}

size_t idem_external_history_probe_count(const idem_external_history *h)
{
    return h != NULL ? h->probe_count : 0;
}

const idem_external_probe_record *idem_external_history_probe_at(const idem_external_history *h,
                                                                 size_t i)
{
    return h != NULL && i < h->probe_count ? &h->probe_items[i] : NULL;
}

void idem_external_history_free(idem_external_history *h)
{
    if (h == NULL)
        return;
    PQclear(h->record);
    PQclear(h->attempts);
    PQclear(h->probes);
    free(h->probe_items);
    free(h->items);
    free(h);
}
