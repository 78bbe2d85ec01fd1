/* Schema migrations through the library: up, status, plan, check, the lock, failures. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "idem/migrate.h"
#include "migratetest.h"
#include "pgtest.h"

/* Each test's database and connection, and the migration files it reads (the fixtures
 * below make them; migrate_fini() frees whatever was made). */
typedef struct migrate_fixture {
    char *conninfo;
    PGconn *conn;
    char *dir;  /* a scratch folder of migration files (dir_init) */
    char *data; /* a folder of tests/data (data_options()) */
    char *other_conninfo;
    PGconn *other; /* another database's connection (two_databases_init) */
} migrate_fixture;

static migrate_fixture fx;

/* An empty database. */
static void database_init(void)
{
    fx.conninfo = pgtest_new_database("mig");
    fx.conn = pgtest_connect(fx.conninfo);
}

/* A database with idem's schema (every embedded migration applied). */
static void migrated_init(void)
{
    fx.conninfo = pgtest_new_migrated_database("mig");
    fx.conn = pgtest_connect(fx.conninfo);
}

/* An empty database and a scratch folder for the test's migration files. */
static void dir_init(void)
{
    database_init();
    fx.dir = migratetest_make_dir();
}

/* Another empty database first (its lock then tends to come first in pg_locks), then the
 * test's own. */
static void two_databases_init(void)
{
    fx.other_conninfo = pgtest_new_database("mig_other");
    fx.other = pgtest_connect(fx.other_conninfo);
    database_init();
}

static void migrate_fini(void)
{
    if (fx.dir != NULL)
        migratetest_remove_dir(fx.dir);
    free(fx.data);
    PQfinish(fx.other);
    PQfinish(fx.conn);
    free(fx.other_conninfo);
    free(fx.conninfo);
}

TestSuite(migrate, .fini = migrate_fini);

/* Options that read the migrations of tests/data/<name>. */
static idem_migrate_options data_options(const char *name)
{
    fx.data = migratetest_data_dir(name);
    return migratetest_dir_options(fx.data);
}

/* Counts progress events. */
typedef struct events {
    int lock_waits, starting, applied, failed;
} events;

static void count_event(void *ctx, idem_migrate_event event, const idem_migration *m)
{
    events *e = ctx;

    e->lock_waits += event == IDEM_MIGRATE_LOCK_WAIT;
    e->starting += event == IDEM_MIGRATE_STARTING;
    e->applied += event == IDEM_MIGRATE_APPLIED;
    e->failed += event == IDEM_MIGRATE_FAILED;
}

/* The number of embedded migrations, from a fresh database's status. */
static size_t embedded_count(PGconn *conn)
{
    idem_migrate_list *list = NULL;
    size_t n;

    cr_assert_eq(idem_migrate_status(&list, conn, NULL, NULL), 0);
    n = idem_migrate_list_count(list);
    idem_migrate_list_free(list);
    return n;
}

Test(migrate, fresh_database_up_then_status_is_clean, .init = database_init)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *list = NULL;
    size_t n = embedded_count(fx.conn);

    cr_assert_gt(n, 0);
    cr_assert_eq(idem_migrate_up(fx.conn, 0, NULL, &err), 0, "%s", err.message);
    cr_assert_eq(idem_migrate_status(&list, fx.conn, NULL, &err), 0, "%s", err.message);
    cr_assert_eq(idem_migrate_list_count(list), n);
    cr_assert_eq(migratetest_count_state(list, IDEM_MIGRATION_APPLIED), n);
    cr_assert(idem_migrate_list_ledger_exists(list));
    cr_assert_eq(idem_migrate_list_at(list, n - 1)->version, idem_migrate_latest_version());
    cr_assert_eq(idem_migrate_check(fx.conn, &err), 0, "%s", err.message);
    cr_assert(migratetest_relation_exists(fx.conn, "idem.operations"));
    idem_migrate_list_free(list);
}

