/* What a migration leaves behind, read from its statements: the objects its CREATE
 * statements name, the tables it isolates, the table privileges it grants. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "migrate_internal.h"

/* The objects of a file with text sql. */
static size_t objects_of(idem__object **out, const char *sql)
{
    idem__migration_file f;
    size_t n = 99;

    memset(&f, 0, sizeof(f));
    f.sql = (char *)sql;
    f.len = strlen(sql);
    cr_assert_eq(idem__migration_objects(out, &n, &f), 0);
    return n;
}

Test(migrate_objects, create_statements_name_their_objects_in_schema_idem_unless_qualified)
{
    idem__object *o = NULL;
    size_t n = objects_of(&o, "-- head\nCREATE TABLE idem.operations (id int);\n"
                              "create unique index concurrently if not exists ops_i ON x (id);\n"
                              "CREATE OR REPLACE FUNCTION app.\"Odd\"\"Name\"(a int) RETURNS int\n"
                              "  LANGUAGE sql AS $$ SELECT 1; $$;\n"
                              "CREATE MATERIALIZED VIEW Totals AS SELECT 1;\n");

    cr_assert_eq(n, 4);
    cr_assert_str_eq(o[0].schema, "idem");
    cr_assert_str_eq(o[0].name, "operations");
    cr_assert_not(o[0].if_not_exists);
    cr_assert_str_eq(o[1].name, "ops_i");
    cr_assert(o[1].if_not_exists);
    cr_assert_str_eq(o[2].schema, "app");
    cr_assert_str_eq(o[2].name, "Odd\"Name");
    cr_assert(o[2].if_not_exists, "OR REPLACE runs again harmlessly");
    cr_assert_str_eq(o[3].schema, "idem");
    cr_assert_str_eq(o[3].name, "totals");
    free(o);
}

Test(migrate_objects, statements_that_leave_no_named_object_are_skipped)
{
    idem__object *o = NULL;
    size_t n = objects_of(&o, "CREATE TEMP TABLE t (id int);\nCREATE INDEX ON idem.a (id);\n"
                              "ALTER TABLE idem.a ADD COLUMN b int;\nINSERT INTO a VALUES (1);\n"
                              "COMMENT ON TABLE a IS 'CREATE TABLE b';\n");

    cr_assert_eq(n, 0);
    free(o);
}

Test(migrate_objects, isolate_tenants_calls_name_the_tables_they_isolate)
{
    idem__object *o = NULL;
    size_t n =
        objects_of(&o, "SELECT idem.isolate_tenants('idem.outbox');\n"
                       "select isolate_tenants('Items'::regclass);\n"
                       "DO $$ DECLARE t regclass; BEGIN\n"
                       "  -- it's every table with a tenant column\n"
                       "  FOR t IN SELECT 'x' LOOP PERFORM idem.isolate_tenants(t); END LOOP;\n"
                       "END $$;\n"
                       "CREATE FUNCTION f() RETURNS void LANGUAGE sql\n"
                       "  AS $$ SELECT idem.isolate_tenants('idem.never_run') $$;\n"
                       "COMMENT ON FUNCTION idem.isolate_tenants(regclass) IS 'x';\n");

    cr_assert_eq(n, 4, "three calls and the function f");
    cr_assert_eq(o[0].kind, IDEM__OBJECT_ISOLATED);
    cr_assert_str_eq(o[0].schema, "idem");
    cr_assert_str_eq(o[0].name, "outbox");
    cr_assert(o[0].if_not_exists, "isolating a table again is harmless");
    cr_assert_eq(o[1].kind, IDEM__OBJECT_ISOLATED);
    cr_assert_str_eq(o[1].name, "items", "a regclass literal is folded to lower case");
    cr_assert_eq(o[2].kind, IDEM__OBJECT_ISOLATED);
    cr_assert_str_eq(o[2].name, "", "a table from the catalog: every tenant table");
    cr_assert_eq(o[3].kind, IDEM__OBJECT_NAMED);
    cr_assert_str_eq(o[3].name, "f");
    free(o);
}

