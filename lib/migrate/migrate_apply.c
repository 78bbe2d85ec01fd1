/* Applying one migration file: statement by statement, so that a failure names its line,
 * inside one transaction with the ledger row (or, for a no-transaction file, in
 * autocommit, then the ledger row). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "clock.h"
#include "error.h"
#include "migrate_internal.h"

static const char SQL_SETTINGS_LOCAL[] = "SELECT set_config('search_path', 'idem', true),"
                                         " set_config('client_encoding', 'UTF8', true)";
static const char SQL_SETTINGS_SAVE[] =
    "SELECT current_setting('search_path'), current_setting('client_encoding')";
static const char SQL_SETTINGS_SESSION[] = "SELECT set_config('search_path', $1::text, false),"
                                           " set_config('client_encoding', $2::text, false)";

static int exec_params(PGconn *conn, const char *sql, int n, const char *const *values,
                       const idem__migration_file *f, const char *what, idem_error *err)
{
    PGresult *res = PQexecParams(conn, sql, n, NULL, values, NULL, NULL, 0);
    ExecStatusType st = PQresultStatus(res);
    int rc = 0;

    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        rc = idem__error_pg(err, conn, res, "%s: %s", f->name, what);
    PQclear(res);
    return rc;
}

/* Only inside a transaction: a ROLLBACK outside one earns a server warning. */
static void rollback_if_open(PGconn *conn)
{
    PGTransactionStatusType st = PQtransactionStatus(conn);

    if ((st == PQTRANS_INTRANS || st == PQTRANS_INERROR) && PQstatus(conn) == CONNECTION_OK)
        PQclear(PQexec(conn, "ROLLBACK"));
}

/* A migration has no data to give COPY FROM STDIN nor a reader for COPY TO STDOUT: end
 * the copy so that the connection is usable again. */
static void abandon_copy(PGconn *conn, ExecStatusType status)
{
    PGresult *res;
    char *buf = NULL;

    if (status == PGRES_COPY_IN)
        PQputCopyEnd(conn, "COPY with STDIN is not supported in a migration");
    else
        while (PQgetCopyData(conn, &buf, 0) > 0)
            PQfreemem(buf);
    while ((res = PQgetResult(conn)) != NULL)
        PQclear(res);
}

static void append_note(idem_error *err, const char *note)
{
    size_t used;

    if (err == NULL)
        return;
    used = strlen(err->message);
    snprintf(err->message + used, sizeof(err->message) - used, "%s", note);
}

/* duplicate_table, duplicate_object, duplicate_schema, duplicate_function */
static int already_exists(const idem_error *err)
{
    static const char *const states[] = {"42P07", "42710", "42P06", "42723"};

    for (size_t i = 0; err != NULL && i < sizeof(states) / sizeof(states[0]); i++)
        if (strcmp(err->sqlstate, states[i]) == 0)
            return 1;
    return 0;
}

/* A pending file whose object exists: most likely applied once, its ledger row lost. */
static void ledger_note(idem_error *err, const idem__migration_file *f)
{
    char note[320];

    snprintf(note, sizeof(note),
             "; the ledger idem.schema_migrations does not record %s, yet this object exists: "
             "if it was applied before, its ledger row is missing. Restore the ledger from a "
             "backup, or record it with idem-migrate baseline --to %d",
             f->name, f->version);
    append_note(err, note);
}

/* "FILE:LINE: server message (detail)", LINE from the error's position in the statement
 * when the server gives one, else the statement's first line. */
static int statement_failed(idem_error *err, PGconn *conn, const PGresult *res,
                            const idem__migration_file *f, const idem__sql_stmt *st)
{
    const char *pos = PQresultErrorField(res, PG_DIAG_STATEMENT_POSITION);
    const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
    const char *encoding = PQparameterStatus(conn, "server_encoding");
    int utf8 = encoding == NULL || strcmp(encoding, "SQL_ASCII") != 0;
    size_t off = st->offset;
    int rc;

    if (pos != NULL)
        off += idem__sql_char_offset(f->sql + st->offset, st->len, atol(pos), utf8);
    rc = idem__error_pg(err, conn, res, "%s:%u", f->name, idem__sql_line(f->sql, off));
    if (detail != NULL) {
        append_note(err, " (");
        append_note(err, detail);
        append_note(err, ")");
    }
    if (already_exists(err))
        ledger_note(err, f);
    return rc;
}

