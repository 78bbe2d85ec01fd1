/* The bench's databases: a fresh one per run (idem's schema, the example's table and the
 * hand-written side's table), loaded with operation records in bulk. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "support_tasks.h"

#define LOAD_CHUNK 1000000L

/* A run with more threads than connections queues for them on purpose: a wait this long
 * is a measurement, not a failure. */
#define ACQUIRE_TIMEOUT_MS 30000

/* Append " key='value'" to buf, quoting as libpq wants. */
static void append_kv(char *buf, size_t size, const char *key, const char *value)
{
    size_t n = strlen(buf);

    n += (size_t)snprintf(buf + n, size - n, "%s%s='", n ? " " : "", key);
    for (const char *p = value; *p && n + 3 < size; p++) {
        if (*p == '\'' || *p == '\\')
            buf[n++] = '\\';
        buf[n++] = *p;
    }
    snprintf(buf + n, size - n, "'");
}

char *bench_conninfo(const char *dsn, const char *dbname)
{
    char *err = NULL;
    PQconninfoOption *opts = PQconninfoParse(dsn, &err);
    size_t size = strlen(dsn) * 2 + strlen(dbname) * 2 + 64;
    char *buf;

    if (opts == NULL) {
        bench_error("--dsn", err);
        PQfreemem(err);
        return NULL;
    }
    buf = calloc(1, size);
    for (PQconninfoOption *o = opts; buf != NULL && o->keyword != NULL; o++) {
        if (o->val != NULL && *o->val && strcmp(o->keyword, "dbname") != 0)
            append_kv(buf, size, o->keyword, o->val);
    }
    if (buf != NULL)
        append_kv(buf, size, "dbname", dbname);
    PQconninfoFree(opts);
    return buf;
}

static int exec_admin(PGconn *admin, const char *verb, const char *name, const char *tail)
{
    char *ident = PQescapeIdentifier(admin, name, strlen(name));
    char sql[256];
    PGresult *res;
    int rc;

    if (ident == NULL)
        return bench_error(verb, PQerrorMessage(admin));
    snprintf(sql, sizeof(sql), "%s %s%s", verb, ident, tail);
    PQfreemem(ident);
    res = PQexec(admin, sql);
    rc = PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : bench_error(sql, PQerrorMessage(admin));
    PQclear(res);
    return rc;
}

/* The table of the create mode's sides without idem (create.c). */
static int create_hand_table(PGconn *pg)
{
    PGresult *res = PQexec(pg, "CREATE TABLE IF NOT EXISTS " BENCH_HAND_TABLE);
    int rc = PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : -1;

    PQclear(res);
    return rc;
}

static int setup_schema(const char *conninfo)
{
    idem_error err = IDEM_ERROR_INIT;
    PGconn *pg = PQconnectdb(conninfo);
    int rc;

    if (PQstatus(pg) != CONNECTION_OK) {
        rc = bench_error("connecting to the bench database", PQerrorMessage(pg));
    } else {
        rc = idem_migrate_up(pg, 0, NULL, &err);
        if (rc != 0)
            rc = bench_error("applying migrations", err.message);
        else if (example_support_tasks_setup(pg, &err) != 0)
            rc = bench_error("setting up the example's table", err.message);
        else if (create_hand_table(pg) != 0)
            rc = bench_error("creating the hand-written side's table", PQerrorMessage(pg));
    }
    PQfinish(pg);
    return rc;
}

int bench_db_create(PGconn *admin, const char *dsn, const char *name)
{
    char *conninfo;
    int rc;

    if (exec_admin(admin, "DROP DATABASE IF EXISTS", name, "") != 0 ||
        exec_admin(admin, "CREATE DATABASE", name, "") != 0)
        return -1;
    conninfo = bench_conninfo(dsn, name);
    if (conninfo == NULL)
        return -1;
    rc = setup_schema(conninfo);
    free(conninfo);
    return rc;
}

void bench_db_drop(PGconn *admin, const char *name)
{
    exec_admin(admin, "DROP DATABASE IF EXISTS", name, "");
}

int bench_pool_open(idem_pool **out, const char *conninfo, int threads, int cap)
{
    return bench_pool_open_pooler(out, conninfo, threads, cap, IDEM_POOLER_NONE);
}

static unsigned int pool_statement_timeout_ms;

void bench_pool_set_statement_timeout(unsigned int ms)
{
    pool_statement_timeout_ms = ms;
}

int bench_pool_open_pooler(idem_pool **out, const char *conninfo, int threads, int cap,
                           idem_pooler pooler)
{
    idem_pool_options opts = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;

    opts.max_size = (unsigned int)(threads < cap ? threads : cap);
    opts.min_idle = opts.max_size;
    opts.acquire_timeout_ms = ACQUIRE_TIMEOUT_MS;
    opts.application_name = "idem-bench";
    opts.pooler = pooler;
    opts.statement_timeout_ms = pool_statement_timeout_ms;
    if (idem_pool_new(out, conninfo, &opts, &err) != 0)
        return bench_error("opening the pool", err.message);
    return 0;
}

void bench_loaded_key(char *out, size_t size, uint64_t i)
{
    snprintf(out, size, "k%010llu", (unsigned long long)i);
}

