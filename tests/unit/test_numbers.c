/* Numbers are exact: a receipt keeps the integers an effect built, 64-bit ones included,
 * and arguments hold no number that an IEEE double would change, so that two different
 * intents never share a fingerprint. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "idem/idem.h"
#include "jcs.h"

static char *serialize(const json_t *value)
{
    idem_error err = IDEM_ERROR_INIT;
    char *out = NULL;

    cr_assert_eq(idem_jcs_serialize(&out, NULL, value, &err), 0, "%s", err.message);
    return out;
}

static int fingerprint_text(idem_fingerprint *fp, const char *arguments, idem_error *err)
{
    return idem_fingerprint_compute_text(fp, "place_order", 1, arguments, strlen(arguments), NULL,
                                         err);
}

Test(numbers, receipt_integers_beyond_2_53_keep_every_digit)
{
    json_t *receipt =
        json_pack("{s:I,s:[I,I,I]}", "order_id", (json_int_t)1234567890123456789LL, "edges",
                  (json_int_t)INT64_MAX, (json_int_t)INT64_MIN, (json_int_t)-9007199254740993LL);
    char *out = serialize(receipt);

    cr_assert_str_eq(out, "{\"edges\":[9223372036854775807,-9223372036854775808,"
                          "-9007199254740993],\"order_id\":1234567890123456789}");
    idem_free(out);
    json_decref(receipt);
}

/* Within ±2^53 an integer is exactly a double, and is written as RFC 8785 writes it. */
Test(numbers, receipt_integers_within_2_53_are_written_as_rfc8785_writes_them)
{
    static const json_int_t values[] = {
        0, -1, 42, 1000000, 9007199254740992LL, -9007199254740992LL, 9007199254740991LL};
    char expected[IDEM__JCS_NUMBER_MAX];

    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        json_t *v = json_integer(values[i]);
        char *out = serialize(v);

        cr_assert_eq(idem__jcs_format_double(expected, (double)values[i]), 0);
        cr_assert_str_eq(out, expected);
        idem_free(out);
        json_decref(v);
    }
}

/* The text is held in the struct: Criterion runs each test in a new process, where a
 * pointer into the parent's memory would not be valid. */
struct literal {
    char text[64];
};

/* Numbers an IEEE double cannot hold as they were written. */
ParameterizedTestParameters(numbers, arguments_with_a_number_a_double_changes_are_invalid)
{
    static struct literal rejected[] = {
        {"9007199254740993"},
        {"-9007199254740993"},
        {"9007199254740994"}, /* a double holds it, but not as an I-JSON integer */
        {"1234567890123456789"},
        {"18446744073709551616"},
        {"100000000000000000000"},
        {"9007199254740993.0"},
        {"9.007199254740993e15"},
        {"3.141592653589793238462643383279"},
        {"1e-400"},
        {"0.1000000000000000000000000001"},
    };

    return cr_make_param_array(struct literal, rejected, sizeof(rejected) / sizeof(rejected[0]));
}

ParameterizedTest(struct literal *lit, numbers,
                  arguments_with_a_number_a_double_changes_are_invalid)
{
    char arguments[128];
    idem_error err = IDEM_ERROR_INIT;
    idem_fingerprint fp;

    snprintf(arguments, sizeof(arguments), "{\"customer\": [1, %s]}", lit->text);
    cr_assert_eq(fingerprint_text(&fp, arguments, &err), IDEM_EINVAL, "%s was accepted", lit->text);
    cr_assert_str_eq(err.field, "arguments");
    cr_assert_not_null(strstr(err.message, "as a string"), "%s", err.message);
    cr_assert_not_null(strstr(err.message, "column 18"), "%s", err.message);
}

