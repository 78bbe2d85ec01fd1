/* Tenant isolation enforced by PostgreSQL (migration 0007): row-level security on every
 * table of idem's that holds tenant data, and the roles idem_app, idem_sweeper and
 * idem_operator. Each test connects as the tests' login roles (pgtest.h), never as the
 * cluster's superuser, which bypasses the policies. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/sys/reconcile.h"
#include "idem/sys/sweep.h"

#include "intenttest.h"
#include "storetest.h"

/* A transaction of tenant A's, as migrations/README.md, "Security", says to open one: SET LOCAL
 * behind Citus's propagation setting, so that on Citus the workers see the tenant too. One
 * statement at a time: sent as one string, they make Citus 13's workers warn "there is
 * already a transaction in progress". */
static void begin_as_a(PGconn *conn)
{
    PQclear(pgtest_exec(conn, "BEGIN"));
    PQclear(pgtest_exec(conn, "SET LOCAL citus.propagate_set_commands = 'local'"));
    PQclear(pgtest_exec(conn, "SET LOCAL idem.tenant = 'A'"));
}

TestSuite(security, .init = storetest_init, .fini = storetest_fini, .timeout = 240);

/* Rows of every kind, in tenants A and B: a record made through the store (as the
 * application role), and beside it an attempt, an outbox item, a reconciliation item and a
 * provider's answer. */
static void seed_two_tenants(void)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    static const char *const tenants[] = {"A", "B"};

    storetest_open(NULL, 2);
    for (size_t i = 0; i < 2; i++) {
        char sql[1280];

        cr_assert_eq(storetest_create_task(&out, tenants[i], "op-1", "{\"subject\":\"s\"}", NULL),
                     0);
        idem_outcome_clear(&out);
        idem_intent_free(intenttest_approve(fx.store, tenants[i], "msg-1", EXAMPLE_TOOL_NAME,
                                            "{\"subject\":\"s\"}"));
        snprintf(sql, sizeof(sql),
                 "INSERT INTO idem.external_attempts (tenant, operation_id, attempt)"
                 " VALUES ('%s', 'op-1', 1);"
                 "INSERT INTO idem.outbox (tenant, operation_id, tool, payload_version,"
                 " arguments, max_attempts) VALUES ('%s', 'op-1', 'send', 1, '{}', 3);"
                 "INSERT INTO idem.reconciliation_items (tenant, operation_id, kind, tool,"
                 " fingerprint) VALUES ('%s', 'op-1', 'expired', 'send', '\\x00');"
                 "INSERT INTO idem.external_probes (tenant, operation_id, probe_id, took_ms,"
                 " asked_by, resolver, answer, changed) VALUES ('%s', 'op-1',"
                 " gen_random_uuid(), 0, 'probe', 'r', 'unknown', false)",
                 tenants[i], tenants[i], tenants[i], tenants[i]);
        PQclear(pgtest_exec(fx.check, sql));
    }
}

/* The tables of schema idem with a tenant column, from the catalog (intents included
 * when they exist). */
static PGresult *tenant_tables(void)
{
    PGresult *res =
        pgtest_exec(fx.check, "SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c"
                              " JOIN pg_namespace n ON n.oid = c.relnamespace"
                              " JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant'"
                              " WHERE n.nspname = 'idem' AND c.relkind IN ('r', 'p') ORDER BY 1");

    cr_assert_geq(PQntuples(res), 4, "operations, reconciliation items, attempts, outbox");
    return res;
}

/* Rows of @table that @conn sees, with @where ("" or " WHERE ..."). */
static long count_rows(PGconn *conn, const char *table, const char *where)
{
    char sql[256];

    snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s%s", table, where);
    return pgtest_scalar(conn, sql);
}

/* Run @sql, which must fail with @sqlstate. */
static void refused(PGconn *conn, const char *sql, const char *sqlstate)
{
    PGresult *res = PQexec(conn, sql);
    const char *got = PQresultErrorField(res, PG_DIAG_SQLSTATE);

    cr_assert(PQresultStatus(res) == PGRES_FATAL_ERROR, "%s: succeeded", sql);
    cr_assert_str_eq(got != NULL ? got : "", sqlstate, "%s: %s", sql, PQresultErrorMessage(res));
    PQclear(res);
    if (PQtransactionStatus(conn) != PQTRANS_IDLE)
        PQclear(PQexec(conn, "ROLLBACK"));
}

