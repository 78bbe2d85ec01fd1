/* Strict JSON parsing on top of jansson, and the I-JSON number rules for arguments.
 *
 * jansson already rejects invalid UTF-8, unpaired surrogate escapes, NaN/Infinity,
 * trailing garbage, and (with JSON_REJECT_DUPLICATES) duplicate keys; a number out of
 * double range fails as "real number overflow". `\u0000` is accepted inside string
 * values (the writer escapes it back) but jansson refuses it inside object keys. The
 * checks below add the size limit, a clear message for a raw NUL byte, and our own
 * depth limit, which is tested before jansson's fixed one (JSON_PARSER_MAX_DEPTH). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "idem/fingerprint.h"
#include "idem/jcs.h"
#include "jcs.h"

#define PARSE_FLAGS                                                                                \
    (JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL)

/* Line and column (in characters, as jansson counts) of byte offset `at`, both from 1. */
static void locate(const char *text, size_t at, size_t *line, size_t *column)
{
    *line = 1;
    *column = 1;
    for (size_t i = 0; i < at; i++) {
        unsigned char c = (unsigned char)text[i];

        if (c == '\n') {
            (*line)++;
            *column = 1;
        } else if ((c & 0xc0) != 0x80) {
            (*column)++;
        }
    }
}

/* An error at byte offset `at`; "position" counts bytes read, the offending one
 * included, as jansson's does. */
static int error_at(idem_error *err, const char *text, size_t at, const char *reason)
{
    size_t line, column;

    locate(text, at, &line, &column);
    return idem__error_set(err, IDEM_EINVAL,
                           "invalid JSON at line %zu, column %zu, position %zu: %s", line, column,
                           at + 1, reason);
}

int idem_json_options_init(idem_json_options *opts, unsigned int version)
{
    static const idem_json_options defaults = IDEM_JSON_OPTIONS_INIT;

    return idem__struct_init(opts, &defaults, sizeof(defaults), version, IDEM_JSON_OPTIONS_VERSION);
}

static int resolve_options(size_t *max_bytes, size_t *max_depth, const idem_json_options *opts,
                           idem_error *err)
{
    *max_bytes = IDEM_JSON_MAX_BYTES_DEFAULT;
    *max_depth = IDEM_JSON_MAX_DEPTH_DEFAULT;
    if (opts == NULL)
        return 0;
    if (idem__check_version(err, opts->version, IDEM_JSON_OPTIONS_VERSION, "options") != 0)
        return IDEM_EINVAL;
    if (opts->max_bytes != 0)
        *max_bytes = opts->max_bytes;
    if (opts->max_depth != 0)
        *max_depth = opts->max_depth;
    return 0;
}

/* Nesting depth, counted on the text so that an over-deep input fails with our limit
 * and the place where it is crossed, before jansson recurses into it. */
static int check_depth(const char *text, size_t len, size_t max_depth, idem_error *err)
{
    char reason[96];
    size_t depth = 0;
    int in_string = 0;

    for (size_t i = 0; i < len; i++) {
        char c = text[i];

        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = 0;
        } else if (c == '"') {
            in_string = 1;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth) {
                snprintf(reason, sizeof(reason), "nested deeper than %zu levels", max_depth);
                return error_at(err, text, i, reason);
            }
        } else if ((c == ']' || c == '}') && depth > 0) {
            depth--;
        }
    }
    return 0;
}

static int load_error(idem_error *err, const json_error_t *jerr)
{
    if (json_error_code(jerr) == json_error_out_of_memory)
        return idem__error_set(err, IDEM_ENOMEM, "out of memory parsing JSON");
    return idem__error_set(err, IDEM_EINVAL, "invalid JSON at line %d, column %d, position %d: %s",
                           jerr->line, jerr->column, jerr->position, jerr->text);
}

/* The checks that come before any parse: the pointers, the options, the size. */
static int parse_limits(size_t *max_bytes, size_t *max_depth, json_t **out, const char *text,
                        size_t len, const idem_json_options *opts, idem_error *err)
{
    int rc;

    if (out == NULL || (text == NULL && len > 0))
        return idem__error_set(err, IDEM_EINVAL, "JSON parse: out or text is NULL");
    rc = resolve_options(max_bytes, max_depth, opts, err);
    if (rc != 0)
        return rc;
    if (len > *max_bytes)
        return idem__error_set(err, IDEM_EINVAL,
                               "JSON text is %zu bytes, over the limit of %zu bytes", len,
                               *max_bytes);
    return 0;
}

