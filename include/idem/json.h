/**
 * @file json.h
 * @brief Strict JSON parsing: one value, no duplicate keys, limits on size and depth, and
 *        the I-JSON check of a request's arguments.
 */
#ifndef IDEM_JSON_H
#define IDEM_JSON_H

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
 * A request's arguments parsed once: a copy of their text and the tree
 * idem_json_parse_arguments() made of it. For a caller that reads the arguments itself
 * before it calls the store (a check against the tool's schema, say): handed over in
 * idem_request.parsed, the store takes that tree instead of parsing the same text again.
 * Opaque and immutable once made; free it after the call.
 */
typedef struct idem_arguments idem_arguments;

/**
 * Parse arguments as idem_json_parse_arguments() does, keeping a copy of @p text.
 * @param out  on success the new object; caller frees it with idem_arguments_free().
 *             Untouched on failure.
 * @param opts NULL for the defaults. The store takes the tree only when its own parse
 *             allows as deep a nesting (IDEM_JSON_MAX_DEPTH_DEFAULT): with a deeper
 *             max_depth it parses the text itself.
 * @return as idem_json_parse_arguments(); IDEM_EINVAL with err->field "out" for a NULL
 *         @p out, "text" for a NULL @p text of non-zero @p len.
 */
IDEM_API int idem_arguments_parse(idem_arguments **out, const char *text, size_t len,
                                  const idem_json_options *opts, idem_error *err);

/** The tree of @p args, owned by it (borrowed: valid until idem_arguments_free()); NULL for
 *  NULL. Read it; never change it. */
IDEM_API const json_t *idem_arguments_json(const idem_arguments *args);

/** Free @p args and its tree's reference (NULL is fine). */
IDEM_API void idem_arguments_free(idem_arguments *args);

#ifdef __cplusplus
}
#endif

#endif
