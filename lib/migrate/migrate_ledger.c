/* The ledger idem.schema_migrations and the advisory lock that serializes idem_migrate_up().
 *
 * Statements run with PQexecParams rather than as server-side prepared statements: the
 * connection is the caller's, and a prepared statement would outlive the call there. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/text.h"
#include "log.h"
#include "error.h"
#include "migrate_internal.h"

static const char SQL_LEDGER_EXISTS[] = "SELECT to_regclass('idem.schema_migrations') IS NOT NULL";

/* Without a ledger, schema idem should hold nothing: what it holds was made by migrations
 * whose record is lost (or by someone else). Relations, routines and the types that have
 * no relation of their own (enums, domains, ranges). */
static const char SQL_SCHEMA_OBJECTS[] =
    "SELECT count(*), array_to_string((array_agg(o ORDER BY o))[1:3], ', ') FROM ("
    " SELECT 'idem.' || quote_ident(c.relname) FROM pg_catalog.pg_class c"
    " WHERE c.relnamespace = to_regnamespace('idem')"
    " UNION ALL SELECT 'idem.' || quote_ident(p.proname) || '()' FROM pg_catalog.pg_proc p"
    " WHERE p.pronamespace = to_regnamespace('idem')"
    " UNION ALL SELECT 'idem.' || quote_ident(t.typname) FROM pg_catalog.pg_type t"
    " WHERE t.typnamespace = to_regnamespace('idem') AND t.typtype IN ('e', 'd', 'r', 'm')"
    ") AS objects(o)";

static const char SQL_LEDGER_READ[] =
    "SELECT version, name, encode(checksum, 'hex'),"
    " to_char(applied_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),"
    " duration_ms, applied_by"
    " FROM idem.schema_migrations ORDER BY version";

static const char SQL_LEDGER_INSERT[] =
    "INSERT INTO idem.schema_migrations (version, name, checksum, duration_ms)"
    " VALUES ($1::integer, $2::text, $3::bytea, $4::bigint)";

#define LOCK_POLL_MS 100

static const char SQL_TRY_LOCK[] = "SELECT pg_try_advisory_lock($1::bigint)";
static const char SQL_UNLOCK[] = "SELECT pg_advisory_unlock($1::bigint)";
/* pg_locks shows a bigint advisory key as classid (high half), objid (low half),
 * objsubid 1, in the database it was taken in (the same key elsewhere is another lock).
 * pg_stat_activity hides the client's address from roles that may not see the session
 * (client_port NULL then); client_port -1 is a Unix socket. */
static const char SQL_LOCK_HOLDER[] =
    "SELECT l.pid, a.application_name, a.usename, host(a.client_addr), a.client_port"
    " FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND l.classid = $1::oid AND l.objid = $2::oid LIMIT 1";

/* The ledger is a plain table, not tenant data: it is the same on every node if the
 * schema is ever distributed by tenant. One statement string: runs as one implicit
 * transaction (or in the caller's: baseline).
 *
 * idem's roles may read it (idem_migrate_check() at a server's start reads it as
 * idem_app), and migration 0009 grants that. The grant is here too, for the roles that
 * exist already, because 0009 does not run on every ledger: a ledger that baseline
 * re-creates on a migrated schema records 0009 without running it, and would otherwise
 * be unreadable to them. On a first install in a new cluster the roles do not exist yet
 * (0007 creates them), and 0009 grants it then. Read-only: the ledger holds no tenant
 * data and nothing secret. */
