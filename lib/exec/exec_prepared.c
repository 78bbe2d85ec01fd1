/* The execution layer's prepared statements: the names idem's statements take on a
 * server session and what each connection has prepared there; a caller's SQL (an effect's
 * statement) kept by a pooled connection as a statement of its own, so that it is parsed
 * and planned once per connection (exec.h, idem__conn_text_stmt()); and what happens when
 * the table under one has changed since. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

#include "exec.h"
#include "exec_io.h"
#include "conn.h"

/* The name @stmt has on this connection's server session, or NULL when it is not
 * prepared there. */
/* Whether @p was prepared for @stmt: the same object, under its name. A statement is
 * known by its address, but a declared effect's may be freed and another made at the same
 * address; declared effects' names are unique (a serial number), so the name tells them
 * apart, and the earlier one's entry is never taken for the later one. */
static int prepared_for(const idem__prepared *p, const idem__stmt *stmt)
{
    size_t n = strnlen(stmt->name, IDEM__STMT_NAME_MAX);

    return p->stmt == stmt && strncmp(p->name, stmt->name, n) == 0 && p->name[n] == '_';
}

const char *idem__exec_prepared_name(const idem_conn *conn, const idem__stmt *stmt)
{
    for (size_t i = 0; i < conn->nprepared; i++) {
        if (prepared_for(&conn->prepared[i], stmt))
            return conn->prepared[i].name;
    }
    return NULL;
}

/* The name a statement is prepared under: its own and a hash (FNV-1a) of its SQL, so that
 * a session holding a statement of that name holds this very SQL, never another
 * process's declared statement of the same name or another version's. */
static uint64_t fnv1a(const char *sql, uint64_t h)
{
    for (const unsigned char *p = (const unsigned char *)sql; *p != '\0'; p++)
        h = (h ^ *p) * 1099511628211ULL;
    return h;
}

void idem__exec_server_name(char *out, size_t size, const idem__stmt *stmt)
{
    snprintf(out, size, "%.*s_%016llx", IDEM__STMT_NAME_MAX, stmt->name,
             (unsigned long long)fnv1a(stmt->sql, 14695981039346656037ULL));
}

int idem__exec_remember_prepared(idem_conn *conn, const idem__stmt *stmt, const char *name,
                                 idem_error *err)
{
    if (conn->nprepared == conn->prepared_cap) {
        size_t cap = conn->prepared_cap ? conn->prepared_cap * 2 : 16;
        idem__prepared *grown = realloc(conn->prepared, cap * sizeof(*grown));

        if (grown == NULL)
            return idem__error_set(err, IDEM_ENOMEM, "out of memory preparing %s", stmt->name);
        conn->prepared = grown;
        conn->prepared_cap = cap;
    }
    conn->prepared[conn->nprepared].stmt = stmt;
    snprintf(conn->prepared[conn->nprepared++].name, IDEM__PREPARED_NAME_MAX + 1, "%s", name);
    return 0;
}

#ifdef IDEM_TESTING
void idem__conn_forget_prepared(idem_conn *conn)
{
    if (conn != NULL)
        conn->nprepared = 0;
}
#endif

static int is_text_stmt(const idem_conn *conn, const idem__stmt *stmt)
{
    for (size_t i = 0; i < conn->ntexts; i++) {
        if (&conn->texts[i].stmt == stmt)
            return 1;
    }
    return 0;
}

const idem__stmt idem__stmt_begin_serializable = {"idem_tx_begin_serializable",
                                                  "BEGIN ISOLATION LEVEL SERIALIZABLE", 0};
const idem__stmt idem__stmt_begin_read_committed = {"idem_tx_begin_read_committed",
                                                    "BEGIN ISOLATION LEVEL READ COMMITTED", 0};
const idem__stmt idem__stmt_commit = {"idem_tx_commit", "COMMIT", 0};

int idem__exec_is_tx_control(const idem__stmt *stmt)
{
    return stmt == &idem__stmt_begin_serializable || stmt == &idem__stmt_begin_read_committed ||
           stmt == &idem__stmt_commit;
}