Test(security, app_role_without_a_tenant_sees_no_row_of_any_tenant_table)
{
    seed_two_tenants();
    PGresult *tables = tenant_tables();
    PGconn *app = pgtest_connect_as(fx.conninfo, PGTEST_APP);

    for (int i = 0; i < PQntuples(tables); i++) {
        const char *t = PQgetvalue(tables, i, 0);

        cr_assert_eq(count_rows(fx.check, t, ""), 2, "%s: seeded", t);
        cr_assert_eq(count_rows(app, t, ""), 0, "%s: no tenant set", t);
    }
    /* A tenant set in an earlier transaction is gone with it. */
    begin_as_a(app);
    cr_assert_eq(pgtest_scalar(app, "SELECT count(*) FROM idem.operations"), 1);
    PQclear(pgtest_exec(app, "COMMIT"));
    cr_assert_eq(pgtest_scalar(app, "SELECT count(*) FROM idem.operations"), 0);
    /* The session cannot turn the policies off. */
    PQclear(pgtest_exec(app, "SET row_security = off"));
    refused(app, "SELECT count(*) FROM idem.operations", "42501");
    PQclear(tables);
    PQfinish(app);
}

Test(security, app_role_in_tenant_a_cannot_read_change_or_delete_tenant_b_rows)
{
    seed_two_tenants();
    PGresult *tables = tenant_tables();
    PGconn *app = pgtest_connect_as(fx.conninfo, PGTEST_APP);

    for (int i = 0; i < PQntuples(tables); i++) {
        const char *t = PQgetvalue(tables, i, 0);
        char sql[256];
        PGresult *res;

        begin_as_a(app);
        cr_assert_eq(count_rows(app, t, " WHERE tenant = \'A\'"), 1, "%s", t);
        cr_assert_eq(count_rows(app, t, " WHERE tenant = \'B\'"), 0, "%s", t);
        snprintf(sql, sizeof(sql), "UPDATE %s SET tenant = tenant WHERE tenant = 'B'", t);
        res = pgtest_exec(app, sql);
        cr_assert_str_eq(PQcmdTuples(res), "0", "%s: B's rows updated", t);
        PQclear(res);
        snprintf(sql, sizeof(sql), "DELETE FROM %s WHERE tenant = 'B'", t);
        res = pgtest_exec(app, sql);
        cr_assert_str_eq(PQcmdTuples(res), "0", "%s: B's rows deleted", t);
        PQclear(res);
        /* Nor may A's row be moved into B: the policy refuses it, and on Citus, before it,
         * the rule that a row's distribution column never changes. */
        snprintf(sql, sizeof(sql), "UPDATE %s SET tenant = 'B' WHERE tenant = 'A'", t);
        refused(app, sql, pgtest_citus_workers() != NULL ? "0A000" : "42501");
        cr_assert_eq(count_rows(fx.check, t, " WHERE tenant = \'B\'"), 1, "%s: B's row is intact",
                     t);
    }
    PQclear(tables);
    PQfinish(app);
}

Test(security, app_role_cannot_insert_a_row_for_another_tenant)
{
    seed_two_tenants();
    PGconn *app = pgtest_connect_as(fx.conninfo, PGTEST_APP);

    begin_as_a(app);
    refused(app,
            "INSERT INTO idem.operations (tenant, operation_id, tool, payload_version,"
            " fingerprint, state, claim_token, expires_at) VALUES ('B', 'op-x', 't', 1,"
            " decode(repeat('00', 32), 'hex'), 'pending', gen_random_uuid(), now())",
            "42501");
    begin_as_a(app);
    refused(app,
            "INSERT INTO idem.reconciliation_items (tenant, operation_id, kind, tool,"
            " fingerprint) VALUES ('B', 'op-x', 'expired', 't', '\\x00')",
            "42501");
    /* Without a tenant, not even a row of its own. */
    refused(app,
            "INSERT INTO idem.reconciliation_items (tenant, operation_id, kind, tool,"
            " fingerprint) VALUES ('A', 'op-x', 'expired', 't', '\\x00')",
            "42501");
    cr_assert_eq(pgtest_scalar(fx.check, "SELECT count(*) FROM idem.operations"), 2);
    cr_assert_eq(pgtest_scalar(fx.check, "SELECT count(*) FROM idem.reconciliation_items"), 2);
    PQfinish(app);
}