/* One INSERT ... SELECT of keys [from, to); the receipt is what the example tool answers. */
static int load_chunk(PGconn *pg, const char *tenant, const idem_fingerprint *fp, long from,
                      long to)
{
    static const char sql[] =
        "INSERT INTO idem.operations (tenant, operation_id, tool, payload_version,"
        " fingerprint, state, response, claim_token, completed_at, expires_at)"
        " SELECT $1, 'k' || lpad(i::text, 10, '0'), $2, $3::int4, $4, 'completed',"
        " convert_to('{\"status\":\"created\",\"task_id\":' || i || '}', 'UTF8'),"
        " gen_random_uuid(), now(), now() + interval '7 days'"
        " FROM generate_series($5::int8, $6::int8) AS i";
    char version[16], lo[24], hi[24];
    const char *values[6] = {tenant, EXAMPLE_TOOL_NAME, version, (const char *)fp->bytes, lo, hi};
    int lengths[6] = {0, 0, 0, IDEM_FINGERPRINT_SIZE, 0, 0};
    int formats[6] = {0, 0, 0, 1, 0, 0};
    PGresult *res;
    int rc;

    snprintf(version, sizeof(version), "%d", EXAMPLE_TOOL_VERSION);
    snprintf(lo, sizeof(lo), "%ld", from);
    snprintf(hi, sizeof(hi), "%ld", to - 1);
    res = PQexecParams(pg, sql, 6, NULL, values, lengths, formats, 0);
    rc = PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : bench_error("loading", PQerrorMessage(pg));
    PQclear(res);
    return rc;
}

static int exec_simple(PGconn *pg, const char *sql)
{
    PGresult *res = PQexec(pg, sql);
    int rc = PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : bench_error(sql, PQerrorMessage(pg));

    PQclear(res);
    return rc;
}

static int load_operations(const char *conninfo, const char *tenant, long from, long to, int fresh)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_fingerprint fp;
    PGconn *pg = PQconnectdb(conninfo);
    int rc = 0;

    if (PQstatus(pg) != CONNECTION_OK)
        rc = bench_error("connecting to load", PQerrorMessage(pg));
    else if (fresh && exec_simple(pg, "ALTER TABLE idem.operations"
                                      " SET (autovacuum_enabled = off)") != 0)
        rc = -1;
    else if (idem_fingerprint_compute_text(&fp, EXAMPLE_TOOL_NAME, EXAMPLE_TOOL_VERSION,
                                           BENCH_REPLAY_ARGUMENTS, strlen(BENCH_REPLAY_ARGUMENTS),
                                           NULL, &err) != 0)
        rc = bench_error("fingerprint", err.message);
    for (long at = from; rc == 0 && at < to; at += LOAD_CHUNK)
        rc = load_chunk(pg, tenant, &fp, at, at + LOAD_CHUNK < to ? at + LOAD_CHUNK : to);
    if (rc == 0 && !fresh)
        rc = exec_simple(pg, "VACUUM ANALYZE idem.operations");
    PQfinish(pg);
    return rc;
}

int bench_load_operations(const char *conninfo, const char *tenant, long from, long to)
{
    return load_operations(conninfo, tenant, from, to, 0);
}

int bench_load_operations_fresh(const char *conninfo, const char *tenant, long from, long to)
{
    return load_operations(conninfo, tenant, from, to, 1);
}

#define BENCH_APP_ROLE "idem_bench_app"

static const char sql_app_role[] =
    "DO $$ BEGIN CREATE ROLE " BENCH_APP_ROLE " LOGIN IN ROLE idem_app;"
    " EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$";
static const char sql_app_grants[] =
    "GRANT USAGE ON SCHEMA idem_example TO " BENCH_APP_ROLE ";"
    "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA idem_example TO " BENCH_APP_ROLE;

int bench_app_role_setup(const char *conninfo)
{
    PGconn *pg = PQconnectdb(conninfo);
    int rc = PQstatus(pg) == CONNECTION_OK
                 ? 0
                 : bench_error("connecting to set up the application role", PQerrorMessage(pg));

    if (rc == 0)
        rc = exec_simple(pg, sql_app_role);
    if (rc == 0)
        rc = exec_simple(pg, sql_app_grants);
    PQfinish(pg);
    return rc;
}

char *bench_app_conninfo(const char *conninfo, const char *tenant)
{
    size_t size = strlen(conninfo) + 2 * (tenant ? strlen(tenant) : 0) + 96;
    char *buf = malloc(size);
    char option[160];

    if (buf == NULL)
        return NULL;
    snprintf(buf, size, "%s", conninfo);
    append_kv(buf, size, "user", BENCH_APP_ROLE);
    if (tenant != NULL) {
        snprintf(option, sizeof(option), "-c idem.tenant=%s", tenant);
        append_kv(buf, size, "options", option);
    }
    return buf;
}

long long bench_count_rows(const char *conninfo, const char *table, const char *tenant)
{
    const char *sql = strcmp(table, "operations") == 0
                          ? "SELECT count(*) FROM idem.operations WHERE tenant = $1"
                          : "SELECT count(*) FROM idem_example.support_tasks WHERE tenant = $1";
    PGconn *pg = PQconnectdb(conninfo);
    PGresult *res = NULL;
    long long n = -1;

    if (PQstatus(pg) == CONNECTION_OK)
        res = PQexecParams(pg, sql, 1, NULL, &tenant, NULL, NULL, 0);
    if (PQresultStatus(res) == PGRES_TUPLES_OK)
        n = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    else
        bench_error("counting rows", PQerrorMessage(pg));
    PQclear(res);
    PQfinish(pg);
    return n;
}
