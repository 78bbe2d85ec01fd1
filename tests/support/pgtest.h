/* Test support: reaching the throwaway PostgreSQL that tools/with-postgres started. */
#ifndef IDEM_TESTS_PGTEST_H
#define IDEM_TESTS_PGTEST_H

#include <criterion/criterion.h>
#include <libpq-fe.h>

/* NULL when the server answers, else why not. Every integration executable checks this
 * before its tests run (pgtest_main.c): no test needs to. */
const char *pgtest_server_problem(void);

/* The workers of the Citus cluster that tools/with-citus started ("host:port,...",
 * IDEM_CITUS_WORKERS), or NULL on plain PostgreSQL. */
const char *pgtest_citus_workers(void);

/* Under Citus, idem_migrate_distribute() on the database (with @table, an effect table, or
 * NULL), failing the test unless everything ends up distributed; nothing otherwise. */
void pgtest_distribute(const char *conninfo, const char *table);

/* Create an empty database with a unique name for this test; returns its conninfo
 * (malloc'd, caller frees). The database is left behind for the cluster's removal. Under
 * Citus (IDEM_CITUS_WORKERS) it is a Citus database: the extension created on the
 * coordinator and in a database of the same name on every worker, the workers added; and
 * it is dropped on every node when the process that made it exits (each test runs in a
 * process of its own), so that its maintenance daemon's connections end with the test. */
char *pgtest_new_database(const char *tag);

/* pgtest_new_database(tag), then every embedded migration applied through
 * idem_migrate_up(), failing the test on error: a database with idem's schema; under Citus
 * distributed (pgtest_distribute()). Returns its conninfo (malloc'd, caller frees). */
char *pgtest_new_migrated_database(const char *tag);

/* Login roles of the tests, members of idem's group roles (migration 0007). The cluster's
 * superuser (PGUSER) bypasses row-level security, so a test that must see the policies
 * at work connects as one of these. pgtest_new_migrated_database() creates them. */
#define PGTEST_APP      "idem_test_app"      /* in idem_app */
#define PGTEST_SWEEPER  "idem_test_sweeper"  /* in idem_sweeper */
#define PGTEST_OPERATOR "idem_test_operator" /* in idem_operator */
/* in idem_app and idem_operator: a worker that recovers every tenant's durable intents */
#define PGTEST_RECOVERER "idem_test_recoverer"

/* A login role whose password the server checks, over TCP only: tools/with-postgres (and
 * with-citus) put scram-sha-256 for it in pg_hba.conf, trust being the rule elsewhere.
 * Tests create it with pgtest_create_role() and this password. */
#define PGTEST_PASSWORD_ROLE "idem_test_password"
#define PGTEST_PASSWORD      "idem-test-password"
/* A role PgBouncer (tools/with-postgres --pgbouncer) lets in and the server never has. */
#define PGTEST_GHOST_ROLE "idem_test_ghost"

/* Create role @name WITH @options (SQL, e.g. "LOGIN CONNECTION LIMIT 0") unless it exists
 * (tolerates other test processes creating it at the same time); @conn is a superuser's.
 * Fails the test on error. */
void pgtest_create_role(PGconn *conn, const char *name, const char *options);

/* A conninfo reaching the server over TCP (IDEM_PG_TCP, set by tools/with-postgres), or the
 * test fails. Borrowed. */
const char *pgtest_tcp(void);

/* Create the login roles above when they are missing (tolerates other test processes
 * creating them at the same time); @conn is a superuser's connection to a migrated
 * database. Fails the test on error. */
void pgtest_create_roles(PGconn *conn);

/* @conninfo connecting as @role (malloc'd, caller frees); under Citus as the superuser
 * (row-level security does not run there yet). */
char *pgtest_as(const char *conninfo, const char *role);

/* A connection to @conninfo's database as @role (pgtest_as()); the test fails if it cannot
 * connect. Caller finishes it. */
PGconn *pgtest_connect_as(const char *conninfo, const char *role);

/* In the migrated database @conninfo: the example tool's own table
 * (idem_example.support_tasks, tools/example), on which PGTEST_APP may write, under Citus
 * distributed by tenant. */
void pgtest_example_setup(const char *conninfo);

/* pgtest_new_migrated_database(tag), then the example tool's own table
 * (idem_example.support_tasks, tools/example), on which PGTEST_APP may write, under Citus
 * distributed by tenant: for tests
 * that run the example effect. Returns its conninfo (malloc'd, caller frees). */
char *pgtest_new_example_database(const char *tag);

/* The conninfo (without dbname) of the PgBouncer that `tools/with-postgres --pgbouncer`
 * started in transaction mode in front of the server (IDEM_PGBOUNCER), or NULL. */
const char *pgtest_pgbouncer(void);

/* Whether this executable runs its store tests through that PgBouncer (its meson test
 * sets IDEM_TEST_PGBOUNCER): the fixtures' pools then connect through it with
 * IDEM_POOLER_TRANSACTION. */
int pgtest_through_pgbouncer(void);

/* @conninfo (a database's, from pgtest_new_database()) reached through the PgBouncer
 * (malloc'd, caller frees). Fails the test when there is none. */
char *pgtest_pgbouncer_conninfo(const char *conninfo);

void pgtest_sleep_ms(long ms);

/* Timed tests leave room for a loaded machine (both cores busy, other work beside the
 * suite): whatever must happen before a deadline is given at least PGTEST_LOAD_SLACK_MS to
 * do it, and a wait that must end at a deadline may end up to pgtest_late_ms() after it
 * started. */
#define PGTEST_LOAD_SLACK_MS 2000

/* The latest a wait that should end @deadline_ms after it started may end on a loaded
 * machine: max(PGTEST_LOAD_SLACK_MS, the deadline) past the deadline. */
long pgtest_late_ms(long deadline_ms);

/* Connect or fail the test. */
PGconn *pgtest_connect(const char *conninfo);

/* Run SQL that must succeed (fails the test otherwise); returns the result, caller clears. */
PGresult *pgtest_exec(PGconn *conn, const char *sql);

/* @english, words of the server's a test looks for in a message, when the server speaks
 * English in the test's databases; "" (found in any message) when IDEM_TEST_LC_MESSAGES
 * makes it speak another language: then only codes, fields and idem's own words count. */
const char *pgtest_server_says(const char *english);

/* Run a query returning one integer in its first cell. */
long pgtest_scalar(PGconn *conn, const char *sql);

/* A new UUIDv7 whose embedded time is @conn's database's now() + @offset_s. */
void pgtest_uuid_v7_at(char out[37], PGconn *conn, long offset_s);

#endif
