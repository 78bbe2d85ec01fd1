/* The distribution step for Citus: idem's tenant tables distributed by tenant and
 * co-located with idem.operations, the ledger a reference table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "migrate_internal.h"

struct idem_distribution {
    int citus;
    idem_distributed_table *tables;
    size_t count;
};

static const char SQL_CITUS[] = "SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus'),"
                                " to_regclass('idem.operations') IS NOT NULL";

/* The tables: schema idem's and the named ones ($1, a regclass[] literal), operations
 * first. Placement: 1 distributed by tenant with operations' co-location, 2 reference,
 * 3 anything else Citus knows, 0 local. */
#define TABLES_FROM                                                                                \
    " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"                               \
    " WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition"                                      \
    " AND (n.nspname = 'idem' OR c.oid = ANY ($1::regclass[]))"                                    \
    " ORDER BY c.oid <> 'idem.operations'::regclass, 1"
#define TABLES_SELECT                                                                              \
    "SELECT format('%I.%I', n.nspname, c.relname), EXISTS (SELECT FROM pg_attribute a WHERE "      \
    "a.attrelid = c.oid"                                                                           \
    " AND a.attname = 'tenant' AND a.attnum > 0 AND NOT a.attisdropped), "

static const char SQL_TABLES_PLAIN[] = TABLES_SELECT "0" TABLES_FROM;

static const char SQL_TABLES_CITUS[] =
    TABLES_SELECT "(SELECT CASE WHEN p.partmethod = 'h' AND p.colocationid = (SELECT colocationid"
                  " FROM pg_dist_partition WHERE logicalrelid = 'idem.operations'::regclass)"
                  " AND column_to_column_name(p.logicalrelid, p.partkey) = 'tenant' THEN 1"
                  " WHEN p.partmethod = 'n' AND p.repmodel = 't' THEN 2 ELSE 3 END"
                  " FROM pg_dist_partition p WHERE p.logicalrelid = c.oid)" TABLES_FROM;

static const char SQL_DISTRIBUTE[] =
    "SELECT create_distributed_table($1::regclass, 'tenant', colocate_with => $2)";
static const char SQL_REFERENCE[] = "SELECT create_reference_table($1::regclass)";
/* A shard's row is not of type idem.operations: the CHECK constraint goes back to
 * migration 0008's form, one argument per column (migration 0017), before the table is
 * distributed. A schema from before 0017 has that form already. */
static const char SQL_CHECK_PER_FIELD[] =
    "DO $$ BEGIN IF to_regprocedure('idem.operations_check_per_field()') IS NOT NULL THEN"
    " PERFORM idem.operations_check_per_field(); END IF; END $$";
static int query(PGresult **out, PGconn *conn, const char *sql, int n, const char *const *values,
                 const char *what, idem_error *err)
{
    PGresult *res = PQexecParams(conn, sql, n, NULL, values, NULL, NULL, 0);
    ExecStatusType st = PQresultStatus(res);

    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
        int rc = idem__error_pg(err, conn, res, "%s", what);
        PQclear(res);
        return rc;
    }
    *out = res;
    return 0;
}

/* "{name,name}" for regclass[]: each name double-quoted, quotes and backslashes escaped. */
static char *names_literal(const char *const *tables, size_t n, idem_error *err)
{
    size_t len = 3;
    char *s, *p;

    for (size_t i = 0; i < n; i++) {
        if (tables[i] == NULL || tables[i][0] == '\0')
            return idem__error_field(err, IDEM_EINVAL, "tables", "table %zu is %s", i + 1,
                                     tables[i] == NULL ? "NULL" : "empty"),
                   NULL;
        len += 2 * strlen(tables[i]) + 3;
    }
    if ((p = s = malloc(len)) == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "distribution: out of memory"), NULL;
    *p++ = '{';
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            *p++ = ',';
        *p++ = '"';
        for (const char *q = tables[i]; *q != '\0'; q++) {
            if (*q == '"' || *q == '\\')
                *p++ = '\\';
            *p++ = *q;
        }
        *p++ = '"';
    }
    *p++ = '}';
    *p = '\0';
    return s;
}