static int run_statement(PGconn *conn, const idem__migration_file *f, const idem__sql_stmt *st,
                         idem_error *err)
{
    char *text = strndup(f->sql + st->offset, st->len);
    PGresult *res;
    ExecStatusType status;
    int rc = 0;

    if (text == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "%s: out of memory", f->name);
    /* The extended protocol runs exactly one statement: text the splitter got wrong fails
     * loudly instead of running as several statements of which only the last is seen. */
    res = PQexecParams(conn, text, 0, NULL, NULL, NULL, NULL, 0);
    status = PQresultStatus(res);
    if (status == PGRES_COPY_IN || status == PGRES_COPY_OUT) {
        abandon_copy(conn, status);
        rc = idem__error_set(err, IDEM_EDB,
                             "%s:%u: COPY from STDIN or to STDOUT has no data in "
                             "a migration",
                             f->name, idem__sql_line(f->sql, st->offset));
    } else if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK &&
               status != PGRES_EMPTY_QUERY) {
        rc = statement_failed(err, conn, res, f, st);
    }
    PQclear(res);
    free(text);
    return rc;
}

/* The n-th word of a statement (0-based), as [*word, *word + *len); 0 when there is none.
 * Statements start with a word when they start with a keyword. */
static int nth_word(const char **word, size_t *len, const char *s, size_t n, unsigned nth)
{
    size_t i = 0, start;

    for (unsigned k = 0;; k++) {
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
            i++;
        start = i;
        while (i < n && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')))
            i++;
        if (i == start)
            return 0;
        if (k == nth) {
            *word = s + start;
            *len = i - start;
            return 1;
        }
    }
}

static int word_is(const char *s, size_t len, unsigned nth, const char *keyword)
{
    const char *w;
    size_t n;

    return nth_word(&w, &n, s, len, nth) && n == strlen(keyword) && strncasecmp(w, keyword, n) == 0;
}

/* COMMIT, END, ABORT, ROLLBACK (but not ROLLBACK TO a savepoint), PREPARE TRANSACTION:
 * statements that would end the migration's transaction, committing half a file. */
static int ends_transaction(const char *s, size_t len)
{
    if (word_is(s, len, 0, "commit") || word_is(s, len, 0, "end") || word_is(s, len, 0, "abort"))
        return 1;
    if (word_is(s, len, 0, "rollback"))
        return !word_is(s, len, 1, "to") && !word_is(s, len, 1, "prepared");
    return word_is(s, len, 0, "prepare") && word_is(s, len, 1, "transaction");
}

/* A transactional file is refused before it runs when a statement would end its
 * transaction. */
static int check_transactional(const idem__migration_file *f, const idem__sql_stmt *stmts,
                               size_t count, idem_error *err)
{
    for (size_t i = 0; i < count; i++)
        if (ends_transaction(f->sql + stmts[i].offset, stmts[i].len))
            return idem__error_set(err, IDEM_EDB,
                                   "%s:%u: this statement would end the migration's "
                                   "transaction; a file that manages its own transactions needs "
                                   "the \"-- idem:no-transaction\" marker",
                                   f->name, idem__sql_line(f->sql, stmts[i].offset));
    return 0;
}

/* Run every statement of f; in_tx: they run inside the migration's transaction, which
 * none of them may end. */
static int run_all(PGconn *conn, const idem__migration_file *f, int in_tx, long long *duration_ms,
                   idem_error *err)
{
    idem__sql_stmt *stmts = NULL;
    size_t count = 0;
    long long start = (long long)idem__now_ms();
    int rc = idem__sql_split(&stmts, &count, f->sql, f->len);

    if (rc != 0)
        return idem__error_set(err, rc, "%s: out of memory", f->name);
    if (in_tx)
        rc = check_transactional(f, stmts, count, err);
    for (size_t i = 0; rc == 0 && i < count; i++) {
        rc = run_statement(conn, f, &stmts[i], err);
        if (rc == 0 && in_tx && PQtransactionStatus(conn) != PQTRANS_INTRANS)
            rc = idem__error_set(err, IDEM_EDB,
                                 "%s:%u: this statement ended the migration's transaction; a "
                                 "file that manages its own transactions needs the "
                                 "\"-- idem:no-transaction\" marker",
                                 f->name, idem__sql_line(f->sql, stmts[i].offset));
    }
    if (rc == 0 && !in_tx && PQtransactionStatus(conn) != PQTRANS_IDLE)
        rc = idem__error_set(err, IDEM_EDB, "%s: the file ends inside a transaction it opened",
                             f->name);
    *duration_ms = (long long)idem__now_ms() - start;
    free(stmts);
    return rc;
}

static int apply_in_transaction(PGconn *conn, const idem__migration_file *f, long long *duration_ms,
                                idem_error *err)
{
    int rc = exec_params(conn, "BEGIN", 0, NULL, f, "BEGIN", err);

    if (rc == 0)
        rc = exec_params(conn, SQL_SETTINGS_LOCAL, 0, NULL, f, "setting search_path", err);
    if (rc == 0)
        rc = run_all(conn, f, 1, duration_ms, err);
    if (rc == 0)
        rc = idem__ledger_record(conn, f, *duration_ms, err);
    if (rc == 0)
        rc = exec_params(conn, "COMMIT", 0, NULL, f, "COMMIT", err);
    if (rc != 0)
        rollback_if_open(conn);
    return rc;
}

/* Session settings changed for a no-transaction file, restored after it. */
typedef struct saved_settings {
    char *search_path;
    char *client_encoding;
} saved_settings;

static int settings_save(saved_settings *out, PGconn *conn, const idem__migration_file *f,
                         idem_error *err)
{
    PGresult *res = PQexec(conn, SQL_SETTINGS_SAVE);
    int rc = 0;

    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        rc = idem__error_pg(err, conn, res, "%s: reading the session settings", f->name);
    } else {
        out->search_path = strdup(PQgetvalue(res, 0, 0));
        out->client_encoding = strdup(PQgetvalue(res, 0, 1));
        if (out->search_path == NULL || out->client_encoding == NULL)
            rc = idem__error_set(err, IDEM_ENOMEM, "%s: out of memory", f->name);
    }
    PQclear(res);
    return rc;
}

