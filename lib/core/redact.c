/* Keeping a connection string's password out of every message idem produces: the
 * library's (idem_conninfo_redact(), idem__error_redact()) and the tools'. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redact.h"

#define MASK       "********"
#define MAX_SECRET 4

/* Replace every occurrence of @secret (len bytes) in @text (a NUL-terminated buffer of
 * @size bytes) with MASK. Returns how many it replaced. */
static size_t mask_all(char *text, size_t size, const char *secret, size_t len)
{
    size_t count = 0, mask = strlen(MASK);
    char *p = text;

    while (len > 0 && (p = strstr(p, secret)) != NULL) {
        size_t room = size - 1 - (size_t)(p - text), tail = strlen(p + len);

        count++;
        if (mask >= room) { /* no room for the rest: the mask, cut, ends the text */
            memcpy(p, MASK, room);
            p[room] = '\0';
            break;
        }
        if (mask + tail > room) /* the mask fits, the tail is cut */
            tail = room - mask;
        memmove(p + mask, p + len, tail);
        memcpy(p, MASK, mask);
        p[mask + tail] = '\0';
        p += mask;
    }
    return count;
}

/* The end of a key=value value starting at @v (quoted or not). */
static size_t value_length(const char *v)
{
    size_t n = 0;

    if (*v == '\'') {
        for (n = 1; v[n] != '\0' && v[n] != '\''; n++) {
            if (v[n] == '\\' && v[n + 1] != '\0')
                n++;
        }
        return v[n] == '\'' ? n + 1 : n;
    }
    while (v[n] != '\0' && v[n] != ' ' && v[n] != '&' && v[n] != '\t')
        n++;
    return n;
}

/* The password of a URI's user information, "scheme://user:password@host...": taken up to
 * the authority's last '@' (before any '?'), so that a password holding '/' or '@', which
 * libpq itself cuts at the first of them, is found whole. Returns 0 when there is none. */
static size_t uri_password(const char *conninfo, const char **at)
{
    const char *uri = strstr(conninfo, "://"), *user, *end, *colon;

    if (uri == NULL)
        return 0;
    user = uri + 3;
    end = user + strcspn(user, "?");
    while (end > user && end[-1] != '@')
        end--;
    if (end == user)
        return 0; /* no '@': no user information */
    end--;        /* the '@' */
    colon = memchr(user, ':', (size_t)(end - user));
    if (colon == NULL)
        return 0;
    *at = colon + 1;
    return (size_t)(end - colon - 1);
}

/* Secrets found by reading the text itself, parsed or not: "password=..." values and the
 * password of a URI's user information. */
static size_t find_secrets(const char *conninfo, const char **at, size_t *len, int *in_uri)
{
    size_t n = 0;
    const char *p;

    for (p = conninfo; n < MAX_SECRET && (p = strstr(p, "password=")) != NULL; p += 9) {
        at[n] = p + 9;
        len[n] = value_length(p + 9);
        in_uri[n] = 0;
        n++;
    }
    if (n < MAX_SECRET && (len[n] = uri_password(conninfo, &at[n])) > 0)
        in_uri[n++] = 1;
    return n;
}

static int hex_value(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* @s (len bytes) percent-decoded into @out (at least len + 1 bytes); a '%' not followed by
 * two hex digits is kept. */
static void percent_decode(char *out, const char *s, size_t len)
{
    size_t o = 0;

    for (size_t i = 0; i < len; i++) {
        int hi = i + 2 < len ? hex_value(s[i + 1]) : -1, lo = hi >= 0 ? hex_value(s[i + 2]) : -1;

        if (s[i] == '%' && lo >= 0) {
            out[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = '\0';
}

/* Mask @secret (len bytes) as written and percent-decoded. Returns how many it masked. */
static size_t mask_forms(char *text, size_t size, const char *secret, size_t len)
{
    char piece[256], decoded[256];
    size_t count;

    if (len == 0 || len >= sizeof(piece) || strspn(secret, "*") >= len)
        return 0; /* nothing to hide, or nothing but the mask itself */
    memcpy(piece, secret, len);
    piece[len] = '\0';
    count = mask_all(text, size, piece, len);
    percent_decode(decoded, piece, len);
    if (strcmp(decoded, piece) != 0)
        count += mask_all(text, size, decoded, strlen(decoded));
    return count;
}

/* A URI password that libpq misreads (it cuts the user information at the first '/' or
 * '@') comes back in its messages in pieces, as a port, a host or a database name: mask
 * each piece between @delims of two bytes or more as well. */
static size_t mask_pieces(char *text, size_t size, const char *secret, size_t len,
                          const char *delims)
{
    size_t count = 0;

    for (size_t i = 0; i < len;) {
        size_t n = 0;

        while (i + n < len && strchr(delims, secret[i + n]) == NULL)
            n++;
        if (n >= 2 && n < len)
            count += mask_forms(text, size, secret + i, n);
        i += n + 1;
    }
    return count;
}

size_t idem__conninfo_redact(char *text, size_t size, const char *conninfo)
{
    const char *at[MAX_SECRET];
    size_t len[MAX_SECRET], n, count = 0;
    int in_uri[MAX_SECRET];

    if (text == NULL || size == 0 || conninfo == NULL)
        return 0;
    n = find_secrets(conninfo, at, len, in_uri);
    for (size_t i = 0; i < n; i++) {
        const char *v = at[i];
        size_t l = len[i];

        count += mask_forms(text, size, v, l);          /* as written (quoted, perhaps) */
        if (l >= 3 && v[0] == '\'' && v[l - 1] == '\'') /* and what the quotes hold */
            count += mask_forms(text, size, v + 1, l - 2);
        if (in_uri[i]) { /* where libpq cuts the URI, then where it cuts a piece */
            count += mask_pieces(text, size, v, l, "@/");
            count += mask_pieces(text, size, v, l, "@/:,?&=");
        }
    }
    return count;
}
