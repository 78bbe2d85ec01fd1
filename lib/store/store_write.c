/* One attempt of the write path for a callback effect: the claim, the effect and the
 * finished record in one SERIALIZABLE transaction, and what a failure on the way makes of
 * the call: another attempt, in progress, effect failed, or outcome unknown. */
#include "idem/jcs.h"

#include "core/clock.h"
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "exec.h"
#include "store_internal.h"
#include "tenant.h"

void idem__store_rollback(idem_conn *conn)
{
    PGTransactionStatusType st = PQtransactionStatus(idem_conn_pg(conn));
    PGresult *res = NULL;

    /* After a failed COMMIT, or an effect that ended the transaction itself, there is
     * nothing to roll back (and the server would warn "no transaction in progress"). */
    if (st != PQTRANS_INTRANS && st != PQTRANS_INERROR)
        return;
    if (idem__conn_exec(&res, conn, "ROLLBACK", NULL) == 0)
        PQclear(res);
}

/* A failed statement inside the transaction: back off on 40001/40P01, else finish. */
static enum step tx_failure(call *c, idem_conn *conn, int rc, int *out_rc)
{
    idem__store_rollback(conn);
    if (idem__sqlstate_is_retryable(c->err->sqlstate))
        return STEP_BACKOFF;
    *out_rc = rc;
    return STEP_DONE;
}

/* Run the effect and serialize its response. Returns 0 with *receipt set, or a negative
 * code; the effect's SQLSTATE (if any) is left in tx->sqlstate. */
static int run_effect(call *c, idem_tx *tx, char **receipt, size_t *len, int *failed)
{
    json_t *response = NULL;
    int rc = c->effect(&response, tx, c->arguments, c->ctx, c->err);

    if (rc < 0) {
        json_decref(response);
        if (c->err->message[0] == '\0')
            idem__error_set(c->err, rc, "effect failed: %s", idem_strerror(rc));
        snprintf(c->err->sqlstate, sizeof(c->err->sqlstate), "%s", tx->sqlstate);
        return rc;
    }
    if (rc != IDEM_EFFECT_OK && rc != IDEM_EFFECT_FINAL_FAILURE) {
        json_decref(response);
        return idem__error_set(c->err, IDEM_EEFFECT,
                               "effect returned %d: neither IDEM_EFFECT_OK, "
                               "IDEM_EFFECT_FINAL_FAILURE nor a negative IDEM_E* code",
                               rc);
    }
    if (response == NULL)
        return idem__error_set(c->err, IDEM_EEFFECT, "effect returned %d without a response", rc);
    *failed = rc == IDEM_EFFECT_FINAL_FAILURE;
    rc = idem_jcs_serialize(receipt, len, response, c->err);
    json_decref(response);
    if (rc != 0)
        return idem__error_context(c->err, "effect response"), IDEM_EEFFECT;
    if (*len > c->store->opts.max_response_bytes) {
        free(*receipt);
        *receipt = NULL;
        return idem__error_set(c->err, IDEM_EEFFECT,
                               "effect response: %zu bytes exceed the limit of %zu", *len,
                               c->store->opts.max_response_bytes);
    }
    return 0;
}

/* An effect that sent COMMIT itself committed the pending claim with its rows: take the
 * claim back, so that the key is not left pending for ever. */
static void unclaim(call *c, idem_conn *conn)
{
    const char *values[3] = {c->req->tenant, c->req->operation_id, c->claim};
    PGresult *res = NULL;

    if (idem__tenant_exec(&res, conn, c->req->tenant, &idem__store_stmt_unclaim, values, NULL, NULL,
                          0, NULL) == 0)
        PQclear(res);
}

int idem__store_claim_busy(const call *c, size_t failed_at, const char *sqlstate)
{
    return failed_at == c->claim_at && strcmp(sqlstate, "55P03") == 0;
}

/* Another attempt holds the key right now: answer in_progress and let the connection go. */
static enum step busy(call *c, idem_conn *conn, int *out_rc)
{
    idem__store_rollback(conn);
    COUNT(c->store, in_progress);
    c->out->status = IDEM_STATUS_IN_PROGRESS;
    *out_rc = idem__error_set(c->err, IDEM_EBUSY,
                              "operation %s is being executed by another attempt right now; "
                              "retry later with the same key",
                              c->req->operation_id);
    return STEP_DONE;
}

