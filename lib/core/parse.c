/* Numbers as an operator writes them on a command line, and as libpq reads its options. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include "parse.h"

int idem__parse_whole(long long *out, const char *text, long long min, long long max)
{
    char *end = NULL;
    long long v;

    errno = 0;
    v = strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int idem__parse_libpq_int(int *out, const char *text)
{
    char *end = NULL;
    long v;

    errno = 0;
    v = strtol(text, &end, 10);
    if (end == text || errno != 0 || v < INT_MIN || v > INT_MAX)
        return -1;
    while (*end != '\0' && isspace((unsigned char)*end))
        end++;
    if (*end != '\0')
        return -1;
    *out = (int)v;
    return 0;
}

static int hex_value(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int idem__hex_decode(unsigned char *out, size_t n, const char *hex)
{
    for (size_t i = 0; i < n; i++) {
        int hi = hex_value(hex[2 * i]), lo = hi >= 0 ? hex_value(hex[2 * i + 1]) : -1;

        if (lo < 0)
            return -1;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}
