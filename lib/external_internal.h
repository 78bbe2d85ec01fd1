/* External effects (external*.c): the shared state of the path and of one attempt, the
 * statements, and what each part offers the others. Private to the library. */
#ifndef IDEM_LIB_EXTERNAL_INTERNAL_H
#define IDEM_LIB_EXTERNAL_INTERNAL_H

#include <stdint.h>

#include "exec.h"
#include "idem/external.h"
#include "idem/retry.h"
#include "reconcile_internal.h"
#include "store_internal.h"
#include "tenant.h"

/* The statements (external_sql.c). */
extern const idem__stmt idem__external_stmt_claim, idem__external_stmt_forget,
    idem__external_stmt_lapse, idem__external_stmt_start, idem__external_stmt_mine,
    idem__external_stmt_finish, idem__external_stmt_unknown, idem__external_stmt_release,
    idem__external_stmt_extend, idem__external_stmt_held, idem__external_stmt_outbox_claim;
/* Run through idem_tx_exec() inside an effect's transaction: SQL text, text parameters. */
extern const char idem__external_sql_enqueue[];

/* Retention counts from when the outcome is known, as it does for a local effect (record o). The
 * arithmetic is on UTC timestamps, whose operators are immutable: Citus refuses a stable
 * function (timestamptz + interval) over columns in an UPDATE. */
#define IDEM__WINDOWS_FROM_NOW                                                                     \
    " expires_at = (now() AT TIME ZONE 'UTC' + (o.expires_at - o.created_at)) AT TIME ZONE 'UTC'," \
    " forget_at = (now() AT TIME ZONE 'UTC' + (o.forget_at - o.created_at)) AT TIME ZONE 'UTC'"

/* Longest provider reference and error text. */
#define IDEM__PROVIDER_REF_MAX 256
#define IDEM__ERROR_TEXT_MAX   1000

struct idem_external {
    idem_store *store;
    idem_external_options opts;
    idem_retry_policy outbox_backoff;
    char lease_ms[16]; /* opts.lease_ms as a statement parameter */
};

struct idem_external_attempt {
    idem_external *ext;
    char *tenant, *operation_id, *tool, *downstream_key;
    char *arguments; /* an outbox item's canonical arguments; NULL from begin */
    int payload_version;
    idem_fingerprint fp;
    char token[IDEM_UUID_STRING_SIZE]; /* proves the lease */
    int number;
    int64_t lease_expires_at;
    int ended; /* reported, released, or found taken over */
};

/* A new attempt (strings copied); NULL when out of memory (external.c). */
idem_external_attempt *idem__external_attempt_new(idem_external *ext, const char *tenant,
                                                  const char *operation_id, const char *tool,
                                                  int payload_version, const idem_fingerprint *fp,
                                                  const char *downstream_key);

/* What idem__external_check_text() accepts beyond printable ASCII. */
#define IDEM__TEXT_ASCII 0
#define IDEM__TEXT_UTF8  1 /* any UTF-8 without control characters */
#define IDEM__TEXT_LINES 3 /* that, with tabs and newlines */

/* Check a provider reference, error text, note or name: NULL, or 1 to @max bytes of what
 * @kind allows. Returns 0 or IDEM_EINVAL naming @field. */
int idem__external_check_text(const char *field, const char *text, size_t max, int kind,
                              idem_error *err);

/* Check that @out and @attempt can be used for a report (its outcome reset). */
int idem__external_check_report(idem_outcome *out, const idem_external_attempt *a, idem_error *err);

/* A store call for a decision about @a's key from its record (store_record.c's): the
 * request and fingerprint are the attempt's. */
void idem__external_call_init(call *c, idem_request *req, const idem_external_attempt *a,
                              idem_outcome *out, idem_error *err);

/* Microseconds since the epoch from a text int8 cell. */
int64_t idem__external_cell_us(const PGresult *res, int row, int col);

#endif
