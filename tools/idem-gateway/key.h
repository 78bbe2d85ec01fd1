/* The Idempotency-Key header (draft-ietf-httpapi-idempotency-key-header-07): a
 * structured-field string (RFC 8941), "..." with \" and \\ escapes; a bare value of
 * token characters (RFC 9110 tchar, ':' and '/'; a UUID may start with a digit) is taken
 * as it is. The key is the unquoted value, which must be an operation ID (validate.h:
 * 1-128 bytes of printable ASCII, no space). */
#ifndef IDEM_GATEWAY_KEY_H
#define IDEM_GATEWAY_KEY_H

#include <stddef.h>

#include <idem/idem.h>

/* Parse @header (the field's value, NULL when absent) into @out. Returns 0, or -1 with
 * @why (of @size bytes) saying what is wrong. */
int gw_key_parse(char out[IDEM_OPERATION_ID_MAX + 1], const char *header, char *why, size_t size);

#endif
