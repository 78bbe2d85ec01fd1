/* A declared effect's failures (store_declared.c): the key taken, a retryable conflict, the
 * session's check, idem's schema behind the library, a privilege the role lacks, or the
 * effect's own failure, said in the words of the callback path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "exec.h"
#include "store_internal.h"

/* idem.declared_outcome() raises IDEM2 naming the rule the statement broke in the error's
 * constraint name (migration 0016; 0018's idem.declared_outcome_marker() raises through
 * it); for a receipt over max_response_bytes its DETAIL starts with the receipt's bytes. */
#define RULE_ONE_ROW      "declared_one_row"
#define RULE_RECEIPT_JSON "declared_receipt_json"
#define RULE_RECEIPT_SIZE "declared_receipt_size"

#define KEY_TAKEN "IDEM1"

/* The statement broke a rule of idem.declared_outcome() (IDEM2): say which in the words of
 * the callback path, by the rule the function names; the count of rows is in the server's
 * words already. */
static void refused_receipt(call *c)
{
    const char *rule = c->err->constraint;

    if (strcmp(c->err->sqlstate, "IDEM2") != 0 || strcmp(rule, RULE_ONE_ROW) == 0)
        return;
    if (strcmp(rule, RULE_RECEIPT_JSON) == 0)
        snprintf(c->err->message, sizeof(c->err->message),
                 "the declared statement returned SQL NULL instead of JSON");
    else if (strcmp(rule, RULE_RECEIPT_SIZE) == 0)
        snprintf(c->err->message, sizeof(c->err->message),
                 "receipt: %lld bytes exceed the limit of %zu (max_response_bytes)",
                 strtoll(c->err->detail, NULL, 10), c->store->opts.max_response_bytes);
}

/* Row-level security refused a row the statement writes, the record or one of the tool's
 * (error.h, idem__error_row_security(); the server names the table only in its message):
 * the tool's SQL changed idem.tenant or turned row_security off on its way, or wrote a row
 * its own table's policy refuses; say so, keeping the server's words, field sql. */
static void record_refused(call *c)
{
    char said[IDEM_ERROR_MESSAGE_MAX];

    if (!idem__error_row_security(c->err))
        return;
    snprintf(said, sizeof(said), "%s", c->err->message);
    idem__error_field(c->err, IDEM_EEFFECT, "sql",
                      "row-level security refused a row of the declared statement: it changed "
                      "idem.tenant or turned row_security off, so that its record could not be "
                      "written under the call's tenant, or wrote a row its table's policy "
                      "refuses; nothing of the call is kept (%s)",
                      said);
    snprintf(c->err->sqlstate, sizeof(c->err->sqlstate), "42501");
}

/* Whether idem's schema lacks what the declared statement needs (an older schema than this
 * library's: run idem-migrate up), asked of the server after a failure of the schema's
 * class, since its message names the missing object only in words: migration 0018's
 * function (which needs 0014's), the record's columns of 0012 and 0013, the table. The
 * tool's own SQL naming a missing object of the application's stays the effect's failure. */
static const char schema_behind_sql[] =
    "SELECT to_regprocedure('idem.declared_outcome_marker(bytea,timestamptz)') IS NULL"
    " OR (SELECT count(*) FROM pg_attribute WHERE attrelid = to_regclass('idem.operations')"
    " AND attname IN ('receipt_canonical', 'identity_digests') AND NOT attisdropped) < 2";

static int schema_behind(idem_conn *conn, const idem_error *err)
{
    PGresult *res = NULL;
    int behind;

    if (idem__sqlstate_classify(err->sqlstate) != IDEM__SQLSTATE_SCHEMA ||
        idem__conn_exec(&res, conn, schema_behind_sql, NULL) != 0)
        return 0;
    behind = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return behind;
}

/* Whether the statement, sent with the session's check (@checked), failed it: the session's
 * statement_timeout was not the one the statement was to run under. Only then: the tool's
 * own SQL may fail with the same SQLSTATE and, from its arguments, any words. */
static int session_changed(const call *c, size_t failed_at, size_t at, int checked)
{
    return checked && failed_at == at && strcmp(c->err->sqlstate, "22023") == 0 &&
           strstr(c->err->message, IDEM__DECLARED_SESSION_CHANGED) != NULL;
}

/* The statement failed: the key is taken, a retryable conflict, the session's check, or the
 * effect's failure. */
enum step idem__store_declared_failure(call *c, idem_conn *conn, int rc, size_t failed_at,
                                       size_t at, int checked, int *out_rc)
{
    if (rc == IDEM_EUNAVAIL || idem__conn_failed(conn) ||
        idem__store_commit_unknown(failed_at, at + 1, c->err->sqlstate)) {
        idem_conn_discard(conn);
        return STEP_RESOLVE; /* COMMIT may have been carried out: look on a fresh connection */
    }
    idem__store_rollback(conn);
    if (idem__sqlstate_is_retryable(c->err->sqlstate))
        return STEP_BACKOFF;
    /* The check failed before anything of the statement ran: again, with the settings'
     * statement, not counted as an attempt; the connection is not checked again. */
    if (session_changed(c, failed_at, at, checked)) {
        idem__conn_session_timeout_changed(conn);
        c->out->attempts--;
        return STEP_AGAIN;
    }
    if (failed_at == at && strcmp(c->err->sqlstate, KEY_TAKEN) == 0) {
        c->lost_claim = 1; /* counted if the lookup finds a record */
        c->lookup_first = 1;
        return STEP_AGAIN; /* the lookup answers from the record, or the key's window */
    }
    if (failed_at != at) {
        *out_rc = rc;
        return STEP_DONE;
    }
    /* As in the callback path: a lock or statement timeout is the server being busy. */
    if (idem__sqlstate_is_timeout(c->err->sqlstate)) {
        idem__error_context(c->err, "declared effect timed out waiting; retry later with the "
                                    "same key");
        c->err->code = IDEM_EUNAVAIL;
        *out_rc = IDEM_EUNAVAIL;
        return STEP_DONE;
    }
    /* idem's schema is behind this library (the server refused the statement before running
     * any of it): the call ends misconfigured, as in the callback path, where the call's end
     * classifies and counts it (store_run.c). */
    if (schema_behind(conn, c->err)) {
        c->err->code = IDEM_EDB;
        *out_rc = IDEM_EDB;
        return STEP_DONE;
    }
    /* As in the callback path: a privilege the role lacks on the application's own objects
     * is the deployment's fault, not the effect's (row-level security's refusal stays);
     * misconfigured, counted at the call's end. */
    if (strcmp(c->err->sqlstate, "42501") == 0 &&
        idem__error_privilege(c->err, PQuser(idem_conn_pg(conn))) == IDEM_EPERM) {
        c->out->status = IDEM_STATUS_MISCONFIGURED;
        *out_rc = IDEM_EPERM;
        return STEP_DONE;
    }
    COUNT(c->store, effect_failures);
    refused_receipt(c);
    record_refused(c);
    idem__error_context(c->err, "declared effect");
    c->err->code = IDEM_EEFFECT;
    c->out->status = IDEM_STATUS_EFFECT_FAILED;
    *out_rc = IDEM_EEFFECT;
    return STEP_DONE;
}