static int parse_within(json_t **out, const char *text, size_t len, size_t max_depth,
                        idem_error *err)
{
    const char *nul;
    json_error_t jerr;
    json_t *value;
    int rc;

    if (text == NULL)
        text = "";
    nul = memchr(text, '\0', len);
    if (nul != NULL)
        return error_at(err, text, (size_t)(nul - text), "NUL byte in the text");
    rc = check_depth(text, len, max_depth, err);
    if (rc != 0)
        return rc;
    value = json_loadb(text, len, PARSE_FLAGS, &jerr);
    if (value == NULL)
        return load_error(err, &jerr);
    *out = value;
    return 0;
}

int idem_json_parse(json_t **out, const char *text, size_t len, const idem_json_options *opts,
                    idem_error *err)
{
    size_t max_bytes = 0, max_depth = 0;
    int rc = parse_limits(&max_bytes, &max_depth, out, text, len, opts, err);

    return rc != 0 ? rc : parse_within(out, text, len, max_depth, err);
}

/* A double's exact decimal expansion has at most 767 significant digits: a number written
 * with more (trailing zeros aside) is no double's rounding. */
#define MAX_EXACT_DIGITS 770

/* A number as written: its significant digits d1..dk (no leading or trailing zero; k is 0
 * for zero) and the exponent n of its value 0.d1..dk × 10^n. */
struct literal {
    char digits[MAX_EXACT_DIGITS + 1];
    int k;
    int too_long; /* more than MAX_EXACT_DIGITS significant digits (then only those kept) */
    long n;
    int integer; /* written without fraction or exponent */
};

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* The exponent part, saturated far beyond any double's (jansson has rejected overflow). */
static long read_exponent(const char *p, size_t len)
{
    size_t i = 0;
    long e = 0;
    int negative = 0;

    if (i < len && (p[i] == '+' || p[i] == '-'))
        negative = p[i++] == '-';
    for (; i < len && is_digit(p[i]); i++)
        e = e < 100000000L ? e * 10 + (p[i] - '0') : e;
    return negative ? -e : e;
}

/* Read a number token of valid JSON text. */
static void read_literal(struct literal *lit, const char *p, size_t len)
{
    size_t i = p[0] == '-' ? 1 : 0;
    long before_point = 0; /* significant digits before the point (negative: zeros after) */
    int after_point = 0, last = 0, count = 0;

    lit->integer = 1;
    for (; i < len && (is_digit(p[i]) || p[i] == '.'); i++) {
        if (p[i] == '.') {
            after_point = 1;
            lit->integer = 0;
        } else if (count == 0 && p[i] == '0') {
            before_point -= after_point;
        } else {
            before_point += !after_point;
            if (count < MAX_EXACT_DIGITS)
                lit->digits[count] = p[i];
            count++;
            last = p[i] != '0' ? count : last;
        }
    }
    lit->integer = lit->integer && i == len;
    lit->too_long = last > MAX_EXACT_DIGITS;
    lit->k = last < MAX_EXACT_DIGITS ? last : MAX_EXACT_DIGITS;
    lit->digits[lit->k] = '\0';
    lit->n = before_point + (i < len ? read_exponent(p + i + 1, len - i - 1) : 0);
}

/* Whether an integer literal lies beyond ±2^53. */
static int beyond_2_53(const struct literal *lit)
{
    char padded[17] = "0000000000000000";

    if (lit->n != 16)
        return lit->n > 16;
    memcpy(padded, lit->digits, (size_t)lit->k);
    return strcmp(padded, "9007199254740992") > 0;
}

/* The double nearest to the literal: written without a decimal point, so that strtod's
 * locale does not matter. */
static double literal_value(const struct literal *lit)
{
    char text[MAX_EXACT_DIGITS + 32];

    snprintf(text, sizeof(text), "%se%ld", lit->digits, lit->n - lit->k);
    return strtod(text, NULL);
}