const char *idem__exec_stmt_what(const idem_conn *conn, const idem__stmt *stmt)
{
    return is_text_stmt(conn, stmt) || idem__exec_is_tx_control(stmt) ? stmt->sql : stmt->name;
}

/* A kept text statement failed because its plan no longer fits its table, changed since it
 * was prepared ("cached plan must not change result type"): every connection of the pool
 * may hold such a statement. The pool's epoch moves on; a connection that kept texts under
 * an earlier one sends them as text from then on and is closed on release (a fresh one
 * prepares them anew). */
void idem__exec_note_stale_plan(idem_conn *conn, const idem__stmt *stmt, const PGresult *res)
{
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    const char *where = PQresultErrorField(res, PG_DIAG_SOURCE_FUNCTION);
    unsigned int epoch = conn->text_epoch;

    if (stmt == NULL || state == NULL || where == NULL || strcmp(state, "0A000") != 0 ||
        strcmp(where, "RevalidateCachedQuery") != 0 || !is_text_stmt(conn, stmt))
        return;
    conn->stale_plan = 1;
    /* Once for all the connections that meet it: a bump another made first is enough. */
    atomic_compare_exchange_strong(conn->pool_text_epoch, &epoch, epoch + 1);
}

/* The SQL's first characters, on one line and in ASCII (the server takes a statement's
 * name in the client's encoding, which may not be UTF-8): the statement's name in
 * messages, and (with a hash of the whole SQL) on the server. */
static void text_label(char *out, const char *sql)
{
    size_t n = strnlen(sql, IDEM__TEXT_LABEL_MAX);

    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)sql[i];

        out[i] = c >= 0x80 ? '?' : c < 0x20 ? ' ' : (char)c;
    }
    out[n] = '\0';
}

int idem__conn_take_stale_plan(idem_conn *conn)
{
    int stale = conn->stale_plan;

    conn->stale_plan = 0;
    return stale;
}

/* Whether this is the first time the connection runs @sql with @nparams parameters (as far
 * as it remembers): it is then remembered, and the next run keeps it. */
static int first_run(idem_conn *conn, const char *sql, int nparams)
{
    uint64_t h = fnv1a(sql, 14695981039346656037ULL ^ (uint64_t)(unsigned int)nparams);

    h += h == 0; /* 0 marks an empty place */
    for (size_t i = 0; i < IDEM__TEXT_SEEN_MAX; i++) {
        if (conn->text_seen[i] == h) {
            conn->text_seen[i] = 0;
            return 0;
        }
    }
    conn->text_seen[conn->text_seen_next++ % IDEM__TEXT_SEEN_MAX] = h;
    return 1;
}

const idem__stmt *idem__conn_text_stmt(idem_conn *conn, const char *sql, int nparams)
{
    unsigned int epoch = atomic_load(conn->pool_text_epoch);
    idem__text_stmt *t;

    if (conn->unnamed || strnlen(sql, IDEM__TEXT_STMT_SQL_MAX + 1) > IDEM__TEXT_STMT_SQL_MAX)
        return NULL;
    if (conn->ntexts == 0)
        conn->text_epoch = epoch;
    if (conn->text_epoch != epoch) {
        conn->expires_ms = 0; /* closed on release, as at the end of its lifetime */
        return NULL;
    }
    for (size_t i = 0; i < conn->ntexts; i++) {
        t = &conn->texts[i];
        if (strcmp(t->sql, sql) == 0)
            return t->stmt.nparams == nparams ? &t->stmt : NULL;
    }
    if (conn->ntexts == IDEM__TEXT_STMTS_MAX || first_run(conn, sql, nparams))
        return NULL;
    /* Allocated once, whole: the pool remembers a statement by its address. */
    if (conn->texts == NULL &&
        (conn->texts = calloc(IDEM__TEXT_STMTS_MAX, sizeof(*conn->texts))) == NULL)
        return NULL;
    t = &conn->texts[conn->ntexts];
    if ((t->sql = strdup(sql)) == NULL)
        return NULL;
    text_label(t->label, sql);
    t->stmt = (idem__stmt){t->label, t->sql, nparams};
    conn->ntexts++;
    return &t->stmt;
}
