/* The tokens of the arguments' common shape (args_shape.h), for both one-pass readers. */
#include <stdint.h>
#include <string.h>

#include "args_shape.h"

const char *const idem__shape_words[3] = {"true", "false", "null"};

void idem__shape_blanks(idem__shape_reader *r)
{
    while (r->i < r->n &&
           (r->s[r->i] == ' ' || r->s[r->i] == '\t' || r->s[r->i] == '\r' || r->s[r->i] == '\n'))
        r->i++;
}

int idem__shape_next(idem__shape_reader *r, char close)
{
    idem__shape_blanks(r);
    if (r->i >= r->n)
        return -1;
    if (r->s[r->i] == close) {
        r->i++;
        return 1;
    }
    if (r->s[r->i] != ',')
        return -1;
    r->i++;
    idem__shape_blanks(r);
    return 0;
}

/* Its canonical form is the text itself, quotes included (RFC 8785 escapes nothing else). */
int idem__shape_string(idem__shape_reader *r, size_t *start, size_t *len)
{
    const unsigned char *s = (const unsigned char *)r->s;
    size_t i = r->i + 1;
    uint32_t cp;

    while (i < r->n && s[i] != '"') {
        if (s[i] >= 0x20 && s[i] < 0x80 && s[i] != '\\')
            i++;
        else if (s[i] < 0x80 || idem__utf8_next(s, r->n, &i, &cp) != 0)
            return IDEM__SHAPE_NO;
    }
    if (i >= r->n)
        return IDEM__SHAPE_NO;
    *start = r->i + 1;
    *len = i - r->i - 1;
    r->i = i + 1;
    return IDEM__SHAPE_OK;
}

size_t idem__shape_integer(idem__shape_reader *r)
{
    size_t start = r->i, digits;

    if (r->s[r->i] == '-')
        r->i++;
    digits = r->i;
    while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9')
        r->i++;
    digits = r->i - digits;
    /* No leading zero but 0 itself, not -0, no fraction or exponent, exactly a double. */
    if (digits == 0 || digits > IDEM__SHAPE_MAX_DIGITS ||
        (r->s[r->i - digits] == '0' && digits > 1) ||
        (r->s[start] == '-' && r->s[r->i - digits] == '0') ||
        (r->i < r->n && (r->s[r->i] == '.' || r->s[r->i] == 'e' || r->s[r->i] == 'E')))
        return 0;
    return r->i - start;
}

int idem__shape_word(idem__shape_reader *r)
{
    for (int k = 0; k < 3; k++) {
        size_t len = strlen(idem__shape_words[k]);

        if (r->n - r->i >= len && memcmp(r->s + r->i, idem__shape_words[k], len) == 0) {
            r->i += len;
            return k;
        }
    }
    return -1;
}
