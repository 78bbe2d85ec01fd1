/* The gateway's writer of jansson trees (tools/idem-gateway/json_write.c), checked against
 * json_dumps(): the same text byte for byte for every kind of value, escapes and order,
 * the same refusals; and a raw string written as the JSON text it holds. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "json_write.h"

#define LOAD_FLAGS (JSON_DECODE_ANY | JSON_ALLOW_NUL)

/* A parameter held by value: a test runs in a process of its own. */
typedef struct json_text {
    char s[160];
} json_text;

static void assert_as_jansson(const json_t *v)
{
    char *want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    char *got = gw_json_dump(v, NULL);

    cr_assert_not_null(want);
    cr_assert_not_null(got, "refused what jansson writes: %s", want);
    cr_assert_str_eq(got, want);
    free(want);
    free(got);
}

ParameterizedTestParameters(json_write, writes_what_jansson_writes)
{
    static json_text texts[] = {
        {"null"},
        {"true"},
        {"false"},
        {"0"},
        {"-1"},
        {"9223372036854775807"},
        {"-9223372036854775808"},
        {"1.5"},
        {"-0.0"},
        {"1e300"},
        {"0.1"},
        {"123456.789e-20"},
        {"\"\""},
        {"\"plain ascii ~ DEL:\x7f\""},
        {"\"quote \\\" backslash \\\\ slash / \\/\""},
        {"\"\\b\\f\\n\\r\\t \\u0001 \\u001f \\u0000 nul\""},
        {"\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \\u2028\""},
        {"[]"},
        {"{}"},
        {"[1,[2,[3,[]]],{\"a\":{}}]"},
        {"{\"z\":1,\"a\":2,\"m\":{\"y\":[true,false,null],\"b\":\"x\"}}"},
        {"{\"k\\\"ey\":\"v\",\"\\u00e9\":0.25,\"ctl\\u0007\":[]}"},
        {"[\"a\",1,2.5,-3,{\"n\":null}]"},
    };

    return cr_make_param_array(json_text, texts, sizeof(texts) / sizeof(texts[0]));
}

ParameterizedTest(json_text *t, json_write, writes_what_jansson_writes)
{
    json_error_t jerr;
    json_t *v = json_loads(t->s, LOAD_FLAGS, &jerr);

    cr_assert_not_null(v, "<%s>: %s", t->s, jerr.text);
    assert_as_jansson(v);
    json_decref(v);
}

/* Members in the order they were set, as jansson writes them, also past its table's first
 * growth; and values built rather than parsed. */
Test(json_write, writes_members_in_their_order_and_built_values)
{
    json_t *o = json_object(), *a = json_array();
    char key[16];

    for (int i = 40; i > 0; i--) {
        snprintf(key, sizeof(key), "k%02d", (i * 7) % 41);
        json_object_set_new(o, key, json_integer(i));
    }
    json_object_del(o, "k07");
    json_object_set_new(o, "k07", json_string("again, last"));
    json_array_append_new(a, json_real(0.0253));
    json_array_append_new(a, json_stringn("nul\0inside", 10));
    json_array_append_new(a, json_integer(-42));
    json_object_set_new(o, "list", a);
    assert_as_jansson(o);
    json_decref(o);
}

/* What jansson refuses to write, refused too: a string that is not UTF-8 (only a string
 * made without jansson's check can be one). */
Test(json_write, refuses_what_jansson_refuses)
{
    const char *bad[] = {"\xc3", "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "a\xff"};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *o = json_pack("{s:o}", "s", json_stringn_nocheck(bad[i], strlen(bad[i])));
        char *want = json_dumps(o, JSON_COMPACT);

        cr_assert_null(want, "jansson wrote case %zu", i);
        cr_assert_null(gw_json_dump(o, NULL), "case %zu", i);
        json_decref(o);
    }
    cr_assert_null(gw_json_dump(NULL, NULL));
}

/* The raw string is written as the text it holds, wherever it is, and only that one: a
 * number beyond 64 bits and digits a parser would drop reach the text as written. */
Test(json_write, writes_the_raw_string_as_its_json_text)
{
    static const char receipt[] = "{\"n\":123456789012345678901234567890,\"x\":1.50,\"e\":1E+2}";
    static const char want[] =
        "{\"result\":{\"text\":"
        "\"{\\\"n\\\":123456789012345678901234567890,\\\"x\\\":1.50,\\\"e\\\":1E+2}\","
        "\"receipt\":{\"n\":123456789012345678901234567890,\"x\":1.50,\"e\":1E+2},"
        "\"after\":\"x\"}}";
    json_t *raw = json_string(receipt);
    json_t *doc =
        json_pack("{s:{s:s, s:o, s:s}}", "result", "text", receipt, "receipt", raw, "after", "x");
    char *got = gw_json_dump(doc, raw);
    json_error_t jerr;
    json_t *back;

    cr_assert_not_null(got);
    cr_assert_str_eq(got, want);
    back = json_loads(got, JSON_DECODE_INT_AS_REAL, &jerr);
    cr_assert_not_null(back, "not JSON: %s", jerr.text);
    json_decref(back);
    free(got);
    json_decref(doc);
}
