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
    if (!gw_token_wellformed(token, len) || gw_token_digest(digest, token, len) != 0)
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
