/* The gateway's walk of JSON text as written (tools/idem-gateway/json_span.c), checked
 * against jansson's reading of the same text: every text jansson reads is walked, element
 * by element, to the same names and values; malformed text is refused. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <jansson.h>
#include <string.h>

#include "json_span.h"

#define LOAD_FLAGS (JSON_DECODE_ANY | JSON_ALLOW_NUL)

/* A parameter held by value: a test runs in a process of its own, where the parent's
 * pointers mean nothing. */
typedef struct json_text {
    char s[128];
} json_text;

static json_t *load(gw_span s)
{
    json_t *v = json_loadb(s.at, s.len, LOAD_FLAGS, NULL);

    cr_assert_not_null(v, "jansson cannot read <%.*s>", (int)s.len, s.at);
    return v;
}

/* Each element of @s read alone equals jansson's element of the whole. */
static void assert_elements_match(gw_span s, const json_t *whole)
{
    gw_span_iter it;
    gw_span key, value, member;
    size_t seen = 0;
    char name[256];
    int rc;

    cr_assert_eq(gw_span_iter_init(&it, s), 0);
    while ((rc = gw_span_next(&it, &key, &value, &member)) == 1) {
        json_t *got = load(value);
        const json_t *want;

        if (json_is_object(whole)) {
            long n = gw_span_string(name, sizeof(name), key);

            cr_assert_geq(n, 0, "member name <%.*s> not decoded", (int)key.len, key.at);
            want = json_object_get(whole, name); /* no NUL in these names */
            cr_assert_eq(member.at, key.at);
        } else {
            cr_assert_eq(key.len, 0);
            want = json_array_get(whole, seen);
            cr_assert_eq(member.at, value.at);
        }
        cr_assert(json_equal(got, want), "element %zu <%.*s> differs", seen, (int)value.len,
                  value.at);
        cr_assert_eq(member.at + member.len, value.at + value.len);
        json_decref(got);
        seen++;
    }
    cr_assert_eq(rc, 0, "<%.*s> not walked to its end", (int)s.len, s.at);
    cr_assert_eq(seen, json_is_object(whole) ? json_object_size(whole) : json_array_size(whole));
    cr_assert_eq(gw_span_next(&it, &key, &value, &member), 0, "the end is the end");
}

ParameterizedTestParameters(json_span, walks_what_jansson_reads)
{
    static json_text texts[] = {
        {"{}"},
        {"[]"},
        {" { \"a\" : 1 , \"b\" : [ 2, {\"c\": null} ] } "},
        {"{\"n\": 3.141592653589793238462643383279, \"m\": 1e-400, \"k\": -0}"},
        {"[9007199254740993.0, 1E+2, -0.0e-0, true, false, null]"},
        {"{\"s\": \"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\", \"u\": \"\\u00e9\\ud83d\\ude00\"}"},
        {"{\"\\u0061rguments\": {\"x\": \"]}\"}, \"t\": \"{[\"}"},
        {"{\"nul\": \"a\\u0000b\", \"\": \"empty name\"}"},
        {"[[[[[[[[[[1]]]]]]]]]]"},
        {"{\"deep\": {\"er\": {\"est\": [1, [2, [3, {\"x\": \"y\"}]]]}}}"},
        {"\t[\r\n\"é\", \"\xe2\x82\xac\"\n]\t"},
    };
    return cr_make_param_array(json_text, texts, sizeof(texts) / sizeof(texts[0]));
}

ParameterizedTest(json_text *t, json_span, walks_what_jansson_reads)
{
    gw_span s;
    json_t *whole;
    size_t lead = strspn(t->s, " \t\r\n");

    cr_assert_eq(gw_span_value(&s, t->s, strlen(t->s)), 0, "<%s> not walked", t->s);
    cr_assert_eq(s.at, t->s + lead);
    cr_assert_eq(gw_span_well_formed(s), 0, "<%s> not well-formed", t->s);
    whole = load(s);
    assert_elements_match(s, whole);
    json_decref(whole);
}

