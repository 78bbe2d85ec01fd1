/* Asking the provider about an unknown outcome (external.h, "Resolvers"): read the record,
 * ask the tool's resolver with no connection held, then record the answer in one statement
 * that changes the record only if it is still outcome_unknown, so that of several answers
 * given at once only the first one recorded changes it. For a retry that met the record
 * (idem_external_begin()) and for an application's worker (idem_external_probe()). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "error.h"
#include "external_internal.h"

/* The external record: state, tool, payload_version, downstream_key, provider_ref. */
static const idem__stmt stmt_read = {
    "idem_external_probe_read",
    "SELECT state, tool, payload_version, downstream_key, provider_ref FROM idem.operations"
    " WHERE tenant = $1 AND operation_id = $2 AND attempts IS NOT NULL",
    2};

/* The answer's row: $1 tenant, $2 operation_id, $3 probe_id, $4 took_ms, $5 asked_by, $6
 * the resolver's name, $7 the answer, $8 provider_ref, $9 result, $10 reason; changed when
 * the statement's CTE settled changed the record. An INSERT with ON CONFLICT, which Citus
 * carries out on the tenant's shard. */
#define PROBE_ROW                                                                                  \
    " probe AS (INSERT INTO idem.external_probes (tenant, operation_id, probe_id, took_ms,"        \
    " asked_by, resolver, answer, provider_ref, result, reason, changed)"                          \
    " SELECT $1, $2, $3::uuid, $4::int4, $5, $6, $7, $8, $9, $10, EXISTS (SELECT FROM settled)"    \
    " ON CONFLICT (tenant, operation_id, probe_id) DO NOTHING)"

/* The record still outcome_unknown: the only one an answer changes. */
#define STILL_UNKNOWN                                                                              \
    " WHERE o.tenant = $1 AND o.operation_id = $2 AND o.state = 'outcome_unknown'"                 \
    " AND o.attempts IS NOT NULL"

/* Its open outcome_unknown item is resolved by the resolver ($6), with the note $11. */
#define ITEM_RESOLVED                                                                              \
    " items AS (UPDATE idem.reconciliation_items r SET resolved_at = now(), resolved_by = $6,"     \
    " note = $11 FROM settled WHERE r.tenant = $1 AND r.operation_id = $2"                         \
    " AND r.kind = '" IDEM__RECONCILE_OUTCOME_UNKNOWN "' AND r.resolved_at IS NULL),"

/* Done or failed: $12 'completed' or 'failed', $13 the receipt (binary). Returns whether the
 * record changed. */
static const idem__stmt stmt_settle = {
    "idem_external_probe_settle",
    "WITH settled AS (UPDATE idem.operations o SET state = $12, response = $13,"
    " completed_at = now(), provider_ref = coalesce($8, o.provider_ref),"
    " lease_expires_at = NULL," IDEM__WINDOWS_FROM_NOW STILL_UNKNOWN " RETURNING 1),"
    " box AS (UPDATE idem.outbox b SET state = $12, updated_at = now() FROM settled"
    " WHERE b.tenant = $1 AND b.operation_id = $2)," ITEM_RESOLVED PROBE_ROW
    " SELECT count(*) FROM settled",
    13};

/* Not done: pending again without a lease, which the next attempt takes over with the same
 * downstream key (external_sql.c's claim); an outbox item is due again now. */
static const idem__stmt stmt_again = {
    "idem_external_probe_again",
    "WITH settled AS (UPDATE idem.operations o SET state = 'pending'" STILL_UNKNOWN " RETURNING 1),"
    " box AS (UPDATE idem.outbox b SET state = 'queued', next_attempt_at = now(),"
    " updated_at = now() FROM settled WHERE b.tenant = $1 AND b.operation_id = $2"
    " AND b.state = 'outcome_unknown')," ITEM_RESOLVED PROBE_ROW " SELECT count(*) FROM settled",
    11};

/* Unknown: the answer's row alone. */
static const idem__stmt stmt_unknown = {
    "idem_external_probe_unknown",
    "INSERT INTO idem.external_probes (tenant, operation_id, probe_id, took_ms, asked_by,"
    " resolver, answer, provider_ref, result, reason, changed)"
    " VALUES ($1, $2, $3::uuid, $4::int4, $5, $6, $7, $8, $9, $10, false)",
    10};

static const char *const answer_names[] = {"unknown", "done", "failed", "not_done"};

/* One question in progress. */
typedef struct probing {
    idem_external *ext;
    const char *tenant, *operation_id;
    const char *asked_by; /* "retry" or "probe" */
    uint64_t deadline_ms;
    idem_conn *conn;
    PGresult *record; /* stmt_read's row */
    idem__resolver r;
    idem_external_answer answer;
    char probe_id[IDEM_UUID_STRING_SIZE];
    int changed; /* the answer changed the record */
    idem_error *err;
} probing;

