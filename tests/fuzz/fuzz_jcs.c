/* Fuzz target: strict parsing, RFC 8785 serialization and the fingerprint.
 *
 * Besides "no crash, no sanitizer report", it checks the properties the fingerprint
 * relies on, and aborts when one fails:
 * - whatever parses also serializes and fingerprints;
 * - the canonical form parses again and is its own canonical form;
 * - a number's text reads back as the same double;
 * - the one-pass fingerprint of arguments text (jcs_args.c), where it answers, is the
 *   fingerprint of the parsed arguments, which the parser accepts.
 * Built with libFuzzer (-Dfuzzing=true, clang) or with standalone.c (any compiler). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "idem/idem.h"
#include "identity.h"
#include "jcs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_canonical_is_fixed_point(const char *canonical, size_t len)
{
    idem_json_options opts = IDEM_JSON_OPTIONS_INIT;
    char *again = NULL;
    size_t again_len = 0;

    /* Canonical text can be longer than its source ("1e20"), never deeper. */
    opts.max_bytes = len;
    if (idem_jcs_canonicalize(&again, &again_len, canonical, len, &opts, NULL) != 0)
        abort();
    if (again_len != len || memcmp(again, canonical, len) != 0)
        abort();
    idem_free(again);
}

static void check_parse_and_serialize(const char *text, size_t size)
{
    json_t *value = NULL;
    char *canonical = NULL;
    size_t len = 0;
    idem_fingerprint fp;

    if (idem_json_parse(&value, text, size, NULL, NULL) != 0)
        return;
    if (idem_jcs_serialize(&canonical, &len, value, NULL) != 0)
        abort();
    check_canonical_is_fixed_point(canonical, len);
    if (idem_fingerprint_compute(&fp, "fuzz", 1, value, NULL) != 0)
        abort();
    idem_free(canonical);
    json_decref(value);
}

static void check_number(const uint8_t *data, size_t size)
{
    char text[IDEM__JCS_NUMBER_MAX];
    double value;

    if (size < sizeof(value))
        return;
    memcpy(&value, data, sizeof(value));
    if (idem__jcs_format_double(text, value) != 0) {
        if (isfinite(value))
            abort();
        return;
    }
    if (strlen(text) >= sizeof(text) || (value != 0 && strtod(text, NULL) != value))
        abort();
}

static void check_fingerprint_text(const char *text, size_t size)
{
    idem_fingerprint fast, full;
    json_t *value = NULL;
    int rc = idem__fingerprint_text(&fast, "fuzz", 1, text, size, NULL);

    if (rc == 0)
        return;
    if (rc != 1 || idem_json_parse_arguments(&value, text, size, NULL, NULL) != 0 ||
        idem_fingerprint_compute(&full, "fuzz", 1, value, NULL) != 0 ||
        memcmp(fast.bytes, full.bytes, sizeof(fast.bytes)) != 0)
        abort();
    json_decref(value);
}

/* The validators on the input as a C string: any bytes, never a crash. */
static void check_validators(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);

    if (s == NULL)
        return;
    memcpy(s, data, size);
    s[size] = '\0';
    idem_validate_tenant(s, NULL);
    idem_validate_operation_id(s, NULL);
    idem_validate_tool(s, NULL);
    idem_validate_trace_id(s, NULL);
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_parse_and_serialize((const char *)data, size);
    check_fingerprint_text((const char *)data, size);
    check_number(data, size);
    check_validators(data, size);
    return 0;
}
