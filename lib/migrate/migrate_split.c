/* Splitting a migration file into statements, so that each runs on its own (CREATE INDEX
 * CONCURRENTLY refuses a multi-statement query string) and an error maps to a file line.
 * The rules follow psql's lexer: quotes, comments and dollar quotes hide ';', and so do
 * parentheses and the BEGIN ... END body of CREATE FUNCTION/PROCEDURE. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "migrate_internal.h"

typedef struct scanner {
    const char *s;
    size_t len;
    int paren_depth;
    int begin_depth;
    char heads[4];       /* first letters of the statement's leading keywords, for CREATE
                            [OR REPLACE] FUNCTION|PROCEDURE */
    unsigned word_count; /* identifiers seen in this statement */
    int after_begin;     /* the previous word was BEGIN (a block opens only at BEGIN ATOMIC) */
} scanner;

static int is_word_start(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
}

static int is_word_char(unsigned char c)
{
    return is_word_start(c) || (c >= '0' && c <= '9') || c == '$';
}

/* End of a quoted stretch of s opening at i with quote q ('' doubles it; backslash escapes
 * when backslashes is set, for E'...'). */
static size_t skip_quoted(const char *s, size_t len, size_t i, char q, int backslashes)
{
    size_t j = i + 1;

    while (j < len) {
        if (backslashes && s[j] == '\\') {
            j += 2;
        } else if (s[j] == q) {
            if (j + 1 < len && s[j + 1] == q)
                j += 2;
            else
                return j + 1;
        } else {
            j++;
        }
    }
    return len;
}

/* Comments nest in PostgreSQL. */
static size_t skip_block_comment(const char *s, size_t len, size_t i)
{
    size_t j = i + 2;
    int depth = 1;

    while (j + 1 < len) {
        if (s[j] == '/' && s[j + 1] == '*') {
            depth++;
            j += 2;
        } else if (s[j] == '*' && s[j + 1] == '/') {
            j += 2;
            if (--depth == 0)
                return j;
        } else {
            j++;
        }
    }
    return len;
}

static size_t skip_line_comment(const char *s, size_t len, size_t i)
{
    const char *nl = memchr(s + i, '\n', len - i);

    return nl != NULL ? (size_t)(nl - s) + 1 : len;
}

/* Length of the dollar-quote tag ("$$", "$body$") opening at i, or 0 when there is none
 * ("$1" is a parameter). */
static size_t dollar_tag_len(const char *s, size_t len, size_t i)
{
    size_t j = i + 1;

    if (j < len && s[j] == '$')
        return 2;
    if (j >= len || !is_word_start((unsigned char)s[j]))
        return 0;
    while (j < len && is_word_char((unsigned char)s[j]) && s[j] != '$')
        j++;
    return j < len && s[j] == '$' ? j - i + 1 : 0;
}

static size_t skip_dollar_quoted(const char *s, size_t len, size_t i, size_t tag_len)
{
    for (size_t j = i + tag_len; j + tag_len <= len; j++)
        if (memcmp(s + j, s + i, tag_len) == 0)
            return j + tag_len;
    return len;
}

size_t idem__sql_lex_end(const char *s, size_t len, size_t i)
{
    unsigned char c = (unsigned char)s[i];
    size_t j = i;

    if (c == '-' && i + 1 < len && s[i + 1] == '-')
        return skip_line_comment(s, len, i);
    if (c == '/' && i + 1 < len && s[i + 1] == '*')
        return skip_block_comment(s, len, i);
    if (c == '\'' || c == '"')
        return skip_quoted(s, len, i, (char)c, 0);
    if (c == '$' && dollar_tag_len(s, len, i) > 0)
        return skip_dollar_quoted(s, len, i, dollar_tag_len(s, len, i));
    if (!is_word_char(c) || c == '$')
        return i + 1;
    while (j < len && is_word_char((unsigned char)s[j]))
        j++;
    if (j - i == 1 && (c == 'e' || c == 'E') && j < len && s[j] == '\'')
        return skip_quoted(s, len, j, '\'', 1);
    return j;
}

static int word_is(const char *w, size_t n, const char *keyword)
{
    return strlen(keyword) == n && strncasecmp(w, keyword, n) == 0;
}

/* psql's heuristic: inside CREATE [OR REPLACE] FUNCTION|PROCEDURE, BEGIN ATOMIC (and CASE within
 * it) opens a block that END closes; ';' inside that block does not end the statement. */