Test(security, app_role_cannot_change_the_schema)
{
    PGconn *app = pgtest_connect_as(fx.conninfo, PGTEST_APP);

    refused(app, "CREATE TABLE idem.mine (a int)", "42501");
    refused(app, "ALTER TABLE idem.operations DISABLE ROW LEVEL SECURITY", "42501");
    refused(app, "ALTER TABLE idem.operations NO FORCE ROW LEVEL SECURITY", "42501");
    refused(app, "DROP POLICY tenant_isolation ON idem.operations", "42501");
    refused(app, "CREATE POLICY everything ON idem.operations USING (true)", "42501");
    refused(app, "DROP TABLE idem.outbox", "42501");
    refused(app, "TRUNCATE idem.operations", "42501");
    refused(app, "SELECT idem.isolate_tenants('idem.operations')", "42501");
    PQfinish(app);
}

/* A server checks the schema at start-up (idem_migrate_check()), and idem-demo migrates
 * (idem_migrate_up(), nothing left to apply), as idem_app; idem-migrate status and verify
 * may run as the sweeper's or the operator's role. Each reads the ledger (0009), and may
 * not write it. */
Test(security, roles_read_the_ledger_to_check_the_schema_but_cannot_change_it)
{
    static const char *const roles[] = {PGTEST_APP, PGTEST_SWEEPER, PGTEST_OPERATOR};
    idem_error err = IDEM_ERROR_INIT;

    for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++) {
        PGconn *conn = pgtest_connect_as(fx.conninfo, roles[i]);

        cr_assert_eq(idem_migrate_check(conn, &err), 0, "%s: %s", roles[i], err.message);
        cr_assert_eq(idem_migrate_up(conn, 0, NULL, &err), 0, "%s: %s", roles[i], err.message);
        refused(conn, "DELETE FROM idem.schema_migrations", "42501");
        refused(conn, "UPDATE idem.schema_migrations SET duration_ms = 0", "42501");
        refused(conn,
                "INSERT INTO idem.schema_migrations (version, name, checksum, duration_ms)"
                " VALUES (9999, '9999_x.sql', sha256('x'), 0)",
                "42501");
        PQfinish(conn);
    }
}

/* Concurrent calls with one operation ID in two tenants. */
typedef struct racer {
    const char *tenant;
    const char *subject;
    int rc;
    idem_status status;
    char receipt[256];
} racer;

static void *race(void *arg)
{
    racer *r = arg;
    char args[64];
    idem_outcome out = IDEM_OUTCOME_INIT;

    snprintf(args, sizeof(args), "{\"subject\":\"%s\"}", r->subject);
    for (int tries = 0; tries < 1000; tries++) {
        idem_request req = storetest_request(r->tenant, "op-shared", args);

        req.attempt = 1;
        r->rc = idem_store_execute(&out, fx.store, &req, example_create_support_task, NULL, NULL);
        r->status = out.status;
        if (out.receipt != NULL)
            snprintf(r->receipt, sizeof(r->receipt), "%s", out.receipt);
        idem_outcome_clear(&out);
        if (r->rc != IDEM_EBUSY)
            break;
        pgtest_sleep_ms(5); /* another attempt holds the key: retry it, as a caller would */
    }
    return NULL;
}

Test(security, one_operation_id_in_two_tenants_stays_two_keys_under_concurrent_calls)
{
    enum { N = 8 };
    racer r[N];
    pthread_t t[N];
    int created[2] = {0, 0};

    storetest_open(NULL, N);
    for (int i = 0; i < N; i++) {
        r[i] = (racer){i % 2 ? "B" : "A", i % 2 ? "for B" : "for A", 0, 0, {0}};
        cr_assert_eq(pthread_create(&t[i], NULL, race, &r[i]), 0);
    }
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(r[i].rc, 0, "%s: %s", r[i].tenant, idem_err_name(r[i].rc));
        created[i % 2] += r[i].status == IDEM_STATUS_CREATED;
        /* Every caller of a tenant gets that tenant's receipt. */
        cr_assert_str_eq(r[i].receipt, r[i % 2].receipt);
    }
    cr_assert_eq(created[0], 1);
    cr_assert_eq(created[1], 1);
    cr_assert_str_neq(r[0].receipt, r[1].receipt);
    cr_assert_eq(pgtest_scalar(fx.check, "SELECT count(*) FROM idem_example.support_tasks"
                                         " WHERE tenant = 'A' AND subject = 'for A'"),
                 1);
    cr_assert_eq(pgtest_scalar(fx.check, "SELECT count(*) FROM idem_example.support_tasks"
                                         " WHERE tenant = 'B' AND subject = 'for B'"),
                 1);
    cr_assert_eq(storetest_tasks(), 2);
}

