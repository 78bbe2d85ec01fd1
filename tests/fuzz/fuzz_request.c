/* Fuzz target: what the store checks before it touches the database, on every field of
 * an idem_request: idem__store_validate() (store_request.c), and the public pieces it is
 * made of, idem_validate_*(), idem_json_parse_arguments() and idem_fingerprint_compute().
 *
 * Input: one flags byte (bits 0-1: the request struct's version, 0 to 3; bit 2: trace_id
 * NULL; bit 3: a 16-byte max_arguments_bytes), the payload version as 4 bytes big-endian,
 * then tenant, operation_id, tool, trace_id and arguments separated by 0x1f (the arguments
 * are the rest, 0x1f included; a field the input does not reach is NULL).
 *
 * Aborts when a property fails:
 * - a string field is accepted exactly when it satisfies validate.h's table (length and
 *   charset; only trace_id may be NULL), and a refusal is IDEM_EINVAL naming the field;
 * - the store accepts the request exactly when each field does, its arguments parse and
 *   fingerprint; else it names the first field refused;
 * - the fingerprint is the same computed twice, from the text, and by the store, and is
 *   the SHA-256 of the canonical bytes of {"arguments","tool","version"};
 * - the canonical form of the arguments parses again (as RFC 8785 reads it) to the same
 *   fingerprint, and as arguments too, unless it writes an integer beyond 2^53 in full
 *   (RFC 8785 does up to 1e21; idem_json_parse_arguments() refuses those).
 * Built with libFuzzer (-Dfuzzing=true, clang) or with standalone.c (any compiler). */
#include <math.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "idem/idem.h"
#include "store_internal.h"
#include "jcs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HEADER_SIZE 5
#define SEPARATOR   0x1f

enum { TENANT, OPERATION_ID, TOOL, TRACE_ID, ARGUMENTS, FIELDS };

struct input {
    char *field[FIELDS]; /* NUL-terminated, but arguments: exactly arg_len bytes */
    size_t arg_len;
    unsigned int version;
    int payload_version;
    size_t max_arguments_bytes;
};

#define check(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            abort();                                                                               \
    } while (0)

/* validate.h's table, written out independently of validate.c. */
static int in_table(const char *s, size_t max, const char *charset)
{
    size_t n;

    if (s == NULL)
        return 0;
    n = strlen(s);
    if (n < 1 || n > max)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (charset != NULL ? strchr(charset, s[i]) == NULL : (s[i] < 0x21 || s[i] > 0x7e))
            return 0;
    return 1;
}

