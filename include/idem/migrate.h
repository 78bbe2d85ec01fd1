/**
 * @file migrate.h
 * @brief Schema versioning: apply idem's migrations to a database, list what is applied
 *        and pending, and check the schema at start-up.
 *
 * The migrations are the files `migrations/NNNN_description.sql`, embedded in the library
 * at build time (or read from a folder, ::idem_migrate_options.dir). Each applied file is
 * recorded in the ledger `idem.schema_migrations`: version, file name, SHA-256 of the
 * exact file bytes, when, how long it took and the role that applied it.
 *
 * idem_migrate_up() first takes a session-level advisory lock (::IDEM_MIGRATE_LOCK_KEY),
 * polled until a timeout, so that two deploys running at once never apply a migration
 * twice. It creates the schema `idem` and the ledger if they are missing, refuses to run
 * when an applied file has changed (drift), then applies each pending file in version
 * order, each in its own transaction together with its ledger row. A file whose leading
 * comment lines include the marker line
 *
 *     -- idem:no-transaction
 *
 * runs statement by statement outside a transaction (for CREATE INDEX CONCURRENTLY); its
 * ledger row is written after its last statement succeeded. Files are UTF-8 and run with
 * `search_path = idem` and `client_encoding = UTF8`.
 *
 * On a Citus coordinator, an `ALTER TABLE` of several actions whose table Citus knows
 * (distributed, reference or Citus local) is sent as one `ALTER TABLE` per action, in the
 * order written (Citus refuses ADD CONSTRAINT beside other actions): in the file's
 * transaction, so that the file still applies whole or not at all. A failing action's
 * error names its own line. Elsewhere every statement runs as written.
 *
 * Functions here take the caller's libpq connection, borrowed for the call. It must be
 * idle (not inside a transaction). No deadline of idem's bounds them (the store's
 * deadline_ms is for calls on its pool): the lock timeout option and the connection's own
 * settings do. Session settings the functions change are restored
 * before they return; settings a migration file itself changes with a plain SET stay on
 * the connection, so run migrations on a connection of their own (as idem-migrate does).
 * The advisory lock is session-level: connect directly, not through a pooler in
 * transaction mode.
 *
 * The ledger is the only record of what is applied. When it is gone (the table dropped,
 * a backup restored without it) or lost a row while idem's objects stay, running the
 * migrations again would fail half-way on objects that exist. idem_migrate_up() and
 * idem_migrate_plan() refuse then, running nothing, and idem_migrate_status() shows the
 * files that appear applied as ::IDEM_MIGRATION_UNRECORDED. Restore the ledger from a
 * backup, or record what is applied with idem_migrate_baseline(), which checks first that
 * each migration's objects exist.
 */
#ifndef IDEM_MIGRATE_H
#define IDEM_MIGRATE_H

#include <libpq-fe.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The advisory lock idem_migrate_up() holds while it works:
 *  `pg_try_advisory_lock(IDEM_MIGRATE_LOCK_KEY)` ("idemmigr" in ASCII). */
#define IDEM_MIGRATE_LOCK_KEY 0x6964656d6d696772LL

/** Where a migration stands in a database. */
typedef enum idem_migration_state {
    IDEM_MIGRATION_APPLIED = 0,    /**< applied; the file's checksum matches the ledger's */
    IDEM_MIGRATION_PENDING = 1,    /**< a file not applied yet */
    IDEM_MIGRATION_DRIFTED = 2,    /**< applied, but the file's checksum or name now differs */
    IDEM_MIGRATION_UNKNOWN = 3,    /**< in the ledger, but no file has its version: the database
                                        is newer than these migrations */
    IDEM_MIGRATION_UNRECORDED = 4, /**< a file not in the ledger, yet every object it creates
                                        (without IF NOT EXISTS or OR REPLACE) exists: it
                                        appears applied, its ledger row (or the whole ledger)
                                        lost. up refuses until the ledger is restored or
                                        idem_migrate_baseline() records it */
} idem_migration_state;

/** One migration: a file, a ledger row, or both. Read-only; owned by its list. */
typedef struct idem_migration {
    int version;      /**< NNNN of the file name */
    const char *name; /**< file name; for UNKNOWN, the name the ledger recorded */
    idem_migration_state state;
    int no_transaction;        /**< 1 when the file carries the no-transaction marker */
    const char *sql;           /**< the file's exact bytes, NUL-terminated; NULL for UNKNOWN */
    size_t sql_len;            /**< bytes of @ref sql, terminator excluded */
    char checksum[65];         /**< hex SHA-256 of the file; "" for UNKNOWN */
    char applied_name[256];    /**< file name the ledger recorded; "" when PENDING */
    char applied_checksum[65]; /**< hex SHA-256 the ledger recorded; "" when PENDING */
    char applied_at[32];       /**< when applied, UTC, "2024-05-01T09:30:00.123Z"; "" when
                                    PENDING */
    long long duration_ms;     /**< how long applying took; -1 when PENDING */
    char applied_by[64];       /**< the role that applied it; "" when PENDING */
} idem_migration;

