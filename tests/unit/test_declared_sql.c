/* A declared statement's text (idem__declared_check_sql): which $N are parameters, as
 * PostgreSQL's lexer sees them, and text that ends inside a quote or comment. */
#include <criterion/criterion.h>
#include <string.h>

#include "store_internal.h"

static void assert_accepted(const char *sql, size_t nparams)
{
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem__declared_check_sql(sql, nparams, NULL, &err), 0, "<%s> refused: %s", sql,
                 err.message);
}

/* Refused, naming the field "sql", with @says in the message. */
static void assert_refused(const char *sql, size_t nparams, const char *says)
{
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem__declared_check_sql(sql, nparams, NULL, &err), IDEM_EINVAL, "<%s> accepted",
                 sql);
    cr_assert_str_eq(err.field, "sql");
    cr_assert_not_null(strstr(err.message, says), "<%s>: message '%s' lacks '%s'", sql, err.message,
                       says);
}

Test(declared_sql, parameters_within_the_count_are_accepted)
{
    assert_accepted("SELECT 1", 0);
    assert_accepted("SELECT json_build_object('a', $1, 'b', $2)", 2);
    assert_accepted("SELECT $1::int + $01", 1);
    assert_accepted("INSERT INTO t VALUES ($1,$2,$3) RETURNING 1", 5);
}

Test(declared_sql, a_parameter_beyond_the_count_is_refused_naming_it_and_the_count)
{
    assert_refused("SELECT $2", 1, "$2, beyond the 1 parameter declared");
    assert_refused("SELECT $1", 0, "$1, beyond the 0 parameters declared");
    assert_refused("SELECT $1, $10", 9, "$10, beyond the 9 parameters declared");
    assert_refused("SELECT $99999999999999999999999999", 3, "$99999999999999999999");
    assert_refused("SELECT ($3)", 2, "$3,");
    assert_refused("SELECT 1$2", 1, "$2,");
}

Test(declared_sql, dollar_zero_is_refused)
{
    assert_refused("SELECT $0", 3, "$0; parameters are numbered from $1");
    assert_refused("SELECT $00", 3, "$00;");
}

Test(declared_sql, quoted_strings_hide_parameters)
{
    assert_accepted("SELECT '$2'", 1);
    assert_accepted("SELECT 'it''s $2'", 1);
    assert_accepted("SELECT E'\\'$2'", 1);
    assert_accepted("SELECT e'\\\\'", 0);
    assert_accepted("SELECT U&'$2', B'01', X'1f', N'$3'", 0);
    /* A backslash escapes only in E'' strings: here the string ends before $2. */
    assert_refused("SELECT 'a\\' || $2 || 'b'", 1, "$2,");
    assert_refused("SELECT E'a\\\\' || $2", 1, "$2,");
    /* an identifier ending in e, then a plain string */
    assert_refused("SELECT some'\\' || $2", 1, "$2,");
}

Test(declared_sql, quoted_identifiers_and_identifiers_hide_parameters)
{
    assert_accepted("SELECT \"col$2\" FROM t", 0);
    assert_accepted("SELECT \"a\"\"$2\" FROM t", 0);
    assert_accepted("SELECT a$2, b$c$ FROM t", 0);
}

Test(declared_sql, comments_hide_parameters)
{
    assert_accepted("SELECT $1 -- $2", 1);
    assert_accepted("-- $2\nSELECT $1", 1);
    assert_accepted("-- $2\rSELECT $1", 1);
    assert_accepted("SELECT /* $2 */ $1", 1);
    assert_accepted("SELECT /* $2 /* nested $3 */ still $4 */ $1", 1);
    assert_refused("SELECT /* $2 */ $3 /* */", 2, "$3,");
    assert_refused("-- $2\nSELECT $2", 1, "$2,");
    assert_refused("SELECT 1 - -$2", 1, "$2,");
}

Test(declared_sql, dollar_quotes_hide_parameters_and_a_dollar_digit_is_no_tag)
{
    assert_accepted("SELECT $$ $2 $$", 0);
    assert_accepted("SELECT $tag$ $2 ' \" -- /* $tag$", 0);
    assert_accepted("SELECT $_x1$ $2 $_x1$", 0);
    assert_accepted("SELECT $a$ $2 $ab$ still inside $3 $a$", 0);
    assert_accepted("SELECT $$a$$, $1", 1);
    assert_refused("SELECT $$ $2 $$ || $2", 1, "$2,");
    assert_refused("SELECT $1$ $2 $1$", 1, "$2,");
}

Test(declared_sql, text_ending_inside_a_quote_or_comment_is_refused)
{
    assert_refused("SELECT 'abc", 0, "ends inside a quoted string");
    assert_refused("SELECT E'abc\\'", 0, "ends inside a quoted string");
    assert_refused("SELECT \"abc", 0, "ends inside a quoted identifier");
    assert_refused("SELECT 1 /* abc", 0, "ends inside a /* comment");
    assert_refused("SELECT 1 /* /* */", 0, "ends inside a /* comment");
    assert_refused("SELECT $x$ abc $y$", 0, "ends inside a dollar-quoted string");
    assert_accepted("SELECT 1 -- no newline after this", 0);
}