static const char *cell(const PGresult *res, int col)
{
    return PQgetisnull(res, 0, col) ? NULL : PQgetvalue(res, 0, col);
}

/* The record, on a connection checked out for it: IDEM_ENOTFOUND when there is no external
 * one, IDEM_ECONFLICT when it is not outcome_unknown. */
static int read_record(probing *p)
{
    const char *values[2] = {p->tenant, p->operation_id};
    int rc = idem__pool_checkout(&p->conn, p->ext->store->pool, p->deadline_ms, p->err);

    if (rc == 0)
        rc = idem__tenant_exec(&p->record, p->conn, p->tenant, &stmt_read, values, NULL, NULL, 0,
                               p->err);
    idem_pool_release(p->conn);
    p->conn = NULL;
    if (rc != 0)
        return rc;
    if (PQntuples(p->record) != 1)
        return idem__error_set(p->err, IDEM_ENOTFOUND, "no external operation %s in tenant %s",
                               p->operation_id, p->tenant);
    if (strcmp(PQgetvalue(p->record, 0, 0), "outcome_unknown") != 0)
        return idem__error_set(p->err, IDEM_ECONFLICT,
                               "operation %s is %s; only an unknown outcome is probed",
                               p->operation_id, PQgetvalue(p->record, 0, 0));
    return 0;
}

/* Ask the resolver, with no connection held: at most its time limit, and never more than
 * half of what is left of the call's deadline. */
static int ask(probing *p)
{
    uint64_t now = idem__now_ms();
    uint64_t half = p->deadline_ms > now ? (p->deadline_ms - now) / 2 : 0;
    unsigned int limit = half < p->r.timeout_ms ? (unsigned int)half : p->r.timeout_ms;
    idem_external_question q = {IDEM_EXTERNAL_QUESTION_VERSION,
                                p->tenant,
                                p->operation_id,
                                PQgetvalue(p->record, 0, 1),
                                (int)strtol(PQgetvalue(p->record, 0, 2), NULL, 10),
                                PQgetvalue(p->record, 0, 3),
                                cell(p->record, 4),
                                limit};
    int rc;

    if (limit == 0)
        return idem__error_set(p->err, IDEM_EUNKNOWN,
                               "operation %s: no time was left in the call's deadline to ask "
                               "the provider (resolver %s)",
                               p->operation_id, p->r.name);
    if ((rc = idem_uuid_v7(p->probe_id, p->err)) != 0)
        return rc;
    return idem__external_ask(&p->answer, &p->r, &q, limit, p->err);
}

/* The reconciliation item's note for a definite answer. */
static void item_note(char *note, size_t size, const probing *p)
{
    const idem_external_answer *a = &p->answer;

    snprintf(note, size, "asked by a %s, the provider answered %s%s%s%s%s", p->asked_by,
             answer_names[a->verdict], a->provider_ref != NULL ? " (reference " : "",
             a->provider_ref != NULL ? a->provider_ref : "", a->provider_ref != NULL ? ")" : "",
             a->reason != NULL ? ": " : "");
    if (a->reason != NULL)
        snprintf(note + strlen(note), size - strlen(note), "%s", a->reason);
}

/* Record the answer, changing the record when it is definite and the record still unknown. */
static int record(probing *p)
{
    const idem_external_answer *a = &p->answer;
    char took[16], note[IDEM_RECONCILE_NOTE_MAX + 1];
    const char *values[13] = {p->tenant,
                              p->operation_id,
                              p->probe_id,
                              took,
                              p->asked_by,
                              p->r.name,
                              answer_names[a->verdict],
                              a->provider_ref,
                              a->result,
                              a->reason,
                              note,
                              a->verdict == IDEM_PROBE_DONE ? "completed" : "failed",
                              a->result};
    int lengths[13] = {0}, formats[13] = {0};
    const idem__stmt *stmt = a->verdict == IDEM_PROBE_UNKNOWN    ? &stmt_unknown
                             : a->verdict == IDEM_PROBE_NOT_DONE ? &stmt_again
                                                                 : &stmt_settle;
    PGresult *res = NULL;
    int rc;

    snprintf(took, sizeof(took), "%u", a->took_ms);
    item_note(note, sizeof(note), p);
    lengths[12] = (int)a->result_len;
    formats[12] = 1;
    rc = idem__pool_checkout(&p->conn, p->ext->store->pool, p->deadline_ms, p->err);
    if (rc == 0)
        rc = idem__tenant_exec(&res, p->conn, p->tenant, stmt, values, lengths, formats, 0, p->err);
    idem_pool_release(p->conn);
    p->conn = NULL;
    if (rc != 0)
        return idem__error_context(p->err, "the provider's answer (%s) could not be recorded",
                                   answer_names[a->verdict]);
    p->changed = stmt != &stmt_unknown && strcmp(PQgetvalue(res, 0, 0), "0") != 0;
    PQclear(res);
    return 0;
}

