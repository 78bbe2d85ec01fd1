/* The request fingerprint: known values, the fields it checks, and the properties that
 * make it exact (equal requests hash equal, changed requests do not). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/idem.h"
#include "identity.h"
#include "jcs.h"

static void fingerprint_hex(char hex[IDEM_FINGERPRINT_HEX_SIZE], const char *tool, int version,
                            const char *arguments)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_fingerprint fp;

    cr_assert_eq(
        idem_fingerprint_compute_text(&fp, tool, version, arguments, strlen(arguments), NULL, &err),
        0, "%s: %s", arguments, err.message);
    idem_fingerprint_hex(hex, &fp);
}

static void fingerprint_of(idem_fingerprint *out, const char *tool, int version,
                           const json_t *arguments)
{
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_fingerprint_compute(out, tool, version, arguments, &err), 0, "%s",
                 err.message);
}

/* Expected values: SHA-256 of the canonical request text, computed independently. */
Test(fingerprint, is_sha256_of_the_canonical_request)
{
    char hex[IDEM_FINGERPRINT_HEX_SIZE];

    /* {"arguments":{"a":1,"b":2},"tool":"t","version":1} */
    fingerprint_hex(hex, "t", 1, "{\"b\":2,\"a\":1}");
    cr_assert_str_eq(hex, "3ff5dfbb2b521825653ac4acabb258135d1b7aa96b8de00f892ec678f39d0b00");
    /* {"arguments":["€",1e+21,0.1],"tool":"send_email","version":2} */
    fingerprint_hex(hex, "send_email", 2, "[\"\\u20ac\", 1E21, 1e-1]");
    cr_assert_str_eq(hex, "b877eed9f96d287d2f879d4943db0d88242b9c28efa530ff1905c82995f1ede3");
}

Test(fingerprint, text_and_value_forms_agree)
{
    json_t *args = json_pack("{s:[i,f],s:s}", "list", 1, 0.5, "name", "x");
    idem_fingerprint a, b;
    const char *text = "{\"name\":\"x\",\"list\":[1.0,5e-1]}";

    fingerprint_of(&a, "tool", 3, args);
    cr_assert_eq(idem_fingerprint_compute_text(&b, "tool", 3, text, strlen(text), NULL, NULL), 0);
    cr_assert_eq(memcmp(a.bytes, b.bytes, sizeof(a.bytes)), 0);
    json_decref(args);
}

Test(fingerprint, hex_is_64_lower_case_digits)
{
    idem_fingerprint fp;
    char hex[IDEM_FINGERPRINT_HEX_SIZE];

    for (size_t i = 0; i < sizeof(fp.bytes); i++)
        fp.bytes[i] = (unsigned char)(0xf0 + (i % 16));
    idem_fingerprint_hex(hex, &fp);
    cr_assert_eq(strlen(hex), 64);
    cr_assert_eq(strncmp(hex, "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff", 32), 0, "%s", hex);
}

