/* The console's sessions: a cookie "idem_console" whose value is the operator's name, when
 * the session ends (Unix seconds) and an HMAC-SHA-256 of both, under a key drawn at random
 * once per process (so a restart ends every session); and the CSRF token every form of a
 * session carries, an HMAC of the session's cookie value under the same key. Nothing is
 * kept on the server: a session is valid while its MAC holds, it has not ended, and its
 * operator is still configured. */
#ifndef IDEM_GATEWAY_CONSOLE_SESSION_H
#define IDEM_GATEWAY_CONSOLE_SESSION_H

#include <stddef.h>
#include <time.h>

#include "console_config.h"

#define GW_CONSOLE_COOKIE "idem_console"
/* name "." seconds "." 64 hex digits, and the NUL. */
#define GW_CONSOLE_SESSION_SIZE (GW_CONSOLE_OPERATOR_MAX + 1 + 20 + 1 + 64 + 1)
/* 64 hex digits and the NUL. */
#define GW_CONSOLE_CSRF_SIZE 65

/* The cookie value of a session of the operator @name that ends at @ends, into @out. Returns 0, or
 * -1 (no random key: OpenSSL failed, or a name too long). */
int gw_console_session_make(char out[GW_CONSOLE_SESSION_SIZE], const char *name, time_t ends);

/* The operator of the session whose cookie value is @value (NULL: none) at time @now; NULL
 * when there is none, its MAC is wrong, it has ended, or its operator is no longer in
 * @cc. Borrowed from @cc. */
const gw_tenant *gw_console_session_check(const gw_console_config *cc, const char *value,
                                          time_t now);

/* The CSRF token of the session @value into @out. Returns 0 or -1 (OpenSSL failed). */
int gw_console_csrf(char out[GW_CONSOLE_CSRF_SIZE], const char *value);

/* Whether @given (NULL: none) is the CSRF token of the session @value: 1 or 0. Compared in
 * constant time. */
int gw_console_csrf_ok(const char *value, const char *given);

#endif