static size_t code_len(const char *sql)
{
    idem_error err = IDEM_ERROR_INIT;
    size_t n = 0;

    cr_assert_eq(idem__declared_check_sql(sql, 0, &n, &err), 0, "<%s> refused: %s", sql,
                 err.message);
    return n;
}

/* What follows the statement's code (a ';', blanks, comments) is cut before it is embedded;
 * a ';' with more code after it is a second statement. */
Test(declared_sql, a_trailing_semicolon_and_comments_end_the_code_and_a_second_statement_is_refused)
{
    cr_assert_eq(code_len("SELECT 1"), 8);
    cr_assert_eq(code_len("SELECT 1; -- done"), 8);
    cr_assert_eq(code_len("SELECT 1 /* c */ ;\n /* d */ ;  "), 8);
    cr_assert_eq(code_len("SELECT ';' -- ;"), 10);
    cr_assert_eq(code_len("  SELECT $$;$$ ;"), 14);
    assert_refused("SELECT 1; SELECT 2", 0, "more than one statement (a ';' at byte 8)");
    assert_refused("SELECT 1;; DELETE FROM t", 0, "more than one statement");
    assert_refused("-- only a comment", 0, "holds no statement");
    assert_refused(" ; ", 0, "holds no statement");
}

/* The statement runs as the store's WITH query, whose row is the receipt: what cannot stand
 * there, or returns no rows, is refused at declaration, saying why. */
Test(declared_sql, a_statement_that_cannot_return_a_receipt_is_refused_saying_why)
{
    static const char *const never[] = {
        "COMMIT", "rollback", "SET search_path = app", "VACUUM", "CREATE TABLE t (a int)",
        "BEGIN",  "SHOW x",   "EXPLAIN SELECT 1",      "$1",
    };

    for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
        assert_refused(never[i], 1, "must return its receipt: '");
    assert_refused("COMMIT", 0, "'COMMIT' cannot run inside the store's statement");
    assert_refused("SET search_path = app", 0, "'SET' cannot run");
    assert_refused("  -- first\n/* then */ VACUUM", 0, "'VACUUM' cannot run");
    assert_refused("INSERT INTO t VALUES ($1)", 1,
                   "must return its receipt: INSERT without RETURNING");
    assert_refused("update t set a = 1", 0, "update without RETURNING");
    assert_refused("DELETE FROM t WHERE a IN (SELECT a FROM u)", 0, "DELETE without RETURNING");
    assert_refused("MERGE INTO t USING u ON t.a = u.a WHEN MATCHED THEN DELETE", 0,
                   "MERGE without RETURNING");
    assert_refused("WITH x AS (SELECT 1)", 0, "WITH has no statement after its queries");
}

Test(declared_sql, returning_counts_only_where_it_is_the_statements_own)
{
    assert_refused("INSERT INTO t VALUES ('RETURNING') -- RETURNING", 0, "INSERT without");
    assert_refused("INSERT INTO t (\"returning\") VALUES (1)", 0, "INSERT without");
    assert_refused("INSERT INTO t WITH d AS (DELETE FROM u RETURNING *) SELECT * FROM d", 0,
                   "INSERT without");
    assert_refused("WITH d AS (DELETE FROM u RETURNING *) INSERT INTO t SELECT * FROM d", 0,
                   "INSERT without");
    /* a WITH query named like a statement is not the statement */
    assert_refused("WITH insert AS (SELECT 1) INSERT INTO t SELECT * FROM insert", 0,
                   "INSERT without");
}

Test(declared_sql, queries_and_data_modifying_statements_with_returning_are_accepted)
{
    assert_accepted("SELECT json_build_object('a', $1)", 1);
    assert_accepted("values ($1)", 1);
    assert_accepted("TABLE receipts", 0);
    assert_accepted("(SELECT 1)", 0);
    assert_accepted("/* c */ INSERT INTO t VALUES ($1) RETURNING json_build_object('id', id)", 1);
    assert_accepted("UPDATE t SET a = (SELECT 1) WHERE b = $1 RETURNING row_to_json(t)", 1);
    assert_accepted("delete from t returning 1", 0);
    assert_accepted("INSERT INTO t VALUES (1) ON CONFLICT (a) DO UPDATE SET b = 2 RETURNING b", 0);
    assert_accepted("WITH d AS (DELETE FROM u RETURNING *) SELECT count(*) FROM d", 0);
    assert_accepted("WITH update AS (SELECT 1 AS a), b (x) AS MATERIALIZED (SELECT 2)"
                    " INSERT INTO t SELECT a FROM update RETURNING 1",
                    0);
    assert_accepted("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3)"
                    " CYCLE n SET c USING p SELECT json_agg(n) FROM r",
                    0);
}
