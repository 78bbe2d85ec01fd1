/* Durable intents (include/idem/intent.h): the intent object, its accessors, and running
 * the module's statements on a pooled connection. */
#include "idem/validate.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "error.h"
#include "intent_internal.h"
#include "store_internal.h"
#include "tenant.h"

static const char *const state_names[] = {"approved", "attempted", "done", "needs_reconciliation",
                                          "cancelled"};

const char *idem_intent_state_name(idem_intent_state state)
{
    if ((unsigned)state >= sizeof(state_names) / sizeof(state_names[0]))
        return "unknown";
    return state_names[state];
}

int idem__intent_state_parse(const char *name)
{
    for (size_t i = 0; i < sizeof(state_names) / sizeof(state_names[0]); i++)
        if (strcmp(name, state_names[i]) == 0)
            return (int)i;
    return -1;
}

static char *cell(const PGresult *res, int row, int col, int *failed)
{
    char *s;

    if (PQgetisnull(res, row, col))
        return NULL;
    s = strdup(PQgetvalue(res, row, col));
    *failed |= s == NULL;
    return s;
}

static long long cell_ll(const PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? 0 : strtoll(PQgetvalue(res, row, col), NULL, 10);
}

static void clear_strings(idem_intent *t)
{
    free(t->tenant);
    free(t->operation_id);
    free(t->approval_ref);
    free(t->tool);
    free(t->arguments);
    free(t->approved_by);
    free(t->result_status);
    free(t->last_error);
    free(t->lease_owner);
}

int idem__intent_from_row(idem_intent *t, const PGresult *res, int row, idem_error *err)
{
    int failed = 0, state = idem__intent_state_parse(PQgetvalue(res, row, COL_STATE));

    clear_strings(t);
    t->tenant = cell(res, row, COL_TENANT, &failed);
    t->operation_id = cell(res, row, COL_OPERATION_ID, &failed);
    t->approval_ref = cell(res, row, COL_APPROVAL_REF, &failed);
    t->tool = cell(res, row, COL_TOOL, &failed);
    t->arguments = cell(res, row, COL_ARGUMENTS, &failed);
    t->approved_by = cell(res, row, COL_APPROVED_BY, &failed);
    t->result_status = cell(res, row, COL_RESULT_STATUS, &failed);
    t->last_error = cell(res, row, COL_LAST_ERROR, &failed);
    t->lease_owner = NULL; /* a lease token is the holder's alone: recovery sets it */
    snprintf(t->fingerprint_hex, sizeof(t->fingerprint_hex), "%s",
             PQgetvalue(res, row, COL_FINGERPRINT_HEX));
    t->payload_version = (int)cell_ll(res, row, COL_PAYLOAD_VERSION);
    t->attempts = (int)cell_ll(res, row, COL_ATTEMPTS);
    t->result_attempt = (int)cell_ll(res, row, COL_RESULT_ATTEMPT);
    t->approved_at = cell_ll(res, row, COL_APPROVED_AT_US);
    t->lease_until = cell_ll(res, row, COL_LEASE_UNTIL_US);
    t->state = state >= 0 ? (idem_intent_state)state : IDEM_INTENT_APPROVED;
    t->is_new = PQnfields(res) > INTENT_COLS && strcmp(PQgetvalue(res, row, INTENT_COLS), "t") == 0;
    if (failed)
        return idem__error_set(err, IDEM_ENOMEM, "intent: out of memory");
    return 0;
}

idem_intent *idem__intent_new_from_row(const PGresult *res, int row)
{
    idem_intent *t = calloc(1, sizeof(*t));

    if (t != NULL && idem__intent_from_row(t, res, row, NULL) != 0) {
        idem_intent_free(t);
        t = NULL;
    }
    return t;
}

void idem_intent_free(idem_intent *t)
{
    if (t == NULL)
        return;
    clear_strings(t);
    free(t);
}

int idem__intent_check_key(const char *tenant, const char *operation_id, idem_error *err)
{
    int rc = idem_validate_tenant(tenant, err);

    return rc != 0 ? rc : idem_validate_operation_id(operation_id, err);
}

int idem__intent_run(PGresult **out, idem_store *store, uint64_t deadline_ms, const char *tenant,
                     idem__pipe_cmd *cmds, size_t n, idem_error *err)
{
    idem__pipe_cmd all[3 + IDEM__TENANT_EXTRA];
    idem__tx_settings settings;
    idem_conn *conn = NULL;
    size_t first = 0, last, total = n, failed_at = 0;
    int rc;

    if (n == 0 || n > 3)
        return idem__error_set(err, IDEM_EINVAL, "intent: bad pipeline of %zu commands", n);
    if ((rc = idem__pool_checkout(&conn, store->pool, deadline_ms, err)) != 0)
        return rc;
    idem__tx_settings_for(&settings, conn, tenant);
    total = idem__tenant_wrap(all, &settings, idem__tenant_form_for(conn), cmds, n, &first);
    last = first + n - 1;
    rc = idem__conn_pipeline(conn, all, total, &failed_at, err);
    idem_pool_release(conn);
    if (rc == 0) {
        *out = all[last].result;
        all[last].result = NULL;
    }
    idem__store_pipe_clear(all, total);
    return idem__error_misconfigured(err, rc);
}

int idem__intent_run1(PGresult **out, idem_store *store, uint64_t deadline_ms, const char *tenant,
                      const idem__stmt *stmt, const char *const *values, idem_error *err)
{
    idem__pipe_cmd cmd = {stmt, NULL, 0, values, NULL, NULL, 0, NULL};

    return idem__intent_run(out, store, deadline_ms, tenant, &cmd, 1, err);
}

const char *idem_intent_tenant(const idem_intent *t)
{
    return t != NULL ? t->tenant : NULL;
}

const char *idem_intent_operation_id(const idem_intent *t)
{
    return t != NULL ? t->operation_id : NULL;
}

const char *idem_intent_approval_ref(const idem_intent *t)
{
    return t != NULL ? t->approval_ref : NULL;
}

const char *idem_intent_tool(const idem_intent *t)
{
    return t != NULL ? t->tool : NULL;
}

int idem_intent_payload_version(const idem_intent *t)
{
    return t != NULL ? t->payload_version : 0;
}

const char *idem_intent_arguments(const idem_intent *t)
{
    return t != NULL ? t->arguments : NULL;
}

const char *idem_intent_approved_by(const idem_intent *t)
{
    return t != NULL ? t->approved_by : NULL;
}

int64_t idem_intent_approved_at(const idem_intent *t)
{
    return t != NULL ? t->approved_at : 0;
}

idem_intent_state idem_intent_current_state(const idem_intent *t)
{
    return t != NULL ? t->state : IDEM_INTENT_APPROVED;
}

int idem_intent_is_new(const idem_intent *t)
{
    return t != NULL ? t->is_new : 0;
}

int idem_intent_attempts(const idem_intent *t)
{
    return t != NULL ? t->attempts : 0;
}

int idem_intent_result_attempt(const idem_intent *t)
{
    return t != NULL ? t->result_attempt : 0;
}

const char *idem_intent_result_status(const idem_intent *t)
{
    return t != NULL ? t->result_status : NULL;
}

const char *idem_intent_last_error(const idem_intent *t)
{
    return t != NULL ? t->last_error : NULL;
}

int64_t idem_intent_lease_until(const idem_intent *t)
{
    return t != NULL ? t->lease_until : 0;
}
