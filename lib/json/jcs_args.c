/* The common shape of a request's arguments, read in one pass: its canonical form straight
 * from the text, what a retry needs to fingerprint its request, and its jansson tree, what a
 * call whose effect reads its arguments needs (jansson's own parse, byte by byte through its
 * stream, costs several times the pass).
 *
 * It covers a subset of JSON whose canonical form is certain without reading any number as
 * a double: objects, arrays, true, false, null, strings without escapes (valid UTF-8, no
 * control characters), and integers of at most 15 digits (exactly doubles, written as
 * RFC 8785 writes them: their digits). Everything else (an escape, a fraction or an
 * exponent, a longer integer, -0, a duplicate name, deep nesting, anything invalid) is
 * left to the full path, idem_json_parse_arguments()'s parse and idem__jcs_write_value():
 * so every text read here is one that path accepts, into the same bytes and the same tree,
 * and every error is still reported in its words. */
#include <string.h>

#include "jcs.h"

/* Nesting this path follows; deeper text goes the full path (whose own limit, the
 * options' max_depth, is at least IDEM_JSON_MAX_DEPTH_DEFAULT). */
#define FAST_MAX_DEPTH 32
/* Members of one object this path sorts on the stack; more go the full path. */
#define FAST_MAX_MEMBERS 32
/* Integer digits that are always exactly a double (< 2^53) and written as they are. */
#define FAST_MAX_DIGITS 15

enum { FAST_OK = 0, FAST_NO = 1, FAST_NOMEM = -1 };

typedef struct fast_reader {
    const char *s;
    size_t n, i;
    idem__buf *out;
    int max_depth; /* values nested this deep or deeper go the full path */
} fast_reader;

static int fast_value(fast_reader *r, int depth);

static void fast_blanks(fast_reader *r)
{
    while (r->i < r->n &&
           (r->s[r->i] == ' ' || r->s[r->i] == '\t' || r->s[r->i] == '\r' || r->s[r->i] == '\n'))
        r->i++;
}

static int put(fast_reader *r, const void *bytes, size_t n)
{
    return idem__buf_append(r->out, bytes, n) != 0 ? FAST_NOMEM : FAST_OK;
}

/* A string at r->i (its opening quote) without escapes or control characters, its bytes
 * valid UTF-8: *start and *len its contents in the text. Its canonical form is the text
 * itself, quotes included (RFC 8785 escapes nothing else). */
static int fast_string(fast_reader *r, size_t *start, size_t *len)
{
    const unsigned char *s = (const unsigned char *)r->s;
    size_t i = r->i + 1;
    uint32_t cp;

    while (i < r->n && s[i] != '"') {
        if (s[i] >= 0x20 && s[i] < 0x80 && s[i] != '\\')
            i++;
        else if (s[i] < 0x80 || idem__utf8_next(s, r->n, &i, &cp) != 0)
            return FAST_NO;
    }
    if (i >= r->n)
        return FAST_NO;
    *start = r->i + 1;
    *len = i - r->i - 1;
    r->i = i + 1;
    return FAST_OK;
}

/* An integer at r->i in the shape above, read: its length in the text, or 0. */
static size_t fast_integer(fast_reader *r)
{
    size_t start = r->i, digits;

    if (r->s[r->i] == '-')
        r->i++;
    digits = r->i;
    while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9')
        r->i++;
    digits = r->i - digits;
    /* No leading zero but 0 itself, not -0, no fraction or exponent, exactly a double. */
    if (digits == 0 || digits > FAST_MAX_DIGITS || (r->s[r->i - digits] == '0' && digits > 1) ||
        (r->s[start] == '-' && r->s[r->i - digits] == '0') ||
        (r->i < r->n && (r->s[r->i] == '.' || r->s[r->i] == 'e' || r->s[r->i] == 'E')))
        return 0;
    return r->i - start;
}

static int fast_number(fast_reader *r)
{
    size_t len = fast_integer(r);

    return len == 0 ? FAST_NO : put(r, r->s + r->i - len, len);
}

static const char *const fast_words[] = {"true", "false", "null"};