static int read_tables(idem_distribution *d, PGconn *conn, const char *names, idem_error *err)
{
    PGresult *res = NULL;
    const char *values[1] = {names};
    int rc = query(&res, conn, d->citus ? SQL_TABLES_CITUS : SQL_TABLES_PLAIN, 1, values,
                   "listing the tables to distribute", err);
    int n;

    if (rc != 0)
        return rc;
    n = PQntuples(res);
    if ((d->tables = calloc((size_t)n + 1, sizeof(*d->tables))) == NULL) {
        PQclear(res);
        return idem__error_set(err, IDEM_ENOMEM, "distribution: out of memory");
    }
    for (int i = 0; i < n; i++) {
        idem_distributed_table *t = &d->tables[i];

        snprintf(t->name, sizeof(t->name), "%s", PQgetvalue(res, i, 0));
        t->tenant = PQgetvalue(res, i, 1)[0] == 't';
        t->placement = PQgetisnull(res, i, 2) ? IDEM_TABLE_LOCAL
                                              : (idem_table_placement)atoi(PQgetvalue(res, i, 2));
        t->wanted = t->placement == (t->tenant ? IDEM_TABLE_DISTRIBUTED : IDEM_TABLE_REFERENCE);
    }
    d->count = (size_t)n;
    PQclear(res);
    return 0;
}

/* Read where everything stands into *out (caller frees). */
static int read_distribution(idem_distribution **out, PGconn *conn, const char *const *tables,
                             size_t ntables, idem_error *err)
{
    idem_distribution *d = calloc(1, sizeof(*d));
    PGresult *res = NULL;
    char *names = names_literal(tables, ntables, err);
    int rc = d == NULL       ? idem__error_set(err, IDEM_ENOMEM, "distribution: out of memory")
             : names == NULL ? err->code
                             : query(&res, conn, SQL_CITUS, 0, NULL, "looking for Citus", err);

    if (rc != 0)
        goto done;
    d->citus = PQgetvalue(res, 0, 0)[0] == 't';
    if (PQgetvalue(res, 0, 1)[0] != 't') {
        rc = idem__error_set(err, IDEM_ESCHEMA,
                             "idem.operations does not exist: run idem-migrate up first");
        goto done;
    }
    if ((rc = read_tables(d, conn, names, err)) == 0) {
        *out = d;
        d = NULL;
    }
done:
    PQclear(res);
    free(names);
    idem_distribution_free(d);
    return rc;
}

int idem_migrate_distribution(idem_distribution **out, PGconn *conn, const char *const *tables,
                              size_t ntables, idem_error *err)
{
    int rc;

    idem_error_clear(err);
    if (out == NULL || (ntables > 0 && tables == NULL))
        return idem__error_field(err, IDEM_EINVAL, out == NULL ? "out" : "tables",
                                 "must not be NULL");
    if ((rc = idem__migrate_conn_check(conn, err)) != 0)
        return rc;
    return read_distribution(out, conn, tables, ntables, err);
}

/* Refuse what the step cannot fix, before it changes anything. */
static int check_plan(const idem_distribution *d, idem_error *err)
{
    if (!d->citus)
        return idem__error_set(err, IDEM_ESCHEMA,
                               "the citus extension is not installed in this database: run "
                               "CREATE EXTENSION citus on the coordinator and add the workers "
                               "first (see migrations/README.md, \"Scaling out on Citus\")");
    for (size_t i = 0; i < d->count; i++) {
        const idem_distributed_table *t = &d->tables[i];

        if (t->placement == IDEM_TABLE_OTHER)
            return idem__error_set(err, IDEM_ESCHEMA,
                                   "%s is distributed otherwise (not by tenant co-located with "
                                   "idem.operations, or a Citus local table): run SELECT "
                                   "undistribute_table('%s') first",
                                   t->name, t->name);
        if (!t->tenant && strncmp(t->name, "idem.", 5) != 0)
            return idem__error_field(err, IDEM_EINVAL, "tables",
                                     "%s has no column tenant: an effect table must be "
                                     "distributed by tenant",
                                     t->name);
    }
    return 0;
}

