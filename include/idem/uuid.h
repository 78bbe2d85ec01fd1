/**
 * @file uuid.h
 * @brief Operation IDs: UUIDv7 (RFC 9562) from OpenSSL's CSPRNG.
 *
 * The caller allocates one operation ID per approved action, persists it, and reuses it
 * for every transport attempt. idem accepts any valid ID (see validate.h); a UUIDv7
 * also carries its creation time, which lets idem recognise a retry that arrives after
 * the retention window.
 */
#ifndef IDEM_UUID_H
#define IDEM_UUID_H

#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Size of a UUID's text form, terminator included. */
#define IDEM_UUID_STRING_SIZE 37

/**
 * A new UUIDv7, lower-case, 8-4-4-4-12.
 * @param out  at least ::IDEM_UUID_STRING_SIZE bytes; untouched on failure.
 * @return 0, or IDEM_EIO when the random generator fails.
 */
IDEM_API int idem_uuid_v7(char out[IDEM_UUID_STRING_SIZE], idem_error *err);

/**
 * The creation time of a UUIDv7, in milliseconds since the Unix epoch.
 * @param out  untouched on failure.
 * @return 0, or IDEM_EINVAL when @p id is not a UUIDv7 in text form (either case).
 */
IDEM_API int idem_uuid_v7_time_ms(uint64_t *out, const char *id);

#ifdef __cplusplus
}
#endif

#endif