/* A version beyond the newest migration is refused, naming the newest, by up, plan and
 * baseline alike; nothing is applied or recorded. */
Test(migrate, to_version_beyond_the_newest_is_refused_and_changes_nothing, .init = database_init)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *list = NULL;
    int beyond = idem_migrate_latest_version() + 1;

    cr_assert_eq(idem_migrate_up(fx.conn, beyond, NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "to_version");
    cr_assert(strstr(err.message, "beyond the newest migration") != NULL, "%s", err.message);
    cr_assert_eq(idem_migrate_plan(&list, fx.conn, beyond, NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "to_version");
    cr_assert_eq(idem_migrate_baseline(fx.conn, beyond, NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "to_version");
    cr_assert_not(migratetest_relation_exists(fx.conn, "idem.schema_migrations"));
    cr_assert_eq(idem_migrate_up(fx.conn, beyond - 1, NULL, &err), 0, "%s", err.message);
}

Test(migrate, ledger_records_name_checksum_duration_and_role, .init = migrated_init)
{
    idem_migrate_list *list = NULL;
    const idem_migration *m;

    cr_assert_eq(idem_migrate_status(&list, fx.conn, NULL, NULL), 0);
    m = idem_migrate_list_at(list, 0);
    cr_assert_str_eq(m->name, "0001_operations.sql");
    cr_assert_str_eq(m->applied_name, m->name);
    cr_assert_eq(strlen(m->applied_checksum), 64);
    cr_assert_str_eq(m->applied_checksum, m->checksum);
    cr_assert_geq(m->duration_ms, 0);
    cr_assert_str_eq(m->applied_by, PQuser(fx.conn));
    cr_assert_eq(strlen(m->applied_at), 24, "applied_at: %s", m->applied_at);
    cr_assert_eq(pgtest_scalar(fx.conn, "SELECT count(*) FROM idem.schema_migrations WHERE "
                                        "octet_length(checksum) = 32 AND applied_at <= now()"),
                 (long)idem_migrate_list_count(list));
    idem_migrate_list_free(list);
}

Test(migrate, second_up_applies_nothing_and_changes_no_row, .init = migrated_init)
{
    idem_migrate_options o = IDEM_MIGRATE_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    events e = {0, 0, 0, 0};
    long before = pgtest_scalar(fx.conn, "SELECT count(*) FROM idem.schema_migrations");

    PQclear(pgtest_exec(fx.conn, "CREATE TEMP TABLE snap AS SELECT * FROM idem.schema_migrations"));
    o.progress = count_event;
    o.progress_ctx = &e;
    cr_assert_eq(idem_migrate_up(fx.conn, 0, &o, &err), 0, "%s", err.message);
    cr_assert_eq(e.starting + e.applied, 0);
    cr_assert_eq(migratetest_ledger_count(fx.conn), before);
    cr_assert_eq(pgtest_scalar(fx.conn,
                               "SELECT count(*) FROM (SELECT * FROM idem.schema_migrations "
                               "EXCEPT SELECT * FROM snap) changed"),
                 0);
}

/* A child process: apply the embedded migrations on its own connection, reporting its
 * progress events on fd ('W' lock wait, 'A' applied); exits 0 on success. */
static void child_progress(void *ctx, idem_migrate_event event, const idem_migration *m)
{
    int fd = *(int *)ctx;

    if (event == IDEM_MIGRATE_LOCK_WAIT && write(fd, "W", 1) != 1)
        _exit(90);
    if (event == IDEM_MIGRATE_APPLIED && write(fd, "A", 1) != 1)
        _exit(91);
}

static void child_up(const char *conninfo, int fd)
{
    PGconn *conn = PQconnectdb(conninfo);
    idem_migrate_options o = IDEM_MIGRATE_OPTIONS_INIT;
    int rc;

    o.progress = child_progress;
    o.progress_ctx = &fd;
    rc = idem_migrate_up(conn, 0, &o, NULL);
    PQfinish(conn);
    _exit(rc == 0 ? 0 : 100 - rc);
}

static int read_char(int fd)
{
    char c;

    return read(fd, &c, 1) == 1 ? c : -1;
}

Test(migrate, two_processes_at_once_exactly_one_applies_both_succeed, .init = database_init)
{
    PGconn *holder = fx.conn;
    int fds[2], status, waits = 0, applied = 0, c;
    pid_t pids[2];
    size_t n = embedded_count(holder);

    /* Both children must find the lock taken, so they really run at the same time. */
    PQclear(pgtest_exec(holder, "SELECT pg_advisory_lock(7594306392314963826)"));
    cr_assert_eq(IDEM_MIGRATE_LOCK_KEY, 7594306392314963826LL);
    cr_assert_eq(pipe(fds), 0);
    for (int i = 0; i < 2; i++) {
        pids[i] = fork();
        cr_assert_geq(pids[i], 0);
        if (pids[i] == 0) {
            close(fds[0]);
            child_up(fx.conninfo, fds[1]);
        }
    }
    close(fds[1]);
    while (waits < 2 && (c = read_char(fds[0])) != -1)
        waits += c == 'W';
    cr_assert_eq(waits, 2, "both children wait for the lock");
    PQclear(pgtest_exec(holder, "SELECT pg_advisory_unlock(7594306392314963826)"));
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(waitpid(pids[i], &status, 0), pids[i]);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: status %d", i, status);
    }
    while ((c = read_char(fds[0])) != -1)
        applied += c == 'A';
    close(fds[0]);
    cr_assert_eq(applied, (int)n, "each migration applied once in all: %d", applied);
    cr_assert_eq(migratetest_ledger_count(holder), (long)n);
    cr_assert_eq(
        pgtest_scalar(holder, "SELECT count(DISTINCT version) FROM idem.schema_migrations"),
        (long)n);
}

Test(migrate, lock_held_past_the_timeout_is_elocked_and_names_the_holder_in_this_database,
     .init = two_databases_init)
{
    PGconn *other = fx.other; /* the same key there is another lock */
    PGconn *holder = fx.conn, *conn = pgtest_connect(fx.conninfo);
    idem_migrate_options o = IDEM_MIGRATE_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char expected[64];

    PQclear(pgtest_exec(other, "SET application_name = 'elsewhere'"));
    PQclear(pgtest_exec(other, "SELECT pg_advisory_lock(7594306392314963826)"));
    PQclear(pgtest_exec(holder, "SET application_name = 'nightly-report'"));
    PQclear(pgtest_exec(holder, "SELECT pg_advisory_lock(7594306392314963826)"));
    o.lock_timeout_ms = 200;
    cr_assert_eq(idem_migrate_up(conn, 0, &o, &err), IDEM_ELOCKED);
    snprintf(expected, sizeof(expected), "held by pid %d (", PQbackendPID(holder));
    cr_assert_not_null(strstr(err.message, expected), "%s", err.message);
    cr_assert_not_null(strstr(err.message, "application \"nightly-report\""), "%s", err.message);
    cr_assert_null(strstr(err.message, "idem-migrate"), "%s", err.message);
    cr_assert_not(migratetest_relation_exists(conn, "idem.schema_migrations"));
    PQfinish(conn);
}

Test(migrate, failing_migration_rolls_back_completely_and_names_file_and_line,
     .init = database_init)
{
    idem_migrate_options o = data_options("migrations-syntax-error");
    idem_error err = IDEM_ERROR_INIT;
    events e = {0, 0, 0, 0};
    int rc;

    o.progress = count_event;
    o.progress_ctx = &e;
    rc = idem_migrate_up(fx.conn, 0, &o, &err);
    cr_assert_eq(rc, IDEM_EDB, "%s", idem_err_name(rc));
    cr_assert_eq(strncmp(err.message, "0002_broken.sql:7: ", 19), 0, "%s", err.message);
    cr_assert_str_eq(err.sqlstate, "42601");
    cr_assert_eq(e.applied, 1);
    cr_assert_eq(e.failed, 1);
    cr_assert_not(migratetest_relation_exists(fx.conn, "idem.half_done"));
    cr_assert_eq(pgtest_scalar(fx.conn, "SELECT count(*) FROM idem.base"), 0);
    cr_assert_eq(pgtest_scalar(fx.conn, "SELECT max(version) FROM idem.schema_migrations"), 1);
    cr_assert_eq(PQtransactionStatus(fx.conn), PQTRANS_IDLE);
}

Test(migrate, runtime_error_names_the_line_of_its_statement, .init = database_init)
{
    idem_migrate_options o = data_options("migrations-runtime-error");
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_migrate_up(fx.conn, 0, &o, &err), IDEM_EDB);
    cr_assert_eq(strncmp(err.message, "0001_duplicate.sql:6: ", 22), 0, "%s", err.message);
    cr_assert_str_eq(err.sqlstate, "23505");
    cr_assert_not(migratetest_relation_exists(fx.conn, "idem.dup"));
    cr_assert_eq(migratetest_ledger_count(fx.conn), 0);
}

