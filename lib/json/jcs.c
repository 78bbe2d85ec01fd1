/* RFC 8785 (JSON Canonicalization Scheme) serialization. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "idem/fingerprint.h"
#include "idem/jcs.h"
#include "jcs.h"

/* ---- byte buffer ---- */

int idem__buf_append(idem__buf *buf, const void *bytes, size_t n)
{
    if (n >= buf->cap - buf->len || buf->data == NULL) {
        size_t cap = buf->cap ? buf->cap : 256;
        char *grown;

        while (cap - buf->len <= n) {
            if (cap > SIZE_MAX / 2)
                return IDEM_ENOMEM;
            cap *= 2;
        }
        grown = realloc(buf->data, cap);
        if (grown == NULL)
            return IDEM_ENOMEM;
        buf->data = grown;
        buf->cap = cap;
    }
    if (n > 0)
        memcpy(buf->data + buf->len, bytes, n);
    buf->len += n;
    buf->data[buf->len] = '\0';
    return 0;
}

void idem__buf_free(idem__buf *buf)
{
    if (buf == NULL)
        return;
    free(buf->data);
    buf->data = NULL;
    buf->len = buf->cap = 0;
}

static int append_str(idem__buf *buf, const char *s)
{
    return idem__buf_append(buf, s, strlen(s));
}

static int nomem(idem_error *err)
{
    return idem__error_set(err, IDEM_ENOMEM, "out of memory writing canonical JSON");
}

/* ---- strings ---- */

/* Decode one code point of strict UTF-8 (RFC 3629: no overlong forms, no surrogates,
 * nothing above U+10FFFF) at s[*i]; advance *i. Returns 0, or -1 when invalid. */
