/* RFC 8785 canonical form of JSON text whose numbers are kept as written: a declared
 * effect's receipt is the server's JSON text (store_declared.c), whose numbers may carry
 * more digits than a double holds (numeric), so they are copied, never read as values. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "jcs.h"

typedef struct reader {
    const char *s;
    size_t n;
    size_t i;
    idem_error *err;
} reader;

/* A member read from the text: its name decoded to UTF-8, its value already canonical, and
 * its place in the text (members of the same name keep their order). */
typedef struct text_member {
    idem__buf name;
    idem__buf value;
    size_t index;
} text_member;

static int write_value(reader *r, idem__buf *out, int depth);

static int bad(reader *r, const char *what)
{
    return idem__error_set(r->err, IDEM_EINVAL, "JSON text: %s at byte %zu", what, r->i);
}

static int nomem(reader *r)
{
    return idem__error_set(r->err, IDEM_ENOMEM, "out of memory writing canonical JSON");
}

static void skip_blanks(reader *r)
{
    while (r->i < r->n &&
           (r->s[r->i] == ' ' || r->s[r->i] == '\t' || r->s[r->i] == '\r' || r->s[r->i] == '\n'))
        r->i++;
}

/* Whether the next byte is @ch; consumes it if so. */
static int take(reader *r, char ch)
{
    if (r->i < r->n && r->s[r->i] == ch) {
        r->i++;
        return 1;
    }
    return 0;
}

