/* The statement profile (--statements): what each side's statements cost the server,
 * statement by statement, from pg_stat_statements. Only one side runs in a round, so the
 * difference between two snapshots of the view, taken before and after the round, is that
 * side's: the rounds add it to the side's list (rounds.c), and the report prints it per
 * operation (report.c). The snapshots are taken between rounds, outside the time measured,
 * on a connection of their own; statements that read pg_stat_statements are left out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static PGconn *profile_conn;

#define NEEDS                                                                                      \
    "--statements needs pg_stat_statements loaded by the server (shared_preload_libraries ="       \
    " 'pg_stat_statements'; tools/run bench --statements starts such a server)"

/* One row per statement: pg_stat_statements keeps one per user, database and statement, and
 * BEGIN or COMMIT of every database and role share one. */
static const char snapshot_sql[] =
    "SELECT queryid, sum(calls), sum(total_exec_time),"
    " left(regexp_replace(min(query), '[[:space:]]+', ' ', 'g'), 1000)"
    " FROM pg_stat_statements WHERE toplevel AND query NOT LIKE '%pg_stat_statements%'"
    " GROUP BY queryid";

/* pg_stat_statements' settings exist only where the server loaded it. */
static const char loaded_sql[] = "SELECT 1 FROM pg_settings WHERE name = 'pg_stat_statements.max'";

/* Whether @sql ends with status @want, and returns a row when @row. */
static int query_ok(const char *sql, ExecStatusType want, int row)
{
    PGresult *res = PQexec(profile_conn, sql);
    int ok = PQresultStatus(res) == want && (!row || PQntuples(res) > 0);

    PQclear(res);
    return ok;
}

int bench_statements_open(const char *conninfo)
{
    int rc = 0;

    profile_conn = PQconnectdb(conninfo);
    if (PQstatus(profile_conn) != CONNECTION_OK)
        rc = bench_error("--statements: connecting", PQerrorMessage(profile_conn));
    else if (!query_ok(loaded_sql, PGRES_TUPLES_OK, 1))
        rc = bench_error(NEEDS, "the server did not load it");
    else if (!query_ok("SET client_min_messages = warning;"
                       " CREATE EXTENSION IF NOT EXISTS pg_stat_statements",
                       PGRES_COMMAND_OK, 0) ||
             !query_ok(snapshot_sql, PGRES_TUPLES_OK, 0))
        rc = bench_error(NEEDS, PQerrorMessage(profile_conn));
    if (rc != 0) {
        PQfinish(profile_conn);
        profile_conn = NULL;
    }
    return rc;
}

void bench_statements_close(void)
{
    PQfinish(profile_conn);
    profile_conn = NULL;
}

int bench_statements_active(void)
{
    return profile_conn != NULL;
}

/* The view's rows now, or NULL (no profile, or it cannot be read). */
PGresult *bench_statements_snapshot(void)
{
    PGresult *res;

    if (profile_conn == NULL)
        return NULL;
    res = PQexec(profile_conn, snapshot_sql);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        PQclear(res);
        return NULL;
    }
    return res;
}

static bench_stmt *find_or_add(bench_stmts *list, const char *queryid, const char *query)
{
    bench_stmt *grown;

    for (int i = 0; i < list->n; i++) {
        if (strcmp(list->items[i].queryid, queryid) == 0)
            return &list->items[i];
    }
    if (list->n == list->cap) {
        int cap = list->cap > 0 ? 2 * list->cap : 8;

        if ((grown = realloc(list->items, (size_t)cap * sizeof(*grown))) == NULL)
            return NULL;
        list->items = grown;
        list->cap = cap;
    }
    grown = &list->items[list->n++];
    memset(grown, 0, sizeof(*grown));
    snprintf(grown->queryid, sizeof(grown->queryid), "%s", queryid);
    snprintf(grown->query, sizeof(grown->query), "%s", query);
    return grown;
}

/* The row of @queryid in @res, or -1. */
static int row_of(const PGresult *res, const char *queryid)
{
    for (int i = 0; i < PQntuples(res); i++) {
        if (strcmp(PQgetvalue(res, i, 0), queryid) == 0)
            return i;
    }
    return -1;
}

void bench_statements_add(bench_stmts *list, PGresult *before, PGresult *after)
{
    for (int i = 0; after != NULL && before != NULL && i < PQntuples(after); i++) {
        const char *id = PQgetvalue(after, i, 0);
        int j = row_of(before, id);
        double calls = strtod(PQgetvalue(after, i, 1), NULL);
        double ms = strtod(PQgetvalue(after, i, 2), NULL);
        bench_stmt *s;

        if (j >= 0) {
            calls -= strtod(PQgetvalue(before, j, 1), NULL);
            ms -= strtod(PQgetvalue(before, j, 2), NULL);
        }
        if (calls <= 0 || (s = find_or_add(list, id, PQgetvalue(after, i, 3))) == NULL)
            continue;
        s->calls += calls;
        s->ms += ms;
    }
    PQclear(before);
    PQclear(after);
}

static int by_time(const void *a, const void *b)
{
    double x = ((const bench_stmt *)a)->ms, y = ((const bench_stmt *)b)->ms;

    return (x < y) - (x > y);
}

void bench_statements_sort(bench_stmts *list)
{
    if (list->n > 1)
        qsort(list->items, (size_t)list->n, sizeof(bench_stmt), by_time);
}

void bench_statements_free(bench_stmts *list)
{
    free(list->items);
    *list = (bench_stmts){NULL, 0, 0};
}
