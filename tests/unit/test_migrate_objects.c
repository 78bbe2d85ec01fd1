/* What a migration creates, read from its CREATE statements. */
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
