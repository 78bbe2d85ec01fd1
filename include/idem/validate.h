/**
 * @file validate.h
 * @brief Checks of the fields that identify a request. Each returns 0 or IDEM_EINVAL
 *        with err->field set to the field's name and a message saying why.
 *
 * | field            | rule                                                          |
 * | ---------------- | ------------------------------------------------------------- |
 * | tenant           | 1–64 bytes of `[A-Za-z0-9._:@-]`                              |
 * | operation_id     | 1–128 bytes of printable ASCII (0x21–0x7e): no space, no NUL  |
 * | tool             | 1–64 bytes of `[a-z0-9_.-]`                                   |
 * | payload_version  | ≥ 1                                                           |
 * | trace_id         | optional (NULL); else 1–256 bytes of printable ASCII          |
 *
 * NULL, empty, overlong strings, invalid UTF-8 and control characters are all rejected
 * by the charsets above; nothing is ever read past the limit + 1 bytes.
 */
#ifndef IDEM_VALIDATE_H
#define IDEM_VALIDATE_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define IDEM_TENANT_MAX       64
#define IDEM_OPERATION_ID_MAX 128
#define IDEM_TOOL_MAX         64
#define IDEM_TRACE_ID_MAX     256

/** The shortest retention window or key memory, in seconds, that idem accepts: in
 *  ::idem_store_options, ::idem_tool_retention, ::idem_sweep_options and idem-sweep's
 *  --key-memory alike (a value outside is refused, IDEM_EINVAL naming the member). */
#define IDEM_WINDOW_MIN_S 1u
/** The longest: 3650 days (315360000 s). A window is a promise to remember a key; a longer
 *  one is a mistake (UINT_MAX seconds would end in 2163), not a retention policy. */
#define IDEM_WINDOW_MAX_S (3650u * 86400u)

IDEM_API int idem_validate_tenant(const char *tenant, idem_error *err);
IDEM_API int idem_validate_operation_id(const char *operation_id, idem_error *err);
IDEM_API int idem_validate_tool(const char *tool, idem_error *err);
IDEM_API int idem_validate_payload_version(int payload_version, idem_error *err);
/** NULL is valid (no trace ID). */
IDEM_API int idem_validate_trace_id(const char *trace_id, idem_error *err);

#ifdef __cplusplus
}
#endif

#endif
