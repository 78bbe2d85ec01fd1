/* Internal parts of the migrate module: migration files, the SQL statement splitter, the
 * ledger and its advisory lock, applying one file. */
#ifndef IDEM_LIB_MIGRATE_INTERNAL_H
#define IDEM_LIB_MIGRATE_INTERNAL_H

#include <libpq-fe.h>
#include <stddef.h>

#include "idem/migrate.h"

/* Longest file name accepted ("NNNN_description.sql"); the ledger keeps at most this. */
#define IDEM__MIGRATION_NAME_MAX 200

/* One migration file, loaded from the embedded array or a folder. */
typedef struct idem__migration_file {
    int version;
    char *name;                 /* owned */
    char *sql;                  /* owned; exact file bytes plus a terminating NUL */
    size_t len;                 /* file bytes, terminator excluded */
    unsigned char checksum[32]; /* SHA-256 of the file bytes */
    char checksum_hex[65];
    int no_transaction; /* carries the -- idem:no-transaction marker */
} idem__migration_file;

/* Files sorted by version, versions unique. */
typedef struct idem__migration_set {
    idem__migration_file *files; /* owned */
    size_t count;
} idem__migration_set;

/* The options to use: the defaults for NULL, else opts after a version check. */
int idem__migrate_options_get(idem_migrate_options *out, const idem_migrate_options *opts,
                              idem_error *err);
/* conn is connected (EINVAL otherwise); _idle: and not inside a transaction. */
int idem__migrate_conn_check(PGconn *conn, idem_error *err);
int idem__migrate_conn_idle(PGconn *conn, idem_error *err);

/* Load the embedded migrations (dir NULL) or a folder's NNNN_description.sql files. */
int idem__migration_set_load(idem__migration_set *out, const char *dir, idem_error *err);
void idem__migration_set_clear(idem__migration_set *set);

/* 3 when sql starts with a UTF-8 byte order mark, else 0. Editors on Windows add one; the
 * splitter and the marker search skip it, so that it never reaches the server (where it
 * is an invisible syntax error). The checksum stays over the exact file bytes. */
size_t idem__sql_bom_len(const char *sql, size_t len);

/* 1 when the lines before the first statement include "-- idem:no-transaction". */
int idem__sql_no_transaction(const char *sql, size_t len);

/* One statement of a file: bytes [offset, offset + len), ';' included. */
typedef struct idem__sql_stmt {
    size_t offset;
    size_t len;
} idem__sql_stmt;

/* Split a file into statements the way psql does: ';' ends a statement outside quotes,
 * comments, dollar quotes, parentheses and CREATE FUNCTION ... BEGIN ATOMIC ... END.
 * Comment-only stretches are not statements, nor is a leading byte order mark. *out is
 * malloc'd (NULL when none). */
int idem__sql_split(idem__sql_stmt **out, size_t *out_count, const char *sql, size_t len);

/* End of the lexical item of sql that starts at i (i < len), as PostgreSQL's lexer sees
 * it: a comment, a quoted string or identifier (E'...' included), a dollar-quoted string,
 * a word, or else one character. */
size_t idem__sql_lex_end(const char *sql, size_t len, size_t i);

/* An ALTER TABLE statement with several actions ("ALTER TABLE t ADD COLUMN a int, ADD
 * CONSTRAINT c CHECK (...)"): Citus refuses some actions beside others on its tables, and
 * the migration runner sends them one by one there (migrate_apply.c). Offsets are into the
 * statement. */
typedef struct idem__alter_table {
    idem__sql_stmt name;     /* the table's name as written, "idem.operations" */
    size_t head_len;         /* "ALTER TABLE [IF EXISTS] [ONLY] name [*] ", up to the first
                                action */
    idem__sql_stmt *actions; /* malloc'd; each action without its ',' or the final ';' */
    size_t count;            /* >= 2 */
} idem__alter_table;

/* 1 when the statement stmt (len bytes) is an ALTER TABLE of one table with two actions or
 * more (*out filled; free out->actions), 0 when it is not (*out untouched), or
 * IDEM_ENOMEM. */
int idem__sql_alter_table(idem__alter_table *out, const char *stmt, size_t len);

/* 1-based line of byte offset in sql. */
unsigned idem__sql_line(const char *sql, size_t offset);

/* Byte offset of the 1-based character position pos in s (as PostgreSQL counts them:
 * UTF-8 characters when utf8, else bytes); len when pos is past the end. */
size_t idem__sql_char_offset(const char *s, size_t len, long pos, int utf8);

/* One row of idem.schema_migrations. */
typedef struct idem__ledger_row {
    int version;
    char name[IDEM__MIGRATION_NAME_MAX + 1];
    char checksum_hex[65];
    char applied_at[32];
    long long duration_ms;
    char applied_by[64];
} idem__ledger_row;

