/* The canonical form of a request's arguments straight from their text, in one pass, for
 * the arguments' common shape (args_shape.h): what a retry needs to fingerprint its
 * request without building jansson's tree (built only if the call goes on to run its
 * effect, json_tree.c). */
#include <string.h>

#include "args_shape.h"

/* Members of one object this path sorts on the stack; more go the full path. */
#define FAST_MAX_MEMBERS 32

static int fast_value(idem__shape_reader *r, int depth);

static int put(idem__shape_reader *r, const void *bytes, size_t n)
{
    return idem__buf_append(r->out, bytes, n) != 0 ? IDEM__SHAPE_NOMEM : IDEM__SHAPE_OK;
}

static int fast_number(idem__shape_reader *r)
{
    size_t len = idem__shape_integer(r);

    return len == 0 ? IDEM__SHAPE_NO : put(r, r->s + r->i - len, len);
}

static int fast_word(idem__shape_reader *r)
{
    int k = idem__shape_word(r);

    return k < 0 ? IDEM__SHAPE_NO : put(r, idem__shape_words[k], strlen(idem__shape_words[k]));
}

static int fast_array(idem__shape_reader *r, int depth)
{
    int rc = put(r, "[", 1), next;

    r->i++; /* '[' */
    idem__shape_blanks(r);
    if (rc == IDEM__SHAPE_OK && r->i < r->n && r->s[r->i] == ']') {
        r->i++;
        return put(r, "]", 1);
    }
    while (rc == IDEM__SHAPE_OK) {
        if ((rc = fast_value(r, depth)) != IDEM__SHAPE_OK)
            return rc;
        if ((next = idem__shape_next(r, ']')) != 0)
            return next < 0 ? IDEM__SHAPE_NO : put(r, "]", 1);
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

static int fast_member_order(const idem__shape_reader *r, const fast_member *a,
                             const fast_member *b)
{
    return idem__jcs_key_compare(r->s + a->name, a->name_len, r->s + b->name, b->name_len);
}

/* Sort the members by name (insertion: objects here are small); IDEM__SHAPE_NO on a name that
 * appears twice (the full path refuses it, in jansson's words). Sets *moved when the
 * order changed. */
static int fast_sort(const idem__shape_reader *r, fast_member *m, size_t count, int *moved)
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
            return IDEM__SHAPE_NO;
        *moved |= j != k;
        m[j] = x;
    }
    return IDEM__SHAPE_OK;
}

/* The members were written in the text's order from @at on, comma-separated: put them in
 * their canonical order when that differs (members were mostly written in it). */
static int fast_order_members(idem__shape_reader *r, size_t at, fast_member *m, size_t count)
{
    idem__buf copy = {NULL, 0, 0};
    int moved, rc = IDEM__SHAPE_OK;

    if (fast_sort(r, m, count, &moved) != IDEM__SHAPE_OK)
        return IDEM__SHAPE_NO;
    if (!moved)
        return IDEM__SHAPE_OK;
    if (idem__buf_append(&copy, r->out->data + at, r->out->len - at) != 0)
        return IDEM__SHAPE_NOMEM;
    r->out->len = at;
    for (size_t k = 0; k < count && rc == IDEM__SHAPE_OK; k++) {
        if (k > 0)
            rc = put(r, ",", 1);
        if (rc == IDEM__SHAPE_OK)
            rc = put(r, copy.data + (m[k].at - at), m[k].len);
    }
    idem__buf_free(&copy);
    return rc;
}

/* One member at r->i ("name": value), written at the end of the output as "name":value
 * into *m. */
static int fast_member_at(idem__shape_reader *r, fast_member *m, int depth)
{
    int rc;

    if (r->i >= r->n || r->s[r->i] != '"' ||
        idem__shape_string(r, &m->name, &m->name_len) != IDEM__SHAPE_OK)
        return IDEM__SHAPE_NO;
    idem__shape_blanks(r);
    if (r->i >= r->n || r->s[r->i++] != ':')
        return IDEM__SHAPE_NO;
    m->at = r->out->len;
    rc = put(r, r->s + m->name - 1, m->name_len + 2);
    if (rc == IDEM__SHAPE_OK)
        rc = put(r, ":", 1);
    if (rc == IDEM__SHAPE_OK)
        rc = fast_value(r, depth);
    m->len = r->out->len - m->at;
    return rc;
}

static int fast_object(idem__shape_reader *r, int depth)
{
    fast_member m[FAST_MAX_MEMBERS];
    size_t count = 0, at;
    int rc = put(r, "{", 1), next;

    r->i++; /* '{' */
    at = r->out->len;
    idem__shape_blanks(r);
    if (rc == IDEM__SHAPE_OK && r->i < r->n && r->s[r->i] == '}') {
        r->i++;
        return put(r, "}", 1);
    }
    while (rc == IDEM__SHAPE_OK) {
        if (count == FAST_MAX_MEMBERS)
            return IDEM__SHAPE_NO;
        if ((rc = fast_member_at(r, &m[count++], depth)) != IDEM__SHAPE_OK)
            return rc;
        if ((next = idem__shape_next(r, '}')) != 0) {
            if (next < 0)
                return IDEM__SHAPE_NO;
            break;
        }
        rc = put(r, ",", 1);
    }
    if (rc == IDEM__SHAPE_OK)
        rc = fast_order_members(r, at, m, count);
    return rc == IDEM__SHAPE_OK ? put(r, "}", 1) : rc;
}

static int fast_value(idem__shape_reader *r, int depth)
{
    size_t start, len;
    int rc;

    idem__shape_blanks(r);
    if (r->i >= r->n || depth >= r->max_depth)
        return IDEM__SHAPE_NO;
    switch (r->s[r->i]) {
    case '{':
        return fast_object(r, depth + 1);
    case '[':
        return fast_array(r, depth + 1);
    case '"':
        if ((rc = idem__shape_string(r, &start, &len)) != IDEM__SHAPE_OK)
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
    idem__shape_reader r = {text, len, 0, buf, IDEM__SHAPE_MAX_DEPTH};
    size_t at = buf->len;
    int rc = text != NULL ? fast_value(&r, 0) : IDEM__SHAPE_NO;

    idem__shape_blanks(&r);
    if (rc == IDEM__SHAPE_OK && r.i != r.n)
        rc = IDEM__SHAPE_NO;
    if (rc == IDEM__SHAPE_OK)
        return 1;
    if (buf->data != NULL) {
        buf->len = at;
        buf->data[at] = '\0';
    }
    return rc == IDEM__SHAPE_NOMEM ? IDEM_ENOMEM : 0;
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
