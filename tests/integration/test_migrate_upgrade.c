/* Upgrading a schema from each earlier version. Under Citus (tools/run test --citus) the
 * schema is distributed at that version first, as a deployment that ran `idem-migrate
 * distribute` then and upgrades now: the migrations after it must apply to distributed
 * tables (Citus takes some ALTER TABLE actions only one at a time). Then the upgraded
 * schema is distributed again, as README says to after an upgrade, and serves calls: a
 * local effect and its replay, an external effect through its lease. On plain PostgreSQL
 * the same upgrades, without the distribution. Every migration found is covered: the
 * versions come from the embedded files. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>

#include "migrate_internal.h"
#include "migratetest.h"
#include "storetest.h"

#define MAX_VERSIONS 256

/* Each embedded version but the newest: the versions a schema can be upgraded from. */
ParameterizedTestParameters(migrate_upgrade, schema_of_each_earlier_version_upgrades_and_serves)
{
    static int versions[MAX_VERSIONS];
    idem__migration_set set = {NULL, 0};
    idem_error err = IDEM_ERROR_INIT;
    size_t n = 0;

    if (idem__migration_set_load(&set, NULL, &err) != 0)
        cr_log_error("loading the embedded migrations: %s", err.message);
    for (size_t i = 0; i + 1 < set.count && n < MAX_VERSIONS; i++)
        versions[n++] = set.files[i].version;
    idem__migration_set_clear(&set);
    return cr_make_param_array(int, versions, n);
}

static void up(const char *conninfo, int to_version)
{
    PGconn *conn = pgtest_connect(conninfo);
    idem_error err = IDEM_ERROR_INIT;
    int rc = idem_migrate_up(conn, to_version, NULL, &err);

    cr_assert_eq(rc, 0, "up --to %d: %s: %s", to_version, idem_err_name(rc), err.message);
    if (to_version == 0) {
        rc = idem_migrate_check(conn, &err);
        cr_assert_eq(rc, 0, "check after the upgrade: %s: %s", idem_err_name(rc), err.message);
        pgtest_create_roles(conn);
    }
    PQfinish(conn);
}