/** What idem_migrate_up() reports through ::idem_migrate_progress_fn. */
typedef enum idem_migrate_event {
    IDEM_MIGRATE_LOCK_WAIT = 0, /**< the lock is held elsewhere; polling (migration NULL) */
    IDEM_MIGRATE_STARTING = 1,  /**< about to apply the migration */
    IDEM_MIGRATE_APPLIED = 2,   /**< applied and recorded (duration_ms set) */
    IDEM_MIGRATE_FAILED = 3,    /**< failed; rolled back unless it is a no-transaction file.
                                     The function then returns the error. */
} idem_migrate_event;

/** Progress hook; @p migration is borrowed for the call only (NULL for LOCK_WAIT). */
typedef void (*idem_migrate_progress_fn)(void *ctx, idem_migrate_event event,
                                         const idem_migration *migration);

/** Settings. Initialize with ::IDEM_MIGRATE_OPTIONS_INIT, then change what you need. */
typedef struct idem_migrate_options {
    unsigned int version;              /**< ::IDEM_MIGRATE_OPTIONS_VERSION */
    const char *dir;                   /**< NULL: the embedded migrations; else a folder whose
                                            NNNN_description.sql files are used instead (other
                                            *.sql names there are an error, and so is a folder
                                            without any) */
    unsigned int lock_timeout_ms;      /**< longest wait for the advisory lock; 0 = try once;
                                            default 60000 */
    idem_log_fn log;                   /**< optional logging hook; default none */
    void *log_ctx;                     /**< passed to @ref log */
    idem_migrate_progress_fn progress; /**< optional progress hook; default none */
    void *progress_ctx;                /**< passed to @ref progress */
} idem_migrate_options;

#define IDEM_MIGRATE_OPTIONS_VERSION 1
#define IDEM_MIGRATE_OPTIONS_INIT                                                                  \
    {                                                                                              \
        IDEM_MIGRATE_OPTIONS_VERSION, NULL, 60000, NULL, NULL, NULL, NULL                          \
    }

/** Fill @p opts with the defaults of struct version @p version (for bindings that cannot
 *  use ::IDEM_MIGRATE_OPTIONS_INIT). @return 0, or IDEM_EINVAL (NULL, unknown version). */
IDEM_API int idem_migrate_options_init(idem_migrate_options *opts, unsigned int version);

/** A list of migrations, in version order. Opaque. */
typedef struct idem_migrate_list idem_migrate_list;

/**
 * Apply the pending migrations up to @p to_version, in order (see the file comment).
 * A second call with nothing pending changes nothing. Refused, with nothing applied, when
 * an applied file drifted or a pending file is older than the newest applied one.
 *
 * @param conn        borrowed; idle.
 * @param to_version  apply versions <= this; 0 = all.
 * @param opts        NULL for the defaults.
 * @return 0; IDEM_EINVAL (bad argument; a misnamed, duplicate or NUL-containing file in
 *         opts->dir, or none at all: the message names it); IDEM_EIO (opts->dir or a file in it
 *         unreadable); IDEM_ELOCKED (the lock still held by another session after
 *         lock_timeout_ms: any session that took the advisory lock, not only another
 *         idem_migrate_up(); the message names its pid, and its application, role and
 *         client address as far as pg_stat_activity shows them to this role);
 *         IDEM_ESCHEMA (drift or out-of-order: the message names the file; or idem's
 *         objects exist that the ledger does not record, see
 *         idem_migrate_list_ledger_incomplete(): nothing is run, not even the creation of
 *         the ledger); IDEM_EDB or IDEM_EUNAVAIL (a statement failed: the message starts
 *         with "FILE:LINE: ", the progress hook got IDEM_MIGRATE_FAILED, and that file's
 *         transaction was rolled back, earlier files staying applied; when the statement
 *         failed because its object already exists, SQLSTATE 42P07, 42710, 42P06 or 42723,
 *         the message says that the ledger may lack the file's row, and what to do);
 *         IDEM_EIO; IDEM_ENOMEM.
 */
IDEM_API int idem_migrate_up(PGconn *conn, int to_version, const idem_migrate_options *opts,
                             idem_error *err);