Test(fingerprint, bad_tool_version_or_arguments_name_the_field)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_fingerprint fp;
    json_t *args = json_object();

    cr_assert_eq(idem_fingerprint_compute(&fp, "Bad Tool", 1, args, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "tool");
    cr_assert_eq(idem_fingerprint_compute(&fp, NULL, 1, args, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "tool");
    cr_assert_eq(idem_fingerprint_compute(&fp, "t", 0, args, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "payload_version");
    cr_assert_eq(idem_fingerprint_compute(&fp, "t", 1, NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "arguments");
    cr_assert_eq(idem_fingerprint_compute(NULL, "t", 1, args, &err), IDEM_EINVAL);
    json_decref(args);
}

Test(fingerprint, malformed_argument_text_names_arguments_and_the_place)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_fingerprint fp;

    cr_assert_eq(idem_fingerprint_compute_text(&fp, "t", 1, "{\"a\":1,\"a\":2}", 13, NULL, &err),
                 IDEM_EINVAL);
    cr_assert_str_eq(err.field, "arguments");
    cr_assert_eq(strncmp(err.message, "arguments: invalid JSON at line 1", 33), 0, "%s",
                 err.message);
    cr_assert_not_null(strstr(err.message, "duplicate object key"), "%s", err.message);
    cr_assert_eq(idem_fingerprint_compute_text(&fp, "t", 1, NULL, 0, NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "arguments");
}

Test(fingerprint, unserializable_arguments_name_arguments)
{
    json_t *args = json_pack("{so}", "k", json_stringn_nocheck("\xff", 1));
    idem_error err = IDEM_ERROR_INIT;
    idem_fingerprint fp;

    cr_assert_eq(idem_fingerprint_compute(&fp, "t", 1, args, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "arguments");
    cr_assert_not_null(strstr(err.message, "arguments: string is not valid UTF-8"), "%s",
                       err.message);
    json_decref(args);
}

Test(fingerprint, failure_leaves_out_untouched)
{
    idem_fingerprint fp, before;

    memset(fp.bytes, 0xab, sizeof(fp.bytes));
    before = fp;
    cr_assert_eq(idem_fingerprint_compute_text(&fp, "t", 1, "[", 1, NULL, NULL), IDEM_EINVAL);
    cr_assert_eq(memcmp(fp.bytes, before.bytes, sizeof(fp.bytes)), 0);
}

/* ---- properties over generated values ---- */

static uint64_t rng_state;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static const char *const fragments[] = {"a",
                                        "b",
                                        "Z",
                                        "0",
                                        " ",
                                        "\"",
                                        "\\",
                                        "/",
                                        "\n",
                                        "\x01",
                                        "\x7f",
                                        "\xc3\xa9",
                                        "\xe2\x82\xac",
                                        "\xef\xac\xb3",
                                        "\xf0\x9f\x98\x80",
                                        "key"};

static json_t *random_string(void)
{
    char buf[64] = "";
    size_t n = rng() % 5;

    for (size_t i = 0; i < n; i++)
        strcat(buf, fragments[rng() % (sizeof(fragments) / sizeof(fragments[0]))]);
    return json_string(buf);
}

static json_t *random_number(void)
{
    uint64_t bits = rng();
    double d;

    switch (rng() % 3) {
    case 0:
        return json_real((double)(int64_t)(rng() % 2000) - 1000);
    case 1:
        return json_real((double)(rng() % 100000) / 1000.0);
    default:
        memcpy(&d, &bits, sizeof(d));
        return json_real(d == d && d - d == 0 ? d : 1.5); /* finite only */
    }
}

static json_t *random_value(int depth);

static json_t *random_array(int depth)
{
    json_t *a = json_array();
    size_t n = rng() % 5;

    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, random_value(depth + 1));
    return a;
}

static json_t *random_object(int depth)
{
    json_t *o = json_object();
    size_t n = rng() % 5;

    for (size_t i = 0; i < n; i++) {
        json_t *key = random_string();

        json_object_set_new(o, json_string_value(key), random_value(depth + 1));
        json_decref(key);
    }
    return o;
}

static json_t *random_value(int depth)
{
    switch (rng() % (depth < 4 ? 8 : 6)) {
    case 0:
        return json_null();
    case 1:
        return json_boolean(rng() % 2);
    case 2:
    case 3:
        return random_number();
    case 4:
    case 5:
        return random_string();
    case 6:
        return random_array(depth);
    default:
        return random_object(depth);
    }
}

static json_t *reordered(const json_t *v);

static json_t *reordered_object(const json_t *v)
{
    json_t *copy = json_object(), *member;
    const char *keys[8], *key;
    size_t n = 0;

    json_object_foreach((json_t *)v, key, member)
    {
        cr_assert_lt(n, sizeof(keys) / sizeof(keys[0]));
        keys[n++] = key;
    }
    while (n-- > 0)
        json_object_set_new(copy, keys[n], reordered(json_object_get(v, keys[n])));
    return copy;
}

/* A copy whose objects list their members in reverse insertion order. */
static json_t *reordered(const json_t *v)
{
    json_t *copy, *member;
    size_t i;

    if (json_is_object(v))
        return reordered_object(v);
    if (!json_is_array(v))
        return json_deep_copy(v);
    copy = json_array();
    json_array_foreach(v, i, member)
    {
        json_array_append_new(copy, reordered(member));
    }
    return copy;
}

Test(jcs_properties, canonicalizing_twice_changes_nothing)
{
    rng_state = 0x243f6a8885a308d3u;
    for (int i = 0; i < 2000; i++) {
        json_t *v = random_value(0);
        char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_INDENT(2));
        char *once = NULL, *twice = NULL;
        idem_error err = IDEM_ERROR_INIT;

        cr_assert_eq(idem_jcs_canonicalize(&once, NULL, text, strlen(text), NULL, &err), 0,
                     "%s: %s", text, err.message);
        cr_assert_eq(idem_jcs_canonicalize(&twice, NULL, once, strlen(once), NULL, &err), 0,
                     "%s: %s", once, err.message);
        cr_assert_str_eq(once, twice);
        idem_free(once);
        idem_free(twice);
        free(text);
        json_decref(v);
    }
}

/* Member order and whitespace in the text never change the fingerprint. */
Test(jcs_properties, key_order_and_whitespace_never_change_the_fingerprint)
{
    size_t texts_differed = 0;

    rng_state = 0x13198a2e03707344u;
    for (int i = 0; i < 2000; i++) {
        json_t *v = random_object(0), *r = reordered(v);
        char *spaced = json_dumps(v, JSON_INDENT(4));
        char *compact = json_dumps(r, JSON_COMPACT);
        idem_fingerprint a, b;

        texts_differed += strcmp(spaced, compact) != 0;
        cr_assert_eq(idem_fingerprint_compute_text(&a, "t", 1, spaced, strlen(spaced), NULL, NULL),
                     0);
        cr_assert_eq(
            idem_fingerprint_compute_text(&b, "t", 1, compact, strlen(compact), NULL, NULL), 0);
        cr_assert_eq(memcmp(a.bytes, b.bytes, sizeof(a.bytes)), 0, "%s\nvs\n%s", spaced, compact);
        free(spaced);
        free(compact);
        json_decref(v);
        json_decref(r);
    }
    cr_assert_gt(texts_differed, 1000);
}

static int mutate_one_leaf(json_t *v, size_t *pick);

/* 0: the picked leaf is not in member; 1: it was, and is replaced; 2: member is it. */
static int find_leaf(json_t *member, size_t *pick)
{
    if (json_is_object(member) || json_is_array(member))
        return mutate_one_leaf(member, pick);
    return (*pick)-- == 0 ? 2 : 0;
}

/* Replace leaf number *pick (depth first) of the container v with a string the
 * generator never makes. Returns 1 when done, 0 when v has fewer leaves. */
static int mutate_one_leaf(json_t *v, size_t *pick)
{
    const char *key;
    json_t *member;
    size_t i;
    int found;

    if (json_is_object(v)) {
        json_object_foreach(v, key, member)
        {
            if ((found = find_leaf(member, pick)) == 2)
                json_object_set_new(v, key, json_string("\x02mutated"));
            if (found)
                return 1;
        }
        return 0;
    }
    json_array_foreach(v, i, member)
    {
        if ((found = find_leaf(member, pick)) == 2)
            json_array_set_new(v, i, json_string("\x02mutated"));
        if (found)
            return 1;
    }
    return 0;
}

Test(jcs_properties, changing_any_value_changes_the_fingerprint)
{
    size_t mutated = 0;

    rng_state = 0xa4093822299f31d0u;
    for (int i = 0; i < 2000; i++) {
        json_t *v = random_object(0), *changed = json_deep_copy(v);
        size_t pick = rng() % 8;
        idem_fingerprint a, b;

        if (!mutate_one_leaf(changed, &pick)) {
            json_decref(v);
            json_decref(changed);
            continue;
        }
        mutated++;
        fingerprint_of(&a, "t", 1, v);
        fingerprint_of(&b, "t", 1, changed);
        cr_assert_neq(memcmp(a.bytes, b.bytes, sizeof(a.bytes)), 0);
        json_decref(v);
        json_decref(changed);
    }
    cr_assert_gt(mutated, 500);
}

Test(jcs_properties, small_changes_change_the_fingerprint)
{
    static const char *const pairs[][2] = {
        {"{\"a\":1}", "{\"a\":1.0000000000000002}"},
        {"{\"a\":\"x\"}", "{\"a\":\"X\"}"},
        {"{\"a\":\"x\"}", "{\"A\":\"x\"}"},
        {"{\"a\":true}", "{\"a\":false}"},
        {"{\"a\":null}", "{}"},
        {"{\"a\":0}", "{\"a\":\"0\"}"},
        {"[1,2]", "[2,1]"},
        {"[[]]", "[{}]"},
        {"{\"a\":\"\\u00e9\"}", "{\"a\":\"e\\u0301\"}"},
        {"{\"a\":[1]}", "{\"a\":1}"},
    };

    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        char a[IDEM_FINGERPRINT_HEX_SIZE], b[IDEM_FINGERPRINT_HEX_SIZE];

        fingerprint_hex(a, "t", 1, pairs[i][0]);
        fingerprint_hex(b, "t", 1, pairs[i][1]);
        cr_assert_str_neq(a, b, "%s and %s hash the same", pairs[i][0], pairs[i][1]);
    }
}

Test(jcs_properties, equal_values_spelled_differently_hash_the_same)
{
    static const char *const pairs[][2] = {
        {"{\"a\":1}", "{\"a\":1.0}"},
        {"{\"a\":100}", "{\"a\":1e2}"},
        {"{\"a\":0}", "{\"a\":-0}"},
        {"{\"a\":\"\\u0041\"}", "{\"a\":\"A\"}"},
        {"{\"a\":\"\\/\"}", "{\"a\":\"/\"}"},
        {"{\"\\ud83d\\ude00\":1}", "{\"\xf0\x9f\x98\x80\":1}"},
    };

    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        char a[IDEM_FINGERPRINT_HEX_SIZE], b[IDEM_FINGERPRINT_HEX_SIZE];

        fingerprint_hex(a, "t", 1, pairs[i][0]);
        fingerprint_hex(b, "t", 1, pairs[i][1]);
        cr_assert_str_eq(a, b, "%s and %s differ", pairs[i][0], pairs[i][1]);
    }
}