/* A local effect creates, and its retry replays. */
static void local_call(void)
{
    idem_outcome out = IDEM_OUTCOME_INIT, again = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(storetest_create_task(&out, "acme", "op-1", "{\"subject\":\"s\"}", &err), 0, "%s",
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(storetest_create_task(&again, "acme", "op-1", "{\"subject\":\"s\"}", &err), 0,
                 "%s", err.message);
    cr_assert_eq(again.status, IDEM_STATUS_REPLAYED);
    cr_assert_str_eq(again.receipt, out.receipt);
    cr_assert_eq(storetest_tasks(), 1);
    idem_outcome_clear(&out);
    idem_outcome_clear(&again);
}

/* A declared effect creates, marks its record's receipt canonical (0013), and its retry
 * replays the same bytes; the record keeps the server's text, which here differs from the
 * canonical form only by its blanks. (On Citus the task ID is no small number.) */
static void declared_call(void)
{
    idem_declared *d = storetest_declared_task();
    idem_outcome out = IDEM_OUTCOME_INIT, again = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = storetest_request("acme", "op-3", "{\"subject\":\"d\"}");
    char *stored = NULL, *to = NULL;

    req.attempt = 1;
    cr_assert_eq(idem_store_execute_declared(&out, fx.store, &req, d, &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    req.attempt = 2;
    cr_assert_eq(idem_store_execute_declared(&again, fx.store, &req, d, &err), 0, "%s",
                 err.message);
    cr_assert_eq(again.status, IDEM_STATUS_REPLAYED);
    cr_assert_str_eq(again.receipt, out.receipt);
    stored = storetest_receipt("acme", "op-3");
    cr_assert_not_null(strstr(stored, "\"status\" : \"created\""), "%s", stored);
    to = stored;
    for (const char *from = stored; *from != '\0'; from++)
        if (*from != ' ')
            *to++ = *from;
    *to = '\0';
    cr_assert_str_eq(out.receipt, stored, "canonical: the stored text without its blanks");
    cr_assert_eq(pgtest_scalar(fx.check, "SELECT count(*) FROM idem.operations"
                                         " WHERE operation_id = 'op-3' AND receipt_canonical"
                                         " AND idem.receipt_form(receipt_canonical) = 'canonical'"),
                 1);
    cr_assert_eq(pgtest_scalar(fx.check,
                               "SELECT count(*) FROM idem.operations"
                               " WHERE operation_id = 'op-1' AND receipt_canonical IS NULL"
                               " AND idem.receipt_form(receipt_canonical) = 'as stored'"),
                 1, "the callback's record goes out as stored");
    free(stored);
    idem_outcome_clear(&out);
    idem_outcome_clear(&again);
    idem_declared_free(d);
}

/* An external effect takes its lease, completes, and its retry replays. */
static void external_call(void)
{
    idem_external *ext = NULL;
    idem_external_attempt *a = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = storetest_request("acme", "op-2", "{\"to\":\"x\"}");
    json_t *response = json_pack("{s:s}", "message_id", "m-1");

    req.tool = "send_email";
    req.payload_version = 1;
    cr_assert_eq(idem_external_new(&ext, fx.store, NULL, &err), 0, "%s", err.message);
    cr_assert_eq(idem_external_begin(&a, &out, ext, &req, &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_IN_PROGRESS);
    cr_assert_eq(idem_external_complete(&out, a, "m-1", response, &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    idem_external_attempt_free(a);
    a = NULL;
    cr_assert_eq(idem_external_begin(&a, &out, ext, &req, &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_null(a);
    cr_assert_eq(pgtest_scalar(fx.check, "SELECT count(*) FROM idem.external_attempts"), 1);
    idem_outcome_clear(&out);
    json_decref(response);
    idem_external_free(ext);
}

ParameterizedTest(int *version, migrate_upgrade, schema_of_each_earlier_version_upgrades_and_serves,
                  .timeout = 300)
{
    fx.conninfo = pgtest_new_database("upgrade");
    up(fx.conninfo, *version);
    pgtest_distribute(fx.conninfo, NULL); /* under Citus; the schema of that version */
    up(fx.conninfo, 0);
    pgtest_distribute(fx.conninfo, NULL); /* the tables the upgrade added */
    pgtest_example_setup(fx.conninfo);
    fx.check = pgtest_connect(fx.conninfo);
    storetest_open(NULL, 2);
    local_call();
    declared_call();
    external_call();
    storetest_fini();
}

/* A database migrated up to @version (< the latest), with the roles and the example's table,
 * the store open on it: idem_migrate_check() refuses it, naming @pending (the next file) and
 * the fix. */
static void open_schema_at(const char *name, int version, const char *pending)
{
    idem_error err = IDEM_ERROR_INIT;
    PGconn *conn = NULL;

    fx.conninfo = pgtest_new_database(name);
    up(fx.conninfo, version);
    conn = pgtest_connect(fx.conninfo);
    pgtest_create_roles(conn);
    cr_assert_eq(idem_migrate_check(conn, &err), IDEM_ESCHEMA);
    cr_assert_not_null(strstr(err.message, pending), "%s", err.message);
    cr_assert_not_null(strstr(err.message, "run idem-migrate up"), "%s", err.message);
    PQfinish(conn);
    pgtest_distribute(fx.conninfo, NULL);
    pgtest_example_setup(fx.conninfo);
    fx.check = pgtest_connect(fx.conninfo);
    storetest_open(NULL, 2);
}

/* The schema upgraded to the latest version, and the store opened again. */
static void upgrade_and_reopen(void)
{
    storetest_close();
    up(fx.conninfo, 0);
    pgtest_distribute(fx.conninfo, NULL);
    storetest_open(NULL, 2);
}

/* Deploy order: idem-migrate up first, then the new binaries. This library reads and
 * writes receipt_canonical (migration 0013) in every call's statements: on a schema
 * before it, idem_migrate_check() refuses at start-up, and a call that is made all the
 * same ends misconfigured (IDEM_ESCHEMA, the server's words, run idem-migrate up), writing
 * nothing; once the schema is upgraded, the same call creates. */
Test(migrate_upgrade, a_schema_before_0013_is_refused_clearly_until_it_is_upgraded, .timeout = 300)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;

    open_schema_at("before13", 12, "0013_receipt_canonical.sql");
    for (unsigned int attempt = 1; attempt <= 2; attempt++) {
        idem_request req = storetest_request("acme", "op-1", "{\"subject\":\"s\"}");

        req.attempt = attempt; /* the claim, then the lookup */
        idem_outcome_clear(&out);
        cr_assert_eq(
            idem_store_execute(&out, fx.store, &req, example_create_support_task, NULL, &err),
            IDEM_ESCHEMA, "attempt %u: %s", attempt, err.message);
        cr_assert_eq(out.status, IDEM_STATUS_MISCONFIGURED);
        cr_assert_not_null(strstr(err.message, "receipt_canonical"), "%s", err.message);
        cr_assert_not_null(strstr(err.hint, "idem-migrate up"), "%s", err.hint);
    }
    cr_assert_eq(storetest_operations(), 0);
    cr_assert_eq(storetest_tasks(), 0);
    upgrade_and_reopen();
    local_call();
    declared_call();
    idem_outcome_clear(&out);
    storetest_fini();
}

/* A declared effect's statement calls idem.declared_outcome_marker() (migration 0018) when
 * it fails: on a schema at @version, without it, idem_migrate_check()
 * refuses (@pending), and a declared call made all the same ends misconfigured, naming the
 * function and the fix, with nothing written (the server refuses the statement before
 * running any of it); the callback path, which does not need it, still creates. Once
 * upgraded, the declared call creates and replays. */
static void declared_calls_refused_until_upgraded(const char *name, int version,
                                                  const char *pending)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_store_stats stats = IDEM_STORE_STATS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_declared *d = NULL;

    open_schema_at(name, version, pending);
    d = storetest_declared_task();
    for (unsigned int attempt = 1; attempt <= 2; attempt++) {
        idem_request req = storetest_request("acme", "op-9", "{\"subject\":\"s\"}");

        req.attempt = attempt;
        idem_outcome_clear(&out);
        cr_assert_eq(idem_store_execute_declared(&out, fx.store, &req, d, &err), IDEM_ESCHEMA,
                     "attempt %u: %s", attempt, err.message);
        cr_assert_eq(out.status, IDEM_STATUS_MISCONFIGURED);
        cr_assert_not_null(strstr(err.message, "declared_outcome_marker"), "%s", err.message);
        cr_assert_not_null(strstr(err.message, "run `idem-migrate up`"), "%s", err.message);
    }
    cr_assert_eq(storetest_operations(), 0);
    cr_assert_eq(storetest_tasks(), 0);
    cr_assert_eq(idem_store_stats_get(&stats, fx.store), 0);
    cr_assert_eq(stats.misconfigured, 2, "each call counted once");
    cr_assert_eq(stats.effect_failures, 0);
    local_call();
    idem_declared_free(d);
    upgrade_and_reopen();
    declared_call();
    idem_outcome_clear(&out);
    storetest_fini();
}

Test(migrate_upgrade, a_schema_before_0014_refuses_declared_calls_clearly_until_it_is_upgraded,
     .timeout = 300)
{
    declared_calls_refused_until_upgraded("before14", 13, "0014_declared_outcome.sql");
}

/* At 0017 idem.declared_outcome() of 0014 and 0016 is there, but not the function this library's
 * statement calls, which reads the record's marker. */
Test(migrate_upgrade, a_schema_before_0018_refuses_declared_calls_clearly_until_it_is_upgraded,
     .timeout = 300)
{
    declared_calls_refused_until_upgraded("before18", 17, "0018_declared_outcome_marker.sql");
}

static const char TABLE_SQL[] =
    "CREATE TABLE t (tenant text NOT NULL, n int, CONSTRAINT t_pkey PRIMARY KEY (tenant));\n";
/* A syntax error on line 6, in the action that starts on line 5. */
static const char BROKEN_SQL[] = "-- two actions that apply, and a third that fails\n"
                                 "ALTER TABLE t\n"
                                 "    ADD COLUMN a int,\n"
                                 "    ADD CONSTRAINT a_positive CHECK (a > 0),\n"
                                 "    ADD CONSTRAINT b_positive\n"
                                 "        CHECK (a > > 0);\n";
static const char FIXED_SQL[] = "ALTER TABLE t ADD COLUMN a int, ADD CONSTRAINT a_positive CHECK "
                                "(a > 0);\n";

/* An ALTER TABLE of several actions on a table that is distributed (under Citus; a plain
 * table otherwise) applies whole, or not at all: a failing action names its own line, and
 * the actions before it are rolled back with the file. */
Test(migrate_upgrade, alter_table_of_several_actions_applies_whole_or_names_the_failing_line,
     .timeout = 120)
{
    char *ci = pgtest_new_database("alter");
    PGconn *conn = pgtest_connect(ci);
    char *dir = migratetest_make_dir();
    idem_migrate_options o = migratetest_dir_options(dir);
    idem_error err = IDEM_ERROR_INIT;
    PGresult *res;

    migratetest_write_file(dir, "0001_t.sql", TABLE_SQL);
    cr_assert_eq(idem_migrate_up(conn, 0, &o, &err), 0, "%s", err.message);
    if (pgtest_citus_workers() != NULL)
        PQclear(pgtest_exec(conn, "SELECT create_distributed_table('idem.t', 'tenant')"));
    migratetest_write_file(dir, "0002_alter.sql", BROKEN_SQL);
    cr_assert_eq(idem_migrate_up(conn, 0, &o, &err), IDEM_EDB, "%s", err.message);
    cr_assert_eq(strncmp(err.message, "0002_alter.sql:6: ", 18), 0, "%s", err.message);
    cr_assert_str_eq(err.sqlstate, "42601");
    cr_assert_eq(pgtest_scalar(conn, "SELECT count(*) FROM pg_attribute WHERE attrelid = "
                                     "'idem.t'::regclass AND attname = 'a'"),
                 0, "the actions before the failing one are rolled back");
    migratetest_write_file(dir, "0002_alter.sql", FIXED_SQL);
    cr_assert_eq(idem_migrate_up(conn, 0, &o, &err), 0, "%s", err.message);
    res = PQexec(conn, "INSERT INTO idem.t (tenant, a) VALUES ('acme', -1)");
    cr_assert_str_eq(PQresultErrorField(res, PG_DIAG_SQLSTATE), "23514",
                     "the check reaches the rows: %s", PQresultErrorMessage(res));
    PQclear(res);
    migratetest_remove_dir(dir);
    PQfinish(conn);
    free(ci);
}
