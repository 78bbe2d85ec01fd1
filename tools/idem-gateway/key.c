/* The Idempotency-Key header's value: a quoted sf-string or a bare token, then the
 * operation ID validator. */
#include <stdio.h>
#include <string.h>

#include "key.h"

static int is_tchar(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~:/", c) != NULL);
}

/* "..." (RFC 8941 section 4.2.5): printable ASCII, with \" and \\ the only escapes. */
static int unquote(char *out, size_t cap, const char *s, size_t len, char *why, size_t size)
{
    size_t n = 0;

    for (size_t i = 1; i < len - 1; i++) {
        char c = s[i];

        if (c == '\\' && (i + 1 >= len - 1 || (s[i + 1] != '"' && s[i + 1] != '\\'))) {
            snprintf(why, size, "a backslash in the quoted key escapes only '\"' or '\\'");
            return -1;
        }
        if (c == '\\')
            c = s[++i];
        else if (c == '"' || c < 0x20 || c > 0x7e) {
            snprintf(why, size, "the quoted key holds %s",
                     c == '"' ? "an unescaped '\"'"
                              : "a character outside "
                                "printable ASCII");
            return -1;
        }
        if (n + 1 >= cap) {
            snprintf(why, size, "the key is longer than %d bytes", IDEM_OPERATION_ID_MAX);
            return -1;
        }
        out[n++] = c;
    }
    out[n] = '\0';
    return 0;
}

static int bare(char *out, size_t cap, const char *s, size_t len, char *why, size_t size)
{
    for (size_t i = 0; i < len; i++) {
        if (!is_tchar(s[i])) {
            snprintf(why, size,
                     "a bare key is token characters only; quote it (\"...\") to "
                     "send others");
            return -1;
        }
    }
    if (len + 1 > cap) {
        snprintf(why, size, "the key is longer than %d bytes", IDEM_OPERATION_ID_MAX);
        return -1;
    }
    memcpy(out, s, len);
    out[len] = '\0';
    return 0;
}

int gw_key_parse(char out[IDEM_OPERATION_ID_MAX + 1], const char *header, char *why, size_t size)
{
    char key[IDEM_OPERATION_ID_MAX + 1];
    idem_error err = IDEM_ERROR_INIT;
    size_t len;
    int rc;

    if (header == NULL) {
        snprintf(why, size, "the Idempotency-Key header is missing; every tool requires one");
        return -1;
    }
    header += strspn(header, " \t");
    len = strlen(header);
    while (len > 0 && (header[len - 1] == ' ' || header[len - 1] == '\t'))
        len--;
    if (len >= 2 && header[0] == '"' && header[len - 1] == '"')
        rc = unquote(key, sizeof(key), header, len, why, size);
    else if (len > 0 && header[0] == '"') {
        snprintf(why, size, "the quoted key has no closing '\"'");
        rc = -1;
    } else
        rc = bare(key, sizeof(key), header, len, why, size);
    if (rc == 0 && idem_validate_operation_id(key, &err) != 0) {
        snprintf(why, size, "not an operation ID: %s", err.message);
        rc = -1;
    }
    if (rc == 0)
        memcpy(out, key, strlen(key) + 1);
    return rc;
}