static int place(idem_distributed_table *t, PGconn *conn, const char *colocate, idem_error *err)
{
    const char *values[2] = {t->name, colocate};
    PGresult *res = NULL;
    int rc = 0;

    if (strcmp(t->name, "idem.operations") == 0 &&
        (rc = query(&res, conn, SQL_CHECK_PER_FIELD, 0, NULL,
                    "putting back the per-column form of operations_consistent", err)) == 0) {
        PQclear(res);
        res = NULL;
    }
    if (rc == 0)
        rc = t->tenant
                 ? query(&res, conn, SQL_DISTRIBUTE, 2, values, "distributing", err)
                 : query(&res, conn, SQL_REFERENCE, 1, values, "making a reference table", err);

    PQclear(res);
    if (rc != 0)
        return idem__error_context(err, "%s", t->name);
    t->changed = 1;
    return 0;
}

static int distribute_all(idem_distribution *d, PGconn *conn, const idem_migrate_options *o,
                          idem_error *err)
{
    int rc = check_plan(d, err);

    for (size_t i = 0; rc == 0 && i < d->count; i++) {
        idem_distributed_table *t = &d->tables[i];

        if (t->placement != IDEM_TABLE_LOCAL)
            continue;
        /* idem.operations comes first and founds the co-location group. */
        rc = place(t, conn, strcmp(t->name, "idem.operations") == 0 ? "default" : "idem.operations",
                   err);
        if (rc == 0)
            idem__log(o->log, o->log_ctx, IDEM_LOG_INFO, "distributed %s (%s)", t->name,
                      t->tenant ? "by tenant" : "reference table");
    }
    return rc;
}

int idem_migrate_distribute(idem_distribution **out, PGconn *conn, const char *const *tables,
                            size_t ntables, const idem_migrate_options *opts, idem_error *err)
{
    idem_migrate_options o;
    idem_distribution *before = NULL, *after = NULL;
    int rc, locked = 0;

    idem_error_clear(err);
    if (out == NULL || (ntables > 0 && tables == NULL))
        return idem__error_field(err, IDEM_EINVAL, out == NULL ? "out" : "tables",
                                 "must not be NULL");
    if ((rc = idem__migrate_options_get(&o, opts, err)) != 0 ||
        (rc = idem__migrate_conn_idle(conn, err)) != 0)
        return rc;
    if ((rc = idem__migrate_lock(conn, &o, err)) != 0)
        return rc;
    locked = 1;
    if ((rc = read_distribution(&before, conn, tables, ntables, err)) != 0 ||
        (rc = distribute_all(before, conn, &o, err)) != 0 ||
        (rc = read_distribution(&after, conn, tables, ntables, err)) != 0)
        goto done;
    for (size_t i = 0; i < after->count && i < before->count; i++)
        after->tables[i].changed = before->tables[i].changed;
    *out = after;
    after = NULL;
done:
    if (locked)
        idem__migrate_unlock(conn);
    idem_distribution_free(before);
    idem_distribution_free(after);
    return rc;
}

int idem_distribution_citus(const idem_distribution *d)
{
    return d != NULL && d->citus;
}

int idem_distribution_complete(const idem_distribution *d)
{
    if (d == NULL || !d->citus)
        return 0;
    for (size_t i = 0; i < d->count; i++) {
        if (!d->tables[i].wanted)
            return 0;
    }
    return 1;
}

size_t idem_distribution_count(const idem_distribution *d)
{
    return d != NULL ? d->count : 0;
}

const idem_distributed_table *idem_distribution_at(const idem_distribution *d, size_t i)
{
    return d != NULL && i < d->count ? &d->tables[i] : NULL;
}

const char *idem_table_placement_name(idem_table_placement placement)
{
    switch (placement) {
    case IDEM_TABLE_LOCAL:
        return "local";
    case IDEM_TABLE_DISTRIBUTED:
        return "distributed";
    case IDEM_TABLE_REFERENCE:
        return "reference";
    case IDEM_TABLE_OTHER:
        return "other";
    }
    return "unknown";
}

void idem_distribution_free(idem_distribution *d)
{
    if (d == NULL)
        return;
    free(d->tables);
    free(d);
}