/* true, false or null at r->i, read: its index in fast_words, or -1. */
static int fast_word_at(fast_reader *r)
{
    for (int k = 0; k < 3; k++) {
        size_t len = strlen(fast_words[k]);

        if (r->n - r->i >= len && memcmp(r->s + r->i, fast_words[k], len) == 0) {
            r->i += len;
            return k;
        }
    }
    return -1;
}

static int fast_word(fast_reader *r)
{
    int k = fast_word_at(r);

    return k < 0 ? FAST_NO : put(r, fast_words[k], strlen(fast_words[k]));
}

static int fast_array(fast_reader *r, int depth)
{
    int rc = put(r, "[", 1);

    r->i++; /* '[' */
    fast_blanks(r);
    if (rc == FAST_OK && r->i < r->n && r->s[r->i] == ']') {
        r->i++;
        return put(r, "]", 1);
    }
    while (rc == FAST_OK) {
        if ((rc = fast_value(r, depth)) != FAST_OK)
            return rc;
        fast_blanks(r);
        if (r->i >= r->n)
            return FAST_NO;
        if (r->s[r->i++] == ']')
            return put(r, "]", 1);
        if (r->s[r->i - 1] != ',')
            return FAST_NO;
        rc = put(r, ",", 1);
    }
    return rc;
}

/* One member as written, in the text's order: "name":value at out[at..at+len), and its
 * name in the text. */
typedef struct fast_member {
    size_t name, name_len;
    size_t at, len;
} fast_member;

static int fast_member_order(const fast_reader *r, const fast_member *a, const fast_member *b)
{
    return idem__jcs_key_compare(r->s + a->name, a->name_len, r->s + b->name, b->name_len);
}

/* Sort the members by name (insertion: objects here are small); FAST_NO on a name that
 * appears twice (the full path refuses it, in jansson's words). Sets *moved when the
 * order changed. */
static int fast_sort(const fast_reader *r, fast_member *m, size_t count, int *moved)
{
    *moved = 0;
    for (size_t k = 1; k < count; k++) {
        fast_member x = m[k];
        size_t j = k;
        int order = 1;

        while (j > 0 && (order = fast_member_order(r, &m[j - 1], &x)) > 0) {
            m[j] = m[j - 1];
            j--;
        }
        if (j > 0 && order == 0)
            return FAST_NO;
        *moved |= j != k;
        m[j] = x;
    }
    return FAST_OK;
}

/* The members were written in the text's order from @at on, comma-separated: put them in
 * their canonical order when that differs (members were mostly written in it). */
static int fast_order_members(fast_reader *r, size_t at, fast_member *m, size_t count)
{
    idem__buf copy = {NULL, 0, 0};
    int moved, rc = FAST_OK;

    if (fast_sort(r, m, count, &moved) != FAST_OK)
        return FAST_NO;
    if (!moved)
        return FAST_OK;
    if (idem__buf_append(&copy, r->out->data + at, r->out->len - at) != 0)
        return FAST_NOMEM;
    r->out->len = at;
    for (size_t k = 0; k < count && rc == FAST_OK; k++) {
        if (k > 0)
            rc = put(r, ",", 1);
        if (rc == FAST_OK)
            rc = put(r, copy.data + (m[k].at - at), m[k].len);
    }
    idem__buf_free(&copy);
    return rc;
}

/* One member at r->i ("name": value), written at the end of the output as "name":value
 * into *m. */
static int fast_member_at(fast_reader *r, fast_member *m, int depth)
{
    int rc;

    if (r->i >= r->n || r->s[r->i] != '"' || fast_string(r, &m->name, &m->name_len) != FAST_OK)
        return FAST_NO;
    fast_blanks(r);
    if (r->i >= r->n || r->s[r->i++] != ':')
        return FAST_NO;
    m->at = r->out->len;
    rc = put(r, r->s + m->name - 1, m->name_len + 2);
    if (rc == FAST_OK)
        rc = put(r, ":", 1);
    if (rc == FAST_OK)
        rc = fast_value(r, depth);
    m->len = r->out->len - m->at;
    return rc;
}