static int put_utf8(idem__buf *out, uint32_t cp)
{
    unsigned char b[4];
    size_t n;

    if (cp < 0x80) {
        b[0] = (unsigned char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (unsigned char)(0xc0 | (cp >> 6));
        b[1] = (unsigned char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (unsigned char)(0xe0 | (cp >> 12));
        b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        b[2] = (unsigned char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        b[0] = (unsigned char)(0xf0 | (cp >> 18));
        b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
        b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        b[3] = (unsigned char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    return idem__buf_append(out, b, n);
}

/* The four hex digits after "\u" at r->i; -1 if they are not. */
static long hex4(reader *r)
{
    long v = 0;

    if (r->n - r->i < 4)
        return -1;
    for (size_t k = 0; k < 4; k++) {
        char c = r->s[r->i++];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;

        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The code point of a \u escape (r->i past the 'u'), a surrogate pair joined. */
static int unicode_escape(reader *r, uint32_t *cp)
{
    long hi = hex4(r), lo;

    if (hi < 0)
        return bad(r, "a \\u escape without four hex digits");
    if (hi >= 0xdc00 && hi <= 0xdfff)
        return bad(r, "a lone low surrogate");
    if (hi < 0xd800 || hi > 0xdbff) {
        *cp = (uint32_t)hi;
        return 0;
    }
    if (!take(r, '\\') || !take(r, 'u') || (lo = hex4(r)) < 0xdc00 || lo > 0xdfff)
        return bad(r, "a high surrogate without its low one");
    *cp = 0x10000 + (((uint32_t)hi - 0xd800) << 10) + ((uint32_t)lo - 0xdc00);
    return 0;
}

/* One escape (r->i past the backslash), decoded into @out. */
static int escape(reader *r, idem__buf *out)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *at;
    uint32_t cp = 0;
    int rc;

    if (r->i >= r->n)
        return bad(r, "a string that never ends");
    if (r->s[r->i] == 'u') {
        r->i++;
        if ((rc = unicode_escape(r, &cp)) != 0)
            return rc;
        return put_utf8(out, cp) != 0 ? nomem(r) : 0;
    }
    if (r->s[r->i] == '\0' || (at = strchr(from, r->s[r->i])) == NULL)
        return bad(r, "an unknown escape");
    r->i++;
    return idem__buf_append(out, &to[at - from], 1) != 0 ? nomem(r) : 0;
}

/* The string at r->i (its opening quote), decoded to UTF-8 into @out. */
static int read_string(reader *r, idem__buf *out)
{
    int rc;

    if (!take(r, '"'))
        return bad(r, "a string expected");
    if (idem__buf_append(out, "", 0) != 0)
        return nomem(r);
    while (r->i < r->n && r->s[r->i] != '"') {
        size_t run = r->i;

        while (r->i < r->n && r->s[r->i] != '"' && r->s[r->i] != '\\' &&
               (unsigned char)r->s[r->i] >= 0x20)
            r->i++;
        if (idem__buf_append(out, r->s + run, r->i - run) != 0)
            return nomem(r);
        if (r->i < r->n && (unsigned char)r->s[r->i] < 0x20)
            return bad(r, "a control character in a string");
        if (take(r, '\\') && (rc = escape(r, out)) != 0)
            return rc;
    }
    return take(r, '"') ? 0 : bad(r, "a string that never ends");
}

static int write_string(reader *r, idem__buf *out)
{
    idem__buf s = {NULL, 0, 0};
    int rc = read_string(r, &s);

    if (rc == 0)
        rc = idem__jcs_write_string(out, s.data, s.len, r->err);
    idem__buf_free(&s);
    return rc;
}

static size_t digits(reader *r)
{
    size_t start = r->i;

    while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9')
        r->i++;
    return r->i - start;
}

/* A number, copied as written once its grammar is checked (RFC 8259 section 6). */
static int copy_number(reader *r, idem__buf *out)
{
    size_t start = r->i;

    take(r, '-');
    if (take(r, '0') ? 0 : digits(r) == 0)
        return bad(r, "a number without digits");
    if (take(r, '.') && digits(r) == 0)
        return bad(r, "a number without digits after its point");
    if (take(r, 'e') || take(r, 'E')) {
        if (!take(r, '+'))
            take(r, '-');
        if (digits(r) == 0)
            return bad(r, "a number without digits in its exponent");
    }
    return idem__buf_append(out, r->s + start, r->i - start) != 0 ? nomem(r) : 0;
}

static int copy_word(reader *r, idem__buf *out)
{
    static const char *const words[] = {"true", "false", "null"};

    for (size_t k = 0; k < sizeof(words) / sizeof(words[0]); k++) {
        size_t len = strlen(words[k]);

        if (r->n - r->i >= len && memcmp(r->s + r->i, words[k], len) == 0) {
            r->i += len;
            return idem__buf_append(out, words[k], len) != 0 ? nomem(r) : 0;
        }
    }
    return bad(r, "a value expected");
}

static int write_array(reader *r, idem__buf *out, int depth)
{
    int rc = 0;

    r->i++; /* '[' */
    if (idem__buf_append(out, "[", 1) != 0)
        return nomem(r);
    skip_blanks(r);
    for (size_t k = 0; rc == 0 && !take(r, ']'); k++) {
        if (k > 0 && !take(r, ','))
            return bad(r, "',' or ']' expected");
        if (k > 0 && idem__buf_append(out, ",", 1) != 0)
            return nomem(r);
        rc = write_value(r, out, depth);
        skip_blanks(r);
    }
    if (rc == 0 && idem__buf_append(out, "]", 1) != 0)
        return nomem(r);
    return rc;
}

static int compare_text_members(const void *a, const void *b)
{
    const text_member *ma = a, *mb = b;
    int order = idem__jcs_key_compare(ma->name.data, ma->name.len, mb->name.data, mb->name.len);

    return order != 0 ? order : ma->index < mb->index ? -1 : 1;
}

/* One member ("name": value) at r->i into @m. */
static int read_member(reader *r, text_member *m, int depth)
{
    int rc;

    skip_blanks(r);
    if ((rc = read_string(r, &m->name)) != 0)
        return rc;
    skip_blanks(r);
    if (!take(r, ':'))
        return bad(r, "':' expected");
    if ((rc = write_value(r, &m->value, depth)) != 0)
        return rc;
    skip_blanks(r);
    return 0;
}

/* The members of the object at r->i (its '{') into *out, *count of them. */
static int read_members(reader *r, text_member **out, size_t *count, int depth)
{
    size_t cap = 0;
    int rc = 0;

    r->i++; /* '{' */
    skip_blanks(r);
    while (rc == 0 && !take(r, '}')) {
        if (*count > 0 && !take(r, ','))
            return bad(r, "',' or '}' expected");
        if (*count == cap) {
            text_member *grown = realloc(*out, (cap = cap ? cap * 2 : 8) * sizeof(**out));

            if (grown == NULL)
                return nomem(r);
            *out = grown;
        }
        (*out)[*count] = (text_member){{NULL, 0, 0}, {NULL, 0, 0}, *count};
        rc = read_member(r, &(*out)[(*count)++], depth);
    }
    return rc;
}

static int write_members(reader *r, idem__buf *out, const text_member *m, size_t count)
{
    int rc = 0;

    for (size_t k = 0; k < count && rc == 0; k++) {
        if (k > 0 && idem__buf_append(out, ",", 1) != 0)
            return nomem(r);
        rc = idem__jcs_write_string(out, m[k].name.data, m[k].name.len, r->err);
        if (rc == 0 && (idem__buf_append(out, ":", 1) != 0 ||
                        idem__buf_append(out, m[k].value.data, m[k].value.len) != 0))
            return nomem(r);
    }
    return rc;
}

static int write_object(reader *r, idem__buf *out, int depth)
{
    text_member *members = NULL;
    size_t count = 0;
    int rc = read_members(r, &members, &count, depth);

    if (rc == 0 && count > 1)
        qsort(members, count, sizeof(*members), compare_text_members);
    if (rc == 0 && idem__buf_append(out, "{", 1) != 0)
        rc = nomem(r);
    if (rc == 0)
        rc = write_members(r, out, members, count);
    if (rc == 0 && idem__buf_append(out, "}", 1) != 0)
        rc = nomem(r);
    for (size_t k = 0; k < count; k++) {
        idem__buf_free(&members[k].name);
        idem__buf_free(&members[k].value);
    }
    free(members);
    return rc;
}

static int write_value(reader *r, idem__buf *out, int depth)
{
    skip_blanks(r);
    if (r->i >= r->n)
        return bad(r, "a value expected");
    if (depth >= IDEM__JCS_MAX_DEPTH)
        return bad(r, "nesting too deep");
    switch (r->s[r->i]) {
    case '{':
        return write_object(r, out, depth + 1);
    case '[':
        return write_array(r, out, depth + 1);
    case '"':
        return write_string(r, out);
    case '-':
        return copy_number(r, out);
    default:
        if (r->s[r->i] >= '0' && r->s[r->i] <= '9')
            return copy_number(r, out);
        return copy_word(r, out);
    }
}

int idem__jcs_write_text(idem__buf *buf, const char *text, size_t len, idem_error *err)
{
    reader r = {text, len, 0, err};
    int rc = write_value(&r, buf, 0);

    skip_blanks(&r);
    if (rc == 0 && r.i != r.n)
        return bad(&r, "text after the value");
    if (rc == 0 && buf->data == NULL && idem__buf_append(buf, "", 0) != 0)
        return nomem(&r);
    return rc;
}
