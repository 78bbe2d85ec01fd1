/* The core's number parsing (core/parse.c), for the tools' options and libpq's. No state. */
#ifndef IDEM_CORE_PARSE_H
#define IDEM_CORE_PARSE_H

#include <stddef.h>

/* A whole decimal number in [min, max] into *out, the whole of @text as strtoll() reads it;
 * 0, or -1 (out untouched). */
int idem__parse_whole(long long *out, const char *text, long long min, long long max);

/* An int as libpq's parse_int_param() reads a connection option: strtol()'s grammar
 * (leading white space), trailing white space allowed. 0, or -1 (out untouched). */
int idem__parse_libpq_int(int *out, const char *text);

/* @n bytes from the 2 * @n lower-case hex digits that begin @hex (as PostgreSQL's
 * encode(..., 'hex') and sha256sum write them) into @out; 0, or -1 when one is missing or
 * not a lower-case hex digit (@out then undefined). */
int idem__hex_decode(unsigned char *out, size_t n, const char *hex);

#endif
