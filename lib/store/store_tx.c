/* The effect's side of the transaction (idem_tx): the statements an effect runs inside
 * the store's transaction, as the call's tenant; those that would end or change that
 * transaction, or leave session state on the pooled connection, are refused unsent. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "exec.h"
#include "store_internal.h"

/* Past white space and comments (-- to the end of the line; block comments, nested). */
static const char *skip_blank(const char *p)
{
    for (;;) {
        while (isspace((unsigned char)*p))
            p++;
        if (p[0] == '-' && p[1] == '-') {
            p += strcspn(p, "\n");
        } else if (p[0] == '/' && p[1] == '*') {
            int depth = 1;

            for (p += 2; *p != '\0' && depth > 0; p++) {
                if (p[0] == '/' && p[1] == '*')
                    depth++, p++;
                else if (p[0] == '*' && p[1] == '/')
                    depth--, p++;
            }
        } else {
            return p;
        }
    }
}

/* The keyword at @p (after blanks), copied into @word (upper case, at most 15 letters;
 * "" when none); returns what follows it. */
static const char *keyword(const char *p, char word[16])
{
    size_t n = 0;

    p = skip_blank(p);
    while (isalpha((unsigned char)p[n]) || p[n] == '_') {
        if (n < 15)
            word[n] = (char)toupper((unsigned char)p[n]);
        n++;
    }
    word[n < 15 ? n : 15] = '\0';
    return p + n;
}

/* Whether the setting named at @p (after blanks, perhaps double-quoted) is @name. */
static int names_setting(const char *p, const char *name)
{
    size_t n = strlen(name);

    p = skip_blank(p);
    if (*p == '"')
        return strncasecmp(p + 1, name, n) == 0 && p[n + 1] == '"';
    return strncasecmp(p, name, n) == 0 && !isalnum((unsigned char)p[n]) && p[n] != '_' &&
           p[n] != '.' && p[n] != '$';
}

/* Why @sql may not run as an effect's statement, or NULL. An effect runs inside the
 * store's transaction on a pooled connection: a statement that ends that transaction
 * would commit the effect without its record (and a retry would run it again); one that
 * changes the transaction's characteristics breaks the record's write; session state
 * would stay on the connection for every later call, whatever its tenant. Recognised by
 * the statement's first keywords; set_config() inside a query is not (the finishing
 * statement's guard refuses what it did to the tenant, and row-level security's own check
 * what it did to row_security: store_write.c). */
static const char *refused_statement(const char *sql)
{
    char w1[16], w2[16], w3[16];
    const char *rest = keyword(keyword(sql, w1), w2);

    if (!strcmp(w1, "COMMIT") || !strcmp(w1, "END") || !strcmp(w1, "ABORT") ||
        (!strcmp(w1, "PREPARE") && !strcmp(w2, "TRANSACTION")))
        return "it would end the store's transaction, committing the effect without its "
               "record: COMMIT and ROLLBACK are the store's";
    if (!strcmp(w1, "ROLLBACK")) {
        if (!strcmp(w2, "WORK") || !strcmp(w2, "TRANSACTION"))
            keyword(rest, w3);
        else
            snprintf(w3, sizeof(w3), "%s", w2);
        if (strcmp(w3, "TO") != 0) /* ROLLBACK TO SAVEPOINT stays inside the effect */
            return "it would end the store's transaction: COMMIT and ROLLBACK are the store's";
    }
    if (!strcmp(w1, "BEGIN") || !strcmp(w1, "START"))
        return "the store's transaction is already open";
    if (!strcmp(w1, "SET") && !strcmp(w2, "LOCAL") &&
        (names_setting(rest, "idem.tenant") || names_setting(rest, "row_security")))
        return "an effect runs as the call's tenant under row-level security, which its record "
               "is written under too";
    if (!strcmp(w1, "SET") && strcmp(w2, "LOCAL") != 0 && strcmp(w2, "CONSTRAINTS") != 0)
        return !strcmp(w2, "TRANSACTION")
                   ? "it would change the store's transaction, which its record is written in"
                   : "a session's setting would stay on the pooled connection for every later "
                     "call; use SET LOCAL";
    if (!strcmp(w1, "RESET") || !strcmp(w1, "DISCARD") || !strcmp(w1, "DEALLOCATE") ||
        !strcmp(w1, "LISTEN") || !strcmp(w1, "UNLISTEN") || !strcmp(w1, "LOAD"))
        return "it changes the session, which would stay so on the pooled connection for every "
               "later call";
    return NULL;
}

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
    idem__error_copy(&tx->failure, local);
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
        idem__error_copy(err, &local);
    return rc;
}

int idem_tx_exec(PGresult **out, idem_tx *tx, const char *sql, int nparams,
                 const char *const *values, idem_error *err)
{
    idem_error local = IDEM_ERROR_INIT;
    idem__pipe_cmd cmd;
    PGresult *res = NULL;
    const char *why;
    int rc;

    if (out == NULL || tx == NULL || sql == NULL || nparams < 0 || (nparams > 0 && !values))
        return idem__error_field(err, IDEM_EINVAL, "tx_exec",
                                 "out, tx, sql and values must be given");
    if (tx->claim_lost || tx->claim_busy)
        return idem__error_set(err, IDEM_EBUSY,
                               "the key is claimed by another attempt; this one is void");
    if (tx->ended)
        return idem__error_set(err, IDEM_EINVAL, "the effect already ended the transaction");
    if (tx->refused)
        return idem__error_set(err, IDEM_EINVAL, "an earlier statement of the effect was refused");
    if ((why = refused_statement(sql)) != NULL) {
        tx->refused = 1; /* the call ends effect_failed, whatever the effect returns */
        idem__error_field(&tx->failure, IDEM_EINVAL, "sql",
                          "the effect's statement is refused (%s): %s", why, skip_blank(sql));
        if (err != NULL)
            idem__error_copy(err, &tx->failure);
        return IDEM_EINVAL;
    }
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
        idem__error_copy(err, &local);
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