/* Whether the literal is its nearest double rounded to the literal's own significant
 * digits: then it carries nothing that the double does not hold. */
static int double_rounds_to(const struct literal *lit, double d)
{
    char text[MAX_EXACT_DIGITS + 32];
    struct literal back = {.k = 0};
    const char *p = text;

    if (lit->too_long || d == 0 || !isfinite(d))
        return 0;
    /* printf rounds correctly; only its digits and exponent are read, whatever the
     * locale's decimal point. */
    snprintf(text, sizeof(text), "%.*e", lit->k - 1, fabs(d));
    for (; *p != '\0' && *p != 'e'; p++) {
        if (is_digit(*p) && back.k < MAX_EXACT_DIGITS)
            back.digits[back.k++] = *p;
    }
    while (back.k > 0 && back.digits[back.k - 1] == '0')
        back.k--;
    back.digits[back.k] = '\0';
    back.n = (*p == 'e' ? strtol(p + 1, NULL, 10) : 0) + 1;
    return back.n == lit->n && strcmp(back.digits, lit->digits) == 0;
}

/* The number token text[at..at+len) against I-JSON (RFC 7493 section 2.2). */
static int check_number(const char *text, size_t at, size_t len, idem_error *err)
{
    struct literal lit;
    char read_as[IDEM__JCS_NUMBER_MAX] = "0";
    int shown = len > 40 ? 40 : (int)len;
    const char *more = len > 40 ? "..." : "";
    size_t line, column;
    double d;

    read_literal(&lit, text + at, len);
    if (lit.k == 0)
        return 0; /* zero */
    locate(text, at, &line, &column);
    if (lit.integer && beyond_2_53(&lit))
        return idem__error_field(err, IDEM_EINVAL, "arguments",
                                 "number %.*s%s at line %zu, column %zu is an integer beyond "
                                 "±2^53 (9007199254740992), which an IEEE double cannot hold "
                                 "exactly: send it as a string (I-JSON, RFC 7493 section 2.2)",
                                 shown, text + at, more, line, column);
    d = literal_value(&lit);
    if (lit.integer || double_rounds_to(&lit, d))
        return 0;
    idem__jcs_format_double(read_as, d);
    return idem__error_field(err, IDEM_EINVAL, "arguments",
                             "number %.*s%s at line %zu, column %zu has more precision than an "
                             "IEEE double holds (it would be read as %s): send it as a string "
                             "(I-JSON, RFC 7493 section 2.2)",
                             shown, text + at, more, line, column, read_as);
}

static int is_number_char(char c)
{
    return is_digit(c) || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

/* Every number of valid JSON text, in order. Outside strings, a number is the only token
 * that starts with '-' or a digit. */
static int check_numbers(const char *text, size_t len, idem_error *err)
{
    int in_string = 0, rc = 0;

    for (size_t i = 0; i < len && rc == 0; i++) {
        char c = text[i];
        size_t end = i;

        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = 0;
        } else if (c == '"') {
            in_string = 1;
        } else if (c == '-' || is_digit(c)) {
            while (end < len && is_number_char(text[end]))
                end++;
            rc = check_number(text, i, end - i, err);
            i = end - 1;
        }
    }
    return rc;
}

/* Arguments in the common shape (args_shape.h) are built into their tree in one pass, the
 * same tree as jansson's; all others, and every error, take jansson's parse. */
int idem_json_parse_arguments(json_t **out, const char *text, size_t len,
                              const idem_json_options *opts, idem_error *err)
{
    size_t max_bytes = 0, max_depth = 0;
    json_t *value = NULL;
    int rc = parse_limits(&max_bytes, &max_depth, out, text, len, opts, err);

    if (rc != 0)
        return rc;
    rc = idem__json_tree_fast(&value, text, len, max_depth);
    if (rc == 1) {
        *out = value;
        return 0;
    }
    if (rc < 0)
        return idem__error_set(err, IDEM_ENOMEM, "out of memory parsing JSON");
    rc = parse_within(&value, text, len, max_depth, err);
    if (rc == 0)
        rc = check_numbers(text, len, err);
    if (rc != 0) {
        json_decref(value);
        return rc;
    }
    *out = value;
    return 0;
}
