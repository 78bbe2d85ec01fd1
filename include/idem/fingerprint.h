/**
 * @file fingerprint.h
 * @brief Strict JSON parsing, RFC 8785 (JCS) canonical serialization, and the request
 *        fingerprint: SHA-256 over the canonical bytes of
 *        `{"arguments": <arguments>, "tool": <tool>, "version": <payload version>}`.
 */
#ifndef IDEM_FINGERPRINT_H
#define IDEM_FINGERPRINT_H

#include <jansson.h>
#include <stddef.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Default limit on JSON input size: 1 MiB. */
#define IDEM_JSON_MAX_BYTES_DEFAULT ((size_t)1 << 20)
/** Default limit on nesting depth of arrays and objects. */
#define IDEM_JSON_MAX_DEPTH_DEFAULT 128

/** Options for parsing JSON text. Initialize with ::IDEM_JSON_OPTIONS_INIT. */
typedef struct idem_json_options {
    unsigned int version; /**< ::IDEM_JSON_OPTIONS_VERSION */
    size_t max_bytes;     /**< longest accepted input in bytes; 0 means the default */
    size_t max_depth;     /**< deepest accepted nesting; 0 means the default */
} idem_json_options;

#define IDEM_JSON_OPTIONS_VERSION 1
#define IDEM_JSON_OPTIONS_INIT                                                                     \
    {                                                                                              \
        IDEM_JSON_OPTIONS_VERSION, IDEM_JSON_MAX_BYTES_DEFAULT, IDEM_JSON_MAX_DEPTH_DEFAULT        \
    }

/** Fill @p opts with the defaults of struct version @p version (for bindings that cannot
 *  use ::IDEM_JSON_OPTIONS_INIT). @return 0, or IDEM_EINVAL (NULL, unknown version). */
IDEM_API int idem_json_options_init(idem_json_options *opts, unsigned int version);

/**
 * Parse JSON text strictly: one value, no trailing garbage, no duplicate object keys,
 * valid UTF-8 with no unpaired surrogate escapes, no NaN/Infinity, size and depth within
 * limits. Every number is read as an IEEE-754 double, as RFC 8785 requires (integers
 * beyond 2^53 become the nearest double; a number out of double range is rejected). For a
 * request's arguments use idem_json_parse_arguments(), which refuses what a double would
 * change.
 * `\u0000` is accepted in string values but not in object keys (jansson keeps keys as
 * C strings): such a key is rejected with a clear error.
 *
 * @param out   on success, a new reference; caller owns it and releases it with
 *              json_decref(). Untouched on failure.
 * @param text  the JSON text; need not be NUL-terminated; may contain no NUL byte.
 * @param len   its length in bytes.
 * @param opts  NULL for the defaults.
 * @param err   on failure, the reason with the line, column and byte position.
 * @return 0, or IDEM_EINVAL (malformed or over a limit), IDEM_ENOMEM.
 */
IDEM_API int idem_json_parse(json_t **out, const char *text, size_t len,
                             const idem_json_options *opts, idem_error *err);

/**
 * Parse a request's arguments: idem_json_parse(), then every number held to I-JSON
 * (RFC 7493 section 2.2), so that two different intents can never share a fingerprint:
 *  - an integer written without fraction or exponent must lie within ±2^53
 *    (±9007199254740992): `9007199254740993` and `1234567890123456789` are refused, even
 *    where a double happens to hold the value;
 *  - any other number must be its nearest double rounded to the significant digits it was
 *    written with: `0.1`, `1e300`, `1.0e20`, `5e-324` and `0.10000000000000001` (printf's
 *    `%.17g` of 0.1, as jansson writes it) pass; `9007199254740993.0`, `1e-400` and
 *    `3.141592653589793238462643383279` do not.
 * Send such a number as a string. What passes is read as by idem_json_parse().
 * idem_store_execute() and idem_fingerprint_compute_text() parse arguments with this.
 *
 * @return as idem_json_parse(); a refused number is IDEM_EINVAL with err->field
 *         "arguments" and a message giving the number, its line and column, and the advice
 *         to send it as a string.
 */
IDEM_API int idem_json_parse_arguments(json_t **out, const char *text, size_t len,
                                       const idem_json_options *opts, idem_error *err);

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

/** Buffer size that always holds idem_jcs_format_double()'s output. */
#define IDEM_JCS_NUMBER_MAX 32

/**
 * Format a double as ECMAScript's Number.prototype.toString does (RFC 8785 3.2.2.3):
 * shortest round-trip digits, `1e+21`, `1e-7`, `0` for -0.
 * @param out  at least ::IDEM_JCS_NUMBER_MAX bytes.
 * @return 0, or IDEM_EINVAL for NaN and infinities (out untouched).
 */
IDEM_API int idem_jcs_format_double(char out[IDEM_JCS_NUMBER_MAX], double value);

/** Size of a fingerprint in bytes (SHA-256). */
#define IDEM_FINGERPRINT_SIZE 32
/** Size of a fingerprint's lower-case hex form, terminator included. */
#define IDEM_FINGERPRINT_HEX_SIZE 65

/** A request fingerprint. */
typedef struct idem_fingerprint {
    unsigned char bytes[IDEM_FINGERPRINT_SIZE];
} idem_fingerprint;

/**
 * Fingerprint of a request: SHA-256 of the canonical bytes of
 * `{"arguments": arguments, "tool": tool, "version": payload_version}`.
 * An integer in @p arguments beyond ±2^53 is refused (IDEM_EINVAL, field "arguments"), as
 * idem_json_parse_arguments() refuses one in text.
 *
 * @param out        untouched on failure.
 * @param tool       validated as by idem_validate_tool().
 * @param payload_version validated as by idem_validate_payload_version().
 * @param arguments  borrowed; any JSON value.
 * @return 0, IDEM_EINVAL (err->field names "tool", "payload_version" or "arguments"),
 *         IDEM_ENOMEM.
 */
IDEM_API int idem_fingerprint_compute(idem_fingerprint *out, const char *tool, int payload_version,
                                      const json_t *arguments, idem_error *err);

/** idem_fingerprint_compute() over arguments given as JSON text, parsed with
 *  idem_json_parse_arguments() and @p opts. */
IDEM_API int idem_fingerprint_compute_text(idem_fingerprint *out, const char *tool,
                                           int payload_version, const char *arguments_json,
                                           size_t len, const idem_json_options *opts,
                                           idem_error *err);

/** Lower-case hex of @p fp into @p out (::IDEM_FINGERPRINT_HEX_SIZE bytes, NUL-terminated). */
IDEM_API void idem_fingerprint_hex(char out[IDEM_FINGERPRINT_HEX_SIZE], const idem_fingerprint *fp);

#ifdef __cplusplus
}
#endif

#endif
