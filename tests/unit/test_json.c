/* Strict parsing: what is refused, with which reason, and the limits. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "idem/idem.h"

struct malformed {
    const char *name;
    const char *text;
    size_t len;         /* 0: strlen(text) */
    const char *reason; /* expected in the message */
};

static const struct malformed malformed_inputs[] = {
    {"empty", "", 0, "end of file"},
    {"only whitespace", " \n ", 0, "end of file"},
    {"duplicate key", "{\"a\":1,\"a\":2}", 0, "duplicate object key"},
    {"duplicate key nested", "[{\"k\":{\"x\":1,\"x\":1}}]", 0, "duplicate object key"},
    {"duplicate key by escape", "{\"a\":1,\"\\u0061\":2}", 0, "duplicate object key"},
    {"invalid utf-8 byte", "[\"\xff\"]", 0, "unable to decode byte 0xff"},
    {"overlong utf-8", "[\"\xc0\xaf\"]", 0, "unable to decode byte 0xc0"},
    {"encoded surrogate", "[\"\xed\xa0\x80\"]", 0, "unable to decode byte 0xed"},
    {"truncated utf-8", "[\"\xe2\x82\"]", 0, "unable to decode byte"},
    {"lone high surrogate", "[\"\\ud800\"]", 0, "invalid Unicode '\\uD800'"},
    {"lone low surrogate", "[\"\\udc00\"]", 0, "invalid Unicode '\\uDC00'"},
    {"high surrogate then letter", "[\"\\ud83d\\u0041\"]", 0, "invalid Unicode"},
    {"NaN", "[NaN]", 0, "invalid token"},
    {"Infinity", "[Infinity]", 0, "invalid token"},
    {"negative Infinity", "[-Infinity]", 0, "invalid token"},
    {"number overflowing double", "[1e400]", 0, "real number overflow"},
    {"negative overflow", "[-1.8e308]", 0, "real number overflow"},
    {"long integer overflowing double",
     "[1" /* 10^397, written out */
     "0000000000000000000000000000000000000000000000000"
     "0000000000000000000000000000000000000000000000000"
     "0000000000000000000000000000000000000000000000000"
     "0000000000000000000000000000000000000000000000000"
     "0000000000000000000000000000000000000000000000000"
     "0000000000000000000000000000000000000000000000000"
     "0000000000000000000000000000000000000000000000000"
     "000000000000000000000000000000000000000000000000000000]",
     0, "real number overflow"},
    {"leading zero", "[01]", 0, "invalid token"},
    {"trailing comma in array", "[1,]", 0, "unexpected token"},
    {"trailing comma in object", "{\"a\":1,}", 0, "string or '}' expected"},
    {"single quotes", "{'a':1}", 0, "string or '}' expected"},
    {"trailing garbage", "{} x", 0, "end of file expected"},
    {"two values", "1 2", 0, "end of file expected"},
    {"comment", "[1] // c", 0, "end of file expected"},
    {"raw control character", "[\"a\tb\"]", 0, "control character 0x9"},
    {"unterminated string", "[\"abc", 0, "premature end of input"},
    {"bad escape", "[\"\\x41\"]", 0, "invalid escape"},
    {"raw NUL byte", "[1,\0 2]", 6, "NUL byte in the text"},
    {"NUL escape in a key", "{\"a\\u0000\":1}", 0, "NUL byte in object key not supported"},
};

static idem_error parse_error(const struct malformed *m, json_t **value)
{
    idem_error err = IDEM_ERROR_INIT;
    size_t len = m->len ? m->len : strlen(m->text);
    int rc = idem_json_parse(value, m->text, len, NULL, &err);

    cr_assert_eq(rc, IDEM_EINVAL, "%s: returned %d", m->name, rc);
    return err;
}

Test(json_parse, each_malformed_input_is_rejected_with_its_reason)
{
    for (size_t i = 0; i < sizeof(malformed_inputs) / sizeof(malformed_inputs[0]); i++) {
        const struct malformed *m = &malformed_inputs[i];
        json_t *value = NULL;
        idem_error err = parse_error(m, &value);

        cr_assert_null(value, "%s: out was written", m->name);
        cr_assert_eq(err.code, IDEM_EINVAL, "%s", m->name);
        cr_assert_not_null(strstr(err.message, m->reason), "%s: message '%s' lacks '%s'", m->name,
                           err.message, m->reason);
        cr_assert_not_null(strstr(err.message, "position"), "%s: no position in '%s'", m->name,
                           err.message);
    }
}

Test(json_parse, error_names_line_column_and_position)
{
    idem_error err = IDEM_ERROR_INIT;
    json_t *value = NULL;
    const char *text = "{\n  \"a\": 1,\n  \"b\": tru\n}";

    cr_assert_eq(idem_json_parse(&value, text, strlen(text), NULL, &err), IDEM_EINVAL);
    cr_assert_not_null(strstr(err.message, "line 3"), "%s", err.message);
    cr_assert_not_null(strstr(err.message, "column"), "%s", err.message);
}

