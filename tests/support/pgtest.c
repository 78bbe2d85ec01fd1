#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "random.h"
#include "idem/migrate.h"
#include "idem/uuid.h"
#include "pgtest.h"
#include "support_tasks.h"

const char *pgtest_server_problem(void)
{
    static char why[256];
    PGPing ping = PQping("connect_timeout=30");

    switch (ping) {
    case PQPING_OK:
        return NULL;
    case PQPING_REJECT:
        snprintf(why, sizeof(why), "server rejects connections (PGHOST=%s)", getenv("PGHOST"));
        return why;
    case PQPING_NO_RESPONSE:
        snprintf(why, sizeof(why), "no response (PGHOST=%s PGPORT=%s)",
                 getenv("PGHOST") ? getenv("PGHOST") : "unset",
                 getenv("PGPORT") ? getenv("PGPORT") : "unset");
        return why;
    default:
        return "bad connection parameters";
    }
}

const char *pgtest_pgbouncer(void)
{
    const char *v = getenv("IDEM_PGBOUNCER");

    return v != NULL && v[0] != '\0' ? v : NULL;
}

int pgtest_through_pgbouncer(void)
{
    return getenv("IDEM_TEST_PGBOUNCER") != NULL;
}

char *pgtest_pgbouncer_conninfo(const char *conninfo)
{
    const char *bouncer = pgtest_pgbouncer();
    size_t len;
    char *s;

    cr_assert_not_null(bouncer, "no PgBouncer: run under tools/with-postgres --pgbouncer");
    len = strlen(bouncer) + strlen(conninfo) + 2;
    s = malloc(len);
    cr_assert_not_null(s);
    snprintf(s, len, "%s %s", bouncer, conninfo);
    return s;
}

void pgtest_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

long pgtest_late_ms(long deadline_ms)
{
    return deadline_ms + (deadline_ms > PGTEST_LOAD_SLACK_MS ? deadline_ms : PGTEST_LOAD_SLACK_MS);
}

PGconn *pgtest_connect(const char *conninfo)
{
    PGconn *conn = PQconnectdb(conninfo != NULL ? conninfo : "");

    if (PQstatus(conn) != CONNECTION_OK)
        cr_assert_fail("connect(%s): %s", conninfo ? conninfo : "", PQerrorMessage(conn));
    return conn;
}

PGresult *pgtest_exec(PGconn *conn, const char *sql)
{
    PGresult *res = PQexec(conn, sql);
    ExecStatusType st = PQresultStatus(res);

    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        cr_assert_fail("%s: %s", sql, PQresultErrorMessage(res));
    return res;
}

long pgtest_scalar(PGconn *conn, const char *sql)
{
    PGresult *res = pgtest_exec(conn, sql);
    long v;

    if (PQntuples(res) != 1 || PQgetisnull(res, 0, 0))
        cr_assert_fail("%s: expected one non-NULL value", sql);
    v = strtol(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return v;
}

void pgtest_uuid_v7_at(char out[37], PGconn *conn, long offset_s)
{
    char sql[128], hex[13];
    long long ms;

    snprintf(sql, sizeof(sql), "SELECT (extract(epoch FROM now()) * 1000)::int8 + %ld::int8 * 1000",
             offset_s);
    ms = pgtest_scalar(conn, sql);
    cr_assert_eq(idem_uuid_v7(out, NULL), 0);
    snprintf(hex, sizeof(hex), "%012llx", ms);
    memcpy(out, hex, 8);
    memcpy(out + 9, hex + 8, 4);
}

const char *pgtest_citus_workers(void)
{
    const char *v = getenv("IDEM_CITUS_WORKERS");

    return v != NULL && v[0] != '\0' ? v : NULL;
}

/* Run @sql in database @name on the node "host:port" (NULL: the coordinator). */
static void node_exec(const char *node, const char *name, const char *sql)
{
    char conninfo[256];
    const char *colon = node != NULL ? strrchr(node, ':') : NULL;
    PGconn *conn;

    if (node == NULL)
        snprintf(conninfo, sizeof(conninfo), "dbname=%s", name);
    else
        snprintf(conninfo, sizeof(conninfo), "host=%.*s port=%s dbname=%s",
                 (int)(colon != NULL ? colon - node : 0), node, colon != NULL ? colon + 1 : "",
                 name);
    conn = pgtest_connect(conninfo);
    PQclear(pgtest_exec(conn, sql));
    PQfinish(conn);
}

/* Make the new database @name a Citus database: the same database with the extension on
 * every worker, then the extension on the coordinator and the workers added to it. */
static void citus_database(const char *name, const char *workers)
{
    char *list = strdup(workers), *save = NULL, sql[256];
    /* Adding nodes changes shared catalogs on the workers: one test process at a time. */
    PGconn *serial = pgtest_connect("dbname=postgres");

    PQclear(pgtest_exec(serial, "SELECT pg_advisory_lock(7594306392416544113)"));
    cr_assert_not_null(list);
    for (char *w = strtok_r(list, ",", &save); w != NULL; w = strtok_r(NULL, ",", &save)) {
        snprintf(sql, sizeof(sql), "CREATE DATABASE \"%s\" TEMPLATE template0", name);
        node_exec(w, "postgres", sql);
        node_exec(w, name, "CREATE EXTENSION citus");
    }
    node_exec(NULL, name, "CREATE EXTENSION citus");
    snprintf(sql, sizeof(sql), "SELECT citus_set_coordinator_host('127.0.0.1', %s)",
             getenv("PGPORT") != NULL ? getenv("PGPORT") : "5432");
    node_exec(NULL, name, sql);
    strcpy(list, workers);
    for (char *w = strtok_r(list, ",", &save); w != NULL; w = strtok_r(NULL, ",", &save)) {
        char *colon = strrchr(w, ':');

        cr_assert_not_null(colon, "IDEM_CITUS_WORKERS: '%s' is not host:port", w);
        *colon = '\0';
        snprintf(sql, sizeof(sql), "SELECT citus_add_node('%s', %s)", w, colon + 1);
        node_exec(NULL, name, sql);
    }
    free(list);
    PQfinish(serial); /* releases the lock */
}

/* The Citus databases this process made, dropped on every node when it exits: a Citus
 * database keeps its maintenance daemon, and the daemon its connections to every node,
 * until it is dropped, and the suite makes one per test (each test is a process). A child
 * after fork() drops only its own. */
#define MAX_MADE 32
static struct {
    char name[64];
    pid_t pid;
} made[MAX_MADE];
static size_t nmade;

/* Best effort, at exit: no test fails here, and a server a test stopped is passed over. */
static void drop_on_node(const char *node, const char *name)
{
    char conninfo[256], sql[128];
    const char *colon = node != NULL ? strrchr(node, ':') : NULL;
    PGconn *conn;

    if (node == NULL)
        snprintf(conninfo, sizeof(conninfo), "dbname=postgres connect_timeout=10");
    else
        snprintf(conninfo, sizeof(conninfo), "host=%.*s port=%s dbname=postgres connect_timeout=10",
                 (int)(colon != NULL ? colon - node : 0), node, colon != NULL ? colon + 1 : "");
    conn = PQconnectdb(conninfo);
    snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS \"%s\" WITH (FORCE)", name);
    if (PQstatus(conn) == CONNECTION_OK)
        PQclear(PQexec(conn, sql));
    PQfinish(conn);
}