Test(migrate, error_after_multibyte_text_names_the_right_line_whatever_the_client_encoding,
     .init = dir_init)
{
    idem_migrate_options o = migratetest_dir_options(fx.dir);
    idem_error err = IDEM_ERROR_INIT;

    /* 24 two-byte characters before the error: taken as a byte offset, the server's
     * character position would land 24 bytes short, on line 2. */
    migratetest_write_file(
        fx.dir, "0001_utf8.sql",
        "-- \xc3\xa9t\xc3\xa9\n"
        "SELECT '\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
        "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
        "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9' AS a,\n"
        "  nothere.x AS b,\n"
        "  1234567890123456789012345 AS c;\n");
    cr_assert_eq(PQsetClientEncoding(fx.conn, "LATIN1"), 0);
    cr_assert_eq(idem_migrate_up(fx.conn, 0, &o, &err), IDEM_EDB);
    cr_assert_eq(strncmp(err.message, "0001_utf8.sql:3: ", 17), 0, "%s", err.message);
    cr_assert_str_eq(PQparameterStatus(fx.conn, "client_encoding"), "LATIN1");
}

Test(migrate, transactional_file_with_commit_is_refused_before_it_runs, .init = database_init)
{
    idem_migrate_options o = data_options("migrations-commit");
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_migrate_up(fx.conn, 0, &o, &err), IDEM_EDB);
    cr_assert_eq(strncmp(err.message, "0001_commits.sql:3: ", 20), 0, "%s", err.message);
    cr_assert_not(migratetest_relation_exists(fx.conn, "idem.before_commit"));
    cr_assert_eq(migratetest_ledger_count(fx.conn), 0);
}