/* Read, ask, record. Returns 0 for a definite answer, IDEM_EUNKNOWN with the reason for an
 * unknown one, or why nothing was asked or recorded. */
static int probe(probing *p)
{
    int rc = read_record(p);

    if (rc != 0)
        return rc;
    if (!idem__external_resolver_find(&p->r, p->ext, PQgetvalue(p->record, 0, 1)))
        return idem__error_set(p->err, IDEM_ENOTFOUND, "no resolver is registered for tool %s",
                               PQgetvalue(p->record, 0, 1));
    if ((rc = ask(p)) != 0 || (rc = record(p)) != 0)
        return rc;
    if (p->answer.verdict == IDEM_PROBE_UNKNOWN)
        return idem__error_set(p->err, IDEM_EUNKNOWN,
                               "operation %s was dispatched to an external service and its result "
                               "is still not known: %s",
                               p->operation_id, p->answer.reason);
    return 0;
}

static void probing_init(probing *p, idem_external *ext, const char *tenant,
                         const char *operation_id, const char *asked_by, uint64_t deadline_ms,
                         idem_error *err)
{
    memset(p, 0, sizeof(*p));
    p->ext = ext;
    p->tenant = tenant;
    p->operation_id = operation_id;
    p->asked_by = asked_by;
    p->deadline_ms = deadline_ms;
    p->err = err;
}

static void probing_clear(probing *p)
{
    PQclear(p->record);
    idem__external_answer_clear(&p->answer);
}

int idem__external_probe_for_retry(int *has_resolver, idem_external_verdict *verdict,
                                   idem_external *ext, const idem_request *req,
                                   uint64_t deadline_ms, idem_error *err)
{
    idem_error local = IDEM_ERROR_INIT;
    idem__resolver r;
    probing p;
    int rc;

    *has_resolver = idem__external_resolver_find(&r, ext, req->tool);
    *verdict = IDEM_PROBE_UNKNOWN;
    if (!*has_resolver)
        return 0;
    probing_init(&p, ext, req->tenant, req->operation_id, "retry", deadline_ms, &local);
    rc = probe(&p);
    *verdict = p.answer.verdict;
    if (rc == IDEM_ENOTFOUND) /* a local record (stalled_pending): nothing to ask */
        *has_resolver = 0;
    if (rc == IDEM_ENOTFOUND || rc == IDEM_ECONFLICT)
        rc = 0; /* or settled meanwhile: look again */
    if (rc != 0)
        idem__error_copy(err, &local);
    probing_clear(&p);
    return rc;
}

int idem_external_probe_result_init(idem_external_probe_result *result, unsigned int version)
{
    static const idem_external_probe_result defaults = IDEM_EXTERNAL_PROBE_RESULT_INIT;

    return idem__struct_init(result, &defaults, sizeof(defaults), version,
                             IDEM_EXTERNAL_PROBE_RESULT_VERSION);
}

int idem_external_probe(idem_external_probe_result *out, idem_external *ext, const char *tenant,
                        const char *operation_id, idem_error *err)
{
    idem_error local = IDEM_ERROR_INIT;
    probing p;
    int rc;

    err = err != NULL ? err : &local;
    idem_error_clear(err);
    if (out == NULL)
        return idem__error_field(err, IDEM_EINVAL, "out", "must not be NULL");
    if ((rc = idem__check_version(err, out->version, IDEM_EXTERNAL_PROBE_RESULT_VERSION, "out")) !=
        0)
        return rc;
    *out = (idem_external_probe_result)IDEM_EXTERNAL_PROBE_RESULT_INIT;
    if (ext == NULL)
        return idem__error_field(err, IDEM_EINVAL, "ext", "must not be NULL");
    if ((rc = idem_validate_tenant(tenant, err)) != 0 ||
        (rc = idem_validate_operation_id(operation_id, err)) != 0)
        return rc;
    probing_init(&p, ext, tenant, operation_id, "probe", idem__store_deadline(ext->store), err);
    rc = probe(&p);
    out->verdict = p.answer.verdict;
    out->changed = p.changed;
    if (rc == IDEM_EUNAVAIL || rc == IDEM_EDB)
        rc = idem__error_misconfigured(err, rc);
    probing_clear(&p);
    return rc;
}
