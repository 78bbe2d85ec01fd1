/* Reading one record (idem_store_get(), idem_operation): its state, fingerprint, receipt
 * and windows, as its tenant sees it under row-level security. */
#include "idem/validate.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "error.h"
#include "exec.h"
#include "store_internal.h"
#include "tenant.h"

struct idem_operation {
    char *tenant, *operation_id, *tool, *trace_id, *receipt;
    idem_state state;
    size_t receipt_len;
    int payload_version;
    idem_fingerprint fingerprint;
    int64_t created_at, completed_at, expires_at, forget_at, expired_at;
};

static int64_t read_int8(const PGresult *res, int col)
{
    const unsigned char *p = (const unsigned char *)PQgetvalue(res, 0, col);
    uint64_t v = 0;

    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

static char *dup_value(const PGresult *res, int col, size_t *len)
{
    size_t n = (size_t)PQgetlength(res, 0, col);
    char *s;

    if (PQgetisnull(res, 0, col))
        return NULL;
    s = malloc(n + 1);
    if (s != NULL) {
        memcpy(s, PQgetvalue(res, 0, col), n);
        s[n] = '\0';
    }
    if (len != NULL)
        *len = n;
    return s;
}

static const char *const state_names[] = {"pending", "completed", "failed", "expired",
                                          "outcome_unknown"};

const char *idem_state_name(idem_state state)
{
    if ((unsigned)state >= sizeof(state_names) / sizeof(state_names[0]))
        return "unknown";
    return state_names[state];
}

static idem_state state_from_text(const char *text)
{
    for (size_t i = 0; i < sizeof(state_names) / sizeof(state_names[0]); i++) {
        if (strcmp(text, state_names[i]) == 0)
            return (idem_state)i;
    }
    return IDEM_STATE_PENDING;
}

static idem_operation *operation_from_row(const PGresult *res, const char *tenant,
                                          const char *operation_id)
{
    idem_operation *op = calloc(1, sizeof(*op));
    const unsigned char *v;

    if (op == NULL)
        return NULL;
    op->tenant = strdup(tenant);
    op->operation_id = strdup(operation_id);
    op->tool = dup_value(res, 0, NULL);
    v = (const unsigned char *)PQgetvalue(res, 0, 1);
    op->payload_version =
        (int)((uint32_t)v[0] << 24 | (uint32_t)v[1] << 16 | (uint32_t)v[2] << 8 | v[3]);
    memcpy(op->fingerprint.bytes, PQgetvalue(res, 0, 2), IDEM_FINGERPRINT_SIZE);
    op->state = state_from_text(PQgetvalue(res, 0, 3));
    op->receipt = dup_value(res, 4, &op->receipt_len);
    op->trace_id = dup_value(res, 5, NULL);
    op->created_at = read_int8(res, 6);
    op->completed_at = read_int8(res, 7);
    op->expires_at = read_int8(res, 8);
    op->forget_at = read_int8(res, 9);
    op->expired_at = read_int8(res, 10);
    if (op->tenant == NULL || op->operation_id == NULL || op->tool == NULL ||
        (op->receipt == NULL && !PQgetisnull(res, 0, 4)) ||
        (op->trace_id == NULL && !PQgetisnull(res, 0, 5))) {
        idem_operation_free(op);
        return NULL;
    }
    return op;
}

int idem_store_get(idem_operation **out, idem_store *store, const char *tenant,
                   const char *operation_id, idem_error *err)
{
    const char *values[2] = {tenant, operation_id};
    idem_conn *conn = NULL;
    PGresult *res = NULL;
    idem_operation *op;
    int rc;

    if (out == NULL || store == NULL)
        return idem__error_field(err, IDEM_EINVAL, out == NULL ? "out" : "store",
                                 "must not be NULL");
    if ((rc = idem_validate_tenant(tenant, err)) != 0 ||
        (rc = idem_validate_operation_id(operation_id, err)) != 0)
        return rc;
    rc = idem__pool_checkout(&conn, store->pool, idem__store_deadline(store), err);
    if (rc == 0)
        rc = idem__tenant_exec(&res, conn, tenant, &idem__store_stmt_get, values, NULL, NULL, 1,
                               err);
    idem_pool_release(conn);
    if (rc != 0)
        return rc;
    if (PQntuples(res) != 1) {
        PQclear(res);
        return idem__error_set(err, IDEM_ENOTFOUND, "no operation %s in tenant %s", operation_id,
                               tenant);
    }
    op = operation_from_row(res, tenant, operation_id);
    PQclear(res);
    if (op == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "operation: out of memory");
    *out = op;
    return 0;
}

void idem_operation_free(idem_operation *op)
{
    if (op == NULL)
        return;
    free(op->tenant);
    free(op->operation_id);
    free(op->tool);
    free(op->trace_id);
    free(op->receipt);
    free(op);
}

const char *idem_operation_tenant(const idem_operation *op)
{
    if (op == NULL)
        return NULL;
    return op->tenant;
}

const char *idem_operation_id(const idem_operation *op)
{
    if (op == NULL)
        return NULL;
    return op->operation_id;
}

const char *idem_operation_tool(const idem_operation *op)
{
    if (op == NULL)
        return NULL;
    return op->tool;
}

int idem_operation_payload_version(const idem_operation *op)
{
    if (op == NULL)
        return 0;
    return op->payload_version;
}

idem_state idem_operation_state(const idem_operation *op)
{
    if (op == NULL)
        return IDEM_STATE_PENDING;
    return op->state;
}

const idem_fingerprint *idem_operation_fingerprint(const idem_operation *op)
{
    if (op == NULL)
        return NULL;
    return &op->fingerprint;
}

const char *idem_operation_receipt(const idem_operation *op, size_t *len)
{
    if (len != NULL)
        *len = op != NULL ? op->receipt_len : 0;
    return op != NULL ? op->receipt : NULL;
}

const char *idem_operation_trace_id(const idem_operation *op)
{
    if (op == NULL)
        return NULL;
    return op->trace_id;
}

int64_t idem_operation_created_at(const idem_operation *op)
{
    if (op == NULL)
        return 0;
    return op->created_at;
}

int64_t idem_operation_completed_at(const idem_operation *op)
{
    if (op == NULL)
        return 0;
    return op->completed_at;
}

int64_t idem_operation_expires_at(const idem_operation *op)
{
    if (op == NULL)
        return 0;
    return op->expires_at;
}

int64_t idem_operation_forget_at(const idem_operation *op)
{
    if (op == NULL)
        return 0;
    return op->forget_at;
}

int64_t idem_operation_expired_at(const idem_operation *op)
{
    if (op == NULL)
        return 0;
    return op->expired_at;
}