static const char SQL_BOOTSTRAP[] =
    "CREATE SCHEMA IF NOT EXISTS idem;"
    "CREATE TABLE IF NOT EXISTS idem.schema_migrations ("
    " version     integer     NOT NULL,"
    " name        text        NOT NULL,"
    " checksum    bytea       NOT NULL,"
    " applied_at  timestamptz NOT NULL DEFAULT now(),"
    " duration_ms bigint      NOT NULL,"
    " applied_by  text        NOT NULL DEFAULT current_user,"
    " CONSTRAINT schema_migrations_pkey PRIMARY KEY (version),"
    " CONSTRAINT schema_migrations_version_positive CHECK (version >= 1),"
    " CONSTRAINT schema_migrations_name_length CHECK (octet_length(name) BETWEEN 1 AND 200),"
    " CONSTRAINT schema_migrations_checksum_sha256 CHECK (octet_length(checksum) = 32),"
    " CONSTRAINT schema_migrations_duration_nonnegative CHECK (duration_ms >= 0));"
    "COMMENT ON SCHEMA idem IS"
    " 'idem: operation records for retry-safe tool calls. Managed by idem-migrate; see"
    " idem.schema_migrations for the applied migrations.';"
    "COMMENT ON TABLE idem.schema_migrations IS"
    " 'Ledger of idem''s schema migrations: one row per applied migrations/NNNN_*.sql file,"
    " written by idem-migrate up in the same transaction as the file.';"
    "COMMENT ON COLUMN idem.schema_migrations.version IS"
    " 'NNNN of the file name; migrations apply in version order.';"
    "COMMENT ON COLUMN idem.schema_migrations.name IS 'File name, NNNN_description.sql.';"
    "COMMENT ON COLUMN idem.schema_migrations.checksum IS"
    " 'SHA-256 of the exact file bytes applied; idem-migrate verify compares it with the"
    " file.';"
    "COMMENT ON COLUMN idem.schema_migrations.applied_at IS"
    " 'When the row was written: the start of the migration''s transaction (for a"
    " no-transaction file, just after its last statement).';"
    "COMMENT ON COLUMN idem.schema_migrations.duration_ms IS"
    " 'Time the file''s statements took, in milliseconds.';"
    "COMMENT ON COLUMN idem.schema_migrations.applied_by IS"
    " 'Database role that applied the migration.';"
    "DO $grant$ DECLARE r name; BEGIN"
    " FOR r IN SELECT rolname FROM pg_catalog.pg_roles WHERE rolname IN"
    " ('idem_app', 'idem_sweeper', 'idem_operator') ORDER BY rolname LOOP"
    " EXECUTE format('GRANT SELECT ON idem.schema_migrations TO %I', r);"
    " END LOOP; END $grant$;";

/* Run a parameterized query expecting tuples; *out is cleared by the caller. */
/* A role that may not read the ledger (42501): what to grant it, as the hint. */
static void ledger_grant_hint(idem_error *err, PGconn *conn)
{
    char role[2 * 64 + 3]; /* a name the server accepted, quoted */

    if (err == NULL || strcmp(err->sqlstate, "42501") != 0)
        return;
    idem__quote_ident(role, sizeof(role), PQuser(conn) != NULL ? PQuser(conn) : "<role>");
    snprintf(err->hint, sizeof(err->hint),
             "GRANT idem_operator TO %s (any of idem's roles reads the ledger), or USAGE on "
             "schema idem and SELECT on idem.schema_migrations",
             role);
}

static int query(PGresult **out, PGconn *conn, const char *sql, int n, const char *const *values,
                 const char *what, idem_error *err)
{
    PGresult *res = PQexecParams(conn, sql, n, NULL, values, NULL, NULL, 0);

    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        int rc = idem__error_pg(err, conn, res, "%s", what);
        ledger_grant_hint(err, conn);
        PQclear(res);
        return rc;
    }
    *out = res;
    return 0;
}

static void copy_cell(char *dst, size_t size, const PGresult *res, int row, int col)
{
    snprintf(dst, size, "%s", PQgetvalue(res, row, col));
}

