/* RFC 8785 serialization: the official vectors, the number vectors, and the rules
 * (escaping, member order, numbers) one by one. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/idem.h"
#include "jcs.h"
#include "store_internal.h"

/* Whole file under tests/data (IDEM_TEST_DATA); fails the test when unreadable. */
static char *read_data(const char *relative, size_t *len)
{
    const char *dir = getenv("IDEM_TEST_DATA");
    char path[1024];
    char *buf;
    long size;
    FILE *f;

    cr_assert_not_null(dir, "IDEM_TEST_DATA is not set");
    snprintf(path, sizeof(path), "%s/%s", dir, relative);
    f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)size + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(fread(buf, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    buf[size] = '\0';
    *len = (size_t)size;
    return buf;
}

/* Canonical form of text; fails the test on error. Caller frees. */
static char *canon(const char *text, size_t *len)
{
    idem_error err = IDEM_ERROR_INIT;
    char *out = NULL;
    int rc = idem_jcs_canonicalize(&out, len, text, strlen(text), NULL, &err);

    cr_assert_eq(rc, 0, "canonicalize(%s): %s", text, err.message);
    return out;
}

static void assert_canon(const char *text, const char *expected)
{
    size_t len = 0;
    char *out = canon(text, &len);

    cr_assert_str_eq(out, expected, "canonical form of %s", text);
    cr_assert_eq(len, strlen(expected));
    idem_free(out);
}

static void check_vector(const char *name)
{
    char path[256];
    size_t in_len, want_len, got_len = 0;
    char *input, *want, *got = NULL;
    idem_error err = IDEM_ERROR_INIT;

    snprintf(path, sizeof(path), "jcs/input/%s.json", name);
    input = read_data(path, &in_len);
    snprintf(path, sizeof(path), "jcs/output/%s.json", name);
    want = read_data(path, &want_len);
    cr_assert_eq(idem_jcs_canonicalize(&got, &got_len, input, in_len, NULL, &err), 0, "%s: %s",
                 name, err.message);
    cr_assert_eq(got_len, want_len, "%s: length %zu, expected %zu", name, got_len, want_len);
    cr_assert_eq(memcmp(got, want, want_len), 0, "%s: got %s\nexpected %s", name, got, want);
    idem_free(got);
    free(input);
    free(want);
}

Test(jcs_vectors, arrays_is_byte_exact)
{
    check_vector("arrays");
}

Test(jcs_vectors, french_is_byte_exact)
{
    check_vector("french");
}

Test(jcs_vectors, structures_is_byte_exact)
{
    check_vector("structures");
}

Test(jcs_vectors, unicode_is_byte_exact)
{
    check_vector("unicode");
}

Test(jcs_vectors, values_is_byte_exact)
{
    check_vector("values");
}

Test(jcs_vectors, weird_is_byte_exact)
{
    check_vector("weird");
}

/* outhex/ and output/ are two spellings of the same bytes; a damaged copy shows here. */
Test(jcs_vectors, hex_copies_match_the_outputs)
{
    static const char *names[] = {"arrays", "french", "structures", "unicode", "values", "weird"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char path[256];
        size_t hex_len, want_len, n = 0;
        char *hex, *want;
        const char *p;
        unsigned byte;
        int used;

        snprintf(path, sizeof(path), "jcs/outhex/%s.txt", names[i]);
        hex = read_data(path, &hex_len);
        snprintf(path, sizeof(path), "jcs/output/%s.json", names[i]);
        want = read_data(path, &want_len);
        for (p = hex; sscanf(p, " %2x%n", &byte, &used) == 1; p += used, n++) {
            cr_assert_lt(n, want_len, "%s: hex longer than output", names[i]);
            cr_assert_eq((unsigned char)want[n], byte, "%s: byte %zu", names[i], n);
        }
        cr_assert_eq(n, want_len, "%s: hex has %zu bytes, output %zu", names[i], n, want_len);
        free(hex);
        free(want);
    }
}

Test(jcs_numbers, all_10k_vectors_format_byte_exact)
{
    size_t len, count = 0, failures = 0;
    char *csv = read_data("jcs/numbers-10k.csv", &len);
    char *save = NULL;

    for (char *line = strtok_r(csv, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        char *comma = strchr(line, ',');
        char got[IDEM__JCS_NUMBER_MAX];
        uint64_t bits;
        double value;

        cr_assert_not_null(comma, "malformed line: %s", line);
        *comma = '\0';
        bits = strtoull(line, NULL, 16);
        memcpy(&value, &bits, sizeof(value));
        cr_assert_eq(idem__jcs_format_double(got, value), 0, "%s", line);
        if (strcmp(got, comma + 1) != 0 && failures++ < 10)
            cr_log_error("%s: got %s, expected %s", line, got, comma + 1);
        count++;
    }
    free(csv);
    cr_assert_eq(count, 10000);
    cr_assert_eq(failures, 0, "%zu of %zu numbers differ", failures, count);
}

static void assert_number(double value, const char *expected)
{
    char got[IDEM__JCS_NUMBER_MAX];

    cr_assert_eq(idem__jcs_format_double(got, value), 0);
    cr_assert_str_eq(got, expected, "%.17g", value);
}

Test(jcs_numbers, follow_ecmascript_layout_at_each_boundary)
{
    assert_number(56, "56");
    assert_number(-0.0, "0");
    assert_number(1e21, "1e+21");
    assert_number(1e20, "100000000000000000000");
    assert_number(123456789012345680000.0, "123456789012345680000");
    assert_number(1e-7, "1e-7");
    assert_number(0.000001, "0.000001");
    assert_number(1.5e-7, "1.5e-7");
    assert_number(0.1, "0.1");
    assert_number(-2.5, "-2.5");
    assert_number(1e300, "1e+300");
    assert_number(5e-324, "5e-324");
    assert_number(1.7976931348623157e308, "1.7976931348623157e+308");
    assert_number(9007199254740993.0, "9007199254740992");
}

Test(jcs_numbers, non_finite_is_rejected_and_out_untouched)
{
    char out[IDEM__JCS_NUMBER_MAX] = "keep";

    cr_assert_eq(idem__jcs_format_double(out, NAN), IDEM_EINVAL);
    cr_assert_eq(idem__jcs_format_double(out, INFINITY), IDEM_EINVAL);
    cr_assert_eq(idem__jcs_format_double(out, -INFINITY), IDEM_EINVAL);
    cr_assert_str_eq(out, "keep");
}

/* Any double, read back from its text, is the same double. */
Test(jcs_numbers, random_bit_patterns_round_trip)
{
    uint64_t state = 0x9e3779b97f4a7c15u;

    for (int i = 0; i < 100000; i++) {
        char text[IDEM__JCS_NUMBER_MAX];
        double value;

        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        memcpy(&value, &state, sizeof(value));
        if (!isfinite(value))
            continue;
        cr_assert_eq(idem__jcs_format_double(text, value), 0);
        cr_assert(strtod(text, NULL) == value || value == 0, "%016llx -> %s",
                  (unsigned long long)state, text);
    }
}

/* Integers below 2^53 take a short path: their digits as they are, which must be what the
 * shortest-digits search gives (read back exactly, no exponent below 1e21). */
Test(jcs_numbers, integers_below_2_53_are_their_own_digits)
{
    const double edges[] = {1,
                            9,
                            10,
                            100,
                            123456789,
                            1e15,
                            1e15 + 1,
                            4503599627370495.0,
                            4503599627370496.0,
                            4503599627370497.0,
                            9007199254740991.0,
                            9007199254740992.0,
                            9007199254740994.0,
                            1e20,
                            1e21};
    const char *texts[] = {"1",
                           "9",
                           "10",
                           "100",
                           "123456789",
                           "1000000000000000",
                           "1000000000000001",
                           "4503599627370495",
                           "4503599627370496",
                           "4503599627370497",
                           "9007199254740991",
                           "9007199254740992",
                           "9007199254740994",
                           "100000000000000000000",
                           "1e+21"};
    char out[IDEM__JCS_NUMBER_MAX], expect[40];
    uint64_t state = 88172645463325252ull;

    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
        cr_assert_eq(idem__jcs_format_double(out, edges[i]), 0);
        cr_assert_str_eq(out, texts[i]);
        cr_assert_eq(idem__jcs_format_double(out, -edges[i]), 0);
        cr_assert_eq(out[0], '-');
        cr_assert_str_eq(out + 1, texts[i]);
    }
    for (int i = 0; i < 100000; i++) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        uint64_t v = state >> (11 + i % 53); /* every magnitude below 2^53 */
        snprintf(expect, sizeof(expect), "%llu", (unsigned long long)v);
        cr_assert_eq(idem__jcs_format_double(out, (double)v), 0);
        cr_assert_str_eq(out, v == 0 ? "0" : expect);
        cr_assert_eq(strtod(out, NULL), (double)v);
    }
}