Test(migrate, no_transaction_file_runs_create_index_concurrently, .init = database_init)
{
    idem_migrate_options o = data_options("migrations-no-transaction");
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *list = NULL;

    cr_assert_eq(idem_migrate_up(fx.conn, 0, &o, &err), 0, "%s", err.message);
    cr_assert_eq(pgtest_scalar(fx.conn, "SELECT count(*) FROM pg_index WHERE indisvalid AND "
                                        "indexrelid IN ('idem.items_tenant_label'::regclass, "
                                        "'idem.items_tenant_label_desc'::regclass)"),
                 2);
    cr_assert_eq(migratetest_ledger_count(fx.conn), 2);
    cr_assert_eq(idem_migrate_status(&list, fx.conn, &o, &err), 0);
    cr_assert(idem_migrate_list_at(list, 1)->no_transaction);
    cr_assert_not(idem_migrate_list_at(list, 0)->no_transaction);
    cr_assert_eq(pgtest_scalar(fx.conn, "SELECT count(*) FROM pg_settings WHERE name = "
                                        "'search_path' AND setting = '\"$user\", public'"),
                 1, "the session's search_path is restored");
    idem_migrate_list_free(list);
}

Test(migrate, up_to_a_version_stops_there_and_plan_lists_the_rest_without_running_it,
     .init = database_init)
{
    idem_migrate_options o = data_options("migrations-three");
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *plan = NULL;

    cr_assert_eq(idem_migrate_up(fx.conn, 1, &o, &err), 0, "%s", err.message);
    cr_assert_eq(idem_migrate_plan(&plan, fx.conn, 0, &o, &err), 0, "%s", err.message);
    cr_assert_eq(idem_migrate_list_count(plan), 2);
    cr_assert_str_eq(idem_migrate_list_at(plan, 0)->name, "0002_two.sql");
    cr_assert_eq(idem_migrate_list_at(plan, 1)->state, IDEM_MIGRATION_PENDING);
    cr_assert_not_null(strstr(idem_migrate_list_at(plan, 1)->sql, "CREATE TABLE idem.three"));
    cr_assert_eq(migratetest_ledger_count(fx.conn), 1);
    cr_assert_not(migratetest_relation_exists(fx.conn, "idem.two"));
    cr_assert_not(migratetest_relation_exists(fx.conn, "idem.three"));
    idem_migrate_list_free(plan);
}

