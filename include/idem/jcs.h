/**
 * @file jcs.h
 * @brief RFC 8785 (JCS) canonical serialization of JSON values and text.
 */
#ifndef IDEM_JCS_H
#define IDEM_JCS_H

#include <jansson.h>
#include <stddef.h>

#include "common.h"
#include "json.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * RFC 8785 canonical bytes of a JSON value: members sorted by UTF-16 code units,
 * ECMAScript number formatting, minimal string escaping, no whitespace.
 *
 * Integers: a jansson integer (json_integer(); parsed text has none, its numbers are all
 * doubles) is written as its exact decimal digits. Within ±2^53 that is byte for byte what
 * RFC 8785 writes for the same number; beyond, where RFC 8785 would write the nearest
 * double (1234567890123456789 as 1234567890123456800), idem keeps every digit, so that a
 * receipt holding a 64-bit ID is stored and replayed as the effect built it. Everything
 * else is RFC 8785 byte for byte.
 *
 * @param out      on success, a NUL-terminated buffer the caller owns; free with
 *                 idem_free(). Untouched on failure.
 * @param out_len  on success, its length without the terminator. May be NULL.
 * @param value    borrowed.
 * @return 0, or IDEM_EINVAL (a non-finite real, or a string that is not valid UTF-8),
 *         IDEM_ENOMEM.
 */
IDEM_API int idem_jcs_serialize(char **out, size_t *out_len, const json_t *value, idem_error *err);

/** idem_json_parse() then idem_jcs_serialize(); same ownership and errors. */
IDEM_API int idem_jcs_canonicalize(char **out, size_t *out_len, const char *text, size_t len,
                                   const idem_json_options *opts, idem_error *err);

#ifdef __cplusplus
}
#endif

#endif
