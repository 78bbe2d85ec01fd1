/* Internal: the RFC 8785 writer, shared by the serializer and the fingerprint. */
#ifndef IDEM_LIB_JCS_H
#define IDEM_LIB_JCS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "idem/common.h"

/* Deepest nesting the writer follows; also what stops it on a cyclic value. It equals
 * jansson's own parser limit, so any value idem_json_parse() accepts can be written. */
#define IDEM__JCS_MAX_DEPTH 2048

/* A growable byte buffer, always NUL-terminated once anything was appended. Start it
 * zeroed; release it with idem__buf_free(). */
typedef struct idem__buf {
    char *data;
    size_t len;
    size_t cap;
} idem__buf;

/* Decode one code point of strict UTF-8 (RFC 3629: no overlong forms, no surrogates,
 * nothing above U+10FFFF) at s[*i] (of n bytes); advance *i. Returns 0, or -1 when
 * invalid. */
int idem__utf8_next(const unsigned char *s, size_t n, size_t *i, uint32_t *cp);

/* Append n bytes. Returns 0 or IDEM_ENOMEM (the buffer is then unchanged). */
int idem__buf_append(idem__buf *buf, const void *bytes, size_t n);
void idem__buf_free(idem__buf *buf);

/* The largest integer magnitude (2^53) up to which every integer is exactly a double. */
#define IDEM__JCS_INT_LIMIT ((json_int_t)9007199254740992LL)

/* Flags of idem__jcs_write_value(). */
#define IDEM__JCS_ARGUMENTS                                                                        \
    1u /* a request's arguments: an integer beyond ±2^53 is refused                               \
          (IDEM_EINVAL) instead of written exactly */

/* Append the canonical form of value / of the UTF-8 string s[0..n). Return 0,
 * IDEM_EINVAL (invalid UTF-8, non-finite number, nesting too deep, or with
 * IDEM__JCS_ARGUMENTS an integer beyond ±2^53) or IDEM_ENOMEM. */
int idem__jcs_write_value(idem__buf *buf, const json_t *value, unsigned flags, idem_error *err);
int idem__jcs_write_string(idem__buf *buf, const char *s, size_t n, idem_error *err);

/* The order of two member names (UTF-8) by their UTF-16 code units (RFC 8785 3.2.3):
 * negative, 0 or positive. */
int idem__jcs_key_compare(const char *a, size_t a_len, const char *b, size_t b_len);

/* Append the canonical form of the JSON text[0..len) (RFC 8785 3.2: no whitespace, members
 * sorted by UTF-16 code units, strings escaped minimally) with every number written exactly
 * as in the text, digits, sign, exponent and all: its value is not read. Members with the
 * same name (which PostgreSQL's json type keeps) keep their order among themselves. Return
 * 0, IDEM_EINVAL (not one JSON value, invalid UTF-8, an escape of a lone surrogate, nesting
 * deeper than IDEM__JCS_MAX_DEPTH; the buffer may then hold part of the output) or
 * IDEM_ENOMEM. */
int idem__jcs_write_text(idem__buf *buf, const char *text, size_t len, idem_error *err);

/* Append the canonical form of a request's arguments, the JSON text[0..len), in one pass,
 * when the text is in the subset whose canonical form needs no number read as a double
 * (args_shape.h: strings without escapes, integers of at most 15 digits, no duplicate names,
 * shallow nesting), so that idem_json_parse_arguments() accepts it and
 * idem__jcs_write_value(IDEM__JCS_ARGUMENTS) writes the same bytes for its tree. Returns 1
 * when written; 0 when the text is outside the subset or not JSON (the buffer is as it
 * was; the full path then judges it, in its own words); IDEM_ENOMEM. */
int idem__jcs_arguments_fast(idem__buf *buf, const char *text, size_t len);

/* The tree of a request's arguments, the JSON text[0..len), in one pass, when the text is
 * in the same subset and nested less than @max_depth (json_tree.c): the tree jansson's parse
 * in idem_json_parse_arguments() makes of it, members in the text's order, every number a
 * real. Returns 1 with *out set (the caller's reference); 0 when the text is outside the
 * subset or not JSON (nothing made; the full path then judges it); IDEM_ENOMEM. */
int idem__json_tree_fast(json_t **out, const char *text, size_t len, size_t max_depth);

/* The top-level member @name of @s, a NUL-terminated object that idem__jcs_arguments_fast()
 * wrote: 1 with *at and *len its value's canonical text in @s; 0 when it has none. */
int idem__jcs_canonical_member(const char *s, const char *name, size_t *at, size_t *len);

/* Buffer size that always holds idem__jcs_format_double()'s output. */
#define IDEM__JCS_NUMBER_MAX 32

/* Format a double as ECMAScript's Number.prototype.toString does (RFC 8785 3.2.2.3):
 * shortest round-trip digits, `1e+21`, `1e-7`, `0` for -0. out holds at least
 * IDEM__JCS_NUMBER_MAX bytes. Returns 0, or IDEM_EINVAL for NaN and infinities (out
 * untouched). Internal: the tests and the fuzz targets link it from the static library. */
int idem__jcs_format_double(char out[IDEM__JCS_NUMBER_MAX], double value);

#endif
