/* Reading an ALTER TABLE statement's actions, so that the migration runner can send them
 * one by one where Citus refuses them together ("cannot execute ADD CONSTRAINT command
 * with other subcommands"). Lexing as the splitter does (idem__sql_lex_end()). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "migrate_internal.h"

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static int is_comment(const char *s, size_t len, size_t i)
{
    return i + 1 < len && ((s[i] == '-' && s[i + 1] == '-') || (s[i] == '/' && s[i + 1] == '*'));
}

/* The first item at or after i that is not a blank or a comment; len when none. */
static size_t next_item(const char *s, size_t len, size_t i)
{
    while (i < len && (is_blank(s[i]) || is_comment(s, len, i)))
        i = is_blank(s[i]) ? i + 1 : idem__sql_lex_end(s, len, i);
    return i;
}

/* The item at i is the word keyword (any case). */
static int keyword_at(const char *s, size_t len, size_t i, const char *keyword)
{
    size_t n = strlen(keyword);

    return i < len && idem__sql_lex_end(s, len, i) == i + n && strncasecmp(s + i, keyword, n) == 0;
}

/* The item at i is a word or a quoted identifier. */
static int identifier_at(const char *s, size_t len, size_t i)
{
    unsigned char c = i < len ? (unsigned char)s[i] : 0;

    return c == '"' || c == '_' || c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* After "ALTER TABLE [IF EXISTS] [ONLY]" at i: name [. name ...]; sets *name, returns the
 * item after it, or 0 when there is no name. */
static size_t read_name(idem__sql_stmt *name, const char *s, size_t len, size_t i)
{
    size_t end;

    name->offset = i;
    for (;;) {
        if (!identifier_at(s, len, i))
            return 0;
        end = idem__sql_lex_end(s, len, i);
        i = next_item(s, len, end);
        if (i >= len || s[i] != '.')
            break;
        i = next_item(s, len, i + 1);
    }
    name->len = end - name->offset;
    return i;
}

/* Where the head "ALTER TABLE [IF EXISTS] [ONLY] name [*]" of stmt ends (its first
 * action), with *name set; 0 when stmt is not of that form. */
static size_t read_head(idem__sql_stmt *name, const char *s, size_t len)
{
    size_t i = next_item(s, len, 0);

    if (!keyword_at(s, len, i, "alter"))
        return 0;
    i = next_item(s, len, idem__sql_lex_end(s, len, i));
    if (!keyword_at(s, len, i, "table"))
        return 0;
    i = next_item(s, len, idem__sql_lex_end(s, len, i));
    if (keyword_at(s, len, i, "if")) {
        i = next_item(s, len, idem__sql_lex_end(s, len, i));
        if (!keyword_at(s, len, i, "exists"))
            return 0;
        i = next_item(s, len, idem__sql_lex_end(s, len, i));
    }
    if (keyword_at(s, len, i, "only"))
        i = next_item(s, len, idem__sql_lex_end(s, len, i));
    /* ALTER TABLE ALL IN TABLESPACE moves many tables: not one table's actions */
    if (keyword_at(s, len, i, "all") || (i = read_name(name, s, len, i)) == 0)
        return 0;
    if (i < len && s[i] == '*')
        i = next_item(s, len, i + 1);
    return i < len ? i : 0;
}

static int push_action(idem__alter_table *t, size_t *cap, const char *s, size_t start, size_t end)
{
    idem__sql_stmt *grown;

    while (end > start && is_blank(s[end - 1]))
        end--;
    if (t->count == *cap) {
        *cap = *cap == 0 ? 8 : *cap * 2;
        if ((grown = realloc(t->actions, *cap * sizeof(*grown))) == NULL)
            return IDEM_ENOMEM;
        t->actions = grown;
    }
    t->actions[t->count].offset = start;
    t->actions[t->count].len = end - start;
    t->count++;
    return 0;
}

/* The actions from i on: split at the commas outside parentheses and brackets, up to the
 * final ';' or the end. Parentheses are counted apart from brackets, as the splitter
 * counts them: a ';' it left inside them stays inside an action. */
static int read_actions(idem__alter_table *t, const char *s, size_t len, size_t i)
{
    size_t cap = 0, start = i;
    int parens = 0, brackets = 0, rc = 0;

    while (rc == 0 && i < len && !(parens == 0 && brackets == 0 && s[i] == ';')) {
        parens += s[i] == '(' ? 1 : s[i] == ')' && parens > 0 ? -1 : 0;
        brackets += s[i] == '[' ? 1 : s[i] == ']' && brackets > 0 ? -1 : 0;
        if (parens == 0 && brackets == 0 && s[i] == ',') {
            rc = push_action(t, &cap, s, start, i);
            start = i = next_item(s, len, i + 1);
        } else {
            i = is_blank(s[i]) ? i + 1 : idem__sql_lex_end(s, len, i);
        }
    }
    return rc == 0 ? push_action(t, &cap, s, start, i) : rc;
}

int idem__sql_alter_table(idem__alter_table *out, const char *stmt, size_t len)
{
    idem__alter_table t = {{0, 0}, 0, NULL, 0};
    int rc;

    if ((t.head_len = read_head(&t.name, stmt, len)) == 0)
        return 0;
    rc = read_actions(&t, stmt, len, t.head_len);
    if (rc != 0 || t.count < 2) {
        free(t.actions);
        return rc;
    }
    *out = t;
    return 1;
}
