/* External effects, step 1 (external.h): claim the key, or resume it after a lapsed lease,
 * in one committed transaction before anything is dispatched. A key that is taken is
 * answered by the store's own decision (store_record.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "external_internal.h"

/* Lookups and claims before the call gives up: the key changes hands at most a few times
 * (claimed, completed, swept) while one call looks. */
#define MAX_TRIES 4

#define CLAIM_STMTS        4 /* claim, forget, lapse, start (external_sql.c) */
#define CLAIM_CMDS         (1 + IDEM__SETTINGS_CMDS + CLAIM_STMTS + 1)
#define LOCK_NOT_AVAILABLE "55P03"

typedef struct begin {
    call c;
    idem_external *ext;
    idem_external_attempt **out;
    char token[IDEM_UUID_STRING_SIZE], downstream[IDEM_UUID_STRING_SIZE];
    char version[16], retention[24], key_memory[24], born_ms[24], horizon[24], skew[24];
    const char *values[11];
    int lengths[11], formats[11];
    const char *forget[6]; /* tenant, operation_id, downstream key, born_ms, horizon, skew */
    const char *mine[3];   /* tenant, operation_id, token */
} begin;

/* The claim's token and downstream key, made once per call, and its parameters. */
static int make_claim(begin *b)
{
    const idem_request *req = b->c.req;
    unsigned int retention_s, key_memory_s;
    uint64_t born_ms;
    int rc;

    if ((rc = idem_uuid_v7(b->token, b->c.err)) != 0 ||
        (rc = idem_uuid_v7(b->downstream, b->c.err)) != 0)
        return rc;
    idem__store_windows(b->ext->store, req->tool, &retention_s, &key_memory_s);
    snprintf(b->version, sizeof(b->version), "%d", req->payload_version);
    snprintf(b->retention, sizeof(b->retention), "%u", retention_s);
    snprintf(b->key_memory, sizeof(b->key_memory), "%u", key_memory_s);
    snprintf(b->horizon, sizeof(b->horizon), "%llu",
             (unsigned long long)key_memory_s + b->ext->store->opts.clock_skew_s);
    snprintf(b->skew, sizeof(b->skew), "%u", b->ext->store->opts.clock_skew_s);
    if (idem_uuid_v7_time_ms(&born_ms, req->operation_id) == 0)
        snprintf(b->born_ms, sizeof(b->born_ms), "%llu", (unsigned long long)born_ms);
    b->values[0] = req->tenant;
    b->values[1] = req->operation_id;
    b->values[2] = req->tool;
    b->values[3] = b->version;
    b->values[4] = (const char *)b->c.fp.bytes;
    b->values[5] = req->trace_id;
    b->values[6] = b->token;
    b->values[7] = b->retention;
    b->values[8] = b->key_memory;
    b->values[9] = b->downstream;
    b->values[10] = b->ext->lease_ms;
    b->lengths[4] = IDEM_FINGERPRINT_SIZE;
    b->formats[4] = 1;
    b->forget[0] = b->mine[0] = req->tenant;
    b->forget[1] = b->mine[1] = req->operation_id;
    b->forget[2] = b->downstream;
    b->forget[3] = b->born_ms[0] != '\0' ? b->born_ms : NULL;
    b->forget[4] = b->horizon;
    b->forget[5] = b->skew;
    b->mine[2] = b->token;
    return 0;
}

/* This call holds the key: hand the caller its attempt. @res: attempts, downstream_key,
 * lease end (text). */
static int take(begin *b, const PGresult *res)
{
    const idem_request *req = b->c.req;
    idem_external_attempt *a =
        idem__external_attempt_new(b->ext, req->tenant, req->operation_id, req->tool,
                                   req->payload_version, &b->c.fp, PQgetvalue(res, 0, 1));

    if (a == NULL)
        return idem__error_set(b->c.err, IDEM_ENOMEM, "attempt: out of memory");
    memcpy(a->token, b->token, sizeof(a->token));
    a->number = (int)strtol(PQgetvalue(res, 0, 0), NULL, 10);
    a->lease_expires_at = idem__external_cell_us(res, 0, 2);
    *b->out = a;
    b->c.out->status = IDEM_STATUS_IN_PROGRESS;
    return 0;
}

static void rollback(idem_conn *conn)
{
    PGresult *res = NULL;

    if (idem__conn_exec(&res, conn, "ROLLBACK", NULL) == 0)
        PQclear(res);
}

/* Another transaction's claim of the key is still uncommitted: someone holds it now. */
static int busy(begin *b)
{
    b->c.out->status = IDEM_STATUS_IN_PROGRESS;
    return idem__error_set(b->c.err, IDEM_EBUSY,
                           "operation %s is being claimed by another attempt right now; retry "
                           "later with the same key",
                           b->c.req->operation_id);
}