static void drop_made_databases(void)
{
    const char *workers = pgtest_citus_workers();

    for (size_t i = 0; workers != NULL && i < nmade; i++) {
        char *list, *save = NULL;

        if (made[i].pid != getpid() || (list = strdup(workers)) == NULL)
            continue;
        drop_on_node(NULL, made[i].name); /* first: it stops the maintenance daemon */
        for (char *w = strtok_r(list, ",", &save); w != NULL; w = strtok_r(NULL, ",", &save))
            drop_on_node(w, made[i].name);
        free(list);
    }
}

static void drop_at_exit(const char *name)
{
    static int registered;

    if (!registered && atexit(drop_made_databases) == 0)
        registered = 1;
    if (registered && nmade < MAX_MADE) {
        snprintf(made[nmade].name, sizeof(made[nmade].name), "%s", name);
        made[nmade++].pid = getpid();
    }
}

/* IDEM_TEST_LC_MESSAGES: the language the server speaks in the new database @name (its
 * lc_messages, which only a superuser sets), so that the suite's error paths run with the
 * server's messages translated; unset or empty, the cluster's. */
static void set_lc_messages(PGconn *admin, const char *name)
{
    const char *lang = getenv("IDEM_TEST_LC_MESSAGES");
    char *literal, sql[256];

    if (lang == NULL || lang[0] == '\0')
        return;
    literal = PQescapeLiteral(admin, lang, strlen(lang));
    cr_assert_not_null(literal, "IDEM_TEST_LC_MESSAGES: %s", PQerrorMessage(admin));
    snprintf(sql, sizeof(sql), "ALTER DATABASE \"%s\" SET lc_messages = %s", name, literal);
    PQfreemem(literal);
    PQclear(pgtest_exec(admin, sql));
}

const char *pgtest_server_says(const char *english)
{
    const char *lang = getenv("IDEM_TEST_LC_MESSAGES");

    if (lang == NULL || lang[0] == '\0' || strcmp(lang, "C") == 0 || strncmp(lang, "C.", 2) == 0 ||
        strncmp(lang, "en", 2) == 0)
        return english;
    return "";
}

char *pgtest_new_database(const char *tag)
{
    static unsigned counter;
    char name[64], sql[160], *conninfo;
    PGconn *admin = pgtest_connect("dbname=postgres");
    PGresult *res;
    size_t len;

    /* A random part too: the plain and the sanitizer builds share one server, and on a
     * busy machine a process id comes round again within a run. */
    snprintf(name, sizeof(name), "t_%s_%ld_%u_%08x", tag, (long)getpid(), counter++,
             (unsigned)idem__random64());
    snprintf(sql, sizeof(sql), "CREATE DATABASE \"%s\" TEMPLATE template0", name);
    res = pgtest_exec(admin, sql);
    PQclear(res);
    set_lc_messages(admin, name);
    PQfinish(admin);
    if (pgtest_citus_workers() != NULL) {
        drop_at_exit(name);
        citus_database(name, pgtest_citus_workers());
    }
    len = strlen(name) + 16;
    conninfo = malloc(len);
    cr_assert_not_null(conninfo);
    snprintf(conninfo, len, "dbname=%s", name);
    return conninfo;
}