/* The effect's statement lacked a privilege on the application's own objects (42501,
 * "permission denied"): the deployment is wrong, and no retry helps until an operator
 * grants it, so the call is misconfigured, in the statement's words with the GRANT in
 * front. Row-level security's refusal is the effect's (idem__error_privilege()). */
static int privilege_missing(call *c, idem_conn *conn, const idem_tx *tx, int *out_rc)
{
    idem_error denied = tx->failure;

    if (strcmp(tx->sqlstate, "42501") != 0 ||
        idem__error_privilege(&denied, PQuser(idem_conn_pg(conn))) != IDEM_EPERM)
        return 0;
    *c->err = denied;
    *out_rc = IDEM_EPERM;
    return 1;
}

/* A reserved key's attempt ended without its record: the record's INSERT found the key
 * taken (IDEM4), or the effect failed. A record of the key that an earlier attempt
 * committed decides the call then (a request marked a first attempt that was not one: the
 * reservation reads nothing, store_sql.c), whatever the effect's statements made of it;
 * one the effect wrote itself was rolled back with it. Rolls back, looks the key up on
 * the same connection: 1 when the record decided the call (*out_rc set, tx->decided, or
 * the lookup's failure), 0 when the key has none (c->err as it was). */
static int taken_after_all(call *c, idem_conn *conn, idem_tx *tx, int *out_rc)
{
    idem_error said = *c->err;
    int rc = 0, found;

    if (!c->reserved)
        return 0;
    idem__store_rollback(conn);
    found = idem__store_lookup(c, conn, &idem__store_stmt_lookup, &rc);
    if (found < 0) {
        *out_rc = found;
        return 1;
    }
    if (found == 1) {
        COUNT(c->store, claim_races);
        tx->decided = 1;
        *out_rc = rc;
        return 1;
    }
    *c->err = said;
    return 0;
}

/* The effect failed: what the call turns into. */
static enum step effect_failure(call *c, idem_conn *conn, idem_tx *tx, int rc, int *out_rc)
{
    if (tx->begun)
        idem__store_rollback(conn);
    if (tx->ended)
        unclaim(c, conn);
    if (idem__sqlstate_is_retryable(tx->sqlstate))
        return STEP_BACKOFF;
    /* The effect's statement was kept by the connection, planned for its table as it was
     * then: once per call, start over; the connection now sends its statements as text
     * (exec.h, idem__conn_take_stale_plan()). A second failure is the statement's own. */
    if (tx->stale_plan && !c->replanned) {
        c->replanned = 1;
        idem__log(c->store->opts.log, c->store->opts.log_ctx, IDEM_LOG_WARNING,
                  "the effect's statement was planned for a table that has changed since; "
                  "%s/%s starts over, the statement sent afresh",
                  c->req->tenant, c->req->operation_id);
        return STEP_AGAIN;
    }
    /* A lock or statement timeout in the effect is the server being busy, not the effect
     * refusing: the same call succeeds later, so the caller retries (unavailable). */
    if (idem__sqlstate_is_timeout(tx->sqlstate)) {
        *out_rc = idem__error_set(c->err, IDEM_EUNAVAIL,
                                  "the effect's statement timed out waiting (%s); retry later "
                                  "with the same key",
                                  tx->sqlstate);
        snprintf(c->err->sqlstate, sizeof(c->err->sqlstate), "%s", tx->sqlstate);
        return STEP_DONE;
    }
    if (tx->setup_rc != 0 || rc == IDEM_EUNAVAIL || PQstatus(idem_conn_pg(conn)) != CONNECTION_OK) {
        *out_rc = tx->setup_rc != 0 ? tx->setup_rc : IDEM_EUNAVAIL;
        return STEP_DONE;
    }
    if (privilege_missing(c, conn, tx, out_rc))
        return STEP_DONE;
    if (taken_after_all(c, conn, tx, out_rc))
        return STEP_DONE;
    COUNT(c->store, effect_failures);
    c->out->status = IDEM_STATUS_EFFECT_FAILED;
    c->err->code = IDEM_EEFFECT;
    *out_rc = IDEM_EEFFECT;
    return STEP_DONE;
}

/* The claim found the key's record: this attempt is void (its statements are rolled
 * back, or were never carried out), and the record decides the call. */