/* The claim's COMMIT reply was lost: on a fresh connection, does this call's token hold
 * the key? (*taken 1 if so.) */
static int resolve(begin *b, idem_conn **conn, int *taken)
{
    const char *values[3] = {b->c.req->tenant, b->c.req->operation_id, b->token};
    PGresult *res = NULL;
    int rc;

    idem_pool_release(*conn);
    *conn = NULL;
    rc = idem__pool_checkout(conn, b->ext->store->pool, b->c.deadline_ms, b->c.err);
    if (rc == 0)
        rc = idem__tenant_exec(&res, *conn, b->c.req->tenant, &idem__external_stmt_mine, values,
                               NULL, NULL, 0, b->c.err);
    if (rc != 0)
        return idem__error_context(b->c.err, "the claim's outcome could not be looked up; "
                                             "retry later with the same key");
    *taken = PQntuples(res) == 1;
    if (*taken)
        rc = take(b, res);
    PQclear(res);
    return rc;
}

/* The claim (at @at) returned the record and forget did not delete it (external_sql.c). */
static int claimed(const idem__pipe_cmd *cmds, size_t at)
{
    return PQntuples(cmds[at].result) == 1 && PQntuples(cmds[at + 1].result) == 0;
}

/* The claim did not take the key. When forget (at @at + 1) deleted the record it had just
 * made (a key that had none), its UUIDv7 was dated ahead, and the call is invalid, nothing
 * written (IDEM_EINVAL), or too old, and the lookup that follows answers (0), as it does
 * for a key taken by someone else. */
static int not_claimed(begin *b, const idem__pipe_cmd *cmds, size_t at)
{
    const PGresult *res = cmds[at + 1].result;
    int64_t ahead = 0;

    if (PQntuples(res) == 1)
        ahead = idem__store_ahead_ms(&b->c, strtoll(PQgetvalue(res, 0, 0), NULL, 10) / 1000);
    return ahead > 0 ? idem__store_dated_ahead(&b->c, ahead) : 0;
}

/* BEGIN, the settings (settings.h: the tenant, the claim's short lock wait, which ends on
 * the server before the call's deadline, and the statement timeout), the claim's four
 * statements, COMMIT. Returns how many; *at is the claim's index. */
static size_t claim_cmds(begin *b, idem_conn *conn, idem__pipe_cmd *cmds, size_t *at)
{
    idem__tx_settings *s = &b->c.settings;
    size_t n = 0;

    idem__tx_settings_for(s, conn, b->c.req->tenant);
    idem__tx_settings_claim_wait(s, b->ext->opts.claim_wait_ms);
    cmds[n++] = idem__pipe_stmt(&idem__stmt_begin_read_committed, NULL);
    n += idem__tx_settings_cmds(cmds + n, s,
                                idem__tenant_form_for(conn) == IDEM__TENANT_IMPLICIT
                                    ? IDEM__SETTINGS_PLAIN
                                    : IDEM__SETTINGS_CITUS);
    *at = n;
    cmds[n++] = (idem__pipe_cmd){
        &idem__external_stmt_claim, NULL, 0, b->values, b->lengths, b->formats, 0, NULL};
    cmds[n++] = idem__pipe_stmt(&idem__external_stmt_forget, b->forget);
    cmds[n++] = idem__pipe_stmt(&idem__external_stmt_lapse, b->mine);
    cmds[n++] = idem__pipe_stmt(&idem__external_stmt_start, b->mine);
    cmds[n++] = idem__pipe_stmt(&idem__stmt_commit, NULL);
    return n;
}

/* One claim, in one round trip (claim_cmds()). *taken is 1 when this call now holds the
 * key; 0 when the key is someone else's to answer for. */
static int claim(begin *b, idem_conn **conn, int *taken)
{
    idem__pipe_cmd cmds[CLAIM_CMDS];
    size_t at, failed_at, n = claim_cmds(b, *conn, cmds, &at);
    int rc = idem__conn_pipeline(*conn, cmds, n, &failed_at, b->c.err);

    *taken = 0;
    if (rc == 0 && claimed(cmds, at)) {
        *taken = 1;
        rc = take(b, cmds[at].result);
    } else if (rc == 0) {
        rc = not_claimed(b, cmds, at);
    } else if (rc != 0 && (rc == IDEM_EUNAVAIL || idem__conn_failed(*conn))) {
        rc = resolve(b, conn, taken);
    } else if (rc != 0) {
        rollback(*conn);
        if (failed_at >= at && failed_at < at + CLAIM_STMTS &&
            strcmp(b->c.err->sqlstate, LOCK_NOT_AVAILABLE) == 0)
            rc = busy(b);
    }
    idem__store_pipe_clear(cmds, n);
    return rc;
}