Test(jcs_properties, changing_the_tool_or_version_changes_the_fingerprint)
{
    char base[IDEM_FINGERPRINT_HEX_SIZE], other[IDEM_FINGERPRINT_HEX_SIZE];

    fingerprint_hex(base, "send_email", 1, "{\"to\":\"a@example.com\"}");
    fingerprint_hex(other, "send_emai1", 1, "{\"to\":\"a@example.com\"}");
    cr_assert_str_neq(base, other);
    fingerprint_hex(other, "send_email", 2, "{\"to\":\"a@example.com\"}");
    cr_assert_str_neq(base, other);
    fingerprint_hex(other, "send_email", 1, "{\"to\":\"a@example.com\"}");
    cr_assert_str_eq(base, other);
}

/* tests/data/fingerprint/corpus.json: argument documents and the fingerprints the library
 * computed for them before tools could have identity policies. The default policy (all
 * arguments) must keep every one byte for byte, or stored records would stop replaying. */
Test(fingerprint, default_policy_fingerprints_equal_the_fixed_corpus)
{
    char path[1024], hex[IDEM_FINGERPRINT_HEX_SIZE];
    const char *dir = getenv("IDEM_TEST_DATA");
    json_error_t jerr;
    json_t *corpus, *entry;
    size_t i;

    cr_assert_not_null(dir, "IDEM_TEST_DATA is not set");
    snprintf(path, sizeof(path), "%s/fingerprint/corpus.json", dir);
    corpus = json_load_file(path, 0, &jerr);
    cr_assert_not_null(corpus, "%s: %s", path, jerr.text);
    cr_assert_geq(json_array_size(corpus), 16);
    json_array_foreach(corpus, i, entry)
    {
        fingerprint_hex(hex, json_string_value(json_object_get(entry, "tool")),
                        (int)json_integer_value(json_object_get(entry, "payload_version")),
                        json_string_value(json_object_get(entry, "arguments")));
        cr_assert_str_eq(hex, json_string_value(json_object_get(entry, "fingerprint")), "entry %zu",
                         i);
    }
    json_decref(corpus);
}