/* One statement per role, so that a concurrent creator's error only skips that role. */
static const char *const role_sql[] = {
    "DO $$ BEGIN CREATE ROLE " PGTEST_APP " LOGIN IN ROLE idem_app;"
    " EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$",
    "DO $$ BEGIN CREATE ROLE " PGTEST_SWEEPER " LOGIN IN ROLE idem_sweeper;"
    " EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$",
    "DO $$ BEGIN CREATE ROLE " PGTEST_OPERATOR " LOGIN IN ROLE idem_operator;"
    " EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$",
    "DO $$ BEGIN CREATE ROLE " PGTEST_RECOVERER " LOGIN IN ROLE idem_app, idem_operator;"
    " EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$",
};

void pgtest_create_roles(PGconn *conn)
{
    static int done;

    for (size_t i = 0; !done && i < sizeof(role_sql) / sizeof(role_sql[0]); i++)
        PQclear(pgtest_exec(conn, role_sql[i]));
    done = 1;
}

void pgtest_create_role(PGconn *conn, const char *name, const char *options)
{
    char sql[512];

    snprintf(sql, sizeof(sql),
             "DO $$ BEGIN CREATE ROLE %s %s;"
             " EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$",
             name, options);
    PQclear(pgtest_exec(conn, sql));
}

const char *pgtest_tcp(void)
{
    const char *tcp = getenv("IDEM_PG_TCP");

    cr_assert(tcp != NULL && tcp[0] != '\0',
              "IDEM_PG_TCP is not set (tools/with-postgres sets it)");
    return tcp;
}

char *pgtest_as(const char *conninfo, const char *role)
{
    size_t len = strlen(conninfo) + strlen(role) + 8;
    char *s = malloc(len);

    cr_assert_not_null(s);
    snprintf(s, len, "%s user=%s", conninfo, role);
    return s;
}

PGconn *pgtest_connect_as(const char *conninfo, const char *role)
{
    char *as = pgtest_as(conninfo, role);
    PGconn *conn = pgtest_connect(as);

    free(as);
    return conn;
}

static void quiet(void *arg, const char *message)
{
    (void)arg, (void)message;
}

void pgtest_distribute(const char *conninfo, const char *table)
{
    PGconn *conn;
    idem_distribution *d = NULL;
    idem_error err = IDEM_ERROR_INIT;
    int rc;

    if (pgtest_citus_workers() == NULL)
        return;
    conn = pgtest_connect(conninfo);
    PQsetNoticeProcessor(conn, quiet, NULL); /* "Copying data from local table..." */
    rc =
        idem_migrate_distribute(&d, conn, table != NULL ? &table : NULL, table != NULL, NULL, &err);
    PQfinish(conn);
    if (rc != 0)
        cr_assert_fail("idem_migrate_distribute(%s): %s: %s", conninfo, idem_err_name(rc),
                       err.message);
    cr_assert(idem_distribution_complete(d), "%s: not completely distributed", conninfo);
    idem_distribution_free(d);
}

char *pgtest_new_migrated_database(const char *tag)
{
    char *conninfo = pgtest_new_database(tag);
    PGconn *conn = pgtest_connect(conninfo);
    idem_error err = IDEM_ERROR_INIT;
    int rc = idem_migrate_up(conn, 0, NULL, &err);

    if (rc != 0)
        cr_assert_fail("idem_migrate_up(%s): %s: %s", conninfo, idem_err_name(rc), err.message);
    pgtest_create_roles(conn);
    PQfinish(conn);
    pgtest_distribute(conninfo, NULL);
    return conninfo;
}

void pgtest_example_setup(const char *conninfo)
{
    PGconn *conn = pgtest_connect(conninfo);
    idem_error err = IDEM_ERROR_INIT;
    int rc = example_support_tasks_setup(conn, &err);

    if (rc != 0)
        cr_assert_fail("example_support_tasks_setup(%s): %s", conninfo, err.message);
    PQclear(pgtest_exec(conn, "GRANT USAGE ON SCHEMA idem_example TO " PGTEST_APP ";"
                              "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA"
                              " idem_example TO " PGTEST_APP ";"
                              "GRANT USAGE ON SCHEMA idem_example TO " PGTEST_RECOVERER ";"
                              "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA"
                              " idem_example TO " PGTEST_RECOVERER));
    PQfinish(conn);
    pgtest_distribute(conninfo, "idem_example.support_tasks");
}

char *pgtest_new_example_database(const char *tag)
{
    char *conninfo = pgtest_new_migrated_database(tag);

    pgtest_example_setup(conninfo);
    return conninfo;
}