static int run(begin *b)
{
    idem_conn *conn = NULL;
    int rc = idem__pool_checkout(&conn, b->ext->store->pool, b->c.deadline_ms, b->c.err), found,
        taken = 0;

    b->c.resume_pending = 1;
    for (unsigned int tries = 0; rc == 0 && !taken; tries++) {
        if (tries > 0 &&
            (rc = idem__store_deadline_passed(b->ext->store, b->c.deadline_ms, b->c.err)) != 0)
            break;
        if (tries == MAX_TRIES) {
            rc = idem__error_set(b->c.err, IDEM_EUNAVAIL,
                                 "operation %s changed hands %u times while it was looked up; "
                                 "retry later with the same key",
                                 b->c.req->operation_id, tries);
            break;
        }
        if (idem__conn_failed(conn)) {
            idem_pool_release(conn);
            conn = NULL;
            if ((rc = idem__pool_checkout(&conn, b->ext->store->pool, b->c.deadline_ms,
                                          b->c.err)) != 0)
                break;
        }
        /* A first attempt claims at once; the key is looked up when the claim cannot take
         * it, and by a retry first (a replay then costs one round trip). */
        found =
            b->c.lookup_first ? idem__store_lookup(&b->c, conn, &idem__store_stmt_lookup, &rc) : 0;
        if (found != 0) {
            rc = found < 0 ? found : rc;
            break;
        }
        if (b->token[0] == '\0' && (rc = make_claim(b)) != 0)
            break;
        b->c.out->attempts++;
        rc = claim(b, &conn, &taken);
        b->c.resume_pending = 0; /* a pending key the claim could not take is someone's */
        b->c.lookup_first = 1;
    }
    idem_pool_release(conn);
    return rc;
}

/* The key's record is outcome_unknown: when its tool has a resolver, ask the provider
 * (external_probe.c) and, if the answer changed the record (or another call's had), look
 * the key up again: replayed, rejected, or a pending record that this call now takes over
 * and dispatches with the same downstream key. Otherwise the call stays outcome_unknown,
 * with the resolver's reason when it was asked. */
static int ask_provider(begin *b, int rc)
{
    idem_external_verdict verdict;
    int has_resolver, probed = idem__external_probe_for_retry(&has_resolver, &verdict, b->ext,
                                                              b->c.req, b->c.deadline_ms, b->c.err);

    if (!has_resolver)
        return rc;
    if (probed != 0) {
        b->c.out->status = idem_status_from_error(probed);
        return probed;
    }
    idem_error_clear(b->c.err);
    *b->c.out = (idem_outcome)IDEM_OUTCOME_INIT;
    b->c.out->status = IDEM_STATUS_UNAVAILABLE;
    b->c.lookup_first = 1;
    return run(b);
}

int idem_external_begin(idem_external_attempt **out, idem_outcome *outcome, idem_external *ext,
                        const idem_request *req, idem_error *err)
{
    idem_error local = IDEM_ERROR_INIT;
    begin b;
    int rc;

    if (outcome == NULL)
        return idem__error_field(err, IDEM_EINVAL, "outcome", "must not be NULL");
    if ((rc = idem__check_version(err, outcome->version, IDEM_OUTCOME_VERSION, "outcome")) != 0)
        return rc;
    *outcome = (idem_outcome)IDEM_OUTCOME_INIT;
    outcome->status = IDEM_STATUS_INVALID;
    if (out == NULL || ext == NULL)
        return idem__error_field(err, IDEM_EINVAL, out == NULL ? "out" : "ext", "must not be NULL");
    memset(&b, 0, sizeof(b));
    b.ext = ext;
    b.out = out;
    b.c = (call){.store = ext->store,
                 .req = req,
                 .effect = idem__store_no_effect,
                 .out = outcome,
                 .err = err != NULL ? err : &local};
    idem_error_clear(b.c.err);
    if ((rc = idem__store_validate(&b.c)) != 0) {
        outcome->status = idem_status_from_error(rc);
        return rc;
    }
    outcome->status = IDEM_STATUS_UNAVAILABLE;
    b.c.lookup_first = req->version < 2 || req->attempt != 1;
    b.c.deadline_ms = idem__store_deadline(ext->store);
    rc = run(&b);
    if (rc == IDEM_EUNKNOWN && outcome->status == IDEM_STATUS_OUTCOME_UNKNOWN)
        rc = ask_provider(&b, rc);
    idem__store_call_clear(&b.c);
    if (rc == 0 && outcome->status == IDEM_STATUS_REPLAYED)
        *out = NULL;
    if (rc != 0 && outcome->status == IDEM_STATUS_UNAVAILABLE) {
        rc = idem__error_misconfigured(b.c.err, rc);
        outcome->status = idem_status_from_error(rc);
    }
    return rc;
}
