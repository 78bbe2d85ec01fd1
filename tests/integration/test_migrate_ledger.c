/* A ledger that lost what it records (the table dropped, a row deleted) while idem's
 * objects remain: status shows it, up refuses without running anything, baseline records
 * what exists. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/migrate.h"
#include "migratetest.h"
#include "pgtest.h"

typedef struct ledger_fixture {
    char *conninfo;
    PGconn *conn;
    char *dir; /* a scratch folder, when the test makes one */
} ledger_fixture;

static ledger_fixture fx;

static void ledger_init(void)
{
    fx.conninfo = pgtest_new_database("mig_ledger_lost");
    fx.conn = pgtest_connect(fx.conninfo);
    fx.dir = NULL;
}

static void ledger_fini(void)
{
    if (fx.dir != NULL)
        migratetest_remove_dir(fx.dir);
    PQfinish(fx.conn);
    free(fx.conninfo);
}

TestSuite(migrate_ledger, .init = ledger_init, .fini = ledger_fini);

static void exec(const char *sql)
{
    PQclear(pgtest_exec(fx.conn, sql));
}

static void up_or_fail(const idem_migrate_options *o)
{
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_migrate_up(fx.conn, 0, o, &err), 0, "%s", err.message);
}

static idem_migrate_list *status_or_fail(const idem_migrate_options *o)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *list = NULL;

    cr_assert_eq(idem_migrate_status(&list, fx.conn, o, &err), 0, "%s", err.message);
    return list;
}

static int ledger_exists(void)
{
    return migratetest_relation_exists(fx.conn, "idem.schema_migrations");
}

/* 0009 and 0015 only grant (the roles may read the ledger; the operator may record the
 * providers' answers), 0016 only replaces a function's body: running them again is
 * harmless, so each stays pending when its ledger row is lost, and up runs it again. 0018
 * is the newest migration that creates something. */
#define GRANT_ONLY_VERSION      9
#define GRANT_ONLY_VERSION_2    15
#define REPLACE_ONLY_VERSION    16
#define NEWEST_CREATING_VERSION 18
#define STR_(x)                 #x
#define STR(x)                  STR_(x)

Test(migrate_ledger, dropped_ledger_is_reported_and_up_refuses_without_running_anything)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *list = NULL;
    char to[32];

    up_or_fail(NULL);
    exec("DROP TABLE idem.schema_migrations");
    list = status_or_fail(NULL);
    cr_assert_not(idem_migrate_list_ledger_exists(list));
    cr_assert(idem_migrate_list_ledger_incomplete(list));
    for (size_t i = 0; i < idem_migrate_list_count(list); i++) {
        const idem_migration *m = idem_migrate_list_at(list, i);
        cr_assert_eq(m->state,
                     m->version == GRANT_ONLY_VERSION || m->version == GRANT_ONLY_VERSION_2 ||
                             m->version == REPLACE_ONLY_VERSION
                         ? IDEM_MIGRATION_PENDING
                         : IDEM_MIGRATION_UNRECORDED,
                     "%s: %s", m->name, idem_migrate_state_name(m->state));
    }
    idem_migrate_list_free(list);
    list = NULL;
    snprintf(to, sizeof(to), "baseline --to %d", NEWEST_CREATING_VERSION);
    cr_assert_eq(idem_migrate_plan(&list, fx.conn, 0, NULL, &err), IDEM_ESCHEMA);
    cr_assert_null(list);
    cr_assert_not_null(strstr(err.message, "idem.schema_migrations is missing"), "%s", err.message);
    cr_assert_not_null(strstr(err.message, "schema idem holds"), "%s", err.message);
    cr_assert_not_null(strstr(err.message, to), "%s", err.message);
    cr_assert_eq(idem_migrate_up(fx.conn, 0, NULL, &err), IDEM_ESCHEMA);
    cr_assert_not_null(strstr(err.message, to), "%s", err.message);
    cr_assert_not(ledger_exists(), "up created the ledger in the half-state");
    cr_assert_eq(idem_migrate_check(fx.conn, &err), IDEM_ESCHEMA);
    cr_assert_not_null(strstr(err.message, "missing"), "%s", err.message);
}

