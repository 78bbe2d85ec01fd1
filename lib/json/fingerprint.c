/* The request fingerprint: SHA-256 over the RFC 8785 bytes of
 * {"arguments": <arguments>, "tool": <tool>, "version": <payload version>}. */
#include <openssl/evp.h>
#include <openssl/opensslv.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "idem/fingerprint.h"
#include "idem/validate.h"
#include "idem/jcs.h"
#include "identity.h"
#include "jcs.h"

/* A failure inside the arguments names them as the field at fault (once). */
static int blame_arguments(idem_error *err, int rc)
{
    if (rc != IDEM_EINVAL || err == NULL || strcmp(err->field, "arguments") == 0)
        return rc;
    idem__error_context(err, "arguments");
    snprintf(err->field, sizeof(err->field), "%s", "arguments");
    return rc;
}

/* The wrapper is written directly: its keys are already in canonical order, and RFC 8785
 * output composes, so this equals serializing the wrapper object. @identity (a tool's
 * policy, identity.h) is written only when not NULL: without one the bytes are those of
 * every earlier version. */
static int write_request(idem__buf *buf, const char *tool, int payload_version,
                         const json_t *arguments, const json_t *identity, idem_error *err)
{
    char version[IDEM__JCS_NUMBER_MAX];
    int rc;

    idem__jcs_format_double(version, (double)payload_version);
    if (idem__buf_append(buf, "{\"arguments\":", 13) != 0)
        return idem__error_set(err, IDEM_ENOMEM, "out of memory writing the request");
    rc = blame_arguments(err, idem__jcs_write_value(buf, arguments, IDEM__JCS_ARGUMENTS, err));
    if (rc == 0 && identity != NULL) {
        if (idem__buf_append(buf, ",\"identity\":", 12) != 0)
            rc = idem__error_set(err, IDEM_ENOMEM, "out of memory writing the request");
        else
            rc = idem__jcs_write_value(buf, identity, 0, err);
    }
    if (rc == 0 && idem__buf_append(buf, ",\"tool\":", 8) != 0)
        rc = idem__error_set(err, IDEM_ENOMEM, "out of memory writing the request");
    if (rc == 0)
        rc = idem__jcs_write_string(buf, tool, strlen(tool), err);
    if (rc == 0 && (idem__buf_append(buf, ",\"version\":", 11) != 0 ||
                    idem__buf_append(buf, version, strlen(version)) != 0 ||
                    idem__buf_append(buf, "}", 1) != 0))
        rc = idem__error_set(err, IDEM_ENOMEM, "out of memory writing the request");
    return rc;
}

static int check_request(const char *tool, int payload_version, idem_error *err)
{
    int rc = idem_validate_tool(tool, err);

    if (rc == 0)
        rc = idem_validate_payload_version(payload_version, err);
    return rc;
}

/* The checks both entry points make before any work. */
static int check_call(const idem_fingerprint *out, const char *tool, int payload_version,
                      const void *arguments, idem_error *err)
{
    int rc;

    if (out == NULL)
        return idem__error_set(err, IDEM_EINVAL, "fingerprint: out is NULL");
    rc = check_request(tool, payload_version, err);
    if (rc == 0 && arguments == NULL)
        rc = idem__error_field(err, IDEM_EINVAL, "arguments", "is missing (NULL)");
    return rc;
}

/* SHA-256, fetched from libcrypto's providers once (OpenSSL 3): given EVP_sha256(), each
 * digest would look the algorithm up again (a third of a short request's fingerprint).
 * NULL if the fetch failed; EVP_sha256() serves then, as it does with OpenSSL 1.1. */
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
static EVP_MD *sha256_fetched;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void fetch_sha256(void)
{
    sha256_fetched = EVP_MD_fetch(NULL, "SHA256", NULL);
}

static const EVP_MD *sha256(void)
{
    pthread_once(&sha256_once, fetch_sha256);
    return sha256_fetched != NULL ? sha256_fetched : EVP_sha256();
}
#else
static const EVP_MD *sha256(void)
{
    return EVP_sha256();
}
#endif

int idem__sha256(unsigned char out[IDEM_FINGERPRINT_SIZE], const void *bytes, size_t len)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;

    if (EVP_Digest(bytes, len, md, &md_len, sha256(), NULL) != 1 || md_len != IDEM_FINGERPRINT_SIZE)
        return -1;
    memcpy(out, md, IDEM_FINGERPRINT_SIZE);
    return 0;
}

int idem__fingerprint_identity(idem_fingerprint *out, const char *tool, int payload_version,
                               const json_t *arguments, const json_t *identity, idem_error *err)
{
    idem__buf buf = {NULL, 0, 0};
    int rc = check_call(out, tool, payload_version, arguments, err);

    if (rc != 0)
        return rc;
    rc = write_request(&buf, tool, payload_version, arguments, identity, err);
    if (rc == 0 && idem__sha256(out->bytes, buf.data, buf.len) != 0)
        rc = idem__error_set(err, IDEM_ENOMEM, "SHA-256 of the request failed in libcrypto");
    idem__buf_free(&buf);
    return rc;
}