Test(migrate, plan_on_a_fresh_database_lists_everything_and_creates_nothing, .init = database_init)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *plan = NULL;

    cr_assert_eq(idem_migrate_plan(&plan, fx.conn, 0, NULL, &err), 0, "%s", err.message);
    cr_assert_gt(idem_migrate_list_count(plan), 0);
    cr_assert_eq(migratetest_count_state(plan, IDEM_MIGRATION_PENDING),
                 idem_migrate_list_count(plan));
    cr_assert_not(idem_migrate_list_ledger_exists(plan));
    cr_assert_eq(pgtest_scalar(fx.conn, "SELECT count(*) FROM pg_namespace WHERE nspname = 'idem'"),
                 0);
    idem_migrate_list_free(plan);
}

Test(migrate, edited_applied_file_is_drift_naming_it_and_up_refuses, .init = dir_init)
{
    idem_migrate_options o = migratetest_dir_options(fx.dir);
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *list = NULL;

    migratetest_write_file(fx.dir, "0001_first.sql",
                           "CREATE TABLE idem.first (id int PRIMARY KEY);\n");
    cr_assert_eq(idem_migrate_up(fx.conn, 0, &o, &err), 0, "%s", err.message);
    migratetest_write_file(fx.dir, "0001_first.sql",
                           "CREATE TABLE idem.first (id bigint PRIMARY KEY);\n");
    migratetest_write_file(fx.dir, "0002_second.sql",
                           "CREATE TABLE idem.second (id int PRIMARY KEY);\n");
    cr_assert_eq(idem_migrate_status(&list, fx.conn, &o, &err), 0);
    cr_assert_eq(idem_migrate_list_at(list, 0)->state, IDEM_MIGRATION_DRIFTED);
    cr_assert_str_neq(idem_migrate_list_at(list, 0)->checksum,
                      idem_migrate_list_at(list, 0)->applied_checksum);
    idem_migrate_list_free(list);
    list = NULL;
    cr_assert_eq(idem_migrate_plan(&list, fx.conn, 0, &o, &err), IDEM_ESCHEMA);
    cr_assert_null(list);
    cr_assert_eq(idem_migrate_up(fx.conn, 0, &o, &err), IDEM_ESCHEMA);
    cr_assert_not_null(strstr(err.message, "0001_first.sql"), "%s", err.message);
    cr_assert_not(migratetest_relation_exists(fx.conn, "idem.second"));
}

Test(migrate, check_names_a_drifted_embedded_migration, .init = migrated_init)
{
    idem_error err = IDEM_ERROR_INIT;

    PQclear(pgtest_exec(fx.conn, "UPDATE idem.schema_migrations SET checksum = "
                                 "sha256('something else') WHERE version = 1"));
    cr_assert_eq(idem_migrate_check(fx.conn, &err), IDEM_ESCHEMA);
    cr_assert_not_null(strstr(err.message, "0001_operations.sql"), "%s", err.message);
}

