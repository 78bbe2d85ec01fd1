/* The migration file splitter: statements, the no-transaction marker, error lines. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "migrate_internal.h"

/* Split sql; returns the count, and the statements' texts in texts[] (malloc'd). */
static size_t split(const char *sql, char **texts, size_t max)
{
    idem__sql_stmt *stmts = NULL;
    size_t count = 0;

    cr_assert_eq(idem__sql_split(&stmts, &count, sql, strlen(sql)), 0);
    cr_assert_leq(count, max);
    for (size_t i = 0; i < count; i++)
        texts[i] = strndup(sql + stmts[i].offset, stmts[i].len);
    free(stmts);
    return count;
}

static void free_texts(char **texts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(texts[i]);
}

Test(migrate_split, semicolons_end_statements_and_comments_between_are_dropped)
{
    char *t[4];
    size_t n = split("-- head\nCREATE TABLE a (x int);\n/* c */ INSERT INTO a VALUES (1);\n"
                     "-- tail only\n",
                     t, 4);

    cr_assert_eq(n, 2);
    cr_assert_str_eq(t[0], "CREATE TABLE a (x int);");
    cr_assert_str_eq(t[1], "INSERT INTO a VALUES (1);");
    free_texts(t, n);
}

Test(migrate_split, last_statement_without_semicolon_is_kept)
{
    char *t[2];
    size_t n = split("SELECT 1;\nSELECT 2\n", t, 2);

    cr_assert_eq(n, 2);
    cr_assert_str_eq(t[1], "SELECT 2\n");
    free_texts(t, n);
}

Test(migrate_split, semicolons_in_quotes_identifiers_and_comments_do_not_split)
{
    char *t[2];
    size_t n =
        split("SELECT 'a;''b', \"c;d\" -- e;f\n, /* g; /* nested; */ h; */ 1;\nSELECT 2;", t, 2);

    cr_assert_eq(n, 2);
    cr_assert_str_eq(t[1], "SELECT 2;");
    free_texts(t, n);
}

Test(migrate_split, escape_strings_honour_backslash_quotes)
{
    char *t[2];
    size_t n = split("SELECT E'it\\'s; fine';\nSELECT 2;", t, 2);

    cr_assert_eq(n, 2);
    cr_assert_str_eq(t[0], "SELECT E'it\\'s; fine';");
    free_texts(t, n);
}

Test(migrate_split, dollar_quoted_bodies_do_not_split)
{
    char *t[2];
    size_t n = split("CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $body$\n"
                     "BEGIN RETURN 1; END;\n$body$;\nSELECT $$x;y$$;",
                     t, 2);

    cr_assert_eq(n, 2);
    cr_assert_str_eq(t[1], "SELECT $$x;y$$;");
    free_texts(t, n);
}

Test(migrate_split, parameter_placeholders_are_not_dollar_quotes)
{
    char *t[2];
    size_t n = split("PREPARE p AS SELECT $1;\nSELECT 2;", t, 2);

    cr_assert_eq(n, 2);
    free_texts(t, n);
}

Test(migrate_split, begin_atomic_function_body_is_one_statement)
{
    char *t[2];
    size_t n = split("CREATE OR REPLACE FUNCTION f(x int) RETURNS int LANGUAGE sql\n"
                     "BEGIN ATOMIC\n  SELECT CASE WHEN x > 0 THEN 1 ELSE 0 END;\n"
                     "  SELECT 2;\nEND;\nSELECT 3;",
                     t, 2);

    cr_assert_eq(n, 2);
    cr_assert_str_eq(t[1], "SELECT 3;");
    free_texts(t, n);
}

Test(migrate_split, function_named_begin_does_not_open_a_block)
{
    char *t[3];
    size_t n = split("CREATE FUNCTION begin() RETURNS int LANGUAGE sql AS $$select 1$$;\n"
                     "COMMIT;\nSELECT 1/0;",
                     t, 3);

    cr_assert_eq(n, 3, "three statements, got %zu", n);
    cr_assert_str_eq(t[1], "COMMIT;");
    free_texts(t, n);
}

Test(migrate_split, begin_outside_a_function_is_a_statement_of_its_own)
{
    char *t[3];
    size_t n = split("BEGIN;\nSELECT 1;\nCOMMIT;", t, 3);

    cr_assert_eq(n, 3);
    free_texts(t, n);
}

Test(migrate_split, comment_only_file_has_no_statement)
{
    idem__sql_stmt *stmts = NULL;
    size_t count = 7;
    const char *sql = "-- nothing\n/* at all; */\n";

    cr_assert_eq(idem__sql_split(&stmts, &count, sql, strlen(sql)), 0);
    cr_assert_eq(count, 0);
    free(stmts);
}

Test(migrate_split, marker_in_leading_comments_means_no_transaction)
{
    const char *sql = "-- 0003: an index\n-- idem:no-transaction\n\nCREATE INDEX CONCURRENTLY i;";

    cr_assert_eq(idem__sql_no_transaction(sql, strlen(sql)), 1);
}

Test(migrate_split, marker_after_the_first_statement_is_ignored)
{
    const char *sql = "SELECT 1;\n-- idem:no-transaction\n";

    cr_assert_eq(idem__sql_no_transaction(sql, strlen(sql)), 0);
}

Test(migrate_split, marker_must_be_the_whole_line)
{
    const char *sql = "-- idem:no-transactions please\nSELECT 1;";

    cr_assert_eq(idem__sql_no_transaction(sql, strlen(sql)), 0);
}

Test(migrate_split, leading_byte_order_mark_is_not_part_of_the_first_statement)
{
    char *t[2];
    size_t n = split("\xEF\xBB\xBF"
                     "CREATE TABLE a (x int);\nSELECT 1;",
                     t, 2);

    cr_assert_eq(n, 2);
    cr_assert_str_eq(t[0], "CREATE TABLE a (x int);");
    free_texts(t, n);
}

Test(migrate_split, marker_after_a_byte_order_mark_means_no_transaction)
{
    const char *sql = "\xEF\xBB\xBF-- idem:no-transaction\nCREATE INDEX CONCURRENTLY i;";

    cr_assert_eq(idem__sql_no_transaction(sql, strlen(sql)), 1);
}

Test(migrate_split, line_counts_newlines_before_the_offset)
{
    const char *sql = "a\nb\nc";

    cr_assert_eq(idem__sql_line(sql, 0), 1);
    cr_assert_eq(idem__sql_line(sql, 2), 2);
    cr_assert_eq(idem__sql_line(sql, 4), 3);
}

Test(migrate_split, character_position_skips_utf8_continuation_bytes)
{
    const char *s = "\xc3\xa9t\xc3\xa9 x"; /* "été x": x is character 5, byte 6 */

    cr_assert_eq(idem__sql_char_offset(s, strlen(s), 5, 1), 6);
    cr_assert_eq(idem__sql_char_offset(s, strlen(s), 5, 0), 4);
    cr_assert_eq(idem__sql_char_offset(s, strlen(s), 99, 1), strlen(s));
}
