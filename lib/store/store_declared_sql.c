/* A declared effect's SQL text, read as PostgreSQL's lexer reads it (store_internal.h,
 * idem__declared_check_sql()): which $N are parameters, where the statement's code ends,
 * and whether it is one statement. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "store_internal.h"

/* The declared statement's text, scanned as PostgreSQL's lexer does (standard_conforming_strings
 * on), for where $N stands for a parameter and whether the text ends inside a quote or a
 * comment. */

static int is_ident_start(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch >= 0x80;
}

static int is_digit(unsigned char ch)
{
    return ch >= '0' && ch <= '9';
}

/* Past the quoted string or identifier whose quote is at @p: a doubled quote stays inside,
 * and so, with @backslashes (E'...'), does a quote after a backslash. NULL when it never
 * ends. */
static const char *past_quoted(const char *p, int backslashes)
{
    char quote = *p++;

    for (; *p != '\0'; p++) {
        if (backslashes && *p == '\\' && p[1] != '\0')
            p++;
        else if (*p == quote && p[1] == quote)
            p++;
        else if (*p == quote)
            return p + 1;
    }
    return NULL;
}

/* Block comments nest. NULL when one never ends. */
static const char *past_block_comment(const char *p)
{
    size_t depth = 0;

    while (*p != '\0') {
        if (p[0] == '/' && p[1] == '*') {
            depth++;
            p += 2;
        } else if (p[0] == '*' && p[1] == '/') {
            p += 2;
            if (--depth == 0)
                return p;
        } else {
            p++;
        }
    }
    return NULL;
}

/* The length of the dollar-quote delimiter at @p ("$$", "$tag$": a tag starts with a
 * letter or underscore and holds no '$'), or 0: "$1" is a parameter. */
static size_t dollar_tag_len(const char *p)
{
    size_t n = 1;

    if (is_ident_start((unsigned char)p[1]))
        for (n = 2; is_ident_start((unsigned char)p[n]) || is_digit((unsigned char)p[n]); n++)
            ;
    return p[n] == '$' ? n + 1 : 0;
}

/* Past the dollar-quoted string whose delimiter, @tag bytes, is at @p. NULL when it never
 * ends. */
static const char *past_dollar_quoted(const char *p, size_t tag)
{
    for (const char *q = p + tag; (q = strchr(q, '$')) != NULL; q++)
        if (strncmp(q, p, tag) == 0)
            return q + tag;
    return NULL;
}

/* Past the token at @p in which $N is no parameter: a quoted string or identifier, a
 * comment, a dollar-quoted string, or an identifier or keyword (a '$' within one is part
 * of it); otherwise one byte. NULL when a quote or comment never ends; *what names it. */
static const char *past_token(const char *p, const char **what)
{
    size_t tag;

    *what = "a quoted string";
    if (*p == '\'')
        return past_quoted(p, 0);
    if ((*p == 'E' || *p == 'e') && p[1] == '\'')
        return past_quoted(p + 1, 1);
    *what = "a quoted identifier";
    if (*p == '"')
        return past_quoted(p, 0);
    if (p[0] == '-' && p[1] == '-')
        return p + strcspn(p, "\r\n");
    *what = "a /* comment";
    if (p[0] == '/' && p[1] == '*')
        return past_block_comment(p);
    *what = "a dollar-quoted string";
    if (*p == '$' && (tag = dollar_tag_len(p)) > 0)
        return past_dollar_quoted(p, tag);
    if (!is_ident_start((unsigned char)*p))
        return p + 1;
    while (is_ident_start((unsigned char)*p) || is_digit((unsigned char)*p) || *p == '$')
        p++;
    return p;
}

/* The parameter $N at @p (@len digits after the '$') is one of the @nparams declared. */
static int check_param(const char *p, size_t len, size_t nparams, idem_error *err)
{
    unsigned long long number = 0;

    int shown = len > 20 ? 20 : (int)len;

    /* Stops once past nparams (at most 1000): no overflow. */
    for (size_t i = 1; i <= len && number <= nparams; i++)
        number = number * 10 + (unsigned long long)(p[i] - '0');
    if (number == 0)
        return idem__error_field(err, IDEM_EINVAL, "sql",
                                 "refers to $%.*s; parameters are numbered from $1", shown, p + 1);
    if (number > nparams)
        return idem__error_field(err, IDEM_EINVAL, "sql",
                                 "refers to $%.*s, beyond the %zu parameter%s declared (the "
                                 "store's own follow them)",
                                 shown, p + 1, nparams, nparams == 1 ? "" : "s");
    return 0;
}

/* Whether the token at @p is a blank or a comment: no code. */
static int is_blank_or_comment(const char *p)
{
    return strchr(" \t\r\n\f\v", *p) != NULL || (p[0] == '-' && p[1] == '-') ||
           (p[0] == '/' && p[1] == '*');
}

/* The next token of code at or after @p, blanks and comments skipped, and its length; NULL
 * at the end (the scan has already refused a quote or comment that never ends). */
