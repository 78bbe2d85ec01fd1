/* --existing: measure in a database the bench did not create. It checks the schema, takes
 * only the tenants bench-* for its rows, and deletes exactly those at the end. */
#include <stdio.h>
#include <string.h>

#include "bench.h"

/* Tenants the bench writes under: bench-create, bench-replay, bench-external, ... */
#define OWN_TENANTS "tenant LIKE 'bench-%'"

static const char sql_tables[] =
    "SELECT to_regclass('idem_example.support_tasks') IS NOT NULL,"
    " to_regclass('public.bench_article_ops') IS NOT NULL,"
    " EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus'),"
    " (SELECT count(*) FROM idem.operations WHERE " OWN_TENANTS ") > 0";

static int exec_ok(PGconn *pg, const char *sql, const char *what)
{
    PGresult *res = PQexec(pg, sql);
    ExecStatusType st = PQresultStatus(res);
    int rc =
        st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? 0 : bench_error(what, PQerrorMessage(pg));

    PQclear(res);
    return rc;
}

/* In public, named: an unqualified CREATE would land in a schema named like the role (idem). */
static int make_hand_table(PGconn *admin, int citus, int *made)
{
    if (exec_ok(admin, "CREATE TABLE " BENCH_HAND_TABLE, "creating bench_article_ops") != 0)
        return -1;
    *made = 1;
    if (!citus)
        return 0;
    return exec_ok(admin,
                   "SELECT create_distributed_table('public.bench_article_ops', 'tenant',"
                   " colocate_with => 'idem.operations')",
                   "distributing bench_article_ops");
}

int bench_existing_check(PGconn *admin, int modes, int *made)
{
    idem_error err = IDEM_ERROR_INIT;
    PGresult *res = NULL;
    int rc = idem_migrate_check(admin, &err);

    *made = 0;
    if (rc != 0)
        return bench_error("--existing: the database's schema is not what this idem-bench "
                           "expects (run idem-migrate up there first)",
                           err.message);
    res = PQexec(admin, sql_tables);
    if (PQresultStatus(res) != PGRES_TUPLES_OK)
        rc = bench_error("--existing: looking at the database", PQerrorMessage(admin));
    else if (modes == BENCH_MODE_GATEWAY)
        rc = 0; /* its own table (gateway.c); neither the example's nor bench_article_ops */
    else if (PQgetvalue(res, 0, 0)[0] != 't')
        rc = bench_error("--existing",
                         "idem_example.support_tasks is missing: create the example's "
                         "table (idem-demo does; on Citus distribute it with "
                         "idem-migrate distribute --table idem_example.support_tasks)");
    else if (PQgetvalue(res, 0, 3)[0] == 't')
        rc = bench_error("--existing", "idem.operations already has rows of tenants bench-*: "
                                       "they are not this run's to delete; remove them first");
    else if (PQgetvalue(res, 0, 1)[0] != 't')
        rc = make_hand_table(admin, PQgetvalue(res, 0, 2)[0] == 't', made);
    PQclear(res);
    return rc;
}

void bench_existing_clean(PGconn *admin, int modes, int made, int checked)
{
    if (!checked || modes == BENCH_MODE_GATEWAY)
        return; /* the gateway mode's rows stay, its tenant is not bench-* */
    bench_say("deleting the rows of tenants bench-*");
    exec_ok(admin, "DELETE FROM idem.reconciliation_items WHERE " OWN_TENANTS, "cleaning up");
    exec_ok(admin, "DELETE FROM idem.outbox WHERE " OWN_TENANTS, "cleaning up");
    exec_ok(admin, "DELETE FROM idem.external_attempts WHERE " OWN_TENANTS, "cleaning up");
    exec_ok(admin, "DELETE FROM idem.operations WHERE " OWN_TENANTS, "cleaning up");
    exec_ok(admin, "DELETE FROM idem_example.support_tasks WHERE " OWN_TENANTS, "cleaning up");
    if (made)
        exec_ok(admin, "DROP TABLE public.bench_article_ops", "dropping bench_article_ops");
    else
        exec_ok(admin, "DELETE FROM public.bench_article_ops WHERE " OWN_TENANTS, "cleaning up");
}