static int ledger_rows(idem__ledger *ledger, PGconn *conn, idem_error *err)
{
    PGresult *res = NULL;
    int rc = query(&res, conn, SQL_LEDGER_READ, 0, NULL, "reading idem.schema_migrations", err);
    int n;

    if (rc != 0)
        return rc;
    n = PQntuples(res);
    ledger->rows = calloc(n > 0 ? (size_t)n : 1, sizeof(*ledger->rows));
    if (ledger->rows == NULL) {
        PQclear(res);
        return idem__error_set(err, IDEM_ENOMEM, "out of memory reading the ledger");
    }
    for (int i = 0; i < n; i++) {
        idem__ledger_row *r = &ledger->rows[i];
        r->version = atoi(PQgetvalue(res, i, 0));
        copy_cell(r->name, sizeof(r->name), res, i, 1);
        copy_cell(r->checksum_hex, sizeof(r->checksum_hex), res, i, 2);
        copy_cell(r->applied_at, sizeof(r->applied_at), res, i, 3);
        r->duration_ms = strtoll(PQgetvalue(res, i, 4), NULL, 10);
        copy_cell(r->applied_by, sizeof(r->applied_by), res, i, 5);
    }
    ledger->count = (size_t)n;
    PQclear(res);
    return 0;
}

static int schema_objects(idem__ledger *ledger, PGconn *conn, idem_error *err)
{
    PGresult *res = NULL;
    int rc = query(&res, conn, SQL_SCHEMA_OBJECTS, 0, NULL, "looking into schema idem", err);

    if (rc != 0)
        return rc;
    ledger->schema_objects = strtol(PQgetvalue(res, 0, 0), NULL, 10);
    copy_cell(ledger->schema_example, sizeof(ledger->schema_example), res, 0, 1);
    PQclear(res);
    return 0;
}

int idem__ledger_read(idem__ledger *out, PGconn *conn, idem_error *err)
{
    idem__ledger ledger = {0, NULL, 0, 0, ""};
    PGresult *res = NULL;
    int rc =
        query(&res, conn, SQL_LEDGER_EXISTS, 0, NULL, "looking for idem.schema_migrations", err);

    if (rc != 0)
        return rc;
    ledger.exists = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    rc = ledger.exists ? ledger_rows(&ledger, conn, err) : schema_objects(&ledger, conn, err);
    if (rc != 0) {
        idem__ledger_clear(&ledger);
        return rc;
    }
    *out = ledger;
    return 0;
}

void idem__ledger_clear(idem__ledger *ledger)
{
    if (ledger == NULL)
        return;
    free(ledger->rows);
    ledger->rows = NULL;
    ledger->count = 0;
}

int idem__ledger_bootstrap(PGconn *conn, const idem_migrate_options *opts, idem_error *err)
{
    PGresult *res = PQexec(conn, SQL_BOOTSTRAP);
    int rc = 0;

    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        rc = idem__error_pg(err, conn, res, "creating schema idem and idem.schema_migrations");
    else
        idem__log(opts->log, opts->log_ctx, IDEM_LOG_INFO,
                  "created the ledger idem.schema_migrations");
    PQclear(res);
    return rc;
}

int idem__ledger_record(PGconn *conn, const idem__migration_file *file, long long duration_ms,
                        idem_error *err)
{
    char version[16], duration[24];
    const char *values[4] = {version, file->name, (const char *)file->checksum, duration};
    const int lengths[4] = {0, 0, (int)sizeof(file->checksum), 0};
    const int formats[4] = {0, 0, 1, 0};
    PGresult *res;
    int rc = 0;

    snprintf(version, sizeof(version), "%d", file->version);
    snprintf(duration, sizeof(duration), "%lld", duration_ms);
    res = PQexecParams(conn, SQL_LEDGER_INSERT, 4, NULL, values, lengths, formats, 0);
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        rc = idem__error_pg(err, conn, res, "%s: recording it in idem.schema_migrations",
                            file->name);
    PQclear(res);
    return rc;
}

static void lock_key_text(char *buf, size_t size)
{
    snprintf(buf, size, "%lld", (long long)IDEM_MIGRATE_LOCK_KEY);
}

/* 1 = locked, 0 = held elsewhere, < 0 = error. */
static int try_lock(PGconn *conn, idem_error *err)
{
    char key[24];
    const char *values[1] = {key};
    PGresult *res = NULL;
    int rc;

    lock_key_text(key, sizeof(key));
    rc = query(&res, conn, SQL_TRY_LOCK, 1, values, "taking the migration lock", err);
    if (rc != 0)
        return rc;
    rc = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return rc;
}