/* Texts in the one pass's shape, and texts outside it or not JSON. */
static const char *const answered[] = {
    "{}", "[]", "null", "true", "0", "-7", "123456789012345", "\"\"", "\"caf\xc3\xa9 \x7f\"",
    " {\"b\" : 2 , \"a\":[1, {\"z\":null,\"y\":false}, \"x\"]}\n",
    "{\"subject\":\"Benchmark replay\"}", "{\"a\":{},\"b\":[],\"\":0}",
    /* UTF-16 order: U+1F600 (a surrogate pair) sorts before U+FFFD */
    "{\"\xef\xbf\xbd\":1,\"\xf0\x9f\x98\x80\":2,\"a\":3}", "[[[[[[[[[[1]]]]]]]]]]"};
static const char *const declined[] = {"",
                                       " ",
                                       "{",
                                       "[1,]",
                                       "{\"a\":1,}",
                                       "{\"a\" 1}",
                                       "{\"a\":1,\"a\":2}",
                                       "{a:1}",
                                       "01",
                                       "-0",
                                       "1.5",
                                       "1e3",
                                       "1E3",
                                       "1234567890123456",
                                       "-",
                                       "\"a\\nb\"",
                                       "\"\\u00e9\"",
                                       "\"\t\"",
                                       "\"\xc3\"",
                                       "\"\xed\xa0\x80\"",
                                       "\"\xc0\xaf\"",
                                       "\"\xe0\x80\xaf\"",
                                       "\"\xf4\x90\x80\x80\"",
                                       "\"\xf8\x88\x80\x80\x80\"",
                                       "\"\xff\"",
                                       "\"\x80\"",
                                       "tru",
                                       "truex",
                                       "[1] 2",
                                       "nul",
                                       "{\"a\":1}}",
                                       "\"unterminated",
                                       "[1 2]",
                                       "{\"a\":1 \"b\":2}"};

