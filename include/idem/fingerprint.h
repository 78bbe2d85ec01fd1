/**
 * @file fingerprint.h
 * @brief The request fingerprint: SHA-256 over the RFC 8785 canonical bytes of
 *        `{"arguments": <arguments>, "tool": <tool>, "version": <payload version>}`.
 *
 * Arguments given as text are parsed with idem_json_parse_arguments() (json.h).
 */
#ifndef IDEM_FINGERPRINT_H
#define IDEM_FINGERPRINT_H

#include <jansson.h>
#include <stddef.h>

#include "common.h"
#include "json.h"

#ifdef __cplusplus
extern "C" {
#endif

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

/* JCS, which this header held until 0.1: deprecated.h */
#define IDEM__FINGERPRINT_H_DONE
#include "deprecated.h"

#endif