static const char tenant_chars[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:@-";
static const char tool_chars[] = "abcdefghijklmnopqrstuvwxyz0123456789_.-";

static int tenant_ok(const char *s)
{
    return in_table(s, 64, tenant_chars);
}

static int operation_id_ok(const char *s)
{
    return in_table(s, 128, NULL);
}

static int tool_ok(const char *s)
{
    return in_table(s, 64, tool_chars);
}

static int trace_id_ok(const char *s)
{
    return s == NULL || in_table(s, 256, NULL);
}

/* A validator's answer agrees with the table: 0, or IDEM_EINVAL naming the field. */
static void check_answer(int rc, const idem_error *err, int expected, const char *field)
{
    if (expected) {
        check(rc == 0);
    } else {
        check(rc == IDEM_EINVAL);
        check(strcmp(err->field, field) == 0);
        check(err->message[0] != '\0');
    }
}

static void check_validators(const struct input *in)
{
    idem_error err = IDEM_ERROR_INIT;

    check_answer(idem_validate_tenant(in->field[TENANT], &err), &err, tenant_ok(in->field[TENANT]),
                 "tenant");
    check_answer(idem_validate_operation_id(in->field[OPERATION_ID], &err), &err,
                 operation_id_ok(in->field[OPERATION_ID]), "operation_id");
    check_answer(idem_validate_tool(in->field[TOOL], &err), &err, tool_ok(in->field[TOOL]), "tool");
    check_answer(idem_validate_payload_version(in->payload_version, &err), &err,
                 in->payload_version >= 1, "payload_version");
    check_answer(idem_validate_trace_id(in->field[TRACE_ID], &err), &err,
                 trace_id_ok(in->field[TRACE_ID]), "trace_id");
}

static json_t *parse_arguments(const struct input *in)
{
    idem_json_options opts = IDEM_JSON_OPTIONS_INIT;
    json_t *value = NULL;

    if (in->field[ARGUMENTS] == NULL || in->arg_len > in->max_arguments_bytes)
        return NULL;
    opts.max_bytes = in->max_arguments_bytes;
    if (idem_json_parse_arguments(&value, in->field[ARGUMENTS], in->arg_len, &opts, NULL) != 0)
        return NULL;
    return value;
}

static idem_fingerprint fingerprint(const char *tool, int payload_version, const json_t *args)
{
    idem_fingerprint fp;

    check(idem_fingerprint_compute(&fp, tool, payload_version, args, NULL) == 0);
    return fp;
}

static int same(const idem_fingerprint *a, const idem_fingerprint *b)
{
    return memcmp(a->bytes, b->bytes, sizeof(a->bytes)) == 0;
}

/* Whether canonical JSON text writes a number as an integer beyond ±2^53. */
static int has_big_integer(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '"') {
            for (i++; i < len && s[i] != '"'; i++)
                if (s[i] == '\\')
                    i++;
        } else if (s[i] == '-' || (s[i] >= '0' && s[i] <= '9')) {
            size_t n = strspn(s + i, "-+.0123456789eE");
            char number[IDEM__JCS_NUMBER_MAX] = {0};
            int integer = strcspn(s + i, ".eE") >= n;

            check(n < sizeof(number));
            memcpy(number, s + i, n);
            if (integer && fabs(strtod(number, NULL)) > 9007199254740992.0)
                return 1;
            i += n - 1;
        }
    }
    return 0;
}

/* The canonical form reads back, as RFC 8785 JSON and as arguments, to the same request. */
static void check_canonical(const char *tool, int payload_version, const json_t *args,
                            const idem_fingerprint *fp)
{
    idem_json_options opts = IDEM_JSON_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_fingerprint again;
    json_t *value = NULL;
    char *text = NULL;
    size_t len = 0;

    check(idem_jcs_serialize(&text, &len, args, NULL) == 0);
    opts.max_bytes = len;
    check(idem_json_parse(&value, text, len, &opts, NULL) == 0);
    again = fingerprint(tool, payload_version, value);
    check(same(&again, fp));
    json_decref(value);
    value = NULL;
    if (idem_json_parse_arguments(&value, text, len, &opts, &err) == 0) {
        again = fingerprint(tool, payload_version, value);
        check(same(&again, fp));
        json_decref(value);
    } else {
        check(strcmp(err.field, "arguments") == 0 && has_big_integer(text, len));
    }
    idem_free(text);
}

/* The fingerprint is SHA-256 over the canonical bytes of the whole request. */
static void check_definition(const char *tool, int payload_version, const json_t *args,
                             const idem_fingerprint *fp)
{
    json_t *request =
        json_pack("{sOsssi}", "arguments", args, "tool", tool, "version", payload_version);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    char *text = NULL;
    size_t len = 0;

    check(request != NULL);
    check(idem_jcs_serialize(&text, &len, request, NULL) == 0);
    check(EVP_Digest(text, len, md, &md_len, EVP_sha256(), NULL) == 1);
    check(md_len == sizeof(fp->bytes) && memcmp(md, fp->bytes, md_len) == 0);
    idem_free(text);
    json_decref(request);
}

static void check_fingerprint(const struct input *in, const json_t *args)
{
    const char *tool = in->field[TOOL];
    idem_error err = IDEM_ERROR_INIT;
    idem_fingerprint fp, again;
    int rc;

    if (!tool_ok(tool) || in->payload_version < 1) {
        rc = idem_fingerprint_compute(&fp, tool, in->payload_version, args, &err);
        check(rc == IDEM_EINVAL);
        check((!tool_ok(tool) && strcmp(err.field, "tool") == 0) ||
              (in->payload_version < 1 && strcmp(err.field, "payload_version") == 0));
        return;
    }
    fp = fingerprint(tool, in->payload_version, args);
    again = fingerprint(tool, in->payload_version, args);
    check(same(&fp, &again));
    check(idem_fingerprint_compute_text(&again, tool, in->payload_version, in->field[ARGUMENTS],
                                        in->arg_len, NULL, NULL) == 0);
    check(same(&fp, &again));
    check_definition(tool, in->payload_version, args, &fp);
    check_canonical(tool, in->payload_version, args, &fp);
}

