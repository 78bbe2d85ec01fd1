/* Durable intents (intent*.c): the intent object, the statements, and what each part offers
 * the others. Private to the library. */
#ifndef IDEM_LIB_INTENT_INTERNAL_H
#define IDEM_LIB_INTENT_INTERNAL_H

#include <stdint.h>

#include "exec.h"
#include "idem/intent.h"
#include "idem/uuid.h"
#include "reconcile_internal.h"

/* The statements (intent_sql.c). Each that names a tenant runs after
 * the tenant's commands (tenant.h), in a transaction of its own in the same pipeline. */
extern const idem__stmt idem__intent_stmt_approve, idem__intent_stmt_get, idem__intent_stmt_start,
    idem__intent_stmt_mark, idem__intent_stmt_finish, idem__intent_stmt_cancel,
    idem__intent_stmt_recover, idem__intent_stmt_recover_tenant, idem__intent_stmt_recover_due;

/* The columns of an intent row, in this order, as every statement returning one gives
 * them (text). */
enum intent_col {
    COL_TENANT,
    COL_OPERATION_ID,
    COL_APPROVAL_REF,
    COL_TOOL,
    COL_PAYLOAD_VERSION,
    COL_ARGUMENTS,
    COL_FINGERPRINT_HEX,
    COL_APPROVED_BY,
    COL_APPROVED_AT_US,
    COL_STATE,
    COL_ATTEMPTS,
    COL_RESULT_STATUS,
    COL_RESULT_ATTEMPT,
    COL_LAST_ERROR,
    COL_LEASE_OWNER,
    COL_LEASE_UNTIL_US,
    INTENT_COLS
};

/* lease_owner is set only in an intent that recovery leased to this worker. */
struct idem_intent {
    char *tenant, *operation_id, *approval_ref, *tool, *arguments, *approved_by;
    char *result_status, *last_error, *lease_owner;
    char fingerprint_hex[65];
    int payload_version, attempts, result_attempt, is_new;
    int64_t approved_at, lease_until;
    idem_intent_state state;
};

struct idem_intent_list {
    size_t n;
    idem_intent **items;
};

/* Fill @intent (its strings freed first) from row @row of @res. Returns 0 or IDEM_ENOMEM. */
int idem__intent_from_row(idem_intent *intent, const PGresult *res, int row, idem_error *err);

/* A new intent from row @row (NULL when out of memory). */
idem_intent *idem__intent_new_from_row(const PGresult *res, int row);

/* Run @n (at most 3) statements (with their parameters; text results) on a connection of
 * @store's pool, checked out under the call's @deadline_ms (idem__store_deadline()), in one
 * round trip, in a transaction of their own that sets the call's settings first (its
 * timeouts, and @tenant when it is not NULL: idem__tenant_wrap()). On 0 the last command's result
 * is in *out (caller PQclear()s it). A misconfigured deployment gives IDEM_ESCHEMA or IDEM_EPERM
 * with advice. */
int idem__intent_run(PGresult **out, idem_store *store, uint64_t deadline_ms, const char *tenant,
                     idem__pipe_cmd *cmds, size_t n, idem_error *err);

/* One statement: idem__intent_run() of @stmt with text @values. */
int idem__intent_run1(PGresult **out, idem_store *store, uint64_t deadline_ms, const char *tenant,
                      const idem__stmt *stmt, const char *const *values, idem_error *err);

/* Validate a tenant and operation ID given to a call on an existing intent. */
int idem__intent_check_key(const char *tenant, const char *operation_id, idem_error *err);

/* The state's name as the database spells it, and back (-1 when unknown). */
int idem__intent_state_parse(const char *name);

#endif