Test(security, sweeper_role_sweeps_every_tenant_but_inserts_nothing_and_reads_no_receipt)
{
    idem_sweep_result result = IDEM_SWEEP_RESULT_INIT;
    idem_error err = IDEM_ERROR_INIT;
    PGconn *sweeper;

    seed_two_tenants();
    PQclear(pgtest_exec(fx.check, "UPDATE idem.operations SET expires_at = now() - interval '1h',"
                                  " forget_at = now() + interval '1h'"));
    sweeper = pgtest_connect_as(fx.conninfo, PGTEST_SWEEPER);
    cr_assert_eq(idem_sweep_run(&result, sweeper, NULL, &err), 0, "%s", err.message);
    cr_assert_eq(result.expired, 2, "both tenants' records: %llu", result.expired);
    cr_assert_eq(result.late_retries, 2, "both tenants' items");
    cr_assert_eq(pgtest_scalar(fx.check, "SELECT count(*) FROM idem.operations"
                                         " WHERE state = 'expired' AND response IS NULL"),
                 2);
    refused(sweeper,
            "INSERT INTO idem.operations (tenant, operation_id, tool, payload_version,"
            " fingerprint, state, claim_token, expires_at) VALUES ('A', 'op-x', 't', 1,"
            " decode(repeat('00', 32), 'hex'), 'pending', gen_random_uuid(), now())",
            "42501");
    refused(sweeper, "SELECT response FROM idem.operations", "42501");
    refused(sweeper, "SELECT trace_id FROM idem.operations", "42501");
    refused(sweeper, "SELECT note FROM idem.reconciliation_items", "42501");
    refused(sweeper, "UPDATE idem.operations SET response = '\\x01', state = 'completed'", "42501");
    refused(sweeper, "SELECT count(*) FROM idem.outbox", "42501");
    refused(sweeper, "DELETE FROM idem.reconciliation_items", "42501");
    PQfinish(sweeper);
}

Test(security, operator_role_lists_every_tenant_and_inserts_or_deletes_nothing)
{
    idem_reconcile_filter filter = IDEM_RECONCILE_FILTER_INIT;
    idem_reconcile_resolution resolution = IDEM_RECONCILE_RESOLUTION_INIT;
    idem_reconcile_items *items = NULL;
    idem_error err = IDEM_ERROR_INIT;
    unsigned int n = 0;
    PGconn *op;

    seed_two_tenants();
    op = pgtest_connect_as(fx.conninfo, PGTEST_OPERATOR);
    cr_assert_eq(idem_reconcile_list(&items, op, &filter, &err), 0, "%s", err.message);
    cr_assert_eq(idem_reconcile_items_count(items), 2);
    idem_reconcile_items_free(items);
    resolution.note = "checked";
    cr_assert_eq(idem_reconcile_resolve_items(&n, op, "B", "op-1", &resolution, &err), 0, "%s",
                 err.message);
    cr_assert_eq(n, 1);
    refused(op,
            "INSERT INTO idem.reconciliation_items (tenant, operation_id, kind, tool,"
            " fingerprint) VALUES ('A', 'op-x', 'expired', 't', '\\x00')",
            "42501");
    refused(op, "DELETE FROM idem.operations", "42501");
    refused(op, "CREATE TABLE idem.mine (a int)", "42501");
    PQfinish(op);
}