/* The one-pass fingerprint of arguments text (what a retry computes before its lookup)
 * answers only where it is sure, and then with the parsed arguments' fingerprint. */
static void assert_text_form(const char *text, int answers)
{
    idem_fingerprint fast, full;
    idem_error err = IDEM_ERROR_INIT;
    int rc = idem__fingerprint_text(&fast, "send_email", 7, text, strlen(text), &err);

    cr_assert_eq(rc, answers, "%s: %d", text, rc);
    if (rc != 1)
        return;
    cr_assert_eq(
        idem_fingerprint_compute_text(&full, "send_email", 7, text, strlen(text), NULL, &err), 0,
        "%s: %s", text, err.message);
    cr_assert_eq(memcmp(fast.bytes, full.bytes, sizeof(fast.bytes)), 0, "%s", text);
}

Test(fingerprint, text_form_matches_the_parsed_form_or_declines)
{
    for (size_t i = 0; i < sizeof(answered) / sizeof(answered[0]); i++)
        assert_text_form(answered[i], 1);
    for (size_t i = 0; i < sizeof(declined) / sizeof(declined[0]); i++)
        assert_text_form(declined[i], 0);
}

Test(fingerprint, text_form_declines_deep_nesting_and_wide_objects)
{
    char deep[80], wide[400];
    size_t at = 0;

    for (int i = 0; i < 33; i++)
        deep[at++] = '[';
    for (int i = 0; i < 33; i++)
        deep[at++] = ']';
    deep[at] = '\0';
    assert_text_form(deep, 0);
    at = 0;
    wide[at++] = '{';
    for (int i = 0; i < 33; i++)
        at += (size_t)snprintf(wide + at, sizeof(wide) - at, "%s\"k%02d\":%d", i ? "," : "", 32 - i,
                               i);
    snprintf(wide + at, sizeof(wide) - at, "}");
    assert_text_form(wide, 0);
    wide[at - 9] = '}'; /* without ,"k00":32: 32 members, answered, sorted */
    wide[at - 8] = '\0';
    assert_text_form(wide, 1);
}

