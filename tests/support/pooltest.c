#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec.h"
#include "pooltest.h"

static char *conninfo;
static char app[64];
static idem_pool *pool;

void pooltest_init(void)
{
    char tag[32];

    /* Short enough that the database name keeps its unique tail. */
    snprintf(tag, sizeof(tag), "%.24s", criterion_current_test->name);
    snprintf(app, sizeof(app), "idem-%.32s-%ld", criterion_current_test->name, (long)getpid());
    conninfo = pgtest_new_database(tag);
}

void pooltest_fini(void)
{
    pooltest_close();
    free(conninfo);
    conninfo = NULL;
}

const char *pooltest_conninfo(void)
{
    return conninfo;
}

const char *pooltest_app(void)
{
    return app;
}

idem_pool *pooltest_open_at(const char *where, const idem_pool_options *opts)
{
    idem_error err = IDEM_ERROR_INIT;
    int rc;

    cr_assert_null(pool, "one pool per test");
    rc = idem_pool_new(&pool, where, opts, &err);
    cr_assert_eq(rc, 0, "idem_pool_new: %s (%s)", err.message, idem_err_name(rc));
    return pool;
}

idem_pool *pooltest_open(const idem_pool_options *opts)
{
    return pooltest_open_at(conninfo, opts);
}

void pooltest_close(void)
{
    idem_pool_free(pool);
    pool = NULL;
}

idem_conn *pooltest_acquire(idem_pool *from)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_conn *conn = NULL;
    int rc = idem_pool_acquire(&conn, from, &err);

    cr_assert_eq(rc, 0, "acquire: %s (%s)", err.message, idem_err_name(rc));
    return conn;
}

char *pooltest_query(idem_conn *conn, const char *sql)
{
    idem_error err = IDEM_ERROR_INIT;
    PGresult *res = NULL;
    char *value;
    int rc = idem__conn_exec(&res, conn, sql, &err);

    cr_assert_eq(rc, 0, "%s: %s", sql, err.message);
    value = strdup(PQntuples(res) > 0 ? PQgetvalue(res, 0, 0) : "");
    PQclear(res);
    return value;
}

long pooltest_query_long(idem_conn *conn, const char *sql)
{
    char *text = pooltest_query(conn, sql);
    long v = strtol(text, NULL, 10);

    free(text);
    return v;
}

char *pooltest_query_acquired(idem_pool *from, const char *sql)
{
    idem_conn *conn = pooltest_acquire(from);
    char *value = pooltest_query(conn, sql);

    idem_pool_release(conn);
    return value;
}

long pooltest_backend_pid(idem_conn *conn)
{
    return pooltest_query_long(conn, "SELECT pg_backend_pid()");
}

/* One integer from an admin connection; the parameter is $1. */
static long admin_scalar(const char *sql, const char *param)
{
    PGconn *admin = pgtest_connect("dbname=postgres");
    PGresult *res = PQexecParams(admin, sql, 1, NULL, &param, NULL, NULL, 0);
    long v;

    cr_assert_eq(PQresultStatus(res), PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(admin));
    v = strtol(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    PQfinish(admin);
    return v;
}

/* The pool does not look at a connection released within the current tick of its
 * (coarse) clock, so this lets one pass. */
void pooltest_kill_backend(long pid)
{
    char text[32];

    snprintf(text, sizeof(text), "%ld", pid);
    cr_assert_eq(admin_scalar("SELECT pg_terminate_backend($1::int, 10000)::int", text), 1);
    pgtest_sleep_ms(20);
}

long pooltest_sessions(const char *name)
{
    return admin_scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", name);
}

long pooltest_wait_sessions(const char *name, long want)
{
    long n = pooltest_sessions(name);

    for (int i = 0; i < 100 && n != want; i++) {
        pgtest_sleep_ms(50);
        n = pooltest_sessions(name);
    }
    return n;
}

idem_pool_stats pooltest_stats(idem_pool *of)
{
    idem_pool_stats st = IDEM_POOL_STATS_INIT;

    idem_pool_stats_get(&st, of);
    return st;
}

void pooltest_log_record(void *ctx, int level, const char *message)
{
    pooltest_log *log = ctx;

    pthread_mutex_lock(&log->lock);
    log->warnings += level >= IDEM_LOG_WARNING;
    log->multiline += strpbrk(message, "\n\r\t") != NULL;
    strncat(log->text, message, sizeof(log->text) - strlen(log->text) - 2);
    strcat(log->text, "\n");
    pthread_mutex_unlock(&log->lock);
}

FILE *pooltest_trace(idem_conn *conn)
{
    FILE *fp = tmpfile();

    cr_assert_not_null(fp);
    PQtrace(idem_conn_pg(conn), fp);
    return fp;
}

int pooltest_trace_has(FILE *trace, const char *text)
{
    char line[1024];
    int found = 0;

    fflush(trace);
    rewind(trace);
    while (!found && fgets(line, sizeof(line), trace) != NULL)
        found = strstr(line, text) != NULL;
    return found;
}