Test(migrate_objects, grants_of_table_privileges_are_one_object_per_table_role_and_privilege)
{
    idem__object *o = NULL;
    size_t n = objects_of(&o, "GRANT SELECT, delete ON idem.schema_migrations, TABLE_B\n"
                              "  TO idem_app, GROUP \"Ops\" WITH GRANT OPTION;\n"
                              "GRANT USAGE ON SCHEMA idem TO idem_app;\n"
                              "GRANT EXECUTE ON FUNCTION idem.f(bytea) TO idem_app;\n"
                              "GRANT SELECT ON ALL TABLES IN SCHEMA idem TO idem_app;\n"
                              "GRANT SELECT (a, b) ON idem.t TO idem_sweeper;\n"
                              "GRANT ALL ON idem.t TO idem_app;\n"
                              "GRANT idem_app TO my_server;\n"
                              "GRANT UPDATE ON TABLE t TO public;\n");

    cr_assert_eq(n, 9, "2 tables x 2 roles x 2 privileges, and the last grant");
    cr_assert_eq(o[0].kind, IDEM__OBJECT_GRANT);
    cr_assert_str_eq(o[0].schema, "idem");
    cr_assert_str_eq(o[0].name, "schema_migrations");
    cr_assert_str_eq(o[0].role, "idem_app");
    cr_assert_str_eq(o[0].privilege, "SELECT");
    cr_assert(o[0].if_not_exists, "granting again is harmless");
    cr_assert_str_eq(o[1].privilege, "DELETE");
    cr_assert_str_eq(o[2].role, "Ops");
    cr_assert_str_eq(o[4].name, "table_b");
    cr_assert_str_eq(o[8].schema, "idem");
    cr_assert_str_eq(o[8].name, "t");
    cr_assert_str_eq(o[8].role, "public");
    cr_assert_str_eq(o[8].privilege, "UPDATE");
    free(o);
}

/* The embedded migrations: 0007 isolates every tenant table, 0009 lets the roles read the
 * ledger. */
static const idem__migration_file *embedded(const idem__migration_set *set, int version)
{
    for (size_t i = 0; i < set->count; i++)
        if (set->files[i].version == version)
            return &set->files[i];
    cr_assert_fail("no embedded migration %04d", version);
    return NULL;
}

static size_t count_kind(const idem__object *o, size_t n, idem__object_kind kind)
{
    size_t k = 0;

    for (size_t i = 0; i < n; i++)
        k += o[i].kind == kind;
    return k;
}

Test(migrate_objects, row_security_and_ledger_grants_of_idems_migrations_are_checkable)
{
    idem__migration_set set = {NULL, 0};
    idem_error err = IDEM_ERROR_INIT;
    idem__object *o = NULL;
    size_t n = 0;

    cr_assert_eq(idem__migration_set_load(&set, NULL, &err), 0, "%s", err.message);
    cr_assert_eq(idem__migration_objects(&o, &n, embedded(&set, 7)), 0);
    cr_assert_eq(count_kind(o, n, IDEM__OBJECT_ISOLATED), 1);
    for (size_t i = 0; i < n; i++)
        if (o[i].kind == IDEM__OBJECT_ISOLATED)
            cr_assert_str_eq(o[i].name, "", "every table with a tenant column");
    cr_assert_eq(count_kind(o, n, IDEM__OBJECT_NAMED), 1, "idem.isolate_tenants()");
    cr_assert_eq(count_kind(o, n, IDEM__OBJECT_GRANT), 1, "DELETE to the sweeper");
    free(o);
    cr_assert_eq(idem__migration_objects(&o, &n, embedded(&set, 9)), 0);
    cr_assert_eq(n, 3);
    cr_assert_eq(count_kind(o, n, IDEM__OBJECT_GRANT), 3);
    cr_assert_str_eq(o[0].name, "schema_migrations");
    cr_assert_str_eq(o[2].role, "idem_operator");
    free(o);
    idem__migration_set_clear(&set);
}