static void track_word(scanner *sc, const char *w, size_t n)
{
    static const char *const heads[] = {"create", "function", "procedure", "or", "replace"};
    const char *h = sc->heads;

    for (size_t k = 0; k < sizeof(heads) / sizeof(heads[0]); k++)
        if (word_is(w, n, heads[k]) && sc->word_count < sizeof(sc->heads))
            sc->heads[sc->word_count] = heads[k][0];
    sc->word_count++;
    if (!(h[0] == 'c' && (h[1] == 'f' || h[1] == 'p' ||
                          (h[1] == 'o' && h[2] == 'r' && (h[3] == 'f' || h[3] == 'p')))) ||
        sc->paren_depth != 0)
        return;
    if (word_is(w, n, "atomic") && sc->after_begin)
        sc->begin_depth++;
    sc->after_begin = word_is(w, n, "begin");
    if (sc->after_begin)
        return;
    if (word_is(w, n, "case") && sc->begin_depth > 0)
        sc->begin_depth++;
    else if (word_is(w, n, "end") && sc->begin_depth > 0)
        sc->begin_depth--;
}

/* Scan one token of a statement at i (not whitespace, not a comment); returns its end. */
static size_t scan_token(scanner *sc, size_t i)
{
    unsigned char c = (unsigned char)sc->s[i];
    size_t end = idem__sql_lex_end(sc->s, sc->len, i);

    if (c == '(')
        sc->paren_depth++;
    if (c == ')' && sc->paren_depth > 0)
        sc->paren_depth--;
    /* a word, not the E of an E'...' string */
    if (is_word_start(c) && is_word_char((unsigned char)sc->s[end - 1]))
        track_word(sc, sc->s + i, end - i);
    return end;
}

static int push_stmt(idem__sql_stmt **list, size_t *count, size_t *cap, size_t start, size_t end)
{
    if (*count == *cap) {
        size_t grown_cap = *cap == 0 ? 16 : *cap * 2;
        idem__sql_stmt *grown = realloc(*list, grown_cap * sizeof(*grown));
        if (grown == NULL)
            return IDEM_ENOMEM;
        *list = grown;
        *cap = grown_cap;
    }
    (*list)[*count].offset = start;
    (*list)[*count].len = end - start;
    (*count)++;
    return 0;
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

int idem__sql_split(idem__sql_stmt **out, size_t *out_count, const char *sql, size_t len)
{
    scanner sc;
    idem__sql_stmt *list = NULL;
    size_t count = 0, cap = 0, i = 0, start = 0;
    int in_stmt = 0, rc = 0;

    memset(&sc, 0, sizeof(sc));
    sc.s = sql;
    sc.len = len;
    i = idem__sql_bom_len(sql, len);
    while (rc == 0 && i < len) {
        if (is_space(sql[i])) {
            i++;
        } else if (sql[i] == '-' && i + 1 < len && sql[i + 1] == '-') {
            i = idem__sql_lex_end(sql, len, i);
        } else if (sql[i] == '/' && i + 1 < len && sql[i + 1] == '*') {
            i = idem__sql_lex_end(sql, len, i);
        } else if (sql[i] == ';' && sc.paren_depth == 0 && sc.begin_depth == 0) {
            if (in_stmt)
                rc = push_stmt(&list, &count, &cap, start, i + 1);
            in_stmt = 0;
            i++;
        } else {
            if (!in_stmt) {
                memset(&sc.heads, 0, sizeof(sc.heads));
                sc.word_count = 0;
                sc.paren_depth = sc.begin_depth = sc.after_begin = 0;
                start = i;
                in_stmt = 1;
            }
            i = scan_token(&sc, i);
        }
    }
    if (rc == 0 && in_stmt)
        rc = push_stmt(&list, &count, &cap, start, len);
    if (rc != 0) {
        free(list);
        return rc;
    }
    *out = list;
    *out_count = count;
    return 0;
}

size_t idem__sql_bom_len(const char *sql, size_t len)
{
    return len >= 3 && memcmp(sql, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
}

unsigned idem__sql_line(const char *sql, size_t offset)
{
    unsigned line = 1;

    for (size_t i = 0; i < offset; i++)
        if (sql[i] == '\n')
            line++;
    return line;
}

size_t idem__sql_char_offset(const char *s, size_t len, long pos, int utf8)
{
    size_t i = 0;

    for (long n = 1; n < pos && i < len; n++) {
        i++;
        while (utf8 && i < len && ((unsigned char)s[i] & 0xC0) == 0x80)
            i++;
    }
    return i;
}
