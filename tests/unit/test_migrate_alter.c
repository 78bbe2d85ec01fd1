/* Reading an ALTER TABLE statement's actions (idem__sql_alter_table()), which the
 * migration runner sends one by one on a Citus table. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>

#include "migrate_internal.h"

#define MAX_ACTIONS 8

typedef struct alter_text {
    char *name;
    char *head;
    char *actions[MAX_ACTIONS];
    size_t count;
} alter_text;

/* idem__sql_alter_table() on sql: 1 with *out filled, or 0. */
static int read_alter(alter_text *out, const char *sql)
{
    idem__alter_table t;
    int rc = idem__sql_alter_table(&t, sql, strlen(sql));

    cr_assert(rc == 0 || rc == 1, "rc %d", rc);
    if (rc == 0)
        return 0;
    cr_assert_geq(t.count, 2);
    cr_assert_leq(t.count, MAX_ACTIONS);
    out->name = strndup(sql + t.name.offset, t.name.len);
    out->head = strndup(sql, t.head_len);
    out->count = t.count;
    for (size_t i = 0; i < t.count; i++)
        out->actions[i] = strndup(sql + t.actions[i].offset, t.actions[i].len);
    free(t.actions);
    return 1;
}

static void alter_text_free(alter_text *a)
{
    free(a->name);
    free(a->head);
    for (size_t i = 0; i < a->count; i++)
        free(a->actions[i]);
}

Test(migrate_alter, actions_split_at_commas_outside_parentheses_and_brackets)
{
    alter_text a;

    cr_assert(read_alter(&a, "ALTER TABLE idem.operations\n"
                             "    ADD COLUMN n numeric(10, 2) DEFAULT 1,\n"
                             "    ADD COLUMN tags text[] DEFAULT ARRAY['a', 'b'],\n"
                             "    DROP CONSTRAINT c,\n"
                             "    ADD CONSTRAINT c CHECK (state IN ('x', 'y'));"));
    cr_assert_str_eq(a.name, "idem.operations");
    cr_assert_str_eq(a.head, "ALTER TABLE idem.operations\n    ");
    cr_assert_eq(a.count, 4);
    cr_assert_str_eq(a.actions[0], "ADD COLUMN n numeric(10, 2) DEFAULT 1");
    cr_assert_str_eq(a.actions[1], "ADD COLUMN tags text[] DEFAULT ARRAY['a', 'b']");
    cr_assert_str_eq(a.actions[2], "DROP CONSTRAINT c");
    cr_assert_str_eq(a.actions[3], "ADD CONSTRAINT c CHECK (state IN ('x', 'y'))");
    alter_text_free(&a);
}

Test(migrate_alter, commas_in_quotes_comments_and_dollar_quotes_do_not_split)
{
    alter_text a;

    cr_assert(read_alter(&a, "alter table \"we, ird\".t -- a, comment\n"
                             "  ADD COLUMN \"a,b\" text DEFAULT 'x,y' /* c, d */,\n"
                             "  ADD COLUMN e text DEFAULT E'\\', f' || $q$, g$q$\n"));
    cr_assert_str_eq(a.name, "\"we, ird\".t");
    cr_assert_eq(a.count, 2);
    cr_assert_str_eq(a.actions[0], "ADD COLUMN \"a,b\" text DEFAULT 'x,y' /* c, d */");
    cr_assert_str_eq(a.actions[1], "ADD COLUMN e text DEFAULT E'\\', f' || $q$, g$q$");
    alter_text_free(&a);
}

Test(migrate_alter, if_exists_only_and_star_stay_in_the_head)
{
    alter_text a;

    cr_assert(read_alter(&a, "ALTER TABLE IF EXISTS ONLY s . t * ADD x int, ADD y int;"));
    cr_assert_str_eq(a.name, "s . t");
    cr_assert_str_eq(a.head, "ALTER TABLE IF EXISTS ONLY s . t * ");
    cr_assert_str_eq(a.actions[0], "ADD x int");
    cr_assert_str_eq(a.actions[1], "ADD y int");
    alter_text_free(&a);
}

/* The text is held in the struct: Criterion runs each test in a new process, where a
 * pointer into the parent's memory would not be valid. */
struct statement {
    char text[64];
};

/* Statements that are not one table's ALTER TABLE with several actions. */
ParameterizedTestParameters(migrate_alter, other_statements_are_not_split)
{
    static struct statement sql[] = {
        {"ALTER TABLE t ADD COLUMN a int;"},
        {"ALTER TABLE t ADD CONSTRAINT c UNIQUE (a, b);"},
        {"ALTER TABLE t RENAME TO u;"},
        {"ALTER TABLE ALL IN TABLESPACE a SET TABLESPACE b;"},
        {"ALTER TABLE ONLY (t) ADD a int, ADD b int;"},
        {"ALTER INDEX i RENAME TO j;"},
        {"ALTER FOREIGN TABLE t ADD a int, ADD b int;"},
        {"SELECT a, b FROM t;"},
        {"ALTER TABLE;"},
        {"ALTER TABLE t"},
        {"ALTERTABLE t ADD a int, ADD b int;"},
        {"-- ALTER TABLE t ADD a int, ADD b int;"},
    };
    return cr_make_param_array(struct statement, sql, sizeof(sql) / sizeof(sql[0]));
}

ParameterizedTest(struct statement *sql, migrate_alter, other_statements_are_not_split)
{
    alter_text a;

    cr_assert_eq(read_alter(&a, sql->text), 0, "%s", sql->text);
}
