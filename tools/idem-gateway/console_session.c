/* Session cookies and CSRF tokens, both HMAC-SHA-256 under one random key per process. */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console_session.h"

#define KEY_SIZE 32
#define MAC_SIZE 32
/* The signed part: name "." seconds, and the NUL. */
#define HEAD_SIZE (GW_CONSOLE_OPERATOR_MAX + 1 + 20 + 1)

static unsigned char key[KEY_SIZE];
static int key_ready;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void draw_key(void)
{
    key_ready = RAND_bytes(key, KEY_SIZE) == 1;
}

static void to_hex(char *out, const unsigned char *bytes, size_t n)
{
    static const char digits[] = "0123456789abcdef";

    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 15];
    }
    out[2 * n] = '\0';
}

/* HMAC-SHA-256 of @purpose (with its NUL, so that no message of one purpose is one of
 * another) and @text, as hex into @out (65 bytes). */
static int mac_hex(char *out, const char *purpose, const char *text, size_t len)
{
    unsigned char mac[MAC_SIZE];
    unsigned int n = 0;
    size_t plen = strlen(purpose) + 1;
    unsigned char *msg = NULL;
    int rc = -1;

    pthread_once(&key_once, draw_key);
    if (!key_ready || (msg = malloc(plen + len)) == NULL)
        goto done;
    memcpy(msg, purpose, plen);
    memcpy(msg + plen, text, len);
    if (HMAC(EVP_sha256(), key, KEY_SIZE, msg, plen + len, mac, &n) == NULL || n != MAC_SIZE)
        goto done;
    to_hex(out, mac, MAC_SIZE);
    rc = 0;
done:
    free(msg);
    return rc;
}

int gw_console_session_make(char out[GW_CONSOLE_SESSION_SIZE], const char *name, time_t ends)
{
    char head[HEAD_SIZE], mac[2 * MAC_SIZE + 1];
    int n;

    if (strlen(name) > GW_CONSOLE_OPERATOR_MAX)
        return -1;
    n = snprintf(head, sizeof(head), "%s.%lld", name, (long long)ends);
    if (n < 0 || (size_t)n >= sizeof(head) || mac_hex(mac, "session", head, (size_t)n) != 0)
        return -1;
    snprintf(out, GW_CONSOLE_SESSION_SIZE, "%s.%s", head, mac);
    return 0;
}

/* The end of @value's signed part (its last '.'), or NULL when it has no MAC's place. */
static const char *mac_start(const char *value)
{
    const char *dot = strrchr(value, '.');

    return dot != NULL && strlen(dot + 1) == 2 * MAC_SIZE ? dot : NULL;
}

const gw_tenant *gw_console_session_check(const gw_console_config *cc, const char *value,
                                          time_t now)
{
    char want[2 * MAC_SIZE + 1], name[GW_CONSOLE_OPERATOR_MAX + 1], *end = NULL;
    const char *dot, *sep;
    long long ends;

    if (value == NULL || strlen(value) >= GW_CONSOLE_SESSION_SIZE ||
        (dot = mac_start(value)) == NULL)
        return NULL;
    if (mac_hex(want, "session", value, (size_t)(dot - value)) != 0 ||
        CRYPTO_memcmp(want, dot + 1, 2 * MAC_SIZE) != 0)
        return NULL;
    /* Signed by this process: the name and the end are as it wrote them. */
    sep = memchr(value, '.', (size_t)(dot - value));
    if (sep == NULL || (size_t)(sep - value) > GW_CONSOLE_OPERATOR_MAX)
        return NULL;
    ends = strtoll(sep + 1, &end, 10);
    if (end != dot || ends <= (long long)now)
        return NULL;
    memcpy(name, value, (size_t)(sep - value));
    name[sep - value] = '\0';
    return gw_console_operator(cc, name);
}

int gw_console_csrf(char out[GW_CONSOLE_CSRF_SIZE], const char *value)
{
    return mac_hex(out, "csrf", value, strlen(value));
}

int gw_console_csrf_ok(const char *value, const char *given)
{
    char want[GW_CONSOLE_CSRF_SIZE];

    if (given == NULL || strlen(given) != GW_CONSOLE_CSRF_SIZE - 1 ||
        gw_console_csrf(want, value) != 0)
        return 0;
    return CRYPTO_memcmp(want, given, GW_CONSOLE_CSRF_SIZE - 1) == 0;
}