int idem__utf8_next(const unsigned char *s, size_t n, size_t *i, uint32_t *cp)
{
    unsigned char c = s[*i];
    uint32_t v, min;
    size_t len;

    if (c < 0x80) {
        *cp = c;
        (*i)++;
        return 0;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2, v = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        len = 3, v = c & 0x0f, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4, v = c & 0x07, min = 0x10000;
    } else {
        return -1;
    }
    if (n - *i < len)
        return -1;
    for (size_t j = 1; j < len; j++) {
        if ((s[*i + j] & 0xc0) != 0x80)
            return -1;
        v = (v << 6) | (s[*i + j] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return -1;
    *i += len;
    *cp = v;
    return 0;
}

static int check_utf8(const char *s, size_t n, idem_error *err)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    uint32_t cp;

    while (i < n) {
        if (idem__utf8_next(u, n, &i, &cp) != 0)
            return idem__error_set(err, IDEM_EINVAL,
                                   "string is not valid UTF-8 (byte 0x%02x at offset %zu)",
                                   (unsigned)u[i], i);
    }
    return 0;
}

/* The escape for a byte that JSON.stringify escapes, or NULL when it is written as is. */
static const char *escape_for(unsigned char c, char spare[8])
{
    switch (c) {
    case '"':
        return "\\\"";
    case '\\':
        return "\\\\";
    case '\b':
        return "\\b";
    case '\t':
        return "\\t";
    case '\n':
        return "\\n";
    case '\f':
        return "\\f";
    case '\r':
        return "\\r";
    default:
        if (c >= 0x20)
            return NULL;
        snprintf(spare, 8, "\\u%04x", (unsigned)c);
        return spare;
    }
}

int idem__jcs_write_string(idem__buf *buf, const char *s, size_t n, idem_error *err)
{
    size_t run = 0; /* start of the bytes not yet written */
    char spare[8];
    int rc = check_utf8(s, n, err);

    if (rc != 0)
        return rc;
    if (idem__buf_append(buf, "\"", 1) != 0)
        return nomem(err);
    for (size_t i = 0; i < n; i++) {
        const char *esc = escape_for((unsigned char)s[i], spare);

        if (esc == NULL)
            continue;
        if (idem__buf_append(buf, s + run, i - run) != 0 || append_str(buf, esc) != 0)
            return nomem(err);
        run = i + 1;
    }
    if (idem__buf_append(buf, s + run, n - run) != 0 || idem__buf_append(buf, "\"", 1) != 0)
        return nomem(err);
    return 0;
}

/* ---- objects: members sorted by UTF-16 code units ---- */

struct member {
    const char *key;
    size_t key_len;
    const json_t *value;
};

struct utf16_reader {
    const unsigned char *s;
    size_t n;
    size_t i;
    unsigned pending; /* low surrogate still to deliver, or 0 */
};

/* The next UTF-16 code unit, or -1 at the end. An invalid byte (rejected later, when the
 * key is written) stands for itself, so the order stays total. */
static long utf16_next(struct utf16_reader *r)
{
    uint32_t cp;

    if (r->pending != 0) {
        cp = r->pending;
        r->pending = 0;
        return (long)cp;
    }
    if (r->i >= r->n)
        return -1;
    if (idem__utf8_next(r->s, r->n, &r->i, &cp) != 0)
        return (long)r->s[r->i++];
    if (cp < 0x10000)
        return (long)cp;
    cp -= 0x10000;
    r->pending = 0xdc00 + (cp & 0x3ff);
    return (long)(0xd800 + (cp >> 10));
}

int idem__jcs_key_compare(const char *a, size_t a_len, const char *b, size_t b_len)
{
    struct utf16_reader ra = {(const unsigned char *)a, a_len, 0, 0};
    struct utf16_reader rb = {(const unsigned char *)b, b_len, 0, 0};

    for (;;) {
        long ua = utf16_next(&ra), ub = utf16_next(&rb);

        if (ua != ub)
            return ua < ub ? -1 : 1;
        if (ua < 0)
            return 0;
    }
}

static int compare_members(const void *a, const void *b)
{
    const struct member *ma = a, *mb = b;

    return idem__jcs_key_compare(ma->key, ma->key_len, mb->key, mb->key_len);
}

static int write_value(idem__buf *buf, const json_t *value, int depth, unsigned flags,
                       idem_error *err);

static int write_members(idem__buf *buf, const struct member *m, size_t count, int depth,
                         unsigned flags, idem_error *err)
{
    int rc = 0;

    for (size_t i = 0; i < count && rc == 0; i++) {
        if (i > 0 && idem__buf_append(buf, ",", 1) != 0)
            return nomem(err);
        rc = idem__jcs_write_string(buf, m[i].key, m[i].key_len, err);
        if (rc == 0 && idem__buf_append(buf, ":", 1) != 0)
            return nomem(err);
        if (rc == 0)
            rc = write_value(buf, m[i].value, depth, flags, err);
    }
    return rc;
}

static int write_object(idem__buf *buf, const json_t *object, int depth, unsigned flags,
                        idem_error *err)
{
    size_t count = json_object_size(object), i = 0;
    struct member *members = NULL;
    /* jansson's iterator takes a non-const object; iterating does not modify it. */
    json_t *obj = (json_t *)object;
    int rc;

    if (count > 0 && (members = calloc(count, sizeof(*members))) == NULL)
        return nomem(err);
    for (void *it = json_object_iter(obj); it != NULL && i < count;
         it = json_object_iter_next(obj, it), i++) {
        members[i].key = json_object_iter_key(it);
        members[i].key_len = json_object_iter_key_len(it);
        members[i].value = json_object_iter_value(it);
    }
    if (count > 1)
        qsort(members, count, sizeof(*members), compare_members);
    rc = idem__buf_append(buf, "{", 1) != 0 ? nomem(err) : 0;
    if (rc == 0)
        rc = write_members(buf, members, i, depth, flags, err);
    if (rc == 0 && idem__buf_append(buf, "}", 1) != 0)
        rc = nomem(err);
    free(members);
    return rc;
}

static int write_array(idem__buf *buf, const json_t *array, int depth, unsigned flags,
                       idem_error *err)
{
    size_t count = json_array_size(array);
    int rc = 0;

    if (idem__buf_append(buf, "[", 1) != 0)
        return nomem(err);
    for (size_t i = 0; i < count && rc == 0; i++) {
        if (i > 0 && idem__buf_append(buf, ",", 1) != 0)
            return nomem(err);
        rc = write_value(buf, json_array_get(array, i), depth, flags, err);
    }
    if (rc == 0 && idem__buf_append(buf, "]", 1) != 0)
        return nomem(err);
    return rc;
}

static int write_number(idem__buf *buf, double value, idem_error *err)
{
    char text[IDEM__JCS_NUMBER_MAX];

    if (idem__jcs_format_double(text, value) != 0)
        return idem__error_set(err, IDEM_EINVAL, "number is not finite (NaN or infinity)");
    return append_str(buf, text) != 0 ? nomem(err) : 0;
}

/* A caller-built integer (parsed text has none: every number is read as a double). Within
 * ±2^53 it is exactly a double, and its digits are what RFC 8785 writes for that double.
 * Beyond, RFC 8785 would write the nearest double: a receipt keeps the exact digits
 * instead, and arguments refuse it, as they refuse such a number in text. */
static int write_integer(idem__buf *buf, json_int_t value, unsigned flags, idem_error *err)
{
    char text[32];
    int exact = value >= -IDEM__JCS_INT_LIMIT && value <= IDEM__JCS_INT_LIMIT;

    snprintf(text, sizeof(text), "%" JSON_INTEGER_FORMAT, value);
    if (!exact && (flags & IDEM__JCS_ARGUMENTS) != 0)
        return idem__error_set(err, IDEM_EINVAL,
                               "integer %s is beyond ±2^53: an IEEE double cannot hold it "
                               "exactly; send it as a string (I-JSON, RFC 7493)",
                               text);
    return append_str(buf, text) != 0 ? nomem(err) : 0;
}

static int write_value(idem__buf *buf, const json_t *value, int depth, unsigned flags,
                       idem_error *err)
{
    if (depth >= IDEM__JCS_MAX_DEPTH)
        return idem__error_set(err, IDEM_EINVAL,
                               "value nested deeper than %d levels (or contains itself)",
                               IDEM__JCS_MAX_DEPTH);
    switch (json_typeof(value)) {
    case JSON_OBJECT:
        return write_object(buf, value, depth + 1, flags, err);
    case JSON_ARRAY:
        return write_array(buf, value, depth + 1, flags, err);
    case JSON_STRING:
        return idem__jcs_write_string(buf, json_string_value(value), json_string_length(value),
                                      err);
    case JSON_INTEGER:
        return write_integer(buf, json_integer_value(value), flags, err);
    case JSON_REAL:
        return write_number(buf, json_real_value(value), err);
    case JSON_TRUE:
        return append_str(buf, "true") != 0 ? nomem(err) : 0;
    case JSON_FALSE:
        return append_str(buf, "false") != 0 ? nomem(err) : 0;
    case JSON_NULL:
        return append_str(buf, "null") != 0 ? nomem(err) : 0;
    }
    return idem__error_set(err, IDEM_EINVAL, "unknown JSON value type");
}

int idem__jcs_write_value(idem__buf *buf, const json_t *value, unsigned flags, idem_error *err)
{
    if (value == NULL)
        return idem__error_set(err, IDEM_EINVAL, "JSON value is NULL");
    return write_value(buf, value, 0, flags, err);
}

/* ---- public entry points ---- */

int idem_jcs_serialize(char **out, size_t *out_len, const json_t *value, idem_error *err)
{
    idem__buf buf = {NULL, 0, 0};
    int rc;

    if (out == NULL)
        return idem__error_set(err, IDEM_EINVAL, "out is NULL");
    rc = idem__jcs_write_value(&buf, value, 0, err);
    if (rc == 0 && buf.data == NULL)
        rc = idem__buf_append(&buf, "", 0) != 0 ? nomem(err) : 0;
    if (rc != 0) {
        idem__buf_free(&buf);
        return rc;
    }
    *out = buf.data;
    if (out_len != NULL)
        *out_len = buf.len;
    return 0;
}

int idem_jcs_canonicalize(char **out, size_t *out_len, const char *text, size_t len,
                          const idem_json_options *opts, idem_error *err)
{
    json_t *value = NULL;
    int rc;

    if (out == NULL)
        return idem__error_set(err, IDEM_EINVAL, "out is NULL");
    rc = idem_json_parse(&value, text, len, opts, err);
    if (rc == 0)
        rc = idem_jcs_serialize(out, out_len, value, err);
    json_decref(value);
    return rc;
}
