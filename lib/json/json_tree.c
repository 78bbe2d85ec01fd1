/* The tree of a request's arguments in their common shape (args_shape.h), in one pass over
 * the text: the tree jansson's parse in idem_json_parse_arguments() makes of it (members
 * in the text's order, every number a real, JSON_DECODE_INT_AS_REAL), at a fraction of
 * jansson's cost, which reads the text byte by byte through its stream. */
#include <jansson.h>
#include <string.h>

#include "args_shape.h"

/* Names longer than this go the full path: the tree's name is copied to the stack. */
#define TREE_MAX_NAME 128

static int tree_value(idem__shape_reader *r, int depth, json_t **out);

static int tree_array(idem__shape_reader *r, int depth, json_t **out)
{
    json_t *a = json_array(), *v;
    int rc = IDEM__SHAPE_NO, next;

    if (a == NULL)
        return IDEM__SHAPE_NOMEM;
    r->i++; /* '[' */
    idem__shape_blanks(r);
    if (r->i < r->n && r->s[r->i] == ']') {
        r->i++;
        *out = a;
        return IDEM__SHAPE_OK;
    }
    while ((rc = tree_value(r, depth, &v)) == IDEM__SHAPE_OK) {
        if (json_array_append_new(a, v) != 0) { /* v is released either way */
            rc = IDEM__SHAPE_NOMEM;
            break;
        }
        if ((next = idem__shape_next(r, ']')) != 0) {
            if (next < 0)
                break;
            *out = a;
            return IDEM__SHAPE_OK;
        }
    }
    if (rc == IDEM__SHAPE_OK)
        rc = IDEM__SHAPE_NO;
    json_decref(a);
    return rc;
}

/* One member at r->i ("name": value) set in @o; IDEM__SHAPE_NO on a name @o has already. */
static int tree_member(idem__shape_reader *r, json_t *o, int depth)
{
    char name[TREE_MAX_NAME];
    size_t at, len, had = json_object_size(o);
    json_t *v;
    int rc;

    if (r->i >= r->n || r->s[r->i] != '"' || idem__shape_string(r, &at, &len) != IDEM__SHAPE_OK ||
        len >= sizeof(name))
        return IDEM__SHAPE_NO;
    memcpy(name, r->s + at, len);
    name[len] = '\0';
    idem__shape_blanks(r);
    if (r->i >= r->n || r->s[r->i++] != ':')
        return IDEM__SHAPE_NO;
    if ((rc = tree_value(r, depth, &v)) != IDEM__SHAPE_OK)
        return rc;
    if (json_object_set_new_nocheck(o, name, v) != 0) /* v is released either way */
        return IDEM__SHAPE_NOMEM;
    return json_object_size(o) == had ? IDEM__SHAPE_NO : IDEM__SHAPE_OK;
}

static int tree_object(idem__shape_reader *r, int depth, json_t **out)
{
    json_t *o = json_object();
    int rc, next;

    if (o == NULL)
        return IDEM__SHAPE_NOMEM;
    r->i++; /* '{' */
    idem__shape_blanks(r);
    if (r->i < r->n && r->s[r->i] == '}') {
        r->i++;
        *out = o;
        return IDEM__SHAPE_OK;
    }
    while ((rc = tree_member(r, o, depth)) == IDEM__SHAPE_OK) {
        if ((next = idem__shape_next(r, '}')) != 0) {
            if (next < 0)
                break;
            *out = o;
            return IDEM__SHAPE_OK;
        }
    }
    if (rc == IDEM__SHAPE_OK)
        rc = IDEM__SHAPE_NO;
    json_decref(o);
    return rc;
}

/* An integer read as jansson reads every number here (JSON_DECODE_INT_AS_REAL): a double,
 * exact at 15 digits. */
static int tree_number(idem__shape_reader *r, json_t **out)
{
    size_t len = idem__shape_integer(r);
    const char *p = r->s + r->i - len;
    long long n = 0;
    int negative;

    if (len == 0)
        return IDEM__SHAPE_NO;
    negative = *p == '-';
    for (size_t k = (size_t)negative; k < len; k++)
        n = n * 10 + (p[k] - '0');
    *out = json_real(negative ? -(double)n : (double)n);
    return *out != NULL ? IDEM__SHAPE_OK : IDEM__SHAPE_NOMEM;
}

static int tree_value(idem__shape_reader *r, int depth, json_t **out)
{
    size_t start, len;
    int k;

    idem__shape_blanks(r);
    if (r->i >= r->n || depth >= r->max_depth)
        return IDEM__SHAPE_NO;
    switch (r->s[r->i]) {
    case '{':
        return tree_object(r, depth + 1, out);
    case '[':
        return tree_array(r, depth + 1, out);
    case '"':
        if (idem__shape_string(r, &start, &len) != IDEM__SHAPE_OK)
            return IDEM__SHAPE_NO;
        *out = json_stringn_nocheck(r->s + start, len);
        return *out != NULL ? IDEM__SHAPE_OK : IDEM__SHAPE_NOMEM;
    case '-':
        return tree_number(r, out);
    default:
        if (r->s[r->i] >= '0' && r->s[r->i] <= '9')
            return tree_number(r, out);
        if ((k = idem__shape_word(r)) < 0)
            return IDEM__SHAPE_NO;
        *out = k == 0 ? json_true() : k == 1 ? json_false() : json_null();
        return IDEM__SHAPE_OK;
    }
}

int idem__json_tree_fast(json_t **out, const char *text, size_t len, size_t max_depth)
{
    idem__shape_reader r = {text, len, 0, NULL,
                            max_depth < IDEM__SHAPE_MAX_DEPTH ? (int)max_depth
                                                              : IDEM__SHAPE_MAX_DEPTH};
    json_t *value = NULL;
    int rc = text != NULL ? tree_value(&r, 0, &value) : IDEM__SHAPE_NO;

    idem__shape_blanks(&r);
    if (rc == IDEM__SHAPE_OK && r.i != r.n)
        rc = IDEM__SHAPE_NO;
    if (rc == IDEM__SHAPE_OK) {
        *out = value;
        return 1;
    }
    json_decref(value);
    return rc == IDEM__SHAPE_NOMEM ? IDEM_ENOMEM : 0;
}