ParameterizedTestParameters(json_span, refuses_what_is_not_one_value)
{
    static json_text texts[] = {
        {""},
        {"   "},
        {"{"},
        {"[1,"},
        {"{\"a\" 1}"},
        {"{\"a\": 1,}"},
        {"[1 2]"},
        {"{\"a\": [1}]"},
        {"[1]]"},
        {"\"open"},
        {"{a: 1}"},
        {"1 2"},
        {"{} {}"},
        {","},
        {"[,1]"},
        {"{\"a\": }"},
        /* Walked to their end, but outside the grammar inside: */
        {"{\"n\": 01}"},
        {"[tru]"},
        {"[1.]"},
        {"[.5]"},
        {"[\"\x01\"]"},
        {"[\"\\q\"]"},
        {"[1e]"},
        {"[-]"},
        {"{\"x\": {\"a\": 1,}}"},
        {"[[1,]]"},
        {"[\"\\u12g4\"]"},
        {"{\"a\": [nul]}"},
        {"[+1]"},
        {"[0x10]"},
        {"[1e+]"},
        {"{\"\x1f\": 1}"},
    };
    return cr_make_param_array(json_text, texts, sizeof(texts) / sizeof(texts[0]));
}

ParameterizedTest(json_text *t, json_span, refuses_what_is_not_one_value)
{
    gw_span s;
    int rc = gw_span_value(&s, t->s, strlen(t->s));

    if (rc == 0) /* its extent is found: what is inside is refused */
        cr_assert_eq(gw_span_well_formed(s), -1, "<%s> taken as well-formed", t->s);
    cr_assert_null(json_loadb(t->s, strlen(t->s), LOAD_FLAGS, NULL), "jansson reads <%s>", t->s);
}

Test(json_span, strings_decode_as_jansson_does)
{
    static const char *const texts[] = {
        "\"plain\"",
        "\"\\u00e9t\\u00E9\"",
        "\"\\ud83d\\ude00\"",
        "\"a\\u0000b\"",
        "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"",
        "\"\"",
    };
    char out[64];

    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        gw_span s = {texts[i], strlen(texts[i])};
        json_t *want = load(s);
        long n = gw_span_string(out, sizeof(out), s);

        cr_assert_eq(n, (long)json_string_length(want), "%s", texts[i]);
        cr_assert_eq(memcmp(out, json_string_value(want), (size_t)n), 0, "%s", texts[i]);
        json_decref(want);
    }
}

Test(json_span, malformed_or_overlong_strings_are_refused)
{
    static const char *const texts[] = {
        "\"\\ud83d\"", "\"\\ude00\"", "\"\\ud83dx\"", "\"\\u12\"", "\"\\x\"", "plain", "\"\\\"",
    };
    char out[8];
    gw_span big = {"\"123456789\"", 11};

    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        gw_span s = {texts[i], strlen(texts[i])};

        cr_assert_eq(gw_span_string(out, sizeof(out), s), -1, "%s", texts[i]);
    }
    cr_assert_eq(gw_span_string(out, sizeof(out), big), -1, "does not fit");
}

Test(json_span, members_are_found_by_their_decoded_name_and_counted)
{
    static const char text[] = "{\"op\": \"k1\", \"\\u006fp\": \"k2\", \"o\": 1, \"opp\": 2}";
    gw_span obj = {text, sizeof(text) - 1}, value, whole;

    cr_assert_eq(gw_span_member(obj, "op", 2, &value, &whole), 2);
    cr_assert_eq(value.len, 4);
    cr_assert_eq(strncmp(value.at, "\"k1\"", 4), 0);
    cr_assert_eq(strncmp(whole.at, "\"op\": \"k1\"", whole.len), 0);
    cr_assert_eq(gw_span_member(obj, "o", 1, &value, &whole), 1);
    cr_assert_eq(gw_span_member(obj, "missing", 7, &value, &whole), 0);
    obj.at = "[1]";
    obj.len = 3;
    cr_assert_eq(gw_span_member(obj, "op", 2, &value, &whole), -1, "not an object");
}