static int fast_object(fast_reader *r, int depth)
{
    fast_member m[FAST_MAX_MEMBERS];
    size_t count = 0, at;
    int rc = put(r, "{", 1);

    r->i++; /* '{' */
    at = r->out->len;
    fast_blanks(r);
    if (rc == FAST_OK && r->i < r->n && r->s[r->i] == '}') {
        r->i++;
        return put(r, "}", 1);
    }
    while (rc == FAST_OK) {
        if (count == FAST_MAX_MEMBERS)
            return FAST_NO;
        if ((rc = fast_member_at(r, &m[count++], depth)) != FAST_OK)
            return rc;
        fast_blanks(r);
        if (r->i >= r->n)
            return FAST_NO;
        if (r->s[r->i] == '}')
            break;
        if (r->s[r->i++] != ',')
            return FAST_NO;
        fast_blanks(r);
        rc = put(r, ",", 1);
    }
    r->i++; /* '}' */
    if (rc == FAST_OK)
        rc = fast_order_members(r, at, m, count);
    return rc == FAST_OK ? put(r, "}", 1) : rc;
}

static int fast_value(fast_reader *r, int depth)
{
    size_t start, len;
    int rc;

    fast_blanks(r);
    if (r->i >= r->n || depth >= r->max_depth)
        return FAST_NO;
    switch (r->s[r->i]) {
    case '{':
        return fast_object(r, depth + 1);
    case '[':
        return fast_array(r, depth + 1);
    case '"':
        if ((rc = fast_string(r, &start, &len)) != FAST_OK)
            return rc;
        return put(r, r->s + start - 1, len + 2);
    case '-':
        return fast_number(r);
    default:
        if (r->s[r->i] >= '0' && r->s[r->i] <= '9')
            return fast_number(r);
        return fast_word(r);
    }
}

int idem__jcs_arguments_fast(idem__buf *buf, const char *text, size_t len)
{
    fast_reader r = {text, len, 0, buf, FAST_MAX_DEPTH};
    size_t at = buf->len;
    int rc = text != NULL ? fast_value(&r, 0) : FAST_NO;

    fast_blanks(&r);
    if (rc == FAST_OK && r.i != r.n)
        rc = FAST_NO;
    if (rc == FAST_OK)
        return 1;
    if (buf->data != NULL) {
        buf->len = at;
        buf->data[at] = '\0';
    }
    return rc == FAST_NOMEM ? IDEM_ENOMEM : 0;
}

/* ---- the tree ---- */

/* Names longer than this go the full path: the tree's name is copied to the stack. */
#define TREE_MAX_NAME 128

static int tree_value(fast_reader *r, int depth, json_t **out);

static int tree_array(fast_reader *r, int depth, json_t **out)
{
    json_t *a = json_array(), *v;
    int rc = FAST_NO;

    if (a == NULL)
        return FAST_NOMEM;
    r->i++; /* '[' */
    fast_blanks(r);
    if (r->i < r->n && r->s[r->i] == ']') {
        r->i++;
        *out = a;
        return FAST_OK;
    }
    while ((rc = tree_value(r, depth, &v)) == FAST_OK) {
        if (json_array_append_new(a, v) != 0) { /* v is released either way */
            rc = FAST_NOMEM;
            break;
        }
        fast_blanks(r);
        if (r->i >= r->n || (r->s[r->i] != ']' && r->s[r->i] != ',')) {
            rc = FAST_NO;
            break;
        }
        if (r->s[r->i++] == ']') {
            *out = a;
            return FAST_OK;
        }
    }
    json_decref(a);
    return rc;
}

/* One member at r->i ("name": value) set in @o; FAST_NO on a name @o has already. */
static int tree_member(fast_reader *r, json_t *o, int depth)
{
    char name[TREE_MAX_NAME];
    size_t at, len, had = json_object_size(o);
    json_t *v;
    int rc;

    if (r->i >= r->n || r->s[r->i] != '"' || fast_string(r, &at, &len) != FAST_OK ||
        len >= sizeof(name))
        return FAST_NO;
    memcpy(name, r->s + at, len);
    name[len] = '\0';
    fast_blanks(r);
    if (r->i >= r->n || r->s[r->i++] != ':')
        return FAST_NO;
    if ((rc = tree_value(r, depth, &v)) != FAST_OK)
        return rc;
    if (json_object_set_new_nocheck(o, name, v) != 0) /* v is released either way */
        return FAST_NOMEM;
    return json_object_size(o) == had ? FAST_NO : FAST_OK;
}