Test(migrate_ledger, deleted_ledger_row_is_unrecorded_and_up_refuses_naming_it)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *list = NULL;
    const idem_migration *last = NULL;
    long rows;

    up_or_fail(NULL);
    exec("DELETE FROM idem.schema_migrations WHERE version = " STR(NEWEST_CREATING_VERSION));
    rows = migratetest_ledger_count(fx.conn);
    list = status_or_fail(NULL);
    for (size_t i = 0; i < idem_migrate_list_count(list); i++) {
        const idem_migration *m = idem_migrate_list_at(list, i);
        cr_assert_eq(m->state,
                     m->version == NEWEST_CREATING_VERSION ? IDEM_MIGRATION_UNRECORDED
                                                           : IDEM_MIGRATION_APPLIED,
                     "%s: %s", m->name, idem_migrate_state_name(m->state));
        if (m->version == NEWEST_CREATING_VERSION)
            last = m;
    }
    cr_assert_str_eq(idem_migrate_state_name(last->state), "unrecorded");
    cr_assert(idem_migrate_list_ledger_incomplete(list));
    cr_assert_eq(idem_migrate_up(fx.conn, 0, NULL, &err), IDEM_ESCHEMA);
    cr_assert_not_null(strstr(err.message, last->name), "%s", err.message);
    cr_assert_not_null(strstr(err.message, "not recorded"), "%s", err.message);
    cr_assert_eq(migratetest_ledger_count(fx.conn), rows);
    cr_assert_eq(idem_migrate_check(fx.conn, &err), IDEM_ESCHEMA);
    cr_assert_not_null(strstr(err.message, last->name), "%s", err.message);
    idem_migrate_list_free(list);
}

Test(migrate_ledger, lost_row_of_a_grant_only_migration_is_pending_and_up_runs_it_again)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *list = NULL;
    long rows;
    size_t later;

    /* The schema as a version whose newest migration was the grant-only one left it. */
    cr_assert_eq(idem_migrate_up(fx.conn, GRANT_ONLY_VERSION, NULL, &err), 0, "%s", err.message);
    rows = migratetest_ledger_count(fx.conn);
    exec("DELETE FROM idem.schema_migrations WHERE version = " STR(GRANT_ONLY_VERSION));
    list = status_or_fail(NULL);
    later = idem_migrate_list_count(list) - (size_t)rows; /* newer migrations, never applied */
    cr_assert_not(idem_migrate_list_ledger_incomplete(list));
    cr_assert_eq(migratetest_count_state(list, IDEM_MIGRATION_PENDING), 1 + later);
    idem_migrate_list_free(list);
    cr_assert_eq(idem_migrate_check(fx.conn, &err), IDEM_ESCHEMA);
    up_or_fail(NULL);
    cr_assert_eq(migratetest_ledger_count(fx.conn), rows + (long)later);
    cr_assert_eq(idem_migrate_check(fx.conn, &err), 0, "%s", err.message);
}

Test(migrate_ledger, baseline_records_what_exists_without_running_it)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *list = NULL;
    size_t n;

    up_or_fail(NULL);
    exec("DROP TABLE idem.schema_migrations");
    cr_assert_eq(idem_migrate_baseline(fx.conn, idem_migrate_latest_version(), NULL, &err), 0, "%s",
                 err.message);
    list = status_or_fail(NULL);
    n = idem_migrate_list_count(list);
    cr_assert_eq(migratetest_count_state(list, IDEM_MIGRATION_APPLIED), n);
    cr_assert_not(idem_migrate_list_ledger_incomplete(list));
    cr_assert_eq(idem_migrate_list_at(list, 0)->duration_ms, 0);
    cr_assert_eq(idem_migrate_check(fx.conn, &err), 0, "%s", err.message);
    cr_assert_eq(idem_migrate_baseline(fx.conn, idem_migrate_latest_version(), NULL, &err), 0, "%s",
                 err.message);
    cr_assert_eq(migratetest_ledger_count(fx.conn), (long)n, "a second baseline records nothing");
    up_or_fail(NULL);
    idem_migrate_list_free(list);
}