static const char *next_code(const char *p, size_t *len)
{
    const char *what, *end;

    while (p != NULL && *p != '\0' && is_blank_or_comment(p))
        p = past_token(p, &what);
    if (p == NULL || *p == '\0' || (end = past_token(p, &what)) == NULL)
        return NULL;
    *len = (size_t)(end - p);
    return p;
}

/* Whether the token @tok (@len bytes) is the keyword @word, in any case. */
static int is_word(const char *tok, size_t len, const char *word)
{
    return tok != NULL && len == strlen(word) && strncasecmp(tok, word, len) == 0;
}

/* Whether the token @tok is one of the statements that can stand in a WITH query. */
static int is_statement_word(const char *tok, size_t len)
{
    static const char *const words[] = {"SELECT", "VALUES", "TABLE", "INSERT",
                                        "UPDATE", "DELETE", "MERGE"};

    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (is_word(tok, len, words[i]))
            return 1;
    return 0;
}

/* The statement that follows WITH's queries (at @p, past WITH): the first statement keyword
 * outside their parentheses that names no query (a query's name is followed by AS or by its
 * column list; VALUES, itself followed by '(', only by AS). NULL if there is none. */
static const char *after_with(const char *p, size_t *len)
{
    const char *tok, *next;
    size_t next_len, depth = 0;

    for (tok = next_code(p, len); tok != NULL; tok = next_code(tok + *len, len)) {
        if (*tok == '(')
            depth++;
        else if (*tok == ')' && depth > 0)
            depth--;
        if (depth > 0 || !is_statement_word(tok, *len))
            continue;
        next = next_code(tok + *len, &next_len);
        if (!is_word(next, next_len, "AS") &&
            (next == NULL || *next != '(' || is_word(tok, *len, "VALUES")))
            return tok;
    }
    return NULL;
}

/* Whether RETURNING follows @p outside parentheses: the statement's own, not a subquery's. */
static int returns_rows(const char *p)
{
    size_t len, depth = 0;

    for (const char *tok = next_code(p, &len); tok != NULL; tok = next_code(tok + len, &len)) {
        if (*tok == '(')
            depth++;
        else if (*tok == ')' && depth > 0)
            depth--;
        else if (depth == 0 && is_word(tok, len, "RETURNING"))
            return 1;
    }
    return 0;
}

/* The statement runs as the store's WITH query, whose rows are the receipt: a query (SELECT,
 * VALUES, TABLE, a parenthesized one) or a data-modifying statement with RETURNING, after
 * WITH queries or not. Anything else could never run there. */
static int check_kind(const char *sql, idem_error *err)
{
    size_t len;
    const char *tok = next_code(sql, &len);
    int shown;

    if (is_word(tok, len, "WITH") && (tok = after_with(tok + len, &len)) == NULL)
        return idem__error_field(err, IDEM_EINVAL, "sql",
                                 "a declared statement must return its receipt: WITH has no "
                                 "statement after its queries");
    shown = len > 32 ? 32 : (int)len;
    if (*tok == '(' || is_word(tok, len, "SELECT") || is_word(tok, len, "VALUES") ||
        is_word(tok, len, "TABLE"))
        return 0;
    if (is_statement_word(tok, len))
        return returns_rows(tok + len)
                   ? 0
                   : idem__error_field(err, IDEM_EINVAL, "sql",
                                       "a declared statement must return its receipt: %.*s "
                                       "without RETURNING",
                                       shown, tok);
    return idem__error_field(err, IDEM_EINVAL, "sql",
                             "a declared statement must return its receipt: '%.*s' cannot run "
                             "inside the store's statement, as a WITH query (SELECT, VALUES, or "
                             "INSERT, UPDATE, DELETE with RETURNING)",
                             shown, tok);
}

int idem__declared_check_sql(const char *sql, size_t nparams, size_t *code_len, idem_error *err)
{
    const char *p = sql, *what = "a quote or a comment"; /* past_token() says which */
    const char *end = sql, *semicolon = NULL;            /* of the code; its first ';' */
    int rc;

    while (p != NULL && *p != '\0') {
        size_t digits = *p == '$' ? strspn(p + 1, "0123456789") : 0;
        int code = !is_blank_or_comment(p) && *p != ';';

        if (code && semicolon != NULL)
            return idem__error_field(err, IDEM_EINVAL, "sql",
                                     "holds more than one statement (a ';' at byte %zu)",
                                     (size_t)(semicolon - sql));
        if (*p == ';')
            semicolon = p;
        if (digits > 0 && (rc = check_param(p, digits, nparams, err)) != 0)
            return rc;
        p = digits > 0 ? p + 1 + digits : past_token(p, &what);
        if (code && p != NULL)
            end = p;
    }
    if (p == NULL)
        return idem__error_field(err, IDEM_EINVAL, "sql",
                                 "ends inside %s, which would swallow the store's statement "
                                 "around it",
                                 what);
    if (end == sql)
        return idem__error_field(err, IDEM_EINVAL, "sql", "holds no statement");
    if (code_len != NULL)
        *code_len = (size_t)(end - sql);
    return check_kind(sql, err);
}
