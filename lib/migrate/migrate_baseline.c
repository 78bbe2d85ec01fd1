/* idem_migrate_baseline(): record migrations as applied without running them, for a
 * schema whose ledger lost their rows. Each is checked first: what it leaves behind
 * (idem__migration_objects()) must be there: every object it creates, every table it
 * isolates with row-level security enabled, forced and policy tenant_isolation, every
 * table privilege it grants. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "migrate_internal.h"

/* Any relation (table, index, view, sequence), type or routine of that name. */
static const char SQL_OBJECT_EXISTS[] =
    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
    " ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2)"
    " OR EXISTS (SELECT 1 FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n"
    " ON n.oid = t.typnamespace WHERE n.nspname = $1 AND t.typname = $2)"
    " OR EXISTS (SELECT 1 FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n"
    " ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname = $2)";

/* What isolate_tenants() leaves on table $2 of schema $1, or with $2 '' on every table of
 * $1 with a tenant column (0007 finds them the same way): a row per table. */
static const char SQL_ISOLATION[] =
    "SELECT format('%I.%I', n.nspname, c.relname), c.relrowsecurity, c.relforcerowsecurity,"
    " EXISTS (SELECT 1 FROM pg_catalog.pg_policy p WHERE p.polrelid = c.oid"
    " AND p.polname = 'tenant_isolation'),"
    " format('SELECT idem.isolate_tenants(%L);', format('%I.%I', n.nspname, c.relname))"
    " FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = $1::name AND c.relkind IN ('r', 'p') AND CASE WHEN $2::text = ''"
    " THEN EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid"
    " AND a.attname = 'tenant' AND a.attnum > 0 AND NOT a.attisdropped)"
    " ELSE c.relname = $2::name END ORDER BY c.relname";

/* Whether role $3 holds privilege $4 on table $2 of schema $1: '' when it does, else what
 * is missing. has_table_privilege() fails on a role that does not exist: asked last. */
static const char SQL_GRANTED[] =
    "SELECT CASE WHEN c.oid IS NULL THEN 'table'"
    " WHEN $3::name <> 'public' AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r"
    " WHERE r.rolname = $3::name) THEN 'role'"
    " WHEN NOT has_table_privilege($3::name, c.oid, $4::text) THEN 'privilege' ELSE '' END,"
    " format('GRANT %s ON %I.%I TO %I;', $4::text, $1::text, $2::text, $3::text)"
    " FROM (SELECT 1) AS one LEFT JOIN (pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
    " ON n.oid = c.relnamespace) ON n.nspname = $1::name AND c.relname = $2::name";

/* One row of query, into *out; an error for anything else. */
static int query_row(PGresult **out, PGconn *conn, const char *sql, int n,
                     const char *const *values, const idem__object *o, idem_error *err)
{
    PGresult *res = PQexecParams(conn, sql, n, NULL, values, NULL, NULL, 0);
    int rc;

    if (PQresultStatus(res) == PGRES_TUPLES_OK) {
        *out = res;
        return 0;
    }
    rc = idem__error_pg(err, conn, res, "looking for %s.%s", o->schema, o->name);
    PQclear(res);
    return rc;
}

static void gap_set(idem__object_gap *gap, const char *restore, const char *fmt, ...)
    IDEM_PRINTF(3, 4);