Test(migrate_ledger, baseline_refuses_a_migration_whose_objects_are_missing_and_records_nothing)
{
    char *dir = migratetest_data_dir("migrations-three");
    idem_migrate_options o = migratetest_dir_options(dir);
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_migrate_up(fx.conn, 1, &o, &err), 0, "%s", err.message);
    exec("DROP TABLE idem.schema_migrations");
    cr_assert_eq(idem_migrate_baseline(fx.conn, 3, &o, &err), IDEM_ESCHEMA);
    cr_assert_not_null(strstr(err.message, "0002_two.sql is not applied"), "%s", err.message);
    cr_assert_not_null(strstr(err.message, "idem.two"), "%s", err.message);
    cr_assert_not_null(strstr(err.message, "baseline --to 1"), "%s", err.message);
    cr_assert_not(ledger_exists(), "a refused baseline created the ledger");
    cr_assert_eq(idem_migrate_baseline(fx.conn, 1, &o, &err), 0, "%s", err.message);
    up_or_fail(&o);
    cr_assert_eq(migratetest_ledger_count(fx.conn), 3);
    cr_assert(migratetest_relation_exists(fx.conn, "idem.three"));
    free(dir);
}

static void baseline_refused(const char *const *says, size_t n)
{
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_migrate_baseline(fx.conn, idem_migrate_latest_version(), NULL, &err),
                 IDEM_ESCHEMA, "%s", err.message);
    for (size_t i = 0; i < n; i++)
        cr_assert_not_null(strstr(err.message, says[i]), "no \"%s\" in: %s", says[i], err.message);
}

static void baseline_or_fail(void)
{
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_migrate_baseline(fx.conn, idem_migrate_latest_version(), NULL, &err), 0, "%s",
                 err.message);
    cr_assert_eq(idem_migrate_check(fx.conn, &err), 0, "%s", err.message);
}

/* Row-level security taken off a tenant table, then the ledger lost: recording 0007 would
 * silently drop the tenant-isolation guarantee. */
Test(migrate_ledger, baseline_refuses_a_tenant_table_without_row_level_security)
{
    static const char *const says[] = {
        "0007_row_security.sql is not applied",
        "idem.operations, whose tenants it isolates, has row-level security disabled and no "
        "policy tenant_isolation",
        "Nothing was recorded",
        "SELECT idem.isolate_tenants('idem.operations');",
    };

    up_or_fail(NULL);
    exec("DROP POLICY tenant_isolation ON idem.operations");
    exec("ALTER TABLE idem.operations DISABLE ROW LEVEL SECURITY");
    exec("DROP TABLE idem.schema_migrations");
    baseline_refused(says, sizeof(says) / sizeof(says[0]));
    cr_assert_not(ledger_exists(), "a refused baseline created the ledger");
    exec("SELECT idem.isolate_tenants('idem.operations')"); /* as the message says */
    baseline_or_fail();
}

Test(migrate_ledger, baseline_refuses_a_tenant_table_whose_row_level_security_is_not_forced)
{
    static const char *const says[] = {
        "0007_row_security.sql is not applied",
        "idem.outbox, whose tenants it isolates, has row-level security not forced.",
    };
    long rows;

    up_or_fail(NULL);
    exec("ALTER TABLE idem.outbox NO FORCE ROW LEVEL SECURITY");
    exec("DELETE FROM idem.schema_migrations WHERE version >= 7");
    rows = migratetest_ledger_count(fx.conn);
    baseline_refused(says, sizeof(says) / sizeof(says[0]));
    cr_assert_eq(migratetest_ledger_count(fx.conn), rows, "a refused baseline recorded rows");
    exec("ALTER TABLE idem.outbox FORCE ROW LEVEL SECURITY");
    baseline_or_fail();
}