Test(jcs_numbers, integers_beyond_2_53_become_the_nearest_double)
{
    assert_canon("[9007199254740993, 18446744073709551616, -0, 1.0, 1E2, 0.1e1]",
                 "[9007199254740992,18446744073709552000,0,1,100,1]");
}

/* idem's one departure from RFC 8785: a caller-built integer keeps every digit. */
Test(jcs_numbers, caller_built_integers_keep_every_digit)
{
    json_t *v = json_pack("[II]", (json_int_t)9223372036854775807LL, (json_int_t)-5);
    char *out = NULL;

    cr_assert_eq(idem_jcs_serialize(&out, NULL, v, NULL), 0);
    cr_assert_str_eq(out, "[9223372036854775807,-5]");
    idem_free(out);
    json_decref(v);
}

Test(jcs_strings, escape_only_what_json_stringify_escapes)
{
    assert_canon("\"\\u0000\\u0001\\b\\t\\n\\u000b\\f\\r\\u000e\\u000F\\u001f \\\" \\\\ \\/ "
                 "\\u007f \\u00e9 \\u20ac \\ud83d\\ude00\"",
                 "\"\\u0000\\u0001\\b\\t\\n\\u000b\\f\\r\\u000e\\u000f\\u001f \\\" \\\\ / "
                 "\x7f \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
}

Test(jcs_strings, embedded_nul_in_a_built_string_is_escaped)
{
    json_t *v = json_stringn("a\0b", 3);
    char *out = NULL;
    size_t len = 0;

    cr_assert_eq(idem_jcs_serialize(&out, &len, v, NULL), 0);
    cr_assert_str_eq(out, "\"a\\u0000b\"");
    cr_assert_eq(len, 10);
    idem_free(out);
    json_decref(v);
}

Test(jcs_strings, invalid_utf8_in_a_built_string_is_rejected)
{
    static const char *bad[] = {"\xff",     "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                "\xe2\x82", "a\x80"};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *v = json_pack("{so}", "k", json_stringn_nocheck(bad[i], strlen(bad[i])));
        idem_error err = IDEM_ERROR_INIT;
        char *out = NULL;

        cr_assert_eq(idem_jcs_serialize(&out, NULL, v, &err), IDEM_EINVAL, "case %zu", i);
        cr_assert_null(out);
        cr_assert_not_null(strstr(err.message, "not valid UTF-8"), "%s", err.message);
        json_decref(v);
    }
}

Test(jcs_strings, invalid_utf8_in_a_built_key_is_rejected)
{
    json_t *v = json_object();
    idem_error err = IDEM_ERROR_INIT;
    char *out = NULL;

    json_object_setn_new_nocheck(v, "\xfe", 1, json_true());
    cr_assert_eq(idem_jcs_serialize(&out, NULL, v, &err), IDEM_EINVAL);
    cr_assert_not_null(strstr(err.message, "UTF-8"), "%s", err.message);
    json_decref(v);
}

/* U+FB33 sorts after U+1F600 by UTF-8 bytes, before it by UTF-16 code units (0xD83D). */
Test(jcs_objects, members_sort_by_utf16_code_units_not_utf8_bytes)
{
    assert_canon("{\"\\ufb33\":1,\"\\ud83d\\ude00\":2,\"\\u20ac\":3,\"a\":4,\"\":5}",
                 "{\"\":5,\"a\":4,\"\xe2\x82\xac\":3,\"\xf0\x9f\x98\x80\":2,\"\xef\xac\xb3\":1}");
}

Test(jcs_objects, shorter_key_sorts_before_its_extensions)
{
    assert_canon("{\"ab\":1,\"a\":2,\"abc\":3,\"b\":4}", "{\"a\":2,\"ab\":1,\"abc\":3,\"b\":4}");
}

Test(jcs_objects, keys_with_embedded_nul_sort_and_escape)
{
    json_t *v = json_object();
    char *out = NULL;

    json_object_setn_new(v, "a\0b", 3, json_integer(1));
    json_object_setn_new(v, "a", 1, json_integer(2));
    cr_assert_eq(idem_jcs_serialize(&out, NULL, v, NULL), 0);
    cr_assert_str_eq(out, "{\"a\":2,\"a\\u0000b\":1}");
    idem_free(out);
    json_decref(v);
}

Test(jcs_objects, whitespace_and_nesting_are_normalized)
{
    assert_canon(
        " { \"z\" : [ 1 , { \"y\" : null , \"x\" : true } ] ,\n\t\"a\" : { } , \"m\":[] } ",
        "{\"a\":{},\"m\":[],\"z\":[1,{\"x\":true,\"y\":null}]}");
}

Test(jcs_values, scalars_at_the_top_level_are_canonicalized)
{
    assert_canon("true", "true");
    assert_canon("null", "null");
    assert_canon(" \"x\" ", "\"x\"");
    assert_canon("4.50", "4.5");
}

Test(jcs_values, a_value_that_contains_itself_is_rejected_not_followed)
{
    json_t *outer = json_array(), *inner = json_array();
    idem_error err = IDEM_ERROR_INIT;
    char *out = NULL;

    json_array_append(outer, inner);
    json_array_append(inner, outer);
    cr_assert_eq(idem_jcs_serialize(&out, NULL, outer, &err), IDEM_EINVAL);
    cr_assert_not_null(strstr(err.message, "nested deeper"), "%s", err.message);
    json_array_clear(inner); /* break the cycle so both are freed */
    json_decref(inner);
    json_decref(outer);
}

Test(jcs_values, null_value_and_null_out_are_rejected)
{
    json_t *v = json_true();
    char *out = NULL;

    cr_assert_eq(idem_jcs_serialize(&out, NULL, NULL, NULL), IDEM_EINVAL);
    cr_assert_eq(idem_jcs_serialize(NULL, NULL, v, NULL), IDEM_EINVAL);
    cr_assert_eq(idem_jcs_canonicalize(NULL, NULL, "1", 1, NULL, NULL), IDEM_EINVAL);
    cr_assert_null(out);
}

Test(jcs_values, failed_canonicalize_leaves_out_untouched)
{
    char *out = (char *)"untouched";
    size_t len = 42;

    cr_assert_eq(idem_jcs_canonicalize(&out, &len, "[1,]", 4, NULL, NULL), IDEM_EINVAL);
    cr_assert_str_eq(out, "untouched");
    cr_assert_eq(len, 42);
}

/* ---- JSON text with its numbers kept as written (a declared effect's receipt) ---- */

/* idem__jcs_write_text() of text; *rc its code. Caller frees the result. */
static char *canon_text(const char *text, int *rc)
{
    idem__buf buf = {NULL, 0, 0};
    idem_error err = IDEM_ERROR_INIT;

    *rc = idem__jcs_write_text(&buf, text, strlen(text), &err);
    if (*rc != 0)
        idem__buf_free(&buf);
    return buf.data;
}

static void assert_canon_text(const char *text, const char *expected)
{
    int rc;
    char *got = canon_text(text, &rc);

    cr_assert_eq(rc, 0, "canonical text of %s: %d", text, rc);
    cr_assert_str_eq(got, expected, "canonical text of %s", text);
    free(got);
}

Test(jcs_text, the_vectors_without_numbers_to_reformat_are_byte_exact)
{
    static const char *const names[] = {"arrays", "french", "unicode", "weird"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char path[256];
        size_t in_len, want_len;
        char *input, *want, *got;
        int rc;

        snprintf(path, sizeof(path), "jcs/input/%s.json", names[i]);
        input = read_data(path, &in_len);
        snprintf(path, sizeof(path), "jcs/output/%s.json", names[i]);
        want = read_data(path, &want_len);
        got = canon_text(input, &rc);
        cr_assert_eq(rc, 0, "%s", names[i]);
        cr_assert_eq(strlen(got), want_len, "%s: got %s\nexpected %s", names[i], got, want);
        cr_assert_eq(memcmp(got, want, want_len), 0, "%s: got %s", names[i], got);
        free(got);
        free(input);
        free(want);
    }
}

Test(jcs_text, postgresql_spacing_goes_and_members_are_sorted)
{
    assert_canon_text("{\"ticket_id\" : 2}", "{\"ticket_id\":2}");
    assert_canon_text(" {\"b\" : [1, {\"d\" : null, \"c\" : true}], \"a\" : \"x\"}\n",
                      "{\"a\":\"x\",\"b\":[1,{\"c\":true,\"d\":null}]}");
    assert_canon_text("[ ]", "[]");
    assert_canon_text("{ }", "{}");
    /* By UTF-16 code units: U+1F600 (D83D DE00) before U+FF61. */
    assert_canon_text("{\"\\uff61\":1,\"\\ud83d\\ude00\":2}", "{\"😀\":2,\"｡\":1}");
}

Test(jcs_text, numbers_keep_their_digits_as_written)
{
    assert_canon_text("{\"n\" : 1.50, \"m\" : 1E+400, \"k\" : -0, \"j\" : 0.000001e-3}",
                      "{\"j\":0.000001e-3,\"k\":-0,\"m\":1E+400,\"n\":1.50}");
    assert_canon_text("[123456789012345678901234567890.0100]",
                      "[123456789012345678901234567890.0100]");
}

Test(jcs_text, strings_are_escaped_as_rfc_8785_says)
{
    assert_canon_text("\"\\u00e9\\/\\u001f\\t\\\"\\\\\"", "\"é/\\u001f\\t\\\"\\\\\"");
}

Test(jcs_text, members_of_the_same_name_keep_their_order)
{
    assert_canon_text("{\"b\" : 2, \"a\" : 1, \"b\" : 1}", "{\"a\":1,\"b\":2,\"b\":1}");
}

Test(jcs_text, what_is_not_one_json_value_is_refused)
{
    static const char *const bad[] = {
        "",        "{",           "{\"a\" 1}", "[1,]",  "01x",      "1.", "1e",    "\"\\ud800\"",
        "\"\\x\"", "{\"a\":1} 2", "tru",       "\"abc", "\"a\tb\"", "-",  "[1 2]", "\"\xff\"",
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc;
        char *got = canon_text(bad[i], &rc);

        cr_assert_eq(rc, IDEM_EINVAL, "%s", bad[i]);
        cr_assert_null(got);
    }
}

/* The store's exit for a stored receipt: for a record marked receipt_canonical, canonical
 * when it is JSON, as stored when it is not (a record written by hand); for any other, as
 * stored (a declared record of an earlier version: what its first caller got). The same
 * bytes on every call. */
Test(jcs_text, a_stored_receipt_goes_out_canonical_when_marked_or_as_stored)
{
    static const char *const stored[][3] = {
        {"{\"ticket_id\" : 2}", "{\"ticket_id\":2}", "{\"ticket_id\" : 2}"},
        {"{\"status\":\"created\",\"task_id\":1}", "{\"status\":\"created\",\"task_id\":1}",
         "{\"status\":\"created\",\"task_id\":1}"},
        {"not json {", "not json {", "not json {"},
        {"", "", ""},
    };

    for (size_t i = 0; i < sizeof(stored) / sizeof(stored[0]) * 2; i++) {
        const char *const *row = stored[i / 2];
        int marked = i % 2 == 0;
        idem_outcome out = IDEM_OUTCOME_INIT;
        idem_error err = IDEM_ERROR_INIT;

        cr_assert_eq(idem__store_receipt_out(&out, row[0], strlen(row[0]), marked, &err), 0);
        cr_assert_str_eq(out.receipt, row[marked ? 1 : 2]);
        cr_assert_eq(out.receipt_len, strlen(row[marked ? 1 : 2]));
        idem_outcome_clear(&out);
    }
}

/* A receipt marked canonical goes out as idem__jcs_write_text() writes it, whether the
 * one-pass writer of the common shape takes it (no escape, short integers, no name twice,
 * shallow) or leaves it to that writer: the same bytes either way. */
Test(jcs_text, a_receipt_goes_out_the_same_by_either_writer)
{
    static const char *const receipts[] = {
        "{\"status\" : \"created\", \"task_id\" : 123456789012345}",
        " {\"b\" : [1, {\"d\" : null, \"c\" : true}], \"a\" : \"x\", \"\" : false}\n",
        "{\"\xc3\xa9\" : \"\xe2\x82\xac\", \"e\" : \"\xf0\x9f\x98\x80\", \"\xef\xbd\xa1\" : -7}",
        "[\"a,b\", {\"y\" : \"}\"}, [], {}, 0]",
        "\"just a string\"",
        "42",
        "{\"n\" : 1.50}",
        "{\"n\" : 1234567890123456}",
        "{\"n\" : -0}",
        "{\"s\" : \"\\u00e9\"}",
        "{\"b\" : 2, \"a\" : 1, \"b\" : 1}",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
        "{\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8,\"i\":9,\"j\":10,\"k\":"
        "11,"
        "\"l\":12,\"m\":13,\"n\":14,\"o\":15,\"p\":16,\"q\":17,\"r\":18,\"s\":19,\"t\":20,"
        "\"u\":21,\"v\":22,\"w\":23,\"x\":24,\"y\":25,\"z\":26,\"A\":27,\"B\":28,\"C\":29,"
        "\"D\":30,\"E\":31,\"F\":32,\"G\":33}",
        "{\"a\" : 01}",
        "{\"a\" : 1} x",
    };

    for (size_t i = 0; i < sizeof(receipts) / sizeof(receipts[0]); i++) {
        idem_outcome out = IDEM_OUTCOME_INIT;
        idem_error err = IDEM_ERROR_INIT;
        int rc;
        char *want = canon_text(receipts[i], &rc);
        const char *expected = rc == 0 ? want : receipts[i];

        cr_assert_eq(idem__store_receipt_out(&out, receipts[i], strlen(receipts[i]), 1, &err), 0);
        cr_assert_str_eq(out.receipt, expected, "%s", receipts[i]);
        cr_assert_eq(out.receipt_len, strlen(expected));
        idem_outcome_clear(&out);
        free(want);
    }
}
