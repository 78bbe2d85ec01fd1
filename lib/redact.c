/* Keeping a connection string's password out of every message idem produces. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/pool.h"

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

/* Secrets found by reading the text itself, parsed or not: "password=..." values and the
 * password of a URI's user information ("scheme://user:password@"). */
static size_t find_secrets(const char *conninfo, const char **at, size_t *len)
{
    size_t n = 0;
    const char *p, *uri = strstr(conninfo, "://");

    for (p = conninfo; n < MAX_SECRET && (p = strstr(p, "password=")) != NULL; p += 9) {
        at[n] = p + 9;
        len[n] = value_length(p + 9);
        n++;
    }
    if (uri != NULL && n < MAX_SECRET) {
        const char *user = uri + 3, *end = user + strcspn(user, "@/?");
        const char *colon = memchr(user, ':', (size_t)(end - user));

        if (*end == '@' && colon != NULL) {
            at[n] = colon + 1;
            len[n] = (size_t)(end - colon - 1);
            n++;
        }
    }
    return n;
}

size_t idem_conninfo_redact(char *text, size_t size, const char *conninfo)
{
    const char *at[MAX_SECRET];
    size_t len[MAX_SECRET], n, count = 0;
    char secret[256];

    if (text == NULL || size == 0 || conninfo == NULL)
        return 0;
    n = find_secrets(conninfo, at, len);
    for (size_t i = 0; i < n; i++) {
        const char *v = at[i];
        size_t l = len[i];

        if (l == 0 || l >= sizeof(secret))
            continue;
        memcpy(secret, v, l);
        secret[l] = '\0';
        count += mask_all(text, size, secret, l);         /* as written (quoted, perhaps) */
        if (l >= 3 && v[0] == '\'' && v[l - 1] == '\'') { /* and what the quotes hold */
            memcpy(secret, v + 1, l - 2);
            secret[l - 2] = '\0';
            count += mask_all(text, size, secret, l - 2);
        }
    }
    return count;
}