/* ---- the one pass's tree ---- */

#define JANSSON_FLAGS                                                                              \
    (JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL)

/* What the one pass makes of @text: 1 with the tree that jansson's parse makes of it, in
 * the same member order, and that idem_json_parse_arguments() answers; or 0 and nothing.
 * Returns what it answered. */
static int assert_tree_form(const char *given, size_t len, size_t max_depth)
{
    json_t *fast = NULL, *full, *parsed = NULL;
    idem_error err = IDEM_ERROR_INIT;
    /* A copy of exactly len bytes, no NUL after them: a read past the end is caught
     * (AddressSanitizer builds). */
    char *text = malloc(len > 0 ? len : 1), *a, *b, *c;
    int rc;

    cr_assert_not_null(text);
    memcpy(text, given, len);
    rc = idem__json_tree_fast(&fast, text, len, max_depth);

    cr_assert(rc == 0 || rc == 1, "%.*s: %d", (int)len, text, rc);
    if (rc == 0) {
        cr_assert_null(fast, "%.*s", (int)len, text);
        free(text);
        return 0;
    }
    full = json_loadb(text, len, JANSSON_FLAGS, NULL);
    cr_assert_not_null(full, "%.*s: answered, but jansson refuses it", (int)len, text);
    cr_assert_eq(idem_json_parse_arguments(&parsed, text, len, NULL, &err), 0, "%.*s: %s", (int)len,
                 text, err.message);
    a = json_dumps(fast, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
    b = json_dumps(full, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
    c = json_dumps(parsed, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
    cr_assert(json_equal(fast, full), "%.*s: %s against %s", (int)len, text, a, b);
    cr_assert_str_eq(a, b, "%.*s", (int)len, text);
    cr_assert_str_eq(c, b, "%.*s", (int)len, text);
    free(a);
    free(b);
    free(c);
    json_decref(fast);
    json_decref(full);
    json_decref(parsed);
    free(text);
    return 1;
}

Test(fingerprint, tree_form_is_janssons_tree_or_declines)
{
    for (size_t i = 0; i < sizeof(answered) / sizeof(answered[0]); i++)
        cr_assert_eq(assert_tree_form(answered[i], strlen(answered[i]), 128), 1, "%s", answered[i]);
    for (size_t i = 0; i < sizeof(declined) / sizeof(declined[0]); i++)
        cr_assert_eq(assert_tree_form(declined[i], strlen(declined[i]), 128), 0, "%s", declined[i]);
    /* The members in the text's order, every number a real, a name over the stack's copy. */
    cr_assert_eq(assert_tree_form("{\"b\":1,\"a\":[-2,0]}", 18, 128), 1);
    cr_assert_eq(assert_tree_form("[\"a\\u0000\"]", 11, 128), 0);
    cr_assert_eq(assert_tree_form("[1,\0 2]", 6, 128), 0);
}

Test(fingerprint, tree_form_keeps_the_depth_limit)
{
    idem_json_options opts = IDEM_JSON_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    json_t *value = NULL;
    char name[200];

    cr_assert_eq(assert_tree_form("[[1]]", 5, 3), 1);
    cr_assert_eq(assert_tree_form("[[1]]", 5, 2), 0);
    opts.max_depth = 2;
    cr_assert_eq(idem_json_parse_arguments(&value, "[[[1]]]", 7, &opts, &err), IDEM_EINVAL);
    cr_assert_not_null(strstr(err.message, "nested deeper than 2 levels"), "%s", err.message);
    cr_assert_eq(idem_json_parse_arguments(&value, "[[1]]", 5, &opts, &err), 0, "%s", err.message);
    json_decref(value);
    /* A name of 127 bytes is copied; one of 128 goes the full path, into the same tree. */
    memset(name, 'n', sizeof(name));
    name[0] = '{';
    name[1] = '"';
    memcpy(name + 129, "\":1}", 4);
    cr_assert_eq(assert_tree_form(name, 133, 128), 1);
    name[128] = '"';
    memcpy(name + 129, ":1}", 3);
    cr_assert_eq(assert_tree_form(name, 132, 128), 1);
}

/* Text of a random value: mostly in the one pass's shape, some of it not (escapes,
 * fractions, long integers, -0, names twice, bytes that are not UTF-8, cut short), with
 * blanks between tokens. */
static void put_text(char *out, size_t *at, size_t cap, const char *s)
{
    size_t n = strlen(s);

    if (*at + n < cap) {
        memcpy(out + *at, s, n);
        *at += n;
    }
}

static void random_text(char *out, size_t *at, size_t cap, int depth)
{
    static const char *const scalars[] = {"\"\"",
                                          "\"a\"",
                                          "\"caf\xc3\xa9\"",
                                          "\"\xe2\x82\xac\"",
                                          "\"\xf0\x9f\x98\x80\"",
                                          "\"[{,:}]\"",
                                          "0",
                                          "-7",
                                          "123456789012345",
                                          "true",
                                          "false",
                                          "null",
                                          "42"};
    static const char *const odd[] = {
        "1.5",      "1e3",    "-0", "1234567890123456", "\"a\\n\"", "\"\\u00e9\"",
        "\"\xc3\"", "\"\t\"", "01", "\"\xed\xa0\x80\"", "tru",      "[1,]"};
    static const char *const blanks[] = {"", "", "", " ", "\n", "\t ", "\r\n"};
    uint64_t pick = rng() % 100;

    put_text(out, at, cap, blanks[rng() % 7]);
    if (pick < 4) {
        put_text(out, at, cap, odd[rng() % (sizeof(odd) / sizeof(odd[0]))]);
    } else if (depth >= 4 || pick < 60) {
        put_text(out, at, cap, scalars[rng() % (sizeof(scalars) / sizeof(scalars[0]))]);
    } else if (pick < 80) {
        size_t n = rng() % 4;

        put_text(out, at, cap, "[");
        for (size_t i = 0; i < n; i++) {
            if (i > 0)
                put_text(out, at, cap, ",");
            random_text(out, at, cap, depth + 1);
        }
        put_text(out, at, cap, blanks[rng() % 7]);
        put_text(out, at, cap, "]");
    } else {
        static const char *const names[] = {"\"a\"",        "\"b\"",       "\"\"",
                                            "\"\xc3\xa9\"", "\"subject\"", "\"a b\""};
        size_t n = rng() % 5;

        put_text(out, at, cap, "{");
        for (size_t i = 0; i < n; i++) {
            if (i > 0)
                put_text(out, at, cap, ",");
            put_text(out, at, cap, blanks[rng() % 7]);
            put_text(out, at, cap, names[rng() % (sizeof(names) / sizeof(names[0]))]);
            put_text(out, at, cap, blanks[rng() % 7]);
            put_text(out, at, cap, ":");
            random_text(out, at, cap, depth + 1);
        }
        put_text(out, at, cap, "}");
    }
    put_text(out, at, cap, blanks[rng() % 7]);
}

Test(fingerprint, tree_form_is_janssons_tree_on_generated_texts)
{
    char text[4096];
    size_t answered_n = 0, accepted = 0;

    rng_state = 0x5eed0f7ee5ULL;
    for (int i = 0; i < 20000; i++) {
        size_t len = 0;
        json_t *full;

        random_text(text, &len, sizeof(text), 0);
        if (rng() % 10 == 0 && len > 1)
            len = (size_t)(rng() % len); /* cut short */
        full = json_loadb(text, len, JANSSON_FLAGS, NULL);
        accepted += full != NULL;
        json_decref(full);
        answered_n += (size_t)assert_tree_form(text, len, 128);
    }
    /* Most of what jansson accepts is in the shape; the rest and every refusal are not. */
    cr_log_info("%zu answered of %zu accepted", answered_n, accepted);
    cr_assert_gt(answered_n, 8000, "%zu answered of %zu accepted", answered_n, accepted);
    cr_assert_lt(answered_n, accepted, "%zu answered of %zu accepted", answered_n, accepted);
}
