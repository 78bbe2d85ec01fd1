/* Applying one migration file: statement by statement, so that a failure names its line,
 * inside one transaction with the ledger row (or, for a no-transaction file, in
 * autocommit, then the ledger row). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/clock.h"
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

/* A text sent to the server and where its bytes stand in the file: its first head_len
 * bytes at head_offset, the rest from tail_offset (a whole statement: head_len 0). */
typedef struct sent_text {
    const char *text;
    size_t len;
    size_t head_len;
    size_t head_offset;
    size_t tail_offset;
} sent_text;

static size_t file_offset(const sent_text *t, size_t byte)
{
    return byte < t->head_len ? t->head_offset + byte : t->tail_offset + (byte - t->head_len);
}

/* "FILE:LINE: server message (detail)", LINE from the error's position in the text when
 * the server gives one, else the line where the text's own part starts (an action's, when
 * the text is a head and an action). */
static int statement_failed(idem_error *err, PGconn *conn, const PGresult *res,
                            const idem__migration_file *f, const sent_text *t)
{
    const char *pos = PQresultErrorField(res, PG_DIAG_STATEMENT_POSITION);
    const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
    const char *encoding = PQparameterStatus(conn, "server_encoding");
    int utf8 = encoding == NULL || strcmp(encoding, "SQL_ASCII") != 0;
    size_t off = file_offset(t, t->head_len);
    int rc;

    if (pos != NULL)
        off = file_offset(t, idem__sql_char_offset(t->text, t->len, atol(pos), utf8));
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

static int run_text(PGconn *conn, const idem__migration_file *f, const sent_text *t,
                    idem_error *err)
{
    char *text = strndup(t->text, t->len);
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
                             f->name, idem__sql_line(f->sql, file_offset(t, 0)));
    } else if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK &&
               status != PGRES_EMPTY_QUERY) {
        rc = statement_failed(err, conn, res, f, t);
    }
    PQclear(res);
    free(text);
    return rc;
}

/* Citus refuses some actions of an ALTER TABLE beside others on its tables (ADD
 * CONSTRAINT; ADD COLUMN of a serial type or with a nextval() default) and says to issue
 * each separately: on a Citus table each action is sent as an ALTER TABLE of its own, in
 * the order written, in the same transaction. Elsewhere the statement runs as written. */
static const char SQL_CITUS_INSTALLED[] =
    "SELECT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'citus')";
static const char SQL_CITUS_TABLE[] = "SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition"
                                      " WHERE logicalrelid = pg_catalog.to_regclass($1))";

/* *out = the one boolean that sql (with at most one parameter, value) returns. */
static int ask(int *out, PGconn *conn, const char *sql, const char *value,
               const idem__migration_file *f, const idem__sql_stmt *st, idem_error *err)
{
    PGresult *res = PQexecParams(conn, sql, value != NULL, NULL, &value, NULL, NULL, 0);
    int rc = 0;

    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
        rc = idem__error_pg(err, conn, res, "%s:%u: asking Citus about the table", f->name,
                            idem__sql_line(f->sql, st->offset));
    else
        *out = PQgetvalue(res, 0, 0)[0] == 't';
    PQclear(res);
    return rc;
}

/* *out = 1 when the table that alter names is a Citus table. *citus caches whether the
 * extension is installed (-1: not asked yet). */
static int citus_table(int *out, PGconn *conn, const idem__migration_file *f,
                       const idem__sql_stmt *st, const idem__alter_table *alter, int *citus,
                       idem_error *err)
{
    char *name;
    int rc = 0;

    *out = 0;
    if (*citus < 0)
        rc = ask(citus, conn, SQL_CITUS_INSTALLED, NULL, f, st, err);
    if (rc != 0 || !*citus)
        return rc;
    name = strndup(f->sql + st->offset + alter->name.offset, alter->name.len);
    if (name == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "%s: out of memory", f->name);
    rc = ask(out, conn, SQL_CITUS_TABLE, name, f, st, err);
    free(name);
    return rc;
}

/* Each action of alter as "ALTER TABLE name action", one after the other. */
static int run_actions(PGconn *conn, const idem__migration_file *f, const idem__sql_stmt *st,
                       const idem__alter_table *alter, idem_error *err)
{
    const char *stmt = f->sql + st->offset;
    size_t max = 0;
    char *text;
    int rc = 0;

    for (size_t i = 0; i < alter->count; i++)
        max = alter->actions[i].len > max ? alter->actions[i].len : max;
    if ((text = malloc(alter->head_len + max + 1)) == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "%s: out of memory", f->name);
    memcpy(text, stmt, alter->head_len);
    for (size_t i = 0; rc == 0 && i < alter->count; i++) {
        const idem__sql_stmt *a = &alter->actions[i];
        sent_text t = {text, alter->head_len + a->len, alter->head_len, st->offset,
                       st->offset + a->offset};

        memcpy(text + alter->head_len, stmt + a->offset, a->len);
        text[t.len] = '\0';
        rc = run_text(conn, f, &t, err);
    }
    free(text);
    return rc;
}

/* One statement of the file; *citus as citus_table(). */
static int run_statement(PGconn *conn, const idem__migration_file *f, const idem__sql_stmt *st,
                         int *citus, idem_error *err)
{
    sent_text whole = {f->sql + st->offset, st->len, 0, st->offset, st->offset};
    idem__alter_table alter;
    int split = 0, rc = idem__sql_alter_table(&alter, whole.text, whole.len);

    if (rc < 0)
        return idem__error_set(err, rc, "%s: out of memory", f->name);
    if (rc == 0)
        return run_text(conn, f, &whole, err);
    rc = citus_table(&split, conn, f, st, &alter, citus, err);
    if (rc == 0)
        rc = split ? run_actions(conn, f, st, &alter, err) : run_text(conn, f, &whole, err);
    free(alter.actions);
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
    int citus = -1;
    int rc = idem__sql_split(&stmts, &count, f->sql, f->len);

    if (rc != 0)
        return idem__error_set(err, rc, "%s: out of memory", f->name);
    if (in_tx)
        rc = check_transactional(f, stmts, count, err);
    for (size_t i = 0; rc == 0 && i < count; i++) {
        rc = run_statement(conn, f, &stmts[i], &citus, err);
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