static void gap_set(idem__object_gap *gap, const char *restore, const char *fmt, ...)
{
    va_list ap;

    if (gap == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(gap->missing, sizeof(gap->missing), fmt, ap);
    va_end(ap);
    snprintf(gap->restore, sizeof(gap->restore), "%s", restore);
}

static int check_named(PGconn *conn, const idem__object *o, idem__object_gap *gap, idem_error *err)
{
    const char *values[2] = {o->schema, o->name};
    PGresult *res = NULL;
    int rc = query_row(&res, conn, SQL_OBJECT_EXISTS, 2, values, o, err);

    if (rc != 0)
        return rc;
    rc = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    if (rc == 0)
        gap_set(gap, "", "%s.%s, which it creates, does not exist", o->schema, o->name);
    return rc;
}

/* "row-level security disabled, row-level security not forced and no policy
 * tenant_isolation": what a SQL_ISOLATION row lacks ("" when nothing). */
static void isolation_lacks(char *buf, size_t size, const PGresult *res, int row)
{
    static const char *const what[] = {"row-level security disabled",
                                       "row-level security not forced",
                                       "no policy tenant_isolation"};
    size_t used = 0, missing = 0, total = 0;

    buf[0] = '\0';
    for (int k = 0; k < 3; k++)
        total += strcmp(PQgetvalue(res, row, k + 1), "t") != 0;
    for (int k = 0; k < 3 && used < size; k++) {
        if (strcmp(PQgetvalue(res, row, k + 1), "t") == 0)
            continue;
        missing++;
        used += (size_t)snprintf(buf + used, size - used, "%s%s",
                                 missing == 1       ? ""
                                 : missing == total ? " and "
                                                    : ", ",
                                 what[k]);
    }
}

static int check_isolated(PGconn *conn, const idem__object *o, idem__object_gap *gap,
                          idem_error *err)
{
    const char *values[2] = {o->schema, o->name};
    PGresult *res = NULL;
    char lacks[128];
    int rc = query_row(&res, conn, SQL_ISOLATION, 2, values, o, err), found = 1;

    if (rc != 0)
        return rc;
    if (PQntuples(res) == 0 && o->name[0] != '\0') {
        found = 0;
        gap_set(gap, "", "%s.%s, whose tenants it isolates, does not exist", o->schema, o->name);
    }
    for (int row = 0; found && row < PQntuples(res); row++) {
        isolation_lacks(lacks, sizeof(lacks), res, row);
        if (lacks[0] == '\0')
            continue;
        found = 0;
        gap_set(gap, PQgetvalue(res, row, 4), "%s, whose tenants it isolates, has %s",
                PQgetvalue(res, row, 0), lacks);
    }
    PQclear(res);
    return found;
}

static int check_granted(PGconn *conn, const idem__object *o, idem__object_gap *gap,
                         idem_error *err)
{
    const char *values[4] = {o->schema, o->name, o->role, o->privilege};
    PGresult *res = NULL;
    const char *lacks;
    int rc = query_row(&res, conn, SQL_GRANTED, 4, values, o, err);

    if (rc != 0)
        return rc;
    lacks = PQntuples(res) == 1 ? PQgetvalue(res, 0, 0) : "table";
    if (strcmp(lacks, "table") == 0)
        gap_set(gap, "", "%s.%s, on which it grants %s, does not exist", o->schema, o->name,
                o->privilege);
    else if (strcmp(lacks, "role") == 0)
        gap_set(gap, "", "role %s, to which it grants %s on %s.%s, does not exist", o->role,
                o->privilege, o->schema, o->name);
    else if (strcmp(lacks, "privilege") == 0)
        gap_set(gap, PQgetvalue(res, 0, 1), "role %s lacks %s on %s.%s, which it grants", o->role,
                o->privilege, o->schema, o->name);
    rc = lacks[0] == '\0';
    PQclear(res);
    return rc;
}

int idem__object_check(PGconn *conn, const idem__object *object, idem__object_gap *gap,
                       idem_error *err)
{
    switch (object->kind) {
    case IDEM__OBJECT_ISOLATED:
        return check_isolated(conn, object, gap, err);
    case IDEM__OBJECT_GRANT:
        return check_granted(conn, object, gap, err);
    case IDEM__OBJECT_NAMED:
        break;
    }
    return check_named(conn, object, gap, err);
}

static int in_ledger(const idem__ledger *ledger, int version)
{
    for (size_t i = 0; i < ledger->count; i++)
        if (ledger->rows[i].version == version)
            return 1;
    return 0;
}

/* What to do instead, when f is not applied: prev is the version of the file before it
 * (0 when none). */
static void instead(char *buf, size_t size, int prev)
{
    if (prev > 0)
        snprintf(buf, size,
                 "record only up to the version before it (baseline --to %d), then "
                 "apply the rest with idem-migrate up",
                 prev);
    else
        snprintf(buf, size,
                 "nothing before it can be recorded; if schema idem holds objects of "
                 "its own, look at them before running idem-migrate up");
}

/* The advice of a refusal: put a missing guarantee back and run baseline again (gap has
 * the SQL), or else what instead() says. */
static void advice_for(char *buf, size_t size, const idem__object_gap *gap, int prev)
{
    if (gap->restore[0] != '\0')
        snprintf(buf, size,
                 "if the rest of it is there, restore this as the owner of schema idem (%s) "
                 "and run baseline again",
                 gap->restore);
    else
        instead(buf, size, prev);
}

static int not_applied(idem_error *err, const idem__migration_file *f, const idem__object_gap *gap,
                       int prev)
{
    char advice[512];

    advice_for(advice, sizeof(advice), gap, prev);
    return idem__error_set(err, IDEM_ESCHEMA, "%s is not applied: %s. Nothing was recorded: %s",
                           f->name, gap->missing, advice);
}

/* Whether f looks applied: it leaves something to look for, and all of it is there. 0, or
 * ESCHEMA naming what is missing (or that nothing can be checked), or another error. */
static int check_applied(PGconn *conn, const idem__migration_file *f, int prev, idem_error *err)
{
    idem__object *objects = NULL;
    idem__object_gap gap;
    size_t count = 0;
    char advice[160];
    int rc = idem__migration_objects(&objects, &count, f), found = 1;

    if (rc != 0)
        return idem__error_set(err, rc, "%s: out of memory", f->name);
    instead(advice, sizeof(advice), prev);
    if (count == 0)
        rc = idem__error_set(err, IDEM_ESCHEMA,
                             "%s creates no table, index, view, sequence, type or routine, "
                             "isolates no table and grants no table privilege that baseline "
                             "could look for, so it cannot tell whether it is applied. Nothing "
                             "was recorded: %s",
                             f->name, advice);
    for (size_t i = 0; rc == 0 && i < count; i++) {
        found = idem__object_check(conn, &objects[i], &gap, err);
        if (found < 0)
            rc = found;
        else if (found == 0)
            rc = not_applied(err, f, &gap, prev);
    }
    free(objects);
    return rc;
}

static int exec_command(PGconn *conn, const char *sql, idem_error *err)
{
    PGresult *res = PQexec(conn, sql);
    int rc = 0;

    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        rc = idem__error_pg(err, conn, res, "baseline: %s", sql);
    PQclear(res);
    return rc;
}

/* Check and record the n files in todo, in one transaction that a refusal rolls back.
 * A missing ledger is created in it first: what a file grants on the ledger (0009) is
 * checked on the ledger that baseline leaves behind, and the bootstrap grants it. */
static int record_all(PGconn *conn, const idem__migration_file *const *todo, const int *prev,
                      size_t n, int bootstrap, const idem_migrate_options *o, idem_error *err)
{
    idem_migrate_options quiet = *o;
    int rc = exec_command(conn, "BEGIN", err);

    quiet.log = NULL; /* "created the ledger" only once it is committed */
    if (rc == 0 && bootstrap)
        rc = idem__ledger_bootstrap(conn, &quiet, err);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = check_applied(conn, todo[i], prev[i], err);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = idem__ledger_record(conn, todo[i], 0, err);
    if (rc == 0)
        rc = exec_command(conn, "COMMIT", err);
    if (rc != 0 && PQtransactionStatus(conn) != PQTRANS_IDLE)
        PQclear(PQexec(conn, "ROLLBACK"));
    if (rc == 0 && bootstrap)
        idem__log(o->log, o->log_ctx, IDEM_LOG_INFO, "created the ledger idem.schema_migrations");
    for (size_t i = 0; rc == 0 && i < n; i++)
        idem__log(o->log, o->log_ctx, IDEM_LOG_INFO,
                  "recorded %s as applied, without running it (its objects exist)", todo[i]->name);
    return rc;
}

static int baseline_locked(PGconn *conn, const idem__migration_set *set, int to_version,
                           const idem_migrate_options *o, idem_error *err)
{
    const idem__migration_file **todo = calloc(set->count + 1, sizeof(*todo));
    int *prev = calloc(set->count + 1, sizeof(*prev));
    idem__ledger ledger = {0, NULL, 0, 0, ""};
    size_t n = 0;
    int rc = todo != NULL && prev != NULL ? idem__ledger_read(&ledger, conn, err)
                                          : idem__error_set(err, IDEM_ENOMEM, "out of memory");

    for (size_t i = 0; rc == 0 && i < set->count && set->files[i].version <= to_version; i++) {
        if (in_ledger(&ledger, set->files[i].version))
            continue;
        prev[n] = i > 0 ? set->files[i - 1].version : 0;
        todo[n++] = &set->files[i];
    }
    if (rc == 0 && n == 0)
        idem__log(o->log, o->log_ctx, IDEM_LOG_INFO,
                  "nothing to record: the ledger has every migration up to %04d", to_version);
    if (rc == 0 && n > 0)
        rc = record_all(conn, todo, prev, n, !ledger.exists, o, err);
    idem__ledger_clear(&ledger);
    free(prev);
    free(todo);
    return rc;
}

int idem_migrate_baseline(PGconn *conn, int to_version, const idem_migrate_options *opts,
                          idem_error *err)
{
    idem__migration_set set = {NULL, 0};
    idem_migrate_options o;
    int rc = idem__migrate_options_get(&o, opts, err);

    if (rc == 0 && to_version < 1)
        rc = idem__error_field(err, 0, "to_version",
                               "is %d; baseline needs the last version applied (>= 1)", to_version);
    if (rc == 0)
        rc = idem__migrate_conn_idle(conn, err);
    if (rc == 0)
        rc = idem__migration_set_load(&set, o.dir, err);
    if (rc == 0)
        rc = idem__migrate_lock(conn, &o, err);
    if (rc == 0) {
        rc = baseline_locked(conn, &set, to_version, &o, err);
        idem__migrate_unlock(conn);
    }
    idem__migration_set_clear(&set);
    return rc;
}