Test(migrate, check_names_pending_migrations, .init = database_init)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *list = NULL;
    const idem_migration *next;
    char pending[64];

    cr_assert_eq(idem_migrate_status(&list, fx.conn, NULL, NULL), 0);
    cr_assert_geq(idem_migrate_list_count(list), 2);
    next = idem_migrate_list_at(list, 1);
    cr_assert_eq(idem_migrate_up(fx.conn, idem_migrate_list_at(list, 0)->version, NULL, &err), 0,
                 "%s", err.message);
    cr_assert_eq(idem_migrate_check(fx.conn, &err), IDEM_ESCHEMA);
    snprintf(pending, sizeof(pending), "%zu migration%s pending", idem_migrate_list_count(list) - 1,
             idem_migrate_list_count(list) == 2 ? "" : "s");
    cr_assert_not_null(strstr(err.message, pending), "%s", err.message);
    cr_assert_not_null(strstr(err.message, next->name), "the first pending: %s", err.message);
    idem_migrate_list_free(list);
}

Test(migrate, check_on_an_empty_database_says_the_schema_is_missing, .init = database_init)
{
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_migrate_check(fx.conn, &err), IDEM_ESCHEMA);
    cr_assert_not_null(strstr(err.message, "not installed"), "%s", err.message);
}

Test(migrate, pending_file_older_than_an_applied_one_is_refused, .init = dir_init)
{
    idem_migrate_options o = migratetest_dir_options(fx.dir);
    idem_error err = IDEM_ERROR_INIT;

    migratetest_write_file(fx.dir, "0001_a.sql", "CREATE TABLE idem.a (id int PRIMARY KEY);\n");
    migratetest_write_file(fx.dir, "0003_c.sql", "CREATE TABLE idem.c (id int PRIMARY KEY);\n");
    cr_assert_eq(idem_migrate_up(fx.conn, 0, &o, &err), 0, "%s", err.message);
    migratetest_write_file(fx.dir, "0002_b.sql", "CREATE TABLE idem.b (id int PRIMARY KEY);\n");
    cr_assert_eq(idem_migrate_up(fx.conn, 0, &o, &err), IDEM_ESCHEMA);
    cr_assert_not_null(strstr(err.message, "0002_b.sql"), "%s", err.message);
    cr_assert_not(migratetest_relation_exists(fx.conn, "idem.b"));
}

Test(migrate, applied_version_without_a_file_is_unknown_and_tolerated, .init = dir_init)
{
    idem_migrate_options o = migratetest_dir_options(fx.dir);
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *list = NULL;

    migratetest_write_file(fx.dir, "0001_a.sql", "CREATE TABLE idem.a (id int PRIMARY KEY);\n");
    migratetest_write_file(fx.dir, "0002_b.sql", "CREATE TABLE idem.b (id int PRIMARY KEY);\n");
    cr_assert_eq(idem_migrate_up(fx.conn, 0, &o, &err), 0, "%s", err.message);
    migratetest_remove_file(fx.dir, "0002_b.sql");
    cr_assert_eq(idem_migrate_status(&list, fx.conn, &o, &err), 0);
    cr_assert_eq(idem_migrate_list_count(list), 2);
    cr_assert_eq(idem_migrate_list_at(list, 1)->state, IDEM_MIGRATION_UNKNOWN);
    cr_assert_str_eq(idem_migrate_list_at(list, 1)->name, "0002_b.sql");
    cr_assert_null(idem_migrate_list_at(list, 1)->sql);
    cr_assert_eq(idem_migrate_up(fx.conn, 0, &o, &err), 0, "%s", err.message);
    idem_migrate_list_free(list);
}