/* Numbers that are their double, written to the digits they were sent with. */
ParameterizedTestParameters(numbers, arguments_a_double_holds_exactly_are_accepted)
{
    static struct literal accepted[] = {
        {"9007199254740992"},
        {"-9007199254740992"},
        {"0"},
        {"-0"},
        {"1e300"},
        {"1.0e20"},
        {"1E30"},
        {"0.1"},
        {"0.10000000000000001"}, /* printf's %.17g of 0.1, as jansson writes it */
        {"333333333.3333333"},
        {"4.50"},
        {"2e-3"},
        {"5e-324"},
        {"1.7976931348623157e308"},
        {"0.1000000000000000055511151231257827021181583404541015625"}, /* 0.1 exactly */
    };

    return cr_make_param_array(struct literal, accepted, sizeof(accepted) / sizeof(accepted[0]));
}

ParameterizedTest(struct literal *lit, numbers, arguments_a_double_holds_exactly_are_accepted)
{
    char arguments[128];
    idem_error err = IDEM_ERROR_INIT;
    idem_fingerprint fp;

    snprintf(arguments, sizeof(arguments), "{\"customer\": [1, %s]}", lit->text);
    cr_assert_eq(fingerprint_text(&fp, arguments, &err), 0, "%s: %s", lit->text, err.message);
}

Test(numbers, two_integers_a_double_confuses_never_share_a_fingerprint)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_fingerprint a, b;

    cr_assert_eq(fingerprint_text(&a, "{\"customer\": 1234567890123456789}", &err), IDEM_EINVAL);
    cr_assert_eq(fingerprint_text(&b, "{\"customer\": 1234567890123456788}", &err), IDEM_EINVAL);
    cr_assert_eq(fingerprint_text(&a, "{\"customer\": 9007199254740992}", &err), 0);
    cr_assert_eq(fingerprint_text(&b, "{\"customer\": 9007199254740991}", &err), 0);
    cr_assert_neq(memcmp(a.bytes, b.bytes, sizeof(a.bytes)), 0);
}

Test(numbers, caller_built_argument_integers_beyond_2_53_are_invalid)
{
    json_t *args = json_pack("{s:I}", "customer", (json_int_t)9007199254740993LL);
    json_t *edge = json_pack("{s:I}", "customer", (json_int_t)-9007199254740992LL);
    idem_error err = IDEM_ERROR_INIT;
    idem_fingerprint fp;

    cr_assert_eq(idem_fingerprint_compute(&fp, "place_order", 1, args, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "arguments");
    cr_assert_not_null(strstr(err.message, "as a string"), "%s", err.message);
    cr_assert_eq(idem_fingerprint_compute(&fp, "place_order", 1, edge, &err), 0, "%s", err.message);
    json_decref(args);
    json_decref(edge);
}

/* RFC 8785 canonicalization of text is unchanged: it reads every number as a double. */
Test(numbers, canonicalizing_text_still_reads_numbers_as_doubles)
{
    const char *text = "[9007199254740993,333333333.33333329]";
    char *out = NULL;

    cr_assert_eq(idem_jcs_canonicalize(&out, NULL, text, strlen(text), NULL, NULL), 0);
    cr_assert_str_eq(out, "[9007199254740992,333333333.3333333]");
    idem_free(out);
}

Test(numbers, parsed_arguments_are_read_as_doubles_and_refusals_say_where)
{
    const char *ok = "{\"qty\": 3, \"price\": 0.1}";
    const char *bad = "{\"qty\": 3,\n \"id\": -9007199254740993}";
    idem_error err = IDEM_ERROR_INIT;
    json_t *args = NULL;

    cr_assert_eq(idem_json_parse_arguments(&args, ok, strlen(ok), NULL, &err), 0, "%s",
                 err.message);
    cr_assert(json_is_real(json_object_get(args, "qty")));
    cr_assert_eq(json_real_value(json_object_get(args, "price")), 0.1);
    json_decref(args);
    args = NULL;
    cr_assert_eq(idem_json_parse_arguments(&args, bad, strlen(bad), NULL, &err), IDEM_EINVAL);
    cr_assert_null(args);
    cr_assert_str_eq(err.field, "arguments");
    cr_assert_not_null(strstr(err.message, "-9007199254740993 at line 2, column 8"), "%s",
                       err.message);
}
