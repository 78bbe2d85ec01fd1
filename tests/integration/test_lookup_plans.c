/* A lookup finds its record by both key columns whatever the statistics say. On a new,
 * never analyzed idem.operations, with generic plans forced (a pooled connection that
 * prepared its statements before the first ANALYZE keeps such a plan), EXPLAIN EXECUTE of
 * every statement that reads one record by its key shows an index condition on tenant
 * and operation_id: as the table's owner (no row-level security) and as the application
 * role (with it). A condition on operation_id alone scans every tenant's rows of that
 * key's index range, and made replays on a new database four times slower. Not on Citus:
 * it plans a distributed table's statement for the values of each execution (the shard
 * is chosen by them), and refuses a forced generic plan. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "external_internal.h"
#include "pgtest.h"
#include "store_internal.h"

static char *conninfo;

static void plans_init(void)
{
    conninfo = pgtest_new_migrated_database("lookup_plans");
}

static void plans_fini(void)
{
    free(conninfo);
}

TestSuite(lookup_plans, .init = plans_init, .fini = plans_fini);

/* Statements by index: a parameter is copied into the test's own process, where addresses
 * may differ. */
static const idem__stmt *const statements[] = {
    &idem__store_stmt_lookup,     &idem__store_stmt_lookup_as, &idem__store_stmt_resolve,
    &idem__store_stmt_resolve_as, &idem__store_stmt_get,       &idem__store_stmt_replay,
    &idem__store_stmt_replay_as,
};
#define STATEMENTS (sizeof(statements) / sizeof(statements[0]))

struct lookup {
    size_t stmt; /* in statements[] */
    int as_app;  /* connect as the application role (row-level security on) */
};

ParameterizedTestParameters(lookup_plans, every_lookup)
{
    static struct lookup lookups[2 * STATEMENTS];

    for (size_t i = 0; i < 2 * STATEMENTS; i++)
        lookups[i] = (struct lookup){i / 2, (int)(i % 2)};
    return cr_make_param_array(struct lookup, lookups, 2 * STATEMENTS);
}

/* The plan's text, one line per row of EXPLAIN, malloc'd. */
static char *explain(PGconn *pg, const idem__stmt *stmt)
{
    char sql[256];
    PGresult *res;
    size_t size = 1;
    char *plan = calloc(1, 1);

    snprintf(sql, sizeof(sql), "EXPLAIN EXECUTE %s('acme', 'key-1')", stmt->name);
    cr_assert_eq(stmt->nparams, 2, "%s takes the key alone", stmt->name);
    res = PQprepare(pg, stmt->name, stmt->sql, stmt->nparams, NULL);
    cr_assert_eq(PQresultStatus(res), PGRES_COMMAND_OK, "%s", PQerrorMessage(pg));
    PQclear(res);
    res = PQexec(pg, sql);
    cr_assert_eq(PQresultStatus(res), PGRES_TUPLES_OK, "%s", PQerrorMessage(pg));
    for (int i = 0; i < PQntuples(res); i++) {
        size += strlen(PQgetvalue(res, i, 0)) + 1;
        plan = realloc(plan, size);
        strcat(strcat(plan, PQgetvalue(res, i, 0)), "\n");
    }
    PQclear(res);
    return plan;
}

ParameterizedTest(struct lookup *l, lookup_plans, every_lookup)
{
    PGconn *pg = l->as_app ? pgtest_connect_as(conninfo, PGTEST_APP) : pgtest_connect(conninfo);
    const idem__stmt *stmt = statements[l->stmt];
    PGresult *res = PQexec(pg, "SET plan_cache_mode = force_generic_plan");
    const char *cond;
    char *plan;

    cr_assert_eq(PQresultStatus(res), PGRES_COMMAND_OK, "%s", PQerrorMessage(pg));
    PQclear(res);
    if (pgtest_citus_workers() != NULL) {
        PQfinish(pg);
        cr_skip_test("Citus plans each execution for its values");
    }
    cr_assert_eq(pgtest_scalar(pg,
                               "SELECT count(*) FROM pg_stat_user_tables"
                               " WHERE (last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL)"
                               " AND relid = 'idem.operations'::regclass"),
                 0, "idem.operations must never have been analyzed");
    plan = explain(pg, stmt);
    cond = strstr(plan, "Index Cond: ");
    cr_assert_not_null(cond, "%s (%s): no index condition:\n%s", stmt->name,
                       l->as_app ? "application role" : "owner", plan);
    cr_assert(strstr(cond, "tenant = ") != NULL && strstr(cond, "operation_id = ") != NULL &&
                  strchr(cond, '\n') > strstr(cond, "operation_id = ") &&
                  strchr(cond, '\n') > strstr(cond, "tenant = "),
              "%s (%s): the index condition is not on both key columns:\n%s", stmt->name,
              l->as_app ? "application role" : "owner", plan);
    /* A lookup that sets the tenant itself has no check of the setting against the key's
     * tenant in a node of its own either, which the planner derives from the policy and a
     * second condition on the tenant (store_sql.c). */
    if (strstr(stmt->sql, "set_config('idem.tenant'") != NULL)
        cr_assert_null(strstr(plan, "One-Time Filter"), "%s (%s): a one-time filter:\n%s",
                       stmt->name, l->as_app ? "application role" : "owner", plan);
    free(plan);
    PQfinish(pg);
}
