/* Bearer tokens to tenants, by digest, in constant time per configured token. */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <strings.h>
#include <string.h>

#include "auth.h"

static int is_b64token_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("-._~+/", c) != NULL);
}

int gw_token_wellformed(const char *token, size_t len)
{
    size_t i = 0;

    while (i < len && is_b64token_char(token[i]))
        i++;
    if (i == 0)
        return 0;
    while (i < len && token[i] == '=')
        i++;
    return i == len;
}

int gw_token_digest(unsigned char out[GW_DIGEST_SIZE], const char *token, size_t len)
{
    unsigned int n = 0;

    if (EVP_Digest(token, len, out, &n, EVP_sha256(), NULL) != 1 || n != GW_DIGEST_SIZE)
        return -1;
    return 0;
}

/* The digest of the token this thread saw last: a connection's requests (one thread per
 * connection) carry the same token, and SHA-256 through libcrypto's providers costs a few
 * thousand instructions a request. Compared in constant time, as a memo of a pure
 * function: the digest still decides. */
#define TOKEN_MEMO_MAX 256
static _Thread_local struct {
    size_t len; /* 0: none yet */
    char token[TOKEN_MEMO_MAX];
    unsigned char digest[GW_DIGEST_SIZE];
} token_memo;

static int token_digest_memo(unsigned char out[GW_DIGEST_SIZE], const char *token, size_t len)
{
    if (len > 0 && len == token_memo.len && CRYPTO_memcmp(token, token_memo.token, len) == 0) {
        memcpy(out, token_memo.digest, GW_DIGEST_SIZE);
        return 0;
    }
    if (gw_token_digest(out, token, len) != 0)
        return -1;
    if (len <= TOKEN_MEMO_MAX) {
        memcpy(token_memo.token, token, len);
        memcpy(token_memo.digest, out, GW_DIGEST_SIZE);
        token_memo.len = len;
    }
    return 0;
}

const gw_tenant *gw_auth_tenant(const gw_config *cfg, const char *authorization)
{
    unsigned char digest[GW_DIGEST_SIZE];
    const gw_tenant *found = NULL;
    const char *token;
    size_t len;

    if (authorization == NULL || strncasecmp(authorization, "Bearer ", 7) != 0)
        return NULL;
    token = authorization + 7;
    token += strspn(token, " ");
    len = strlen(token);
    while (len > 0 && token[len - 1] == ' ')
        len--;
    if (!gw_token_wellformed(token, len) || token_digest_memo(digest, token, len) != 0)
        return NULL;
    /* Every digest is compared, whichever matches. */
    for (size_t i = 0; i < cfg->ntenants; i++) {
        for (size_t k = 0; k < cfg->tenants[i].ndigests; k++) {
            if (CRYPTO_memcmp(digest, cfg->tenants[i].digests[k], GW_DIGEST_SIZE) == 0)
                found = &cfg->tenants[i];
        }
    }
    return found;
}