static enum step answer_taken(call *c, idem_conn *conn, idem_tx *tx, const PGresult *taken,
                              int in_tx, int *out_rc)
{
    int mine;

    tx->decided = 1;
    if (in_tx)
        idem__store_rollback(conn);
    if (taken == NULL || PQntuples(taken) != 1) {
        /* No record either: the key is outside its window (the lookup says so), or its
         * record went away meanwhile (look again). */
        c->lost_claim = 1;
        return STEP_AGAIN;
    }
    COUNT(c->store, claim_races);
    *out_rc = idem__store_decide(c, conn, taken, &mine);
    return STEP_DONE;
}

int idem__store_commit_unknown(size_t failed_at, size_t commit_at, const char *sqlstate)
{
    return failed_at == commit_at && strcmp(sqlstate, "XX000") == 0;
}

/* Whether the finishing statement's failure (c->err) is the effect's doing: it changed
 * idem.tenant (IDEM3) or the claimed row (IDEM4), which idem.finish_guard() refuses, or it
 * turned row-level security off, so that idem's table could not be written (42501 raised
 * by row-level security with row_security off, error.h; at the claim the same would be
 * the deployment's). The transaction rolled back, the effect's writes with it. */
static int finish_refused(const idem_error *err)
{
    return strcmp(err->sqlstate, "IDEM3") == 0 || strcmp(err->sqlstate, "IDEM4") == 0 ||
           (strcmp(err->sqlstate, "42501") == 0 &&
            strcmp(err->constraint, IDEM__ROW_SECURITY_OFF) == 0);
}

/* The effect left the transaction so that its record could not be finished: effect_failed,
 * field sql, in the server's words; nothing was kept. */
static enum step effect_broke_finish(call *c, idem_conn *conn, int *out_rc)
{
    char said[IDEM_ERROR_MESSAGE_MAX], sqlstate[sizeof(c->err->sqlstate)];
    int rls = strcmp(c->err->sqlstate, "42501") == 0;

    snprintf(said, sizeof(said), "%s", c->err->message);
    snprintf(sqlstate, sizeof(sqlstate), "%s", c->err->sqlstate);
    idem__store_rollback(conn);
    COUNT(c->store, effect_failures);
    c->out->status = IDEM_STATUS_EFFECT_FAILED;
    *out_rc = idem__error_field(c->err, IDEM_EEFFECT, "sql",
                                rls ? "the effect turned row_security off (SET LOCAL row_security "
                                      "or set_config()), so the call's record could not be "
                                      "written; nothing of the call is kept (%s)"
                                    : "the call's record could not be finished; nothing of the "
                                      "call is kept (%s)",
                                said);
    snprintf(c->err->sqlstate, sizeof(c->err->sqlstate), "%s", sqlstate);
    return STEP_DONE;
}

/* What the closing pipeline's results mean; @claim is the claim's result when the claim
 * travelled in the same pipeline; @commit_failed: COMMIT failed in a way that leaves its
 * outcome unknown (idem__store_commit_unknown()); @finish_failed: the finishing statement
 * is the one that failed. */
static enum step after_commit(call *c, idem_conn *conn, idem_tx *tx, const PGresult *claim, int rc,
                              int commit_failed, int finish_failed, int *out_rc)
{
    /* The claim in this pipeline found the key taken: the attempt is void (read-only on
     * plain PostgreSQL, so the finishing UPDATE failed; elsewhere it changed nothing). */
    if (claim != NULL && !idem__store_claimed(claim))
        return answer_taken(c, conn, tx, claim, rc != 0, out_rc);
    /* The finishing statement returns a row only when it finished the claimed record
     * (idem.finish_guard() raises otherwise). */
    if (rc == 0)
        return *out_rc = 0, STEP_DONE;
    if (rc == IDEM_EUNAVAIL || commit_failed || PQstatus(idem_conn_pg(conn)) != CONNECTION_OK) {
        idem_conn_discard(conn);
        return STEP_RESOLVE; /* COMMIT may or may not have been carried out */
    }
    if (finish_failed && strcmp(c->err->sqlstate, "IDEM4") == 0 &&
        taken_after_all(c, conn, tx, out_rc))
        return STEP_DONE;
    if (finish_failed && finish_refused(c->err))
        return effect_broke_finish(c, conn, out_rc);
    /* The effect went on after one of its statements failed, and the record could not be
     * written in the aborted transaction: the statement's failure is the call's. */
    if (strcmp(c->err->sqlstate, "25P02") == 0 && tx->failure.code != 0) {
        *c->err = tx->failure;
        return effect_failure(c, conn, tx, IDEM_EEFFECT, out_rc);
    }
    return tx_failure(c, conn, rc, out_rc);
}