/* A positive int's digits: what RFC 8785 writes for it as a double. */
static size_t format_version(char out[16], int v)
{
    char rev[16];
    size_t n = 0, k = 0;

    do {
        rev[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    while (n > 0)
        out[k++] = rev[--n];
    return k;
}

/* The same bytes write_request() writes, the arguments canonicalized from their text, at
 * REQUEST_ARGUMENTS_AT up to *args_end. A validated tool name (a-z 0-9 _ . -) is its own
 * canonical string: nothing to escape. */
#define REQUEST_ARGUMENTS_AT 13
static int write_request_text(idem__buf *buf, const char *tool, int payload_version,
                              const char *arguments, size_t len, size_t *args_end)
{
    char version[16];
    size_t version_len = format_version(version, payload_version);
    int rc;

    if (idem__buf_append(buf, "{\"arguments\":", REQUEST_ARGUMENTS_AT) != 0)
        return IDEM_ENOMEM;
    if ((rc = idem__jcs_arguments_fast(buf, arguments, len)) != 1)
        return rc;
    *args_end = buf->len;
    if (idem__buf_append(buf, ",\"tool\":\"", 9) != 0 ||
        idem__buf_append(buf, tool, strlen(tool)) != 0 ||
        idem__buf_append(buf, "\",\"version\":", 12) != 0 ||
        idem__buf_append(buf, version, version_len) != 0 || idem__buf_append(buf, "}", 1) != 0)
        return IDEM_ENOMEM;
    return 1;
}

int idem__fingerprint_text_unhashed(idem__buf *text, const char *tool, int payload_version,
                                    const char *arguments, size_t len, idem__buf *canonical,
                                    idem_error *err)
{
    size_t args_end = 0;
    int rc = write_request_text(text, tool, payload_version, arguments, len, &args_end);

    if (rc == IDEM_ENOMEM)
        rc = idem__error_set(err, IDEM_ENOMEM, "out of memory writing the request");
    if (rc == 1 && canonical != NULL &&
        idem__buf_append(canonical, text->data + REQUEST_ARGUMENTS_AT,
                         args_end - REQUEST_ARGUMENTS_AT) != 0)
        rc = idem__error_set(err, IDEM_ENOMEM, "out of memory keeping the arguments");
    if (rc != 1)
        idem__buf_free(text);
    return rc;
}

int idem__fingerprint_hash_text(idem_fingerprint *out, idem__buf *text, idem_error *err)
{
    if (idem__sha256(out->bytes, text->data, text->len) != 0)
        return idem__error_set(err, IDEM_ENOMEM, "SHA-256 of the request failed in libcrypto");
    idem__buf_free(text);
    return 0;
}

int idem__fingerprint_text_kept(idem_fingerprint *out, const char *tool, int payload_version,
                                const char *arguments, size_t len, idem__buf *canonical,
                                idem_error *err)
{
    idem__buf text = {NULL, 0, 0};
    int rc = idem__fingerprint_text_unhashed(&text, tool, payload_version, arguments, len,
                                             canonical, err);

    if (rc == 1 && idem__fingerprint_hash_text(out, &text, err) != 0) {
        idem__buf_free(&text);
        idem__buf_free(canonical);
        rc = IDEM_ENOMEM;
    }
    return rc;
}

int idem__fingerprint_text(idem_fingerprint *out, const char *tool, int payload_version,
                           const char *arguments, size_t len, idem_error *err)
{
    return idem__fingerprint_text_kept(out, tool, payload_version, arguments, len, NULL, err);
}

int idem_fingerprint_compute(idem_fingerprint *out, const char *tool, int payload_version,
                             const json_t *arguments, idem_error *err)
{
    return idem__fingerprint_identity(out, tool, payload_version, arguments, NULL, err);
}

int idem_fingerprint_compute_text(idem_fingerprint *out, const char *tool, int payload_version,
                                  const char *arguments_json, size_t len,
                                  const idem_json_options *opts, idem_error *err)
{
    json_t *arguments = NULL;
    int rc = check_call(out, tool, payload_version, arguments_json, err);

    if (rc != 0)
        return rc;
    rc =
        blame_arguments(err, idem_json_parse_arguments(&arguments, arguments_json, len, opts, err));
    if (rc == 0)
        rc = idem_fingerprint_compute(out, tool, payload_version, arguments, err);
    json_decref(arguments);
    return rc;
}

void idem_fingerprint_hex(char out[IDEM_FINGERPRINT_HEX_SIZE], const idem_fingerprint *fp)
{
    static const char hex[] = "0123456789abcdef";

    if (out == NULL)
        return;
    out[0] = '\0';
    if (fp == NULL)
        return;
    for (size_t i = 0; i < IDEM_FINGERPRINT_SIZE; i++) {
        out[2 * i] = hex[fp->bytes[i] >> 4];
        out[2 * i + 1] = hex[fp->bytes[i] & 0xf];
    }
    out[2 * IDEM_FINGERPRINT_SIZE] = '\0';
}