/* The first field the store should refuse, or NULL. */
static const char *first_refused(const struct input *in, const json_t *args)
{
    if (in->version < 1 || in->version > IDEM_REQUEST_VERSION)
        return "request.version";
    if (!tenant_ok(in->field[TENANT]))
        return "tenant";
    if (!operation_id_ok(in->field[OPERATION_ID]))
        return "operation_id";
    if (!tool_ok(in->field[TOOL]))
        return "tool";
    if (in->payload_version < 1)
        return "payload_version";
    if (!trace_id_ok(in->field[TRACE_ID]))
        return "trace_id";
    return args == NULL ? "arguments" : NULL;
}

static void check_store(const struct input *in, const json_t *args)
{
    idem_request req = IDEM_REQUEST_INIT;
    idem_store_options defaults = IDEM_STORE_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    const char *refused = first_refused(in, args);
    struct idem_store store;
    idem_fingerprint fp;
    call c;
    int rc;

    memset(&store, 0, sizeof(store));
    store.opts = defaults;
    store.opts.max_arguments_bytes = in->max_arguments_bytes;
    memset(&c, 0, sizeof(c));
    c.store = &store;
    c.req = &req;
    c.err = &err;
    req.version = in->version;
    req.tenant = in->field[TENANT];
    req.operation_id = in->field[OPERATION_ID];
    req.tool = in->field[TOOL];
    req.payload_version = in->payload_version;
    req.trace_id = in->field[TRACE_ID];
    req.arguments = in->field[ARGUMENTS];
    req.arguments_len = in->arg_len;
    rc = idem__store_validate(&c);
    if (refused != NULL) {
        check(rc == IDEM_EINVAL && strcmp(err.field, refused) == 0 && c.arguments == NULL);
        return;
    }
    check(rc == 0 && c.arguments != NULL);
    fp = fingerprint(in->field[TOOL], in->payload_version, args);
    check(same(&c.fp, &fp));
    json_decref(c.arguments);
}

/* Split data into the fields, each allocated to its exact size: the strings with their
 * terminator, the arguments without one. */
static int split(struct input *in, const uint8_t *data, size_t size)
{
    uint32_t pv = (uint32_t)data[1] << 24 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 8 |
                  (uint32_t)data[4];
    size_t pos = HEADER_SIZE;
    int32_t signed_pv;

    memset(in, 0, sizeof(*in));
    memcpy(&signed_pv, &pv, sizeof(signed_pv));
    in->payload_version = signed_pv;
    in->version = data[0] & 3u;
    in->max_arguments_bytes = data[0] & 8u ? 16 : IDEM_JSON_MAX_BYTES_DEFAULT;
    for (int f = 0; f < FIELDS && pos <= size; f++) {
        const uint8_t *sep = f < ARGUMENTS ? memchr(data + pos, SEPARATOR, size - pos) : NULL;
        size_t n = sep != NULL ? (size_t)(sep - (data + pos)) : size - pos;

        if ((in->field[f] = malloc(f < ARGUMENTS ? n + 1 : n > 0 ? n : 1)) == NULL)
            return -1;
        memcpy(in->field[f], data + pos, n);
        if (f < ARGUMENTS)
            in->field[f][n] = '\0';
        else
            in->arg_len = n;
        pos += n + 1;
    }
    if (data[0] & 4u) {
        free(in->field[TRACE_ID]);
        in->field[TRACE_ID] = NULL;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct input in;
    json_t *args;

    if (size < HEADER_SIZE)
        return 0;
    if (split(&in, data, size) == 0) {
        args = parse_arguments(&in);
        check_validators(&in);
        if (args != NULL)
            check_fingerprint(&in, args);
        check_store(&in, args);
        json_decref(args);
    }
    for (int f = 0; f < FIELDS; f++)
        free(in.field[f]);
    return 0;
}
