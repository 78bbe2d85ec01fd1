/* Bearer tokens: each tenant's are stored as SHA-256 digests (config.h); a request's token
 * is hashed and compared with every digest in constant time (CRYPTO_memcmp), so that
 * neither the answer nor its timing tells a missing token from a wrong one, or how much of
 * a wrong one was right. */
#ifndef IDEM_GATEWAY_AUTH_H
#define IDEM_GATEWAY_AUTH_H

#include <stddef.h>

#include "config.h"

/* Whether @token (@len bytes) has the form of a bearer token (RFC 6750's b64token:
 * [A-Za-z0-9-._~+/]+ then '='*): 1 or 0. */
int gw_token_wellformed(const char *token, size_t len);

/* SHA-256 of @token's bytes into @out. Returns 0, or -1 (OpenSSL failed). */
int gw_token_digest(unsigned char out[GW_DIGEST_SIZE], const char *token, size_t len);

/* The tenant whose token @authorization (the header's value, or NULL) carries: "Bearer",
 * blanks, the token. NULL when the header is missing, malformed or the token unknown. */
const gw_tenant *gw_auth_tenant(const gw_config *cfg, const char *authorization);

#endif