/**
 * Record migrations as applied without running them: for a database whose idem objects
 * exist but whose ledger lost their rows (see the file comment). Takes the migration lock
 * as idem_migrate_up() does. Every file up to @p to_version that the ledger does not
 * record is checked first: each table, index, view, sequence, type, domain and routine
 * its CREATE statements name must exist, and a file that creates none of these is
 * refused. Then all of them are recorded in one transaction (checksum of the file,
 * duration_ms 0), creating the ledger when it is missing. Nothing else is changed; a
 * second call records nothing.
 *
 * @param conn        borrowed; idle.
 * @param to_version  the newest version to record, >= 1: the last migration that is
 *                    really applied.
 * @param opts        NULL for the defaults (dir, lock_timeout_ms, log are used).
 * @return 0; IDEM_ESCHEMA (a file is not applied, or cannot be checked: the message names
 *         it and the missing object; nothing was recorded); IDEM_EINVAL (to_version < 1,
 *         a connection inside a transaction, a bad opts->dir); IDEM_ELOCKED; IDEM_EIO;
 *         IDEM_EDB; IDEM_EUNAVAIL; IDEM_ENOMEM.
 */
IDEM_API int idem_migrate_baseline(PGconn *conn, int to_version, const idem_migrate_options *opts,
                                   idem_error *err);

/**
 * For servers at start-up: is every embedded migration applied, unchanged? Reads only.
 * Migrations the ledger has and the library does not know (a newer schema) are accepted.
 *
 * @return 0; IDEM_ESCHEMA with a message saying what is missing, pending or drifted (and
 *         "run idem-migrate up"), or that the ledger is missing or lacks a migration that
 *         appears applied (and how to restore it); IDEM_EDB, IDEM_EUNAVAIL, IDEM_EINVAL,
 *         IDEM_ENOMEM.
 */
IDEM_API int idem_migrate_check(PGconn *conn, idem_error *err);

/**
 * Every migration, file or ledger row, with its state. Reads only; takes no lock.
 *
 * @param out   caller owns; free with idem_migrate_list_free(). Untouched on failure.
 * @param conn  borrowed.
 * @param opts  NULL for the defaults (only dir is used).
 * @return 0, IDEM_EINVAL, IDEM_EIO, IDEM_EDB, IDEM_EUNAVAIL, IDEM_ENOMEM.
 */
IDEM_API int idem_migrate_status(idem_migrate_list **out, PGconn *conn,
                                 const idem_migrate_options *opts, idem_error *err);

/**
 * What idem_migrate_up(conn, to_version, opts) would apply now, in order, all PENDING.
 * Reads only; runs none of it.
 *
 * @param out  caller owns; free with idem_migrate_list_free(). Untouched on failure.
 * @return 0; IDEM_ESCHEMA when up would refuse (the message says why); as
 *         idem_migrate_status() otherwise.
 */
IDEM_API int idem_migrate_plan(idem_migrate_list **out, PGconn *conn, int to_version,
                               const idem_migrate_options *opts, idem_error *err);

/** Number of migrations in @p list (0 for NULL). */
IDEM_API size_t idem_migrate_list_count(const idem_migrate_list *list);

/** The @p i-th migration, in version order; borrowed, valid until the list is freed.
 *  NULL when @p i is out of range. */
IDEM_API const idem_migration *idem_migrate_list_at(const idem_migrate_list *list, size_t i);

/** 1 when the database has the ledger idem.schema_migrations, else 0. */
IDEM_API int idem_migrate_list_ledger_exists(const idem_migrate_list *list);

/** 1 when idem's objects exist that the ledger does not record: the ledger
 *  idem.schema_migrations is missing while schema idem holds objects, or a migration is
 *  ::IDEM_MIGRATION_UNRECORDED. idem_migrate_up(), idem_migrate_plan() and
 *  idem_migrate_check() refuse then (IDEM_ESCHEMA). Else 0 (also for NULL). */
IDEM_API int idem_migrate_list_ledger_incomplete(const idem_migrate_list *list);

/** Free a list. NULL is accepted. */
IDEM_API void idem_migrate_list_free(idem_migrate_list *list);

/** The highest version among the embedded migrations: the schema version this library
 *  expects (0 when it embeds none). */
IDEM_API int idem_migrate_latest_version(void);

/** "applied", "pending", "drifted", "unknown", "unrecorded"; never NULL. */
IDEM_API const char *idem_migrate_state_name(idem_migration_state state);

/** Where a table stands on a Citus cluster. */
typedef enum idem_table_placement {
    IDEM_TABLE_LOCAL = 0,       /**< a plain table (on the coordinator only; every table
                                     without Citus) */
    IDEM_TABLE_DISTRIBUTED = 1, /**< hash-distributed by `tenant`, co-located with
                                     idem.operations */
    IDEM_TABLE_REFERENCE = 2,   /**< a reference table: a copy on every node */
    IDEM_TABLE_OTHER = 3,       /**< known to Citus otherwise: distributed by another column,
                                     not co-located, or a Citus local table */
} idem_table_placement;

