/* Validation of the identifying fields: each rule, the field named, never a crash. */
#include <criterion/criterion.h>
#include <string.h>

#include "idem/idem.h"

typedef int (*validate_fn)(const char *, idem_error *);

/* A string of n copies of c (n < 300). */
static const char *repeat(char c, size_t n)
{
    static char buf[300];

    cr_assert_lt(n, sizeof(buf));
    memset(buf, c, n);
    buf[n] = '\0';
    return buf;
}

static void assert_valid(validate_fn fn, const char *value)
{
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(fn(value, &err), 0, "'%s' rejected: %s", value, err.message);
}

static void assert_invalid(validate_fn fn, const char *value, const char *field, const char *why)
{
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(fn(value, &err), IDEM_EINVAL, "'%s' accepted as %s", value ? value : "(null)",
                 field);
    cr_assert_eq(err.code, IDEM_EINVAL);
    cr_assert_str_eq(err.field, field);
    cr_assert_not_null(strstr(err.message, why), "message '%s' lacks '%s'", err.message, why);
    cr_assert_eq(strncmp(err.message, field, strlen(field)), 0,
                 "message '%s' does not start with "
                 "the field",
                 err.message);
}

Test(validate_tenant, accepts_its_charset_up_to_64_bytes)
{
    assert_valid(idem_validate_tenant, "acme");
    assert_valid(idem_validate_tenant, "Org_1.eu-west:team@example");
    assert_valid(idem_validate_tenant, "x");
    assert_valid(idem_validate_tenant, repeat('t', IDEM_TENANT_MAX));
}

Test(validate_tenant, rejects_null_empty_overlong_and_foreign_bytes)
{
    assert_invalid(idem_validate_tenant, NULL, "tenant", "missing");
    assert_invalid(idem_validate_tenant, "", "tenant", "empty");
    assert_invalid(idem_validate_tenant, repeat('t', IDEM_TENANT_MAX + 1), "tenant",
                   "longer than 64 bytes");
    assert_invalid(idem_validate_tenant, "a b", "tenant", "character ' ' at offset 1");
    assert_invalid(idem_validate_tenant, "a/b", "tenant", "character '/'");
    assert_invalid(idem_validate_tenant, "caf\xc3\xa9", "tenant", "byte 0xc3 at offset 3");
    assert_invalid(idem_validate_tenant, "a\nb", "tenant", "byte 0x0a");
    assert_invalid(idem_validate_tenant, "\xff", "tenant", "byte 0xff");
}

Test(validate_operation_id, accepts_printable_ascii_up_to_128_bytes)
{
    assert_valid(idem_validate_operation_id, "0190b5f2-7c1e-7a3b-9c4d-5e6f7a8b9c0d");
    assert_valid(idem_validate_operation_id, "!~{}\"'\\/#");
    assert_valid(idem_validate_operation_id, repeat('o', IDEM_OPERATION_ID_MAX));
}

Test(validate_operation_id, rejects_space_control_non_ascii_and_overlong)
{
    assert_invalid(idem_validate_operation_id, NULL, "operation_id", "missing");
    assert_invalid(idem_validate_operation_id, "", "operation_id", "empty");
    assert_invalid(idem_validate_operation_id, "op 1", "operation_id", "' ' at offset 2");
    assert_invalid(idem_validate_operation_id, "op\t1", "operation_id", "byte 0x09");
    assert_invalid(idem_validate_operation_id, "op\x7f", "operation_id", "byte 0x7f");
    assert_invalid(idem_validate_operation_id, "\xe2\x82\xac", "operation_id", "byte 0xe2");
    assert_invalid(idem_validate_operation_id, repeat('o', IDEM_OPERATION_ID_MAX + 1),
                   "operation_id", "longer than 128 bytes");
}

Test(validate_tool, accepts_lower_case_names_up_to_64_bytes)
{
    assert_valid(idem_validate_tool, "send_email");
    assert_valid(idem_validate_tool, "billing.refund-v2");
    assert_valid(idem_validate_tool, repeat('a', IDEM_TOOL_MAX));
}

Test(validate_tool, rejects_upper_case_spaces_and_overlong)
{
    assert_invalid(idem_validate_tool, NULL, "tool", "missing");
    assert_invalid(idem_validate_tool, "", "tool", "empty");
    assert_invalid(idem_validate_tool, "SendEmail", "tool", "character 'S' at offset 0");
    assert_invalid(idem_validate_tool, "send email", "tool", "' '");
    assert_invalid(idem_validate_tool, "send:email", "tool", "':'");
    assert_invalid(idem_validate_tool, repeat('a', IDEM_TOOL_MAX + 1), "tool",
                   "longer than 64 bytes");
}

Test(validate_payload_version, accepts_one_and_above_only)
{
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_validate_payload_version(1, NULL), 0);
    cr_assert_eq(idem_validate_payload_version(2147483647, NULL), 0);
    cr_assert_eq(idem_validate_payload_version(0, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "payload_version");
    cr_assert_str_eq(err.message, "payload_version: must be at least 1, got 0");
    cr_assert_eq(idem_validate_payload_version(-2147483647 - 1, &err), IDEM_EINVAL);
}

Test(validate_trace_id, is_optional_but_checked_when_given)
{
    cr_assert_eq(idem_validate_trace_id(NULL, NULL), 0);
    assert_valid(idem_validate_trace_id, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    assert_valid(idem_validate_trace_id, repeat('f', IDEM_TRACE_ID_MAX));
    assert_invalid(idem_validate_trace_id, "", "trace_id", "empty");
    assert_invalid(idem_validate_trace_id, "a b", "trace_id", "' '");
    assert_invalid(idem_validate_trace_id, repeat('f', IDEM_TRACE_ID_MAX + 1), "trace_id",
                   "longer than 256 bytes");
}

/* The check stops at limit + 1 bytes: an unterminated buffer of that size is safe. */
Test(validate_limits, nothing_past_limit_plus_one_is_read)
{
    char buf[IDEM_TENANT_MAX + 1];
    idem_error err = IDEM_ERROR_INIT;

    memset(buf, 'a', sizeof(buf)); /* no terminator */
    cr_assert_eq(idem_validate_tenant(buf, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "tenant");
}

Test(validate_limits, a_null_error_pointer_is_accepted)
{
    cr_assert_eq(idem_validate_tenant(NULL, NULL), IDEM_EINVAL);
    cr_assert_eq(idem_validate_tool("BAD", NULL), IDEM_EINVAL);
    cr_assert_eq(idem_validate_operation_id("", NULL), IDEM_EINVAL);
}
