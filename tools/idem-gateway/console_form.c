/* application/x-www-form-urlencoded: name=value pairs joined by '&', '+' for a space,
 * %XX for a byte (the WHATWG URL standard's parser, without its leniency). */
#include <stdlib.h>
#include <string.h>

#include "console_form.h"

static int hex_digit(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* @s (@n bytes) decoded into a new string; NULL as gw_form_value() says. */
static char *decode(const char *s, size_t n)
{
    char *out = malloc(n + 1);
    size_t o = 0;

    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        int hi, lo;

        if (s[i] == '+')
            out[o++] = ' ';
        else if (s[i] != '%')
            out[o++] = s[i];
        else if (i + 2 < n && (hi = hex_digit(s[i + 1])) >= 0 && (lo = hex_digit(s[i + 2])) >= 0 &&
                 (hi | lo) != 0) {
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            free(out);
            return NULL;
        }
    }
    out[o] = '\0';
    return out;
}

char *gw_form_value(const char *body, size_t len, const char *name)
{
    size_t nlen = strlen(name), at = 0;

    while (at < len) {
        const char *pair = body + at, *amp = memchr(pair, '&', len - at);
        size_t plen = amp != NULL ? (size_t)(amp - pair) : len - at;

        if (plen > nlen && memcmp(pair, name, nlen) == 0 && pair[nlen] == '=')
            return decode(pair + nlen + 1, plen - nlen - 1);
        at += plen + 1;
    }
    return NULL;
}