/* Store the receipt and COMMIT, in one round trip (with BEGIN and the claim in front when
 * the effect ran no statement). */
static enum step finish_and_commit(call *c, idem_conn *conn, idem_tx *tx, const char *receipt,
                                   size_t len, int failed, int *out_rc)
{
    idem__pipe_cmd cmds[BEGIN_CMDS + 2];
    finish_params fp;
    size_t n = 0, finish_at, failed_at;
    enum step step;
    int rc;

    if (!tx->begun)
        n = idem__store_begin_cmds(c, conn, cmds);
    finish_at = n;
    cmds[n++] = idem__store_cmd_finish(&fp, c, receipt, len, failed);
    cmds[n++] = idem__pipe_stmt(&idem__stmt_commit, NULL);
    rc = idem__conn_pipeline(conn, cmds, n, &failed_at, c->err);
    if (rc != 0 && !tx->begun && idem__store_claim_busy(c, failed_at, c->err->sqlstate))
        step = busy(c, conn, out_rc);
    else
        step =
            after_commit(c, conn, tx, tx->begun ? NULL : cmds[c->claim_at].result, rc,
                         rc != 0 && idem__store_commit_unknown(failed_at, n - 1, c->err->sqlstate),
                         rc != 0 && failed_at == finish_at, out_rc);
    idem__store_pipe_clear(cmds, n);
    return step;
}

/* Whether a statement of the effect's decides the call whatever the effect returned: one
 * that was refused, or that failed in a way the call answers for itself (a serialization
 * failure or deadlock: run again; a timeout or a lost connection: unavailable; the
 * store's own BEGIN or claim). */
static int decided_by_statement(const idem_tx *tx)
{
    return tx->refused || idem__sqlstate_is_retryable(tx->sqlstate) ||
           idem__sqlstate_is_timeout(tx->sqlstate) || tx->setup_rc != 0 ||
           (tx->failure.code != 0 && PQstatus(idem_conn_pg(tx->conn)) != CONNECTION_OK);
}

enum step idem__store_write_attempt(call *c, idem_conn *conn, int *out_rc)
{
    idem_tx tx = {.conn = conn, .c = c};
    char *receipt = NULL;
    size_t len = 0;
    int failed = 0, rc;
    enum step step;

    idem_error_clear(c->err); /* nothing from an earlier attempt */
    rc = run_effect(c, &tx, &receipt, &len, &failed);
    if (rc >= 0 && decided_by_statement(&tx)) {
        free(receipt);
        receipt = NULL;
        *c->err = tx.failure; /* whatever the effect returned, in the statement's words */
        rc = IDEM_EEFFECT;
    }
    if (tx.ended && rc >= 0) {
        free(receipt);
        receipt = NULL;
        rc = idem__error_set(c->err, IDEM_EEFFECT,
                             "the effect ended the transaction itself; "
                             "COMMIT and ROLLBACK are the store's");
    }
    if (tx.claim_busy) {
        free(receipt);
        return busy(c, conn, out_rc);
    }
    if (tx.claim_lost) {
        free(receipt);
        step = answer_taken(c, conn, &tx, tx.taken, 1, out_rc);
        PQclear(tx.taken);
        return step;
    }
    if (rc != 0)
        return effect_failure(c, conn, &tx, rc, out_rc);
    step = finish_and_commit(c, conn, &tx, receipt, len, failed, out_rc);
    if (step == STEP_DONE && *out_rc == 0 && !tx.decided) {
        c->out->receipt = receipt;
        c->out->receipt_len = len;
        if (failed) {
            *out_rc = idem__store_rejected(c);
            return STEP_DONE;
        }
        c->out->status = IDEM_STATUS_CREATED;
        COUNT(c->store, created);
        return STEP_DONE;
    }
    free(receipt);
    return step;
}