/* 0009's grant is checked too; and a ledger that baseline creates again is readable by
 * idem's roles, as 0009 left the one it replaces. */
Test(migrate_ledger, baseline_checks_that_the_roles_may_read_the_ledger_and_keeps_it_so)
{
    static const char *const says[] = {
        "0009_ledger_read.sql is not applied",
        "role idem_app lacks SELECT on idem.schema_migrations",
        "GRANT SELECT ON idem.schema_migrations TO idem_app;",
    };
    char *as_app;
    PGconn *app;
    idem_error err = IDEM_ERROR_INIT;

    up_or_fail(NULL);
    pgtest_create_roles(fx.conn);
    exec("REVOKE SELECT ON idem.schema_migrations FROM idem_app");
    exec("DELETE FROM idem.schema_migrations WHERE version = " STR(GRANT_ONLY_VERSION));
    baseline_refused(says, sizeof(says) / sizeof(says[0]));
    exec("GRANT SELECT ON idem.schema_migrations TO idem_app");
    baseline_or_fail();
    exec("DROP TABLE idem.schema_migrations");
    baseline_or_fail();
    as_app = pgtest_as(fx.conninfo, PGTEST_APP);
    app = pgtest_connect(as_app);
    cr_assert_eq(idem_migrate_check(app, &err), 0, "%s", err.message);
    PQfinish(app);
    free(as_app);
}

Test(migrate_ledger, baseline_needs_a_version)
{
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_migrate_baseline(fx.conn, 0, NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "to_version");
    cr_assert_eq(idem_migrate_baseline(NULL, 1, NULL, &err), IDEM_EINVAL);
}

Test(migrate_ledger, pending_migration_whose_object_exists_fails_saying_its_ledger_row_may_be_lost)
{
    idem_migrate_options o;
    idem_error err = IDEM_ERROR_INIT;

    fx.dir = migratetest_make_dir();
    o = migratetest_dir_options(fx.dir);
    migratetest_write_file(fx.dir, "0001_a.sql", "CREATE TABLE idem.a (id int PRIMARY KEY);\n");
    up_or_fail(&o);
    /* b is not there, so 0002 does not look applied; c is, so it fails on it. */
    migratetest_write_file(fx.dir, "0002_bc.sql",
                           "CREATE TABLE idem.b (id int PRIMARY KEY);\n"
                           "CREATE TABLE idem.c (id int PRIMARY KEY);\n");
    exec("CREATE TABLE idem.c (id int PRIMARY KEY)");
    cr_assert_eq(idem_migrate_up(fx.conn, 0, &o, &err), IDEM_EDB, "%s", err.message);
    cr_assert_str_eq(err.sqlstate, "42P07");
    cr_assert_eq(strncmp(err.message, "0002_bc.sql:2: ", 15), 0, "%s", err.message);
    cr_assert_not_null(strstr(err.message, "does not record 0002_bc.sql"), "%s", err.message);
    cr_assert_not_null(strstr(err.message, "baseline --to 2"), "%s", err.message);
    cr_assert_not(migratetest_relation_exists(fx.conn, "idem.b"));
}

Test(migrate_ledger, migration_of_if_not_exists_statements_stays_pending_when_its_objects_exist)
{
    char *dir = migratetest_data_dir("migrations-no-transaction");
    idem_migrate_options o = migratetest_dir_options(dir);
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *list = NULL;

    cr_assert_eq(idem_migrate_up(fx.conn, 1, &o, &err), 0, "%s", err.message);
    exec("CREATE INDEX items_tenant_label ON idem.items (tenant, label)");
    exec("CREATE INDEX items_tenant_label_desc ON idem.items (tenant, label DESC)");
    list = status_or_fail(&o);
    cr_assert_eq(idem_migrate_list_at(list, 1)->state, IDEM_MIGRATION_PENDING);
    cr_assert_not(idem_migrate_list_ledger_incomplete(list));
    up_or_fail(&o);
    idem_migrate_list_free(list);
    free(dir);
}
