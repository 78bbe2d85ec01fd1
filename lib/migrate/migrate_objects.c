/* What a migration leaves behind, read from its statements: the objects its CREATE
 * statements name, the tables it isolates (idem.isolate_tenants()) and the table
 * privileges it grants. When the ledger lost a migration's row (or the whole ledger is
 * gone), these tell a migration that appears applied from a pending one;
 * idem_migrate_baseline() checks them before recording a migration it did not run
 * (migrate_object_check.c looks for them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "migrate_internal.h"

/* A token of a statement: a word (unquoted identifier or keyword, lower-cased), a quoted
 * identifier (unescaped), a string literal (unescaped), or one other character. */
typedef struct token {
    char text[IDEM__OBJECT_NAME_MAX];
    int quoted;
    int word;
    int string;
} token;

/* The objects found so far. */
typedef struct object_list {
    idem__object *items;
    size_t count, cap;
} object_list;

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

/* The text between quote characters q from *i (at the opening one), a doubled q being one;
 * *i ends past the closing one. */
static void read_quoted(token *t, size_t *n, const char *s, size_t len, size_t *i, char q)
{
    for ((*i)++; *i < len; (*i)++) {
        if (s[*i] == q && *i + 1 < len && s[*i + 1] == q)
            put_char(t, n, s[(*i)++]);
        else if (s[*i] == q)
            break;
        else
            put_char(t, n, s[*i]);
    }
    (*i)++;
}

