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
    assert_accepted("INSERT INTO t VALUES ($1,$2,$3)", 5);
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