Test(migrate, gap_in_versions_is_accepted_and_applied_in_order, .init = dir_init)
{
    idem_migrate_options o = migratetest_dir_options(fx.dir);
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *list = NULL;

    migratetest_write_file(fx.dir, "0001_a.sql", "CREATE TABLE idem.a (id int PRIMARY KEY);\n");
    migratetest_write_file(fx.dir, "0003_c.sql",
                           "CREATE TABLE idem.c (id int REFERENCES idem.a);\n");
    cr_assert_eq(idem_migrate_up(fx.conn, 0, &o, &err), 0, "%s", err.message);
    cr_assert_eq(idem_migrate_status(&list, fx.conn, &o, &err), 0, "%s", err.message);
    cr_assert_eq(idem_migrate_list_count(list), 2);
    cr_assert_eq(migratetest_count_state(list, IDEM_MIGRATION_APPLIED), 2);
    cr_assert_eq(idem_migrate_list_at(list, 1)->version, 3);
    idem_migrate_list_free(list);
    list = NULL;
    migratetest_write_file(fx.dir, "0004_d.sql", "CREATE TABLE idem.d (id int PRIMARY KEY);\n");
    cr_assert_eq(idem_migrate_up(fx.conn, 0, &o, &err), 0, "%s", err.message);
    cr_assert_eq(migratetest_ledger_count(fx.conn), 3);
    cr_assert_eq(pgtest_scalar(fx.conn, "SELECT count(*) FROM idem.schema_migrations"
                                        " WHERE version IN (1, 3, 4)"),
                 3);
    cr_assert_eq(idem_migrate_plan(&list, fx.conn, 0, &o, &err), 0, "%s", err.message);
    cr_assert_eq(idem_migrate_list_count(list), 0);
    idem_migrate_list_free(list);
}

Test(migrate, embedded_migrations_create_no_table_of_the_example_tool, .init = migrated_init)
{
    cr_assert(migratetest_relation_exists(fx.conn, "idem.operations"));
    cr_assert_not(migratetest_relation_exists(fx.conn, "idem.support_tasks"));
    cr_assert_eq(
        pgtest_scalar(fx.conn, "SELECT count(*) FROM pg_namespace WHERE nspname = 'idem_example'"),
        0);
}

/* Databases migrated before the example tool left the embedded migrations have its 0002
 * in the ledger: an applied version the library no longer knows. */
Test(migrate, ledger_row_of_the_removed_example_migration_is_unknown_and_check_passes,
     .init = migrated_init)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *list = NULL;
    const idem_migration *m;

    PQclear(pgtest_exec(fx.conn, "INSERT INTO idem.schema_migrations (version, name, checksum,"
                                 " duration_ms) VALUES (2, '0002_example_support_tasks.sql',"
                                 " sha256('the old example migration'), 0)"));
    cr_assert_eq(idem_migrate_check(fx.conn, &err), 0, "%s", err.message);
    cr_assert_eq(idem_migrate_status(&list, fx.conn, NULL, &err), 0, "%s", err.message);
    m = idem_migrate_list_at(list, 1);
    cr_assert_not_null(m);
    cr_assert_eq(m->version, 2);
    cr_assert_eq(m->state, IDEM_MIGRATION_UNKNOWN);
    cr_assert_eq(idem_migrate_up(fx.conn, 0, NULL, &err), 0, "%s", err.message);
    idem_migrate_list_free(list);
}

Test(migrate, misnamed_file_in_dir_is_einval_naming_it_before_anything_is_written,
     .init = database_init)
{
    idem_migrate_options o = data_options("migrations-misnamed");
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_migrate_up(fx.conn, 0, &o, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "dir");
    cr_assert_not_null(strstr(err.message, "2_bad.sql"), "%s", err.message);
    cr_assert_not(migratetest_relation_exists(fx.conn, "idem.schema_migrations"));
}