/* The next token at *i; 0 at the end of the statement. */
static int next_token(token *t, const char *s, size_t len, size_t *i)
{
    size_t n = 0;

    memset(t, 0, sizeof(*t));
    skip_blank(s, len, i);
    if (*i >= len)
        return 0;
    if (s[*i] == '"' || s[*i] == '\'') {
        t->quoted = s[*i] == '"';
        t->string = !t->quoted;
        read_quoted(t, &n, s, len, i, s[*i]);
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

static int is_char(const token *t, char c)
{
    return !t->word && !t->quoted && !t->string && t->text[0] == c && t->text[1] == '\0';
}

static int is_name(const token *t)
{
    return t->word || t->quoted;
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

/* The privileges of a table that a GRANT can give and has_table_privilege() knows. */
static int is_table_privilege(const token *t)
{
    static const char *const privileges[] = {"select",   "insert",     "update", "delete",
                                             "truncate", "references", "trigger"};

    for (size_t k = 0; k < sizeof(privileges) / sizeof(privileges[0]); k++)
        if (is_keyword(t, privileges[k]))
            return 1;
    return 0;
}

/* A name, first (read already) and maybe ".second", into out (schema "idem" when there is
 * no qualifier: migrations run with search_path idem); *next gets the token after it.
 * Returns 2 for a qualified name, 1 for a bare one, 0 when first is no name. */
static int read_name(idem__object *out, const token *first, token *next, const char *s, size_t len,
                     size_t *i)
{
    token second;

    if (!is_name(first))
        return 0;
    snprintf(out->schema, sizeof(out->schema), "idem");
    snprintf(out->name, sizeof(out->name), "%s", first->text);
    if (!next_token(next, s, len, i) || !is_char(next, '.'))
        return 1;
    if (!next_token(&second, s, len, i) || !is_name(&second))
        return 1;
    snprintf(out->schema, sizeof(out->schema), "%s", first->text);
    snprintf(out->name, sizeof(out->name), "%s", second.text);
    next_token(next, s, len, i);
    return 2;
}

static int list_add(object_list *l, const idem__object *o)
{
    if (l->count == l->cap) {
        size_t cap = l->cap > 0 ? 2 * l->cap : 16;
        idem__object *items = realloc(l->items, cap * sizeof(*items));
        if (items == NULL)
            return IDEM_ENOMEM;
        l->items = items;
        l->cap = cap;
    }
    l->items[l->count++] = *o;
    return 0;
}

/* The object a CREATE statement names (at *i: past CREATE); nothing when it names none
 * that can be checked (not a CREATE of a table, index, view, sequence, type, domain or
 * routine; a temporary object; an index without a name). */
static int created(object_list *l, const char *s, size_t len, size_t i)
{
    idem__object o;
    token t, next;
    int or_replace = 0;

    memset(&o, 0, sizeof(o));
    while (next_token(&t, s, len, &i) && is_modifier(&t))
        or_replace |= is_keyword(&t, "replace");
    if (!is_kind(&t))
        return 0; /* TEMP objects end here too: they do not outlive the migration */
    next_token(&t, s, len, &i);
    if (is_keyword(&t, "concurrently"))
        next_token(&t, s, len, &i);
    o.kind = IDEM__OBJECT_NAMED;
    o.if_not_exists = or_replace;
    if (is_keyword(&t, "if")) {
        next_token(&t, s, len, &i); /* not */
        next_token(&t, s, len, &i); /* exists */
        next_token(&t, s, len, &i);
        o.if_not_exists = 1;
    }
    if (is_keyword(&t, "on") || !read_name(&o, &t, &next, s, len, &i))
        return 0;
    return list_add(l, &o);
}

/* The privileges of GRANT privilege [, ...] ON (at *i: past GRANT) into privs; 0 unless
 * every one is a table privilege without a column list. */
static size_t grant_privileges(char (*privs)[16], size_t max, const char *s, size_t len, size_t *i)
{
    token t;
    size_t n = 0;

    do {
        if (!next_token(&t, s, len, i) || !is_table_privilege(&t) || n == max)
            return 0;
        size_t k = 0;
        for (; t.text[k] != '\0'; k++) /* a known privilege: shorter than privs[n] */
            privs[n][k] = (char)(t.text[k] - 'a' + 'A');
        privs[n][k] = '\0';
        n++;
    } while (next_token(&t, s, len, i) && is_char(&t, ','));
    return is_keyword(&t, "on") ? n : 0;
}

/* The tables of ON [TABLE] name [, ...] TO (at *i: past ON); 0 when the grant is on
 * something else (ON SCHEMA s, ON FUNCTION f, ON ALL TABLES IN SCHEMA s). */
static size_t grant_tables(idem__object *tables, size_t max, const char *s, size_t len, size_t *i)
{
    token t, next;
    size_t n = 0;
    int kind, table_keyword;

    next_token(&t, s, len, i);
    if ((table_keyword = is_keyword(&t, "table")) != 0)
        next_token(&t, s, len, i);
    do {
        if (n == max || (kind = read_name(&tables[n], &t, &next, s, len, i)) == 0)
            return 0;
        /* ON SCHEMA idem: a word follows a bare word that is a kind of object */
        if (n == 0 && kind == 1 && !table_keyword && next.word && !is_keyword(&next, "to"))
            return 0;
        n++;
    } while (is_char(&next, ',') && next_token(&t, s, len, i));
    return is_keyword(&next, "to") ? n : 0;
}

/* The roles of TO role [, ...] (at *i: past TO) into roles. */
static size_t grant_roles(char (*roles)[IDEM__OBJECT_NAME_MAX], size_t max, const char *s,
                          size_t len, size_t *i)
{
    token t;
    size_t n = 0;

    do {
        if (!next_token(&t, s, len, i) || n == max)
            return 0;
        if (is_keyword(&t, "group") && !next_token(&t, s, len, i))
            return 0;
        if (!is_name(&t))
            return 0;
        snprintf(roles[n++], IDEM__OBJECT_NAME_MAX, "%s", t.text);
    } while (next_token(&t, s, len, i) && is_char(&t, ','));
    return n;
}

#define GRANT_MAX 8

/* GRANT privilege [, ...] ON [TABLE] name [, ...] TO role [, ...] (at *i: past GRANT): an
 * object per table, role and privilege. Column privileges and grants on other objects are
 * left out. */
static int granted(object_list *l, const char *s, size_t len, size_t i)
{
    char privs[GRANT_MAX][16], roles[GRANT_MAX][IDEM__OBJECT_NAME_MAX];
    idem__object tables[GRANT_MAX];
    size_t np, nt = 0, nr = 0;
    int rc = 0;

    memset(tables, 0, sizeof(tables));
    np = grant_privileges(privs, GRANT_MAX, s, len, &i);
    if (np > 0)
        nt = grant_tables(tables, GRANT_MAX, s, len, &i);
    if (nt > 0)
        nr = grant_roles(roles, GRANT_MAX, s, len, &i);
    for (size_t t = 0; t < nt; t++)
        for (size_t r = 0; r < nr; r++)
            for (size_t p = 0; rc == 0 && p < np; p++) {
                idem__object o = tables[t];
                o.kind = IDEM__OBJECT_GRANT;
                o.if_not_exists = 1;
                memcpy(o.role, roles[r], sizeof(o.role));
                memcpy(o.privilege, privs[p], sizeof(o.privilege));
                rc = list_add(l, &o);
            }
    return rc;
}

/* The calls of isolate_tenants() in a SELECT or DO statement (at *i: past its first word):
 * an object for each, naming its table when the argument is a string ('idem.outbox'),
 * else every table of schema idem with a tenant column (0007 passes each such table from
 * the catalog). */
static int isolated(object_list *l, const char *s, size_t len, size_t i)
{
    token t;
    int rc = 0;

    while (rc == 0 && next_token(&t, s, len, &i)) {
        idem__object o;
        token next;
        size_t j = 0;

        if (!is_keyword(&t, "isolate_tenants") || !next_token(&t, s, len, &i) ||
            !is_char(&t, '(') || !next_token(&t, s, len, &i))
            continue;
        memset(&o, 0, sizeof(o));
        o.kind = IDEM__OBJECT_ISOLATED;
        o.if_not_exists = 1; /* it replaces what it made: running it again is harmless */
        snprintf(o.schema, sizeof(o.schema), "idem");
        if (t.string) {
            token first;
            next_token(&first, t.text, strlen(t.text), &j);
            read_name(&o, &first, &next, t.text, strlen(t.text), &j);
        }
        rc = list_add(l, &o);
    }
    return rc;
}

static int statement_objects(object_list *l, const char *s, size_t len)
{
    token t;
    size_t i = 0;

    if (!next_token(&t, s, len, &i))
        return 0;
    if (is_keyword(&t, "create"))
        return created(l, s, len, i);
    if (is_keyword(&t, "grant"))
        return granted(l, s, len, i);
    if (is_keyword(&t, "select") || is_keyword(&t, "do"))
        return isolated(l, s, len, i);
    return 0;
}

int idem__migration_objects(idem__object **out, size_t *out_count, const idem__migration_file *f)
{
    idem__sql_stmt *stmts = NULL;
    object_list l = {NULL, 0, 0};
    size_t count = 0;
    int rc = idem__sql_split(&stmts, &count, f->sql, f->len);

    for (size_t i = 0; rc == 0 && i < count; i++)
        rc = statement_objects(&l, f->sql + stmts[i].offset, stmts[i].len);
    free(stmts);
    if (rc != 0) {
        free(l.items);
        return rc;
    }
    *out = l.items;
    *out_count = l.count;
    return 0;
}
