#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "exec.h"
#include "store_internal.h"

/* COMMIT, ROLLBACK and the like belong to the store: a statement that ended the
 * transaction ends the effect's use of it. */
static int check_still_open(idem_tx *tx, idem_error *err)
{
    if (PQtransactionStatus(idem_conn_pg(tx->conn)) == PQTRANS_INTRANS)
        return 0;
    tx->ended = 1;
    return idem__error_set(err, IDEM_EINVAL,
                           "the effect's statement ended the transaction; "
                           "COMMIT and ROLLBACK are the store's");
}

/* The effect's statement: kept by the connection (parsed and planned once there), or as
 * text. */
static idem__pipe_cmd effect_cmd(idem_tx *tx, const char *sql, int nparams,
                                 const char *const *values)
{
    const idem__stmt *stmt = idem__conn_text_stmt(tx->conn, sql, nparams);

    if (stmt != NULL)
        return (idem__pipe_cmd){stmt, NULL, 0, values, NULL, NULL, 0, NULL};
    return (idem__pipe_cmd){NULL, sql, nparams, values, NULL, NULL, 0, NULL};
}

/* The effect's statement failed. The connection's own failure is not the effect's: a
 * server session that lost the statement this connection kept there, or holds one of its
 * name (exec.c: a transaction pooler in between) fails the call as setting up would. A
 * statement kept from an earlier call whose plan no longer fits its table, changed
 * meanwhile ("cached plan must not change result type"): the call tries once more, with
 * the statement sent afresh (store_write.c, exec.h). */
static void note_failure(idem_tx *tx, int rc, const idem_error *local)
{
    snprintf(tx->sqlstate, sizeof(tx->sqlstate), "%s", local->sqlstate);
    if (strcmp(local->field, "pooler") == 0)
        tx->setup_rc = rc;
    if (idem__conn_take_stale_plan(tx->conn))
        tx->stale_plan = 1;
}

/* The effect's first statement travels with BEGIN and the claim: one round trip. */
static int tx_first_exec(PGresult **out, idem_tx *tx, const char *sql, int nparams,
                         const char *const *values, idem_error *err)
{
    idem__pipe_cmd cmds[BEGIN_CMDS + 1];
    idem_error local = IDEM_ERROR_INIT;
    size_t n = idem__store_begin_cmds(tx->c, tx->conn, cmds), n_begin = n, failed_at;
    size_t claim_at = tx->c->claim_at;
    int rc;

    cmds[n++] = effect_cmd(tx, sql, nparams, values);
    rc = idem__conn_pipeline(tx->conn, cmds, n, &failed_at, &local);
    tx->begun = 1;
    /* A claim that found a record means the key is taken, whatever came after it. */
    if (cmds[claim_at].result != NULL && !idem__store_claimed(cmds[claim_at].result)) {
        tx->claim_lost = 1;
        tx->taken = cmds[claim_at].result;
        cmds[claim_at].result = NULL;
        rc = idem__error_set(&local, IDEM_EBUSY,
                             "the key already has a record; this attempt is void");
    } else if (rc == 0) {
        *out = cmds[n - 1].result;
        cmds[n - 1].result = NULL;
        if ((rc = check_still_open(tx, &local)) != 0) {
            PQclear(*out);
            *out = NULL;
        }
    } else {
        note_failure(tx, rc, &local);
        tx->claim_busy = idem__store_claim_busy(tx->c, failed_at, local.sqlstate);
        if (failed_at < n_begin)
            tx->setup_rc = rc;
    }
    idem__store_pipe_clear(cmds, n);
    if (rc != 0 && err != NULL)
        *err = local;
    return rc;
}

int idem_tx_exec(PGresult **out, idem_tx *tx, const char *sql, int nparams,
                 const char *const *values, idem_error *err)
{
    idem_error local = IDEM_ERROR_INIT;
    idem__pipe_cmd cmd;
    PGresult *res = NULL;
    int rc;

    if (out == NULL || tx == NULL || sql == NULL || nparams < 0 || (nparams > 0 && !values))
        return idem__error_field(err, IDEM_EINVAL, "tx_exec",
                                 "out, tx, sql and values must be given");
    if (tx->claim_lost || tx->claim_busy)
        return idem__error_set(err, IDEM_EBUSY,
                               "the key is claimed by another attempt; this one is void");
    if (tx->ended)
        return idem__error_set(err, IDEM_EINVAL, "the effect already ended the transaction");
    if (!tx->begun)
        return tx_first_exec(out, tx, sql, nparams, values, err);
    /* Later statements go one round trip each, bounded by the call's deadline. */
    cmd = effect_cmd(tx, sql, nparams, values);
    rc = cmd.stmt != NULL
             ? idem__conn_exec_prepared(&res, tx->conn, cmd.stmt, values, NULL, NULL, 0, &local)
             : idem__conn_exec_params(&res, tx->conn, sql, nparams, values, &local);
    if (rc == 0 && (rc = check_still_open(tx, &local)) != 0)
        PQclear(res);
    else if (rc == 0)
        *out = res;
    else
        note_failure(tx, rc, &local);
    if (rc != 0 && err != NULL)
        *err = local;
    return rc;
}

const char *idem_tx_tenant(const idem_tx *tx)
{
    return tx->c->req->tenant;
}

const char *idem_tx_operation_id(const idem_tx *tx)
{
    return tx->c->req->operation_id;
}