static int tree_object(fast_reader *r, int depth, json_t **out)
{
    json_t *o = json_object();
    int rc;

    if (o == NULL)
        return FAST_NOMEM;
    r->i++; /* '{' */
    fast_blanks(r);
    if (r->i < r->n && r->s[r->i] == '}') {
        r->i++;
        *out = o;
        return FAST_OK;
    }
    while ((rc = tree_member(r, o, depth)) == FAST_OK) {
        fast_blanks(r);
        if (r->i >= r->n || (r->s[r->i] != '}' && r->s[r->i] != ',')) {
            rc = FAST_NO;
            break;
        }
        if (r->s[r->i++] == '}') {
            *out = o;
            return FAST_OK;
        }
        fast_blanks(r);
    }
    json_decref(o);
    return rc;
}

/* An integer read as jansson reads every number here (JSON_DECODE_INT_AS_REAL): a double,
 * exact at 15 digits. */
static int tree_number(fast_reader *r, json_t **out)
{
    size_t len = fast_integer(r);
    const char *p = r->s + r->i - len;
    long long n = 0;
    int negative;

    if (len == 0)
        return FAST_NO;
    negative = *p == '-';
    for (size_t k = (size_t)negative; k < len; k++)
        n = n * 10 + (p[k] - '0');
    *out = json_real(negative ? -(double)n : (double)n);
    return *out != NULL ? FAST_OK : FAST_NOMEM;
}

static int tree_value(fast_reader *r, int depth, json_t **out)
{
    size_t start, len;
    int k;

    fast_blanks(r);
    if (r->i >= r->n || depth >= r->max_depth)
        return FAST_NO;
    switch (r->s[r->i]) {
    case '{':
        return tree_object(r, depth + 1, out);
    case '[':
        return tree_array(r, depth + 1, out);
    case '"':
        if (fast_string(r, &start, &len) != FAST_OK)
            return FAST_NO;
        *out = json_stringn_nocheck(r->s + start, len);
        return *out != NULL ? FAST_OK : FAST_NOMEM;
    case '-':
        return tree_number(r, out);
    default:
        if (r->s[r->i] >= '0' && r->s[r->i] <= '9')
            return tree_number(r, out);
        if ((k = fast_word_at(r)) < 0)
            return FAST_NO;
        *out = k == 0 ? json_true() : k == 1 ? json_false() : json_null();
        return FAST_OK;
    }
}

int idem__json_tree_fast(json_t **out, const char *text, size_t len, size_t max_depth)
{
    fast_reader r = {text, len, 0, NULL,
                     max_depth < FAST_MAX_DEPTH ? (int)max_depth : FAST_MAX_DEPTH};
    json_t *value = NULL;
    int rc = text != NULL ? tree_value(&r, 0, &value) : FAST_NO;

    fast_blanks(&r);
    if (rc == FAST_OK && r.i != r.n)
        rc = FAST_NO;
    if (rc == FAST_OK) {
        *out = value;
        return 1;
    }
    json_decref(value);
    return rc == FAST_NOMEM ? IDEM_ENOMEM : 0;
}

/* The end of the value that starts at @at in text this file wrote (no blanks, no escape in
 * any string). */
static size_t canonical_value_end(const char *s, size_t at)
{
    size_t depth = 0;

    for (size_t i = at;; i++) {
        if (s[i] == '"') {
            i = (size_t)(strchr(s + i + 1, '"') - s);
            if (depth == 0)
                return i + 1;
        } else if (s[i] == '{' || s[i] == '[') {
            depth++;
        } else if (s[i] == '}' || s[i] == ']') {
            if (depth == 0)
                return i;
            if (--depth == 0)
                return i + 1;
        } else if (s[i] == ',' && depth == 0) {
            return i;
        }
    }
}

int idem__jcs_canonical_member(const char *s, const char *name, size_t *at, size_t *len)
{
    size_t name_len = strlen(name), i = 1;

    while (s[i] == '"') {
        const char *end = strchr(s + i + 1, '"');
        size_t value = (size_t)(end - s) + 2, value_end = canonical_value_end(s, value);

        if ((size_t)(end - s) - i - 1 == name_len && memcmp(s + i + 1, name, name_len) == 0) {
            *at = value;
            *len = value_end - value;
            return 1;
        }
        i = value_end + (s[value_end] == ',');
    }
    return 0;
}
