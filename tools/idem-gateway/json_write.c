/* A jansson tree written as compact JSON text by hand (json_write.h): runs of plain bytes
 * copied at once, escapes as jansson's dump writes them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json_write.h"

/* As deep as jansson parses: every tree the gateway holds was parsed or built by it. */
#define DEPTH_MAX 2048

typedef struct out {
    char *buf;
    size_t len, cap;
    int failed;
} out;

/* Room for @n more bytes: 0, or -1 (failed) when out of memory. */
static int reserve(out *o, size_t n)
{
    if (o->failed)
        return -1;
    if (n > o->cap - o->len) {
        size_t cap = o->cap * 2 > o->len + n ? o->cap * 2 : o->len + n + 1024;
        char *grown = realloc(o->buf, cap);

        if (grown == NULL) {
            o->failed = 1;
            return -1;
        }
        o->buf = grown;
        o->cap = cap;
    }
    return 0;
}

static void put_n(out *o, const char *s, size_t n)
{
    if (reserve(o, n) != 0)
        return;
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}

static void put(out *o, const char *s)
{
    put_n(o, s, strlen(s));
}

/* The length of the UTF-8 sequence at s[0..n) (RFC 3629: no overlong form, no surrogate,
 * nothing above U+10FFFF), or 0 when there is none: jansson's dump checks the same. */
static size_t utf8_length(const unsigned char *s, size_t n)
{
    size_t len = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : 2;
    uint32_t cp;

    if (s[0] < 0xc2 || s[0] > 0xf4 || n < len)
        return 0;
    cp = s[0] & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return len;
}

size_t gw_json_string(char *buf, size_t size, const char *s, size_t n)
{
    /* The characters JSON escapes in a short form, and the letter of each. */
    static const char plain[] = "\"\\\b\f\n\r\t", escaped[] = "\"\\bfnrt";
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *u = (const unsigned char *)s;
    size_t at = 0, run = 0, i = 0;

#define EMIT(p, k)                                                                                 \
    do {                                                                                           \
        if (at + (k) <= size)                                                                      \
            memcpy(buf + at, (p), (k));                                                            \
        at += (k);                                                                                 \
    } while (0)
    EMIT("\"", 1);
    while (i < n) {
        char esc[7] = "\\u00";
        const char *short_form;
        size_t len = 2, step;

        if (u[i] >= 0x20 && u[i] != '"' && u[i] != '\\' && u[i] < 0x80) {
            i++;
            continue;
        }
        if (u[i] >= 0x80) {
            if ((step = utf8_length(u + i, n - i)) == 0)
                return 0;
            i += step;
            continue;
        }
        EMIT(s + run, i - run);
        if ((short_form = memchr(plain, u[i], sizeof(plain) - 1)) != NULL) {
            esc[1] = escaped[short_form - plain];
        } else {
            esc[4] = hex[u[i] >> 4];
            esc[5] = hex[u[i] & 15];
            len = 6;
        }
        EMIT(esc, len);
        run = ++i;
    }
    EMIT(s + run, n - run);
    EMIT("\"", 1);
#undef EMIT
    return at;
}

/* @s (@n bytes) as a JSON string: at most six bytes a byte, and its quotes. */
static void put_string(out *o, const char *s, size_t n)
{
    size_t len;

    if (n > (SIZE_MAX - 2) / 6 || reserve(o, n * 6 + 2) != 0)
        return;
    if ((len = gw_json_string(o->buf + o->len, o->cap - o->len, s, n)) == 0) {
        o->failed = 1;
        return;
    }
    o->len += len;
}

static void put_integer(out *o, json_int_t v)
{
    char digits[24];
    size_t at = sizeof(digits);
    /* Its magnitude, unsigned: the most negative value has no positive twin. */
    unsigned long long m = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;

    do
        digits[--at] = (char)('0' + m % 10);
    while ((m /= 10) > 0);
    if (v < 0)
        digits[--at] = '-';
    put_n(o, digits + at, sizeof(digits) - at);
}

/* A real as jansson writes it (its shortest form, never as an integer): rare in an
 * answer, so jansson writes it. */
static void put_real(out *o, const json_t *v)
{
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

    if (text == NULL) {
        o->failed = 1;
        return;
    }
    put(o, text);
    free(text);
}

static void put_value(out *o, const json_t *v, const json_t *raw, int depth)
{
    const char *key;
    json_t *member;
    size_t i = 0;

    if (o->failed)
        return;
    if (depth > DEPTH_MAX) {
        o->failed = 1;
        return;
    }
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        put_n(o, "{", 1);
        json_object_foreach((json_t *)v, key, member)
        {
            if (i++ > 0)
                put_n(o, ",", 1);
            put_string(o, key, strlen(key));
            put_n(o, ":", 1);
            put_value(o, member, raw, depth + 1);
        }
        put_n(o, "}", 1);
        break;
    case JSON_ARRAY:
        put_n(o, "[", 1);
        for (; i < json_array_size(v); i++) {
            if (i > 0)
                put_n(o, ",", 1);
            put_value(o, json_array_get(v, i), raw, depth + 1);
        }
        put_n(o, "]", 1);
        break;
    case JSON_STRING:
        if (v == raw)
            put_n(o, json_string_value(v), json_string_length(v));
        else
            put_string(o, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        put_integer(o, json_integer_value(v));
        break;
    case JSON_REAL:
        put_real(o, v);
        break;
    case JSON_TRUE:
        put_n(o, "true", 4);
        break;
    case JSON_FALSE:
        put_n(o, "false", 5);
        break;
    case JSON_NULL:
        put_n(o, "null", 4);
        break;
    }
}

char *gw_json_dump(const json_t *doc, const json_t *raw)
{
    out o = {NULL, 0, 0, 0};

    if (doc == NULL)
        return NULL;
    put_value(&o, doc, raw, 0);
    put_n(&o, "", 1); /* the NUL */
    if (o.failed) {
        free(o.buf);
        return NULL;
    }
    return o.buf;
}