/* " by pid 123 (application "psql", role "dba", client 10.0.0.7 port 51234)" from a
 * SQL_LOCK_HOLDER row: as much as pg_stat_activity shows this role. */
static void describe_holder(char *buf, size_t size, const PGresult *res)
{
    char client[96] = "";

    if (PQgetisnull(res, 0, 0)) {
        snprintf(buf, size, " by a prepared transaction");
        return;
    }
    if (PQgetisnull(res, 0, 2)) { /* no pg_stat_activity row: it has just ended */
        snprintf(buf, size, " by pid %s", PQgetvalue(res, 0, 0));
        return;
    }
    if (!PQgetisnull(res, 0, 4) && strcmp(PQgetvalue(res, 0, 4), "-1") == 0)
        snprintf(client, sizeof(client), ", client on a Unix socket");
    else if (!PQgetisnull(res, 0, 3))
        snprintf(client, sizeof(client), ", client %s port %s", PQgetvalue(res, 0, 3),
                 PQgetvalue(res, 0, 4));
    snprintf(buf, size, " by pid %s (application \"%s\", role \"%s\"%s)", PQgetvalue(res, 0, 0),
             PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 2), client);
}

/* Who holds the lock, for a message: describe_holder(), or " by another session" when no
 * holder can be seen (it has just let go). */
static void lock_holder(char *buf, size_t size, PGconn *conn)
{
    unsigned long long key = (unsigned long long)IDEM_MIGRATE_LOCK_KEY;
    char classid[16], objid[16];
    const char *values[2] = {classid, objid};
    PGresult *res = NULL;

    snprintf(buf, size, " by another session");
    snprintf(classid, sizeof(classid), "%llu", key >> 32);
    snprintf(objid, sizeof(objid), "%llu", key & 0xffffffffULL);
    if (query(&res, conn, SQL_LOCK_HOLDER, 2, values, "", NULL) != 0)
        return;
    if (PQntuples(res) == 1)
        describe_holder(buf, size, res);
    PQclear(res);
}

/* Polling a try-lock rather than waiting in pg_advisory_lock(): a session blocked in a
 * lock wait holds a snapshot, and CREATE INDEX CONCURRENTLY in the lock holder's
 * no-transaction migration would wait for it. */
int idem__migrate_lock(PGconn *conn, const idem_migrate_options *opts, idem_error *err)
{
    long long start = (long long)idem__now_ms();
    char holder[512];
    int rc, waited = 0;

    while ((rc = try_lock(conn, err)) == 0) {
        if ((long long)idem__now_ms() - start >= (long long)opts->lock_timeout_ms) {
            lock_holder(holder, sizeof(holder), conn);
            return idem__error_set(err, IDEM_ELOCKED,
                                   "the migration lock (advisory lock %lld) is still held%s "
                                   "after %u ms; that session lets go when it ends or calls "
                                   "pg_advisory_unlock",
                                   (long long)IDEM_MIGRATE_LOCK_KEY, holder, opts->lock_timeout_ms);
        }
        if (!waited) {
            lock_holder(holder, sizeof(holder), conn);
            idem__log(opts->log, opts->log_ctx, IDEM_LOG_INFO,
                      "waiting up to %u ms for the migration lock, held%s", opts->lock_timeout_ms,
                      holder);
            if (opts->progress != NULL)
                opts->progress(opts->progress_ctx, IDEM_MIGRATE_LOCK_WAIT, NULL);
            waited = 1;
        }
        idem__sleep_ms(LOCK_POLL_MS);
    }
    return rc < 0 ? rc : 0;
}

void idem__migrate_unlock(PGconn *conn)
{
    char key[24];
    const char *values[1] = {key};

    lock_key_text(key, sizeof(key));
    PQclear(PQexecParams(conn, SQL_UNLOCK, 1, NULL, values, NULL, NULL, 0));
}
