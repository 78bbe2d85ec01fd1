/* Whether what a migration leaves behind (idem__migration_objects()) is in the database:
 * an object of that name, a table isolated by row-level security (enabled, forced, policy
 * tenant_isolation), a privilege granted. Status asks it to find a migration that appears
 * applied though the ledger lacks its row; baseline, before it records one. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
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