static int apply_without_transaction(PGconn *conn, const idem__migration_file *f,
                                     long long *duration_ms, idem_error *err)
{
    saved_settings saved = {NULL, NULL};
    const char *ours[2] = {"idem", "UTF8"};
    int rc = settings_save(&saved, conn, f, err);

    if (rc == 0)
        rc = exec_params(conn, SQL_SETTINGS_SESSION, 2, ours, f, "setting search_path", err);
    if (rc == 0) {
        rc = run_all(conn, f, 0, duration_ms, err);
        if (rc != 0)
            append_note(err, " (a no-transaction file: its statements before this one stay "
                             "applied; nothing was recorded in the ledger)");
    }
    if (rc == 0)
        rc = idem__ledger_record(conn, f, *duration_ms, err);
    rollback_if_open(conn);
    if (saved.search_path != NULL && saved.client_encoding != NULL) {
        const char *theirs[2] = {saved.search_path, saved.client_encoding};
        int restored = exec_params(conn, SQL_SETTINGS_SESSION, 2, theirs, f,
                                   "restoring search_path", rc == 0 ? err : NULL);
        if (rc == 0)
            rc = restored;
    }
    free(saved.search_path);
    free(saved.client_encoding);
    return rc;
}

int idem__migration_apply(long long *out, PGconn *conn, const idem__migration_file *file,
                          idem_error *err)
{
    long long duration_ms = 0;
    int rc = file->no_transaction ? apply_without_transaction(conn, file, &duration_ms, err)
                                  : apply_in_transaction(conn, file, &duration_ms, err);

    if (rc == 0)
        *out = duration_ms;
    return rc;
}