Test(json_parse, raw_nul_error_gives_its_place)
{
    idem_error err = IDEM_ERROR_INIT;
    json_t *value = NULL;

    cr_assert_eq(idem_json_parse(&value, "[1,\n2\0]", 7, NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.message,
                     "invalid JSON at line 2, column 2, position 6: NUL byte in the text");
}

Test(json_parse, nul_escape_inside_a_string_value_is_kept)
{
    json_t *value = NULL;

    cr_assert_eq(idem_json_parse(&value, "[\"a\\u0000b\"]", 12, NULL, NULL), 0);
    cr_assert_eq(json_string_length(json_array_get(value, 0)), 3);
    json_decref(value);
}

Test(json_parse, input_over_the_size_limit_is_rejected)
{
    idem_json_options opts = IDEM_JSON_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    json_t *value = NULL;

    opts.max_bytes = 8;
    cr_assert_eq(idem_json_parse(&value, "[1,2,3,4]", 9, &opts, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.message, "JSON text is 9 bytes, over the limit of 8 bytes");
    cr_assert_eq(idem_json_parse(&value, "[1,2,3,4]", 9, NULL, NULL), 0);
    json_decref(value);
}

Test(json_parse, default_size_limit_is_one_mebibyte)
{
    size_t len = IDEM_JSON_MAX_BYTES_DEFAULT + 1;
    char *text = malloc(len);
    json_t *value = NULL;
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_not_null(text);
    memset(text, ' ', len);
    text[0] = '1';
    cr_assert_eq(idem_json_parse(&value, text, len, NULL, &err), IDEM_EINVAL);
    cr_assert_not_null(strstr(err.message, "over the limit of 1048576 bytes"), "%s", err.message);
    cr_assert_eq(idem_json_parse(&value, text, len - 1, NULL, NULL), 0);
    json_decref(value);
    free(text);
}

/* "[[...[]...]]" nested `depth` deep. */
static char *nested(size_t depth)
{
    char *text = malloc(2 * depth + 1);

    cr_assert_not_null(text);
    memset(text, '[', depth);
    memset(text + depth, ']', depth);
    text[2 * depth] = '\0';
    return text;
}

Test(json_parse, nesting_up_to_the_limit_is_accepted_and_one_more_is_not)
{
    idem_json_options opts = IDEM_JSON_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char *ok = nested(IDEM_JSON_MAX_DEPTH_DEFAULT);
    char *deep = nested(IDEM_JSON_MAX_DEPTH_DEFAULT + 1);
    json_t *value = NULL;

    cr_assert_eq(idem_json_parse(&value, ok, strlen(ok), NULL, NULL), 0);
    json_decref(value);
    value = NULL;
    cr_assert_eq(idem_json_parse(&value, deep, strlen(deep), NULL, &err), IDEM_EINVAL);
    cr_assert_null(value);
    cr_assert_not_null(strstr(err.message, "position 129: nested deeper than 128 levels"), "%s",
                       err.message);
    opts.max_depth = 2;
    cr_assert_eq(idem_json_parse(&value, "[{\"a\":[]}]", 10, &opts, &err), IDEM_EINVAL);
    cr_assert_eq(idem_json_parse(&value, "[{\"a\":\"[[[\"}]", 13, &opts, NULL), 0);
    json_decref(value);
    free(ok);
    free(deep);
}

Test(json_parse, brackets_inside_strings_do_not_count_as_nesting)
{
    idem_json_options opts = IDEM_JSON_OPTIONS_INIT;
    json_t *value = NULL;

    opts.max_depth = 1;
    cr_assert_eq(idem_json_parse(&value, "[\"\\\"[[{{\"]", 10, &opts, NULL), 0);
    json_decref(value);
}

Test(json_parse, every_number_is_read_as_a_double)
{
    json_t *value = NULL;

    cr_assert_eq(idem_json_parse(&value, "[1, -0, 1e-400]", 15, NULL, NULL), 0);
    cr_assert(json_is_real(json_array_get(value, 0)));
    cr_assert(json_is_real(json_array_get(value, 1)));
    cr_assert_eq(json_real_value(json_array_get(value, 2)), 0.0);
    json_decref(value);
}

Test(json_parse, zero_options_mean_the_defaults)
{
    idem_json_options opts = {IDEM_JSON_OPTIONS_VERSION, 0, 0};
    json_t *value = NULL;

    cr_assert_eq(idem_json_parse(&value, "{}", 2, &opts, NULL), 0);
    json_decref(value);
}

Test(json_parse, unknown_options_version_is_rejected)
{
    idem_json_options opts = {99, 0, 0};
    idem_error err = IDEM_ERROR_INIT;
    json_t *value = NULL;

    cr_assert_eq(idem_json_parse(&value, "{}", 2, &opts, &err), IDEM_EINVAL);
    cr_assert_not_null(strstr(err.message, "version"));
    cr_assert_null(value);
}

Test(json_parse, null_arguments_are_rejected_not_dereferenced)
{
    json_t *value = NULL;

    cr_assert_eq(idem_json_parse(NULL, "{}", 2, NULL, NULL), IDEM_EINVAL);
    cr_assert_eq(idem_json_parse(&value, NULL, 5, NULL, NULL), IDEM_EINVAL);
    cr_assert_eq(idem_json_parse(&value, NULL, 0, NULL, NULL), IDEM_EINVAL);
    cr_assert_null(value);
}