Test(migrate, missing_dir_is_eio, .init = database_init)
{
    idem_migrate_options o = migratetest_dir_options("/nonexistent/idem-migrations");
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *list = NULL;

    cr_assert_eq(idem_migrate_status(&list, fx.conn, &o, &err), IDEM_EIO);
    cr_assert_null(list);
    cr_assert_not_null(strstr(err.message, "/nonexistent/idem-migrations"), "%s", err.message);
}

Test(migrate, dir_without_migration_files_is_einval_naming_it, .init = dir_init)
{
    idem_migrate_options o = migratetest_dir_options(fx.dir);
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *list = NULL;

    cr_assert_eq(idem_migrate_status(&list, fx.conn, &o, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "dir");
    cr_assert_not_null(strstr(err.message, fx.dir), "%s", err.message);
    migratetest_write_file(fx.dir, "README", "notes, not migrations\n");
    cr_assert_eq(idem_migrate_up(fx.conn, 0, &o, &err), IDEM_EINVAL);
    cr_assert_not_null(strstr(err.message, "no migration files"), "%s", err.message);
    cr_assert_null(list);
    cr_assert_not(migratetest_relation_exists(fx.conn, "idem.schema_migrations"));
}

Test(migrate, byte_order_mark_is_skipped_and_the_checksum_covers_the_exact_bytes, .init = dir_init)
{
    static const char text[] = "\xEF\xBB\xBF-- idem:no-transaction\n"
                               "CREATE TABLE idem.bom (id int PRIMARY KEY);\n";
    idem_migrate_options o = migratetest_dir_options(fx.dir);
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *list = NULL;
    const char *values[1] = {text};
    const int lengths[1] = {(int)sizeof(text) - 1}, formats[1] = {1};
    PGresult *res;

    migratetest_write_file(fx.dir, "0001_bom.sql", text);
    cr_assert_eq(idem_migrate_up(fx.conn, 0, &o, &err), 0, "%s", err.message);
    cr_assert(migratetest_relation_exists(fx.conn, "idem.bom"));
    cr_assert_eq(idem_migrate_status(&list, fx.conn, &o, &err), 0, "%s", err.message);
    cr_assert_eq(idem_migrate_list_at(list, 0)->state, IDEM_MIGRATION_APPLIED);
    cr_assert(idem_migrate_list_at(list, 0)->no_transaction, "the marker after the BOM counts");
    res = PQexecParams(fx.conn,
                       "SELECT checksum = sha256($1::bytea) FROM idem.schema_migrations"
                       " WHERE version = 1",
                       1, NULL, values, lengths, formats, 0);
    cr_assert_str_eq(PQgetvalue(res, 0, 0), "t",
                     "the ledger's checksum is the file's, BOM included");
    PQclear(res);
    idem_migrate_list_free(list);
}

Test(migrate, connection_inside_a_transaction_is_refused, .init = database_init)
{
    idem_error err = IDEM_ERROR_INIT;

    PQclear(pgtest_exec(fx.conn, "BEGIN"));
    cr_assert_eq(idem_migrate_up(fx.conn, 0, NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "conn");
    PQclear(pgtest_exec(fx.conn, "ROLLBACK"));
    cr_assert_not(migratetest_relation_exists(fx.conn, "idem.schema_migrations"));
}

Test(migrate, bad_arguments_are_einval_naming_the_field)
{
    idem_migrate_options o = IDEM_MIGRATE_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *list = NULL;

    cr_assert_eq(idem_migrate_up(NULL, 0, NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "conn");
    cr_assert_eq(idem_migrate_check(NULL, &err), IDEM_EINVAL);
    o.version = 99;
    cr_assert_eq(idem_migrate_status(&list, NULL, &o, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "opts.version");
    cr_assert_eq(idem_migrate_plan(&list, NULL, -1, NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "to_version");
    cr_assert_null(list);
    cr_assert_eq(idem_migrate_list_count(NULL), 0);
    cr_assert_null(idem_migrate_list_at(NULL, 0));
    idem_migrate_list_free(NULL);
}