/** One table the distribution step looks after. Read-only; owned by its list. */
typedef struct idem_distributed_table {
    char name[136];                 /**< "schema.table", quoted where SQL needs it */
    int tenant;                     /**< 1 when the table has a column `tenant` */
    idem_table_placement placement; /**< where it stands now */
    int wanted;                     /**< 1 when that is where the distribution step puts it:
                                         a table with `tenant` DISTRIBUTED, the ledger
                                         idem.schema_migrations (and any other table of schema
                                         idem without `tenant`) REFERENCE */
    int changed;                    /**< 1 when idem_migrate_distribute() placed it just now */
} idem_distributed_table;

/** What idem_migrate_distribution() and idem_migrate_distribute() report. Opaque. */
typedef struct idem_distribution idem_distribution;

/**
 * Where idem's tables stand on Citus: every table of schema idem, and the application's
 * tables named in @p tables, with idem.operations first. Reads only; takes no lock. Works
 * on plain PostgreSQL too (everything is then ::IDEM_TABLE_LOCAL and
 * idem_distribution_citus() is 0).
 *
 * @param out      caller owns; free with idem_distribution_free(). Untouched on failure.
 * @param conn     borrowed; connected to the coordinator.
 * @param tables   NULL, or @p ntables "schema.table" names of the application's effect
 *                 tables to report as well.
 * @return 0; IDEM_EINVAL (NULL out or conn, a NULL or empty name, field "tables"; a name
 *         that is not a table: the message names it); IDEM_ESCHEMA (idem.operations does
 *         not exist: run idem-migrate up); IDEM_EDB; IDEM_EUNAVAIL; IDEM_ENOMEM.
 */
IDEM_API int idem_migrate_distribution(idem_distribution **out, PGconn *conn,
                                       const char *const *tables, size_t ntables, idem_error *err);

/**
 * The distribution step, run once by a DBA on the Citus coordinator after
 * idem_migrate_up() (and again after an upgrade whose migrations add tables): every table
 * of schema idem with a column `tenant`, and each of @p tables (the application's effect
 * tables, which must have one), is distributed by `tenant` and co-located with
 * idem.operations (`create_distributed_table(t, 'tenant', colocate_with =>
 * 'idem.operations')`, existing rows moved to the shards); the ledger becomes a reference
 * table. (idem's lock timeouts reach the workers without any setting: each transaction
 * says `SET LOCAL citus.propagate_set_commands = 'local'` itself.) Holds the migration lock
 * (::IDEM_MIGRATE_LOCK_KEY) while it works. Idempotent: a table already where it belongs is left
 * alone, and a second call changes nothing.
 *
 * Tables join a co-location group only while it is empty of other work; run it at a quiet
 * time: distributing a table takes a lock that blocks writes to it while its rows move.
 *
 * @param out     as idem_migrate_distribution(), after the step (changed set on what it
 *                placed). Untouched on failure.
 * @param opts    NULL for the defaults (lock_timeout_ms and log are used).
 * @return 0; IDEM_ESCHEMA (the citus extension is not installed in this database, or
 *         idem.operations does not exist, or a table is distributed otherwise and must be
 *         undistributed first: the message names it and says what to run; nothing more was
 *         changed); IDEM_EINVAL (as idem_migrate_distribution(); a table in @p tables
 *         without a column `tenant`; a connection inside a transaction); IDEM_ELOCKED;
 *         IDEM_EDB or IDEM_EUNAVAIL (the message names the table; tables placed before it
 *         stay placed); IDEM_ENOMEM.
 */
IDEM_API int idem_migrate_distribute(idem_distribution **out, PGconn *conn,
                                     const char *const *tables, size_t ntables,
                                     const idem_migrate_options *opts, idem_error *err);

/** 1 when the citus extension is installed in the database, else 0 (also for NULL). */
IDEM_API int idem_distribution_citus(const idem_distribution *d);

/** 1 when Citus is installed and every table is where the distribution step puts it
 *  (`wanted`); else 0 (also for NULL). */
IDEM_API int idem_distribution_complete(const idem_distribution *d);

/** Number of tables in @p d (0 for NULL). */
IDEM_API size_t idem_distribution_count(const idem_distribution *d);

/** The @p i-th table (idem.operations first, then by name); borrowed, valid until @p d
 *  is freed. NULL when @p i is out of range. */
IDEM_API const idem_distributed_table *idem_distribution_at(const idem_distribution *d, size_t i);

/** "local", "distributed", "reference", "other"; never NULL. */
IDEM_API const char *idem_table_placement_name(idem_table_placement placement);

/** Free a report. NULL is accepted. */
IDEM_API void idem_distribution_free(idem_distribution *d);

#ifdef __cplusplus
}
#endif

#endif
