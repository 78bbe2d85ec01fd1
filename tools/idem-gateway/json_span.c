/* JSON text walked as written: strings skipped escape by escape, containers by their
 * brackets (each closed by its own kind), scalars as the run of their characters. */
#include <stdlib.h>
#include <string.h>

#include "json_span.h"

/* Deeper than jansson reads (2048), so that every text it accepts can be walked. */
#define DEPTH_MAX 4096

static size_t skip_space(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

/* The string literal at s[*i] ('"'): *i just past its closing quote. */
static int scan_string(const char *s, size_t n, size_t *i)
{
    for (size_t j = *i + 1; j < n; j++) {
        if (s[j] == '\\')
            j++;
        else if (s[j] == '"') {
            *i = j + 1;
            return 0;
        }
    }
    return -1;
}

/* The object or array at s[*i]: *i just past the bracket that closes it. */
static int scan_container(const char *s, size_t n, size_t *i)
{
    char closers[DEPTH_MAX];
    size_t depth = 0, j = *i;

    while (j < n) {
        if (s[j] == '"') {
            if (scan_string(s, n, &j) != 0)
                return -1;
            continue;
        }
        if (s[j] == '{' || s[j] == '[') {
            if (depth == DEPTH_MAX)
                return -1;
            closers[depth++] = s[j] == '{' ? '}' : ']';
        } else if (s[j] == '}' || s[j] == ']') {
            if (depth == 0 || closers[--depth] != s[j])
                return -1;
            if (depth == 0) {
                *i = j + 1;
                return 0;
            }
        }
        j++;
    }
    return -1;
}

static int scalar_char(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
           c == '+' || c == '.';
}

/* The value at s[*i]: *i just past it. */
static int scan_value(const char *s, size_t n, size_t *i)
{
    size_t j = *i;

    if (j >= n)
        return -1;
    if (s[j] == '"')
        return scan_string(s, n, i);
    if (s[j] == '{' || s[j] == '[')
        return scan_container(s, n, i);
    while (j < n && scalar_char(s[j]))
        j++;
    if (j == *i)
        return -1;
    *i = j;
    return 0;
}

int gw_span_value(gw_span *out, const char *text, size_t len)
{
    size_t start = skip_space(text, len, 0), end = start;

    if (scan_value(text, len, &end) != 0 || skip_space(text, len, end) != len)
        return -1;
    out->at = text + start;
    out->len = end - start;
    return 0;
}

int gw_span_iter_init(gw_span_iter *it, gw_span value)
{
    if (value.len < 2 || (value.at[0] != '{' && value.at[0] != '['))
        return -1;
    it->in = value;
    it->pos = 1;
    it->index = 0;
    return 0;
}

int gw_span_next(gw_span_iter *it, gw_span *key, gw_span *value, gw_span *whole)
{
    const char *s = it->in.at;
    size_t n = it->in.len, i = skip_space(s, n, it->pos), start;
    int object = s[0] == '{';

    if (i >= n)
        return i == n && it->pos == n ? 0 : -1;
    if (s[i] == (object ? '}' : ']')) {
        it->pos = n;
        return i == n - 1 ? 0 : -1;
    }
    if (it->index > 0 && s[i++] != ',')
        return -1;
    start = i = skip_space(s, n, i);
    key->at = s + i;
    key->len = 0;
    if (object) {
        if (i >= n || s[i] != '"' || scan_string(s, n, &i) != 0)
            return -1;
        key->len = (size_t)(s + i - key->at);
        i = skip_space(s, n, i);
        if (i >= n || s[i] != ':')
            return -1;
        i = skip_space(s, n, i + 1);
    }
    value->at = s + i;
    if (scan_value(s, n, &i) != 0)
        return -1;
    value->len = (size_t)(s + i - value->at);
    whole->at = s + start;
    whole->len = i - start;
    it->pos = i;
    it->index++;
    return 1;
}

static int hex4(const char *p, unsigned int *out)
{
    *out = 0;
    for (int k = 0; k < 4; k++) {
        char c = p[k];
        unsigned int d = c >= '0' && c <= '9'   ? (unsigned int)(c - '0')
                         : c >= 'a' && c <= 'f' ? (unsigned int)(c - 'a' + 10)
                         : c >= 'A' && c <= 'F' ? (unsigned int)(c - 'A' + 10)
                                                : 16U;
        if (d == 16U)
            return -1;
        *out = *out << 4 | d;
    }
    return 0;
}

static size_t utf8(char *buf, unsigned int cp)
{
    if (cp < 0x80) {
        buf[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        buf[0] = (char)(0xC0 | cp >> 6);
        buf[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        buf[0] = (char)(0xE0 | cp >> 12);
        buf[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        buf[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    buf[0] = (char)(0xF0 | cp >> 18);
    buf[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    buf[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    buf[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* The \u escape at p (@room bytes to the closing quote): its bytes into @buf, *used the
 * escape's length (6, or 12 for a surrogate pair). */
static int unicode_escape(char *buf, size_t *k, size_t *used, const char *p, size_t room)
{
    unsigned int cp, low;

    if (room < 6 || hex4(p + 2, &cp) != 0)
        return -1;
    *used = 6;
    if (cp >= 0xDC00 && cp <= 0xDFFF)
        return -1;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (room < 12 || p[6] != '\\' || p[7] != 'u' || hex4(p + 8, &low) != 0 || low < 0xDC00 ||
            low > 0xDFFF)
            return -1;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        *used = 12;
    }
    *k = utf8(buf, cp);
    return 0;
}

/* The escape at p: its bytes into @buf (@k of them), *used its length. */
static int escape(char *buf, size_t *k, size_t *used, const char *p, size_t room)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *c = room >= 2 && p[1] != '\0' ? strchr(from, p[1]) : NULL;

    if (room >= 2 && p[1] == 'u')
        return unicode_escape(buf, k, used, p, room);
    if (c == NULL)
        return -1;
    buf[0] = to[c - from];
    *k = 1;
    *used = 2;
    return 0;
}

long gw_span_string(char *out, size_t size, gw_span s)
{
    size_t o = 0, i = 1, end = s.len - 1;

    if (s.len < 2 || s.at[0] != '"' || s.at[end] != '"' || size == 0)
        return -1;
    while (i < end) {
        char buf[4];
        size_t k = 1, used = 1;

        if (s.at[i] != '\\')
            buf[0] = s.at[i];
        else if (escape(buf, &k, &used, s.at + i, end - i) != 0)
            return -1;
        if (k >= size - o)
            return -1;
        memcpy(out + o, buf, k);
        o += k;
        i += used;
    }
    out[o] = '\0';
    return (long)o;
}

/* Whether the member name @key decodes to @name (@len bytes). */
static int key_is(gw_span key, const char *name, size_t len)
{
    char *decoded;
    long n;

    /* Written longer than 6 bytes for each of the name's, it cannot be the name. */
    if (key.len < len + 2 || key.len - 2 > 6 * len || (decoded = malloc(key.len)) == NULL)
        return 0;
    n = gw_span_string(decoded, key.len, key);
    n = n >= 0 && (size_t)n == len && memcmp(decoded, name, len) == 0;
    free(decoded);
    return (int)n;
}

int gw_span_member(gw_span obj, const char *name, size_t len, gw_span *value, gw_span *whole)
{
    gw_span_iter it;
    gw_span key, v, w;
    int found = 0, rc;

    if (obj.len == 0 || obj.at[0] != '{' || gw_span_iter_init(&it, obj) != 0)
        return -1;
    while ((rc = gw_span_next(&it, &key, &v, &w)) == 1) {
        if (key_is(key, name, len) && found++ == 0) {
            *value = v;
            *whole = w;
        }
    }
    return rc < 0 ? -1 : found;
}

/* A number as RFC 8259's grammar writes it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int number_ok(gw_span v)
{
    const char *p = v.at, *end = v.at + v.len;
    const char *digits;

    if (p < end && *p == '-')
        p++;
    if (p < end && *p == '0')
        p++;
    else if (p < end && *p >= '1' && *p <= '9')
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    else
        return -1;
    if (p < end && *p == '.') {
        for (digits = ++p; p < end && *p >= '0' && *p <= '9'; p++)
            ;
        if (p == digits)
            return -1;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        if (++p < end && (*p == '+' || *p == '-'))
            p++;
        for (digits = p; p < end && *p >= '0' && *p <= '9'; p++)
            ;
        if (p == digits)
            return -1;
    }
    return p == end ? 0 : -1;
}

static int scalar_ok(gw_span v)
{
    static const char *const words[] = {"true", "false", "null"};

    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (v.len == strlen(words[i]) && memcmp(v.at, words[i], v.len) == 0)
            return 0;
    return number_ok(v);
}

/* A string literal: no control character, every escape one of the grammar's. */
static int string_ok(gw_span v)
{
    unsigned int cp;

    for (size_t i = 1; i + 1 < v.len; i++) {
        if ((unsigned char)v.at[i] < 0x20)
            return -1;
        if (v.at[i] != '\\')
            continue;
        if (v.at[++i] == 'u') {
            if (i + 5 > v.len - 1 || hex4(v.at + i + 1, &cp) != 0)
                return -1;
            i += 4;
        } else if (strchr("\"\\/bfnrt", v.at[i]) == NULL || v.at[i] == '\0') {
            return -1;
        }
    }
    return 0;
}

static int well_formed(gw_span v, int depth)
{
    gw_span_iter it;
    gw_span key, value, whole;
    int rc;

    if (v.at[0] == '"')
        return string_ok(v);
    if (gw_span_iter_init(&it, v) != 0)
        return scalar_ok(v);
    if (depth == GW_SPAN_CHECK_DEPTH)
        return 0;
    while ((rc = gw_span_next(&it, &key, &value, &whole)) == 1)
        if ((key.len > 0 && string_ok(key) != 0) || well_formed(value, depth + 1) != 0)
            return -1;
    return rc;
}

int gw_span_well_formed(gw_span v)
{
    return v.len == 0 ? -1 : well_formed(v, 0);
}