Test(security, app_role_reads_its_own_tenant_through_the_lent_connection_calls)
{
    idem_reconcile_filter filter = IDEM_RECONCILE_FILTER_INIT;
    idem_reconcile_items *items = NULL;
    idem_reconcile_key *key = NULL;
    idem_operation *got = NULL;
    idem_error err = IDEM_ERROR_INIT;
    PGconn *app;

    seed_two_tenants();
    app = pgtest_connect_as(fx.conninfo, PGTEST_APP);
    /* Across tenants the application role sees nothing: no row, never everything. */
    cr_assert_eq(idem_reconcile_list(&items, app, &filter, &err), 0, "%s", err.message);
    cr_assert_eq(idem_reconcile_items_count(items), 0);
    idem_reconcile_items_free(items);
    filter.tenant = "A";
    cr_assert_eq(idem_reconcile_list(&items, app, &filter, &err), 0, "%s", err.message);
    cr_assert_eq(idem_reconcile_items_count(items), 1);
    cr_assert_str_eq(idem_reconcile_items_at(items, 0)->tenant, "A");
    idem_reconcile_items_free(items);
    cr_assert_eq(idem_reconcile_show(&key, app, "A", "op-1", &err), 0, "%s", err.message);
    cr_assert_not_null(idem_reconcile_key_record(key));
    cr_assert_eq(idem_reconcile_items_count(idem_reconcile_key_items(key)), 1);
    idem_reconcile_key_free(key);
    cr_assert_eq(idem_store_get(&got, fx.store, "B", "op-1", &err), 0, "%s", err.message);
    idem_operation_free(got);
    PQfinish(app);
}

/* The file tools/idem-roles.sql of the source tree, read whole (caller frees). */
static char *roles_script(void)
{
    const char *data = getenv("IDEM_TEST_DATA");
    char path[1024];
    FILE *f;
    long size;
    char *text;

    cr_assert_not_null(data, "IDEM_TEST_DATA is not set (run through meson test)");
    snprintf(path, sizeof(path), "%s/../../tools/idem-roles.sql", data);
    cr_assert_not_null(f = fopen(path, "rb"), "%s", path);
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    cr_assert_gt(size = ftell(f), 0);
    rewind(f);
    cr_assert_not_null(text = calloc(1, (size_t)size + 1));
    cr_assert_eq(fread(text, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    return text;
}

/* The DBA's way: a superuser runs tools/idem-roles.sql (twice: it is idempotent); a
 * migrator that is neither superuser nor CREATEROLE applies the migrations and owns schema
 * idem; the application's role then works through the policies, and cannot see the rows
 * of a tenant it did not set, while the owner itself is subject to them (FORCE). */
Test(security, a_migrator_that_is_not_a_superuser_owns_the_schema)
{
    char *db = pgtest_new_database("mig"), *script = roles_script(), *as_migrator, *as_app;
    PGconn *admin = pgtest_connect(db), *migrator, *app;
    idem_error err = IDEM_ERROR_INIT;
    PGresult *res;

    PQclear(pgtest_exec(admin, script));
    PQclear(pgtest_exec(admin, script));
    PQclear(pgtest_exec(admin, "DO $$ BEGIN CREATE ROLE idem_test_migrator LOGIN;"
                               " EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;"
                               " END $$;"
                               "DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO"
                               " idem_test_migrator', current_database()); END $$"));
    as_migrator = pgtest_as(db, "idem_test_migrator");
    migrator = pgtest_connect(as_migrator);
    cr_assert_eq(idem_migrate_up(migrator, 0, NULL, &err), 0, "%s", err.message);
    res = pgtest_exec(admin, "SELECT nspowner::regrole::text FROM pg_namespace"
                             " WHERE nspname = 'idem'");
    cr_assert_str_eq(PQgetvalue(res, 0, 0), "idem_test_migrator");
    PQclear(res);
    PQclear(pgtest_exec(admin, "INSERT INTO idem.reconciliation_items (tenant, operation_id,"
                               " kind, tool, fingerprint) VALUES ('A', 'op-1', 'expired', 't',"
                               " '\\x00')"));
    /* The owner is subject to the policies too: no tenant, no row. */
    cr_assert_eq(pgtest_scalar(migrator, "SELECT count(*) FROM idem.reconciliation_items"), 0);
    pgtest_create_roles(admin);
    as_app = pgtest_as(db, PGTEST_APP);
    app = pgtest_connect(as_app);
    PQclear(pgtest_exec(app, "BEGIN; SELECT set_config('idem.tenant', 'A', true)"));
    cr_assert_eq(pgtest_scalar(app, "SELECT count(*) FROM idem.reconciliation_items"), 1);
    PQclear(pgtest_exec(app, "ROLLBACK; BEGIN; SELECT set_config('idem.tenant', 'B', true)"));
    cr_assert_eq(pgtest_scalar(app, "SELECT count(*) FROM idem.reconciliation_items"), 0);
    PQclear(pgtest_exec(app, "ROLLBACK"));
    PQfinish(app);
    PQfinish(migrator);
    PQfinish(admin);
    free(as_app);
    free(as_migrator);
    free(script);
    free(db);
}
