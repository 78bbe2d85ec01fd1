/* External effects (external*.c): the shared state of the path and of one attempt, the
 * statements, and what each part offers the others. Private to the library. */
#ifndef IDEM_LIB_EXTERNAL_INTERNAL_H
#define IDEM_LIB_EXTERNAL_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "exec.h"
#include "idem/external.h"
#include "idem/retry.h"
#include "idem/sys/reconcile.h"
#include "idem/validate.h"
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
/* Longest resolver name: it is recorded as who resolved a reconciliation item. */
#define IDEM__RESOLVER_NAME_MAX IDEM_RECONCILE_BY_MAX

/* A tool's resolver, as registered (external_resolver.c). */
typedef struct idem__resolver {
    char tool[IDEM_TOOL_MAX + 1];
    char name[IDEM__RESOLVER_NAME_MAX + 1];
    idem_external_probe_fn probe;
    void *ctx;
    unsigned int timeout_ms;
} idem__resolver;

struct idem_external {
    idem_store *store;
    idem_external_options opts;
    idem_retry_policy outbox_backoff;
    char lease_ms[16]; /* opts.lease_ms as a statement parameter */
    pthread_mutex_t resolvers_lock;
    idem__resolver *resolvers; /* registered per tool, in order of registration */
    size_t nresolvers;
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

/* An answer a resolver gave, once it is the caller's: owned strings (external_resolver.c). */
struct idem_external_answer {
    idem_external_verdict verdict;
    int given;          /* an answer call succeeded */
    char *problem;      /* why what the resolver gave cannot be used; NULL when none */
    char *provider_ref; /* NULL when none */
    char *result;       /* done, failed: canonical JSON; else NULL */
    size_t result_len;
    char *reason;         /* NULL when none */
    unsigned int took_ms; /* how long the resolver took, or was waited for */
};

/* A copy of @s, or NULL for NULL; *failed set when out of memory (external_resolver.c). */
char *idem__external_copy_or_null(const char *s, int *failed);

/* Free what @a holds, and empty it. */
void idem__external_answer_clear(idem_external_answer *a);

/* The resolver registered for @tool, copied into *out; 0 when there is none. */
int idem__external_resolver_find(idem__resolver *out, idem_external *ext, const char *tool);

/* The tools that have a resolver, as a text[] literal ("{a,b}"; tool names need no
 * quoting), caller frees; "{}" when none; NULL when out of memory. */
char *idem__external_resolver_tools(idem_external *ext);

/* Ask @r the question @q, in a thread of its own, waiting at most @timeout_ms for the
 * answer (external_ask.c): *out gets it, or an unknown one saying why (no answer in time,
 * the resolver failed, or answered what cannot be used). Returns 0 or IDEM_ENOMEM. */
int idem__external_ask(idem_external_answer *out, const idem__resolver *r,
                       const idem_external_question *q, unsigned int timeout_ms, idem_error *err);

/* A retry (idem_external_begin()) met an outcome_unknown record of @req's tool: ask its
 * resolver, if it has one and the record is external (*has_resolver), within @deadline_ms, and
 * record the answer (external_probe.c); *verdict is what it answered. Returns 0 with no resolver,
 * or when the caller should look the key up again (a definite answer, whoever's changed the record;
 * or the record is no longer outcome_unknown); IDEM_EUNKNOWN with the reason when the answer is
 * unknown; another code when it could not be asked or recorded. */
int idem__external_probe_for_retry(int *has_resolver, idem_external_verdict *verdict,
                                   idem_external *ext, const idem_request *req,
                                   uint64_t deadline_ms, idem_error *err);

#endif
