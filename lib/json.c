/* Strict JSON parsing on top of jansson.
 *
 * jansson already rejects invalid UTF-8, unpaired surrogate escapes, NaN/Infinity,
 * trailing garbage, and (with JSON_REJECT_DUPLICATES) duplicate keys; a number out of
 * double range fails as "real number overflow". `\u0000` is accepted inside string
 * values (the writer escapes it back) but jansson refuses it inside object keys. The
 * checks below add the size limit, a clear message for a raw NUL byte, and our own
 * depth limit, which is tested before jansson's fixed one (JSON_PARSER_MAX_DEPTH). */
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "idem/fingerprint.h"

#define PARSE_FLAGS                                                                                \
    (JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL)

/* Line and column (in characters, as jansson counts) of byte offset `at`, both from 1. */
static void locate(const char *text, size_t at, size_t *line, size_t *column)
{
    *line = 1;
    *column = 1;
    for (size_t i = 0; i < at; i++) {
        unsigned char c = (unsigned char)text[i];

        if (c == '\n') {
            (*line)++;
            *column = 1;
        } else if ((c & 0xc0) != 0x80) {
            (*column)++;
        }
    }
}

/* An error at byte offset `at`; "position" counts bytes read, the offending one
 * included, as jansson's does. */
static int error_at(idem_error *err, const char *text, size_t at, const char *reason)
{
    size_t line, column;

    locate(text, at, &line, &column);
    return idem__error_set(err, IDEM_EINVAL,
                           "invalid JSON at line %zu, column %zu, position %zu: %s", line, column,
                           at + 1, reason);
}

int idem_json_options_init(idem_json_options *opts, unsigned int version)
{
    static const idem_json_options defaults = IDEM_JSON_OPTIONS_INIT;

    return idem__struct_init(opts, &defaults, sizeof(defaults), version, IDEM_JSON_OPTIONS_VERSION);
}

static int resolve_options(size_t *max_bytes, size_t *max_depth, const idem_json_options *opts,
                           idem_error *err)
{
    *max_bytes = IDEM_JSON_MAX_BYTES_DEFAULT;
    *max_depth = IDEM_JSON_MAX_DEPTH_DEFAULT;
    if (opts == NULL)
        return 0;
    if (idem__check_version(err, opts->version, IDEM_JSON_OPTIONS_VERSION, "options") != 0)
        return IDEM_EINVAL;
    if (opts->max_bytes != 0)
        *max_bytes = opts->max_bytes;
    if (opts->max_depth != 0)
        *max_depth = opts->max_depth;
    return 0;
}

/* Nesting depth, counted on the text so that an over-deep input fails with our limit
 * and the place where it is crossed, before jansson recurses into it. */
static int check_depth(const char *text, size_t len, size_t max_depth, idem_error *err)
{
    char reason[96];
    size_t depth = 0;
    int in_string = 0;

    for (size_t i = 0; i < len; i++) {
        char c = text[i];

        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = 0;
        } else if (c == '"') {
            in_string = 1;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth) {
                snprintf(reason, sizeof(reason), "nested deeper than %zu levels", max_depth);
                return error_at(err, text, i, reason);
            }
        } else if ((c == ']' || c == '}') && depth > 0) {
            depth--;
        }
    }
    return 0;
}

static int load_error(idem_error *err, const json_error_t *jerr)
{
    if (json_error_code(jerr) == json_error_out_of_memory)
        return idem__error_set(err, IDEM_ENOMEM, "out of memory parsing JSON");
    return idem__error_set(err, IDEM_EINVAL, "invalid JSON at line %d, column %d, position %d: %s",
                           jerr->line, jerr->column, jerr->position, jerr->text);
}

int idem_json_parse(json_t **out, const char *text, size_t len, const idem_json_options *opts,
                    idem_error *err)
{
    size_t max_bytes, max_depth;
    const char *nul;
    json_error_t jerr;
    json_t *value;
    int rc;

    if (out == NULL || (text == NULL && len > 0))
        return idem__error_set(err, IDEM_EINVAL, "JSON parse: out or text is NULL");
    rc = resolve_options(&max_bytes, &max_depth, opts, err);
    if (rc != 0)
        return rc;
    if (len > max_bytes)
        return idem__error_set(err, IDEM_EINVAL,
                               "JSON text is %zu bytes, over the limit of %zu bytes", len,
                               max_bytes);
    if (text == NULL)
        text = "";
    nul = memchr(text, '\0', len);
    if (nul != NULL)
        return error_at(err, text, (size_t)(nul - text), "NUL byte in the text");
    rc = check_depth(text, len, max_depth, err);
    if (rc != 0)
        return rc;
    value = json_loadb(text, len, PARSE_FLAGS, &jerr);
    if (value == NULL)
        return load_error(err, &jerr);
    *out = value;
    return 0;
}
