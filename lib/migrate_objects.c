/* What a migration creates: the objects its CREATE statements name, and whether they
 * exist. When the ledger lost a migration's row (or the whole ledger is gone), these tell
 * a migration that appears applied from a pending one; idem_migrate_baseline() checks them
 * before recording a migration it did not run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "migrate_internal.h"

/* Any relation (table, index, view, sequence), type or routine of that name. */
static const char SQL_OBJECT_EXISTS[] =
    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
    " ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2)"
    " OR EXISTS (SELECT 1 FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n"
    " ON n.oid = t.typnamespace WHERE n.nspname = $1 AND t.typname = $2)"
    " OR EXISTS (SELECT 1 FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n"
    " ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname = $2)";

/* A token of a statement: a word (unquoted identifier or keyword, lower-cased), a quoted
 * identifier (unescaped), or one other character. */
typedef struct token {
    char text[IDEM__OBJECT_NAME_MAX];
    int quoted;
    int word;
} token;

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static int is_word_char(unsigned char c, int first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80 ||
           (!first && ((c >= '0' && c <= '9') || c == '$'));
}

/* Skip whitespace and comments from *i. */
static void skip_blank(const char *s, size_t len, size_t *i)
{
    while (*i < len) {
        if (is_space(s[*i])) {
            (*i)++;
        } else if (*i + 1 < len && s[*i] == '-' && s[*i + 1] == '-') {
            while (*i < len && s[*i] != '\n')
                (*i)++;
        } else if (*i + 1 < len && s[*i] == '/' && s[*i + 1] == '*') {
            const char *end = NULL;
            for (size_t j = *i + 2; j + 1 < len && end == NULL; j++)
                if (s[j] == '*' && s[j + 1] == '/')
                    end = s + j + 2;
            *i = end != NULL ? (size_t)(end - s) : len;
        } else {
            return;
        }
    }
}

static void put_char(token *t, size_t *n, char c)
{
    if (*n + 1 < sizeof(t->text))
        t->text[(*n)++] = c;
}

/* The next token at *i; 0 at the end of the statement. */
static int next_token(token *t, const char *s, size_t len, size_t *i)
{
    size_t n = 0;

    memset(t, 0, sizeof(*t));
    skip_blank(s, len, i);
    if (*i >= len)
        return 0;
    if (s[*i] == '"') {
        t->quoted = 1;
        for ((*i)++; *i < len; (*i)++) {
            if (s[*i] == '"' && *i + 1 < len && s[*i + 1] == '"')
                put_char(t, &n, s[(*i)++]);
            else if (s[*i] == '"')
                break;
            else
                put_char(t, &n, s[*i]);
        }
        (*i)++;
    } else if (is_word_char((unsigned char)s[*i], 1)) {
        t->word = 1;
        while (*i < len && is_word_char((unsigned char)s[*i], 0)) {
            char c = s[(*i)++];
            put_char(t, &n, c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c);
        }
    } else {
        put_char(t, &n, s[(*i)++]);
    }
    return 1;
}

static int is_keyword(const token *t, const char *keyword)
{
    return t->word && strcmp(t->text, keyword) == 0;
}

/* Words that may come between CREATE and the kind of object. */
static int is_modifier(const token *t)
{
    static const char *const words[] = {"or",      "replace",   "unique",    "unlogged",
                                        "global",  "local",     "recursive", "materialized",
                                        "trusted", "procedural"};

    for (size_t k = 0; k < sizeof(words) / sizeof(words[0]); k++)
        if (is_keyword(t, words[k]))
            return 1;
    return 0;
}

static int is_kind(const token *t)
{
    static const char *const kinds[] = {"table", "index",  "view",     "sequence",
                                        "type",  "domain", "function", "procedure"};

    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
        if (is_keyword(t, kinds[k]))
            return 1;
    return 0;
}

/* The object a CREATE statement names, into *out; 0 when it names none that can be
 * checked (not a CREATE of a table, index, view, sequence, type, domain or routine; a
 * temporary object; an index without a name). */
static int created_object(idem__object *out, const char *s, size_t len)
{
    token t, dot, second;
    size_t i = 0;
    int or_replace = 0;

    if (!next_token(&t, s, len, &i) || !is_keyword(&t, "create"))
        return 0;
    while (next_token(&t, s, len, &i) && is_modifier(&t))
        or_replace |= is_keyword(&t, "replace");
    if (!is_kind(&t))
        return 0; /* TEMP objects end here too: they do not outlive the migration */
    next_token(&t, s, len, &i);
    if (is_keyword(&t, "concurrently"))
        next_token(&t, s, len, &i);
    out->if_not_exists = or_replace;
    if (is_keyword(&t, "if")) {
        next_token(&t, s, len, &i); /* not */
        next_token(&t, s, len, &i); /* exists */
        next_token(&t, s, len, &i);
        out->if_not_exists = 1;
    }
    if ((!t.word && !t.quoted) || is_keyword(&t, "on"))
        return 0;
    snprintf(out->schema, sizeof(out->schema), "idem"); /* migrations run with search_path idem */
    snprintf(out->name, sizeof(out->name), "%s", t.text);
    if (next_token(&dot, s, len, &i) && strcmp(dot.text, ".") == 0 &&
        next_token(&second, s, len, &i) && (second.word || second.quoted)) {
        snprintf(out->schema, sizeof(out->schema), "%s", t.text);
        snprintf(out->name, sizeof(out->name), "%s", second.text);
    }
    return 1;
}

int idem__migration_objects(idem__object **out, size_t *out_count, const idem__migration_file *f)
{
    idem__sql_stmt *stmts = NULL;
    idem__object *objects = NULL;
    size_t count = 0, n = 0;
    int rc = idem__sql_split(&stmts, &count, f->sql, f->len);

    if (rc == 0 && count > 0 && (objects = calloc(count, sizeof(*objects))) == NULL)
        rc = IDEM_ENOMEM;
    for (size_t i = 0; rc == 0 && i < count; i++)
        n += (size_t)created_object(&objects[n], f->sql + stmts[i].offset, stmts[i].len);
    free(stmts);
    if (rc != 0) {
        free(objects);
        return rc;
    }
    *out = objects;
    *out_count = n;
    return 0;
}

int idem__object_exists(PGconn *conn, const idem__object *object, idem_error *err)
{
    const char *values[2] = {object->schema, object->name};
    PGresult *res = PQexecParams(conn, SQL_OBJECT_EXISTS, 2, NULL, values, NULL, NULL, 0);
    int rc;

    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
        rc = idem__error_pg(err, conn, res, "looking for %s.%s", object->schema, object->name);
    else
        rc = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return rc;
}
