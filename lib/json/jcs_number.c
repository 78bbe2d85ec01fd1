/* RFC 8785 numbers: a double written as ECMAScript's Number::toString writes it (RFC 8785
 * section 3.2.2.3). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "idem/fingerprint.h"
#include "idem/jcs.h"
#include "jcs.h"

/* ---- numbers (ECMAScript Number::toString, RFC 8785 section 3.2.2.3) ---- */

/* A positive decimal 0.d1d2...dk × 10^n with no trailing zero digit. */
struct decimal {
    char digits[24];
    int k;
    int n;
};

static void decimal_trim(struct decimal *d)
{
    while (d->k > 1 && d->digits[d->k - 1] == '0')
        d->k--;
    d->digits[d->k] = '\0';
}

/* Read printf's "%.*e" form. Only digits and the exponent are taken, so the locale's
 * decimal separator does not matter. */
static void decimal_from_exp_form(struct decimal *d, const char *text)
{
    const char *p = text;

    d->k = 0;
    for (; *p != '\0' && *p != 'e'; p++) {
        if (*p >= '0' && *p <= '9' && d->k < (int)sizeof(d->digits) - 1)
            d->digits[d->k++] = *p;
    }
    d->n = (*p == 'e' ? (int)strtol(p + 1, NULL, 10) : 0) + 1;
    decimal_trim(d);
}

/* The double nearest to d. Written without a decimal point, so strtod's locale does
 * not matter either. */
static double decimal_value(const struct decimal *d)
{
    char text[48];

    snprintf(text, sizeof(text), "%se%d", d->digits, d->n - d->k);
    return strtod(text, NULL);
}

/* Shortest digits that read back as x (x > 0, finite), and of those the closest to x:
 * printf rounds correctly, so at each length it gives the closest candidate. (Next to a
 * power of two the gap below x is half the gap above, so in theory a farther candidate
 * above x could read back where the closest below does not; checked against every
 * power of two, that never happens for a double.) */
static void shortest_decimal(struct decimal *out, double x)
{
    char text[48];

    for (int precision = 0; precision < 16; precision++) {
        snprintf(text, sizeof(text), "%.*e", precision, x);
        decimal_from_exp_form(out, text);
        if (decimal_value(out) == x)
            return;
    }
    /* 17 significant digits always read back. */
    snprintf(text, sizeof(text), "%.16e", x);
    decimal_from_exp_form(out, text);
}

static char *put_zeros(char *p, int count)
{
    for (; count > 0; count--)
        *p++ = '0';
    return p;
}

static char *put_digits(char *p, const char *digits, int count)
{
    memcpy(p, digits, (size_t)count);
    return p + count;
}

/* Lay d out as Number::toString does, by its decimal exponent n. */
static char *layout_decimal(char *p, const struct decimal *d)
{
    int k = d->k, n = d->n;

    if (k <= n && n <= 21)
        return put_zeros(put_digits(p, d->digits, k), n - k);
    if (0 < n && n <= 21) {
        p = put_digits(p, d->digits, n);
        *p++ = '.';
        return put_digits(p, d->digits + n, k - n);
    }
    if (-6 < n && n <= 0) {
        *p++ = '0';
        *p++ = '.';
        return put_digits(put_zeros(p, -n), d->digits, k);
    }
    *p++ = d->digits[0];
    if (k > 1) {
        *p++ = '.';
        p = put_digits(p, d->digits + 1, k - 1);
    }
    return p + sprintf(p, "e%c%d", n - 1 < 0 ? '-' : '+', abs(n - 1));
}

int idem__jcs_format_double(char out[IDEM__JCS_NUMBER_MAX], double value)
{
    struct decimal d;
    char *p = out;

    if (out == NULL || !isfinite(value))
        return IDEM_EINVAL;
    if (value == 0) {
        strcpy(out, "0"); /* -0 too */
        return 0;
    }
    if (value < 0) {
        *p++ = '-';
        value = -value;
    }
    /* An integer below 2^53: every other integer is another double, so its own digits are
     * the shortest that read back, and Number::toString writes them as they are. */
    if (value < 9007199254740992.0 && value == (double)(uint64_t)value) {
        char digits[20];
        int k = 0;

        for (uint64_t v = (uint64_t)value; v > 0; v /= 10)
            digits[k++] = (char)('0' + v % 10);
        while (k > 0)
            *p++ = digits[--k];
        *p = '\0';
        return 0;
    }
    shortest_decimal(&d, value);
    p = layout_decimal(p, &d);
    *p = '\0';
    return 0;
}