typedef struct idem__ledger {
    int exists;             /* the table idem.schema_migrations exists */
    idem__ledger_row *rows; /* owned; by version */
    size_t count;
    long schema_objects;      /* when the ledger is missing: objects in schema idem all the same */
    char schema_example[160]; /* ... the first few of them, "idem.a, idem.b, idem.c" */
} idem__ledger;

int idem__ledger_read(idem__ledger *out, PGconn *conn, idem_error *err);
void idem__ledger_clear(idem__ledger *ledger);
/* Create schema idem and the ledger when missing. Run under the lock. */
int idem__ledger_bootstrap(PGconn *conn, const idem_migrate_options *opts, idem_error *err);
/* Insert the ledger row of a file just applied (in the caller's transaction, if any). */
int idem__ledger_record(PGconn *conn, const idem__migration_file *file, long long duration_ms,
                        idem_error *err);

/* What a migration leaves behind that can be looked for: an object one of its CREATE
 * statements names, and the guarantees its other statements give. */
typedef enum idem__object_kind {
    IDEM__OBJECT_NAMED,    /* a relation, type or routine of that schema and name exists */
    IDEM__OBJECT_ISOLATED, /* idem.isolate_tenants() ran on table schema.name (name "": on
                            * every table of schema with a tenant column): row-level
                            * security enabled and forced, policy tenant_isolation */
    IDEM__OBJECT_GRANT,    /* role holds privilege on table schema.name */
} idem__object_kind;

#define IDEM__OBJECT_NAME_MAX 128
typedef struct idem__object {
    idem__object_kind kind;
    char schema[IDEM__OBJECT_NAME_MAX]; /* "idem" when the statement does not say */
    char name[IDEM__OBJECT_NAME_MAX];
    char role[IDEM__OBJECT_NAME_MAX]; /* GRANT */
    char privilege[16];               /* GRANT: SELECT, INSERT, ... */
    int if_not_exists; /* IF NOT EXISTS or OR REPLACE, or a statement that is harmless to run
                        * again (isolate_tenants(), GRANT): no evidence that it ran */
} idem__object;

/* What file leaves behind: the tables, indexes, views, sequences, types, domains and
 * routines its CREATE statements name (temporary ones and unnamed indexes left out), the
 * tables its SELECT or DO statements pass to idem.isolate_tenants(), and the table
 * privileges its GRANT statements give (column privileges left out). *out is malloc'd
 * (may be NULL when none). Returns 0 or IDEM_ENOMEM. */
int idem__migration_objects(idem__object **out, size_t *out_count, const idem__migration_file *f);

/* What idem__object_check() found missing: "idem.a, which it creates, does not exist";
 * and for an ISOLATED or GRANT object the SQL that puts it back ("" for NAMED: only the
 * migration creates it). */
typedef struct idem__object_gap {
    char missing[320];
    char restore[320];
} idem__object_gap;

/* 1 when object is there (it exists; the table is isolated; the role holds the privilege),
 * 0 when not (gap, if not NULL, says what is missing), or an error. */
int idem__object_check(PGconn *conn, const idem__object *object, idem__object_gap *gap,
                       idem_error *err);

/* Take the advisory lock IDEM_MIGRATE_LOCK_KEY, polling until opts->lock_timeout_ms. */
int idem__migrate_lock(PGconn *conn, const idem_migrate_options *opts, idem_error *err);
/* Release it; errors are ignored (a lost connection has released it already). */
void idem__migrate_unlock(PGconn *conn);

/* Apply one file and record it: in one transaction, or statement by statement for a
 * no-transaction file. *out gets the milliseconds its statements took. */
int idem__migration_apply(long long *out, PGconn *conn, const idem__migration_file *file,
                          idem_error *err);

/* The list behind idem_migrate_list (migrate_list.c builds and reads it). */
/* For an UNRECORDED item: the objects found, "idem.a, idem.b". */
#define EVIDENCE_MAX 160

struct idem_migrate_list {
    idem__migration_set set;
    idem__ledger ledger;
    idem_migration *items;
    const idem__migration_file **files; /* items[i]'s file; NULL for UNKNOWN */
    char (*evidence)[EVIDENCE_MAX];     /* items[i]'s, for UNRECORDED */
    size_t count;
};

/* A list of the files in @dir (NULL: the embedded ones), with no ledger read yet. */
int idem__migrate_list_new(idem_migrate_list **out, const char *dir, idem_error *err);
/* Merge the list's files with its ledger rows into items, in version order. */
int idem__migrate_list_merge(idem_migrate_list *list, idem_error *err);
/* The newest UNRECORDED item (NULL if none); *count of them, *index of the newest. */
const idem_migration *idem__migrate_newest_unrecorded(const idem_migrate_list *list, size_t *count,
                                                      size_t *index);

/* A --to (@to_version > 0) beyond the newest migration of @set would apply or record
 * everything and say nothing of the version asked for: IDEM_EINVAL, field to_version,
 * naming the newest. 0 otherwise. */
int idem__migrate_to_beyond(int to_version, const idem__migration_set *set, idem_error *err);

#endif
