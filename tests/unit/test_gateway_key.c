/* idem-gateway's reading of the Idempotency-Key header (key.h) without a network: a bare
 * token or a quoted structured-field string, unquoted, then an operation ID; each refusal
 * says why. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "key.h"

/* @header is read as the key @want. */
static void assert_key(const char *header, const char *want)
{
    char key[IDEM_OPERATION_ID_MAX + 1], why[256] = "";

    cr_assert_eq(gw_key_parse(key, header, why, sizeof(why)), 0, "<%s>: %s", header, why);
    cr_assert_str_eq(key, want, "<%s>", header);
}

/* @header is refused, saying @says; the key is left untouched. */
static void assert_refused(const char *header, const char *says)
{
    char key[IDEM_OPERATION_ID_MAX + 1] = "untouched", why[256] = "";

    cr_assert_eq(gw_key_parse(key, header, why, sizeof(why)), -1, "<%s> accepted", header);
    cr_assert_not_null(strstr(why, says), "<%s>: <%s> lacks <%s>", header, why, says);
    cr_assert_str_eq(key, "untouched");
}

Test(gateway_key, a_bare_token_is_the_key_as_sent)
{
    assert_key("note-1", "note-1");
    assert_key("0190f1a2-7b3c-7def-8123-456789abcdef", "0190f1a2-7b3c-7def-8123-456789abcdef");
    assert_key("a:b/c~d", "a:b/c~d");
    assert_key(" \tpadded\t ", "padded");
}

Test(gateway_key, a_quoted_string_is_unquoted_with_its_escapes)
{
    assert_key("\"note-1\"", "note-1");
    assert_key("\"a\\\"b\"", "a\"b");
    assert_key("\"a\\\\b\"", "a\\b");
    assert_key("\"a,b\"", "a,b");
}

Test(gateway_key, a_missing_header_is_refused_as_required)
{
    assert_refused(NULL, "the Idempotency-Key header is missing");
}

Test(gateway_key, a_bare_key_of_other_characters_must_be_quoted)
{
    assert_refused("a,b", "a bare key is token characters only; quote it");
    assert_refused("a b", "a bare key is token characters only");
}

Test(gateway_key, a_quoted_key_is_well_formed)
{
    assert_refused("\"unterminated", "the quoted key has no closing '\"'");
    assert_refused("\"a\\nb\"", "a backslash in the quoted key escapes only");
    assert_refused("\"a\"b\"", "an unescaped '\"'");
    assert_refused("\"a\tb\"", "a character outside printable ASCII");
}

Test(gateway_key, the_unquoted_key_must_be_an_operation_id)
{
    char longest[IDEM_OPERATION_ID_MAX + 1], over[IDEM_OPERATION_ID_MAX + 2];
    char quoted[IDEM_OPERATION_ID_MAX + 4];

    memset(longest, 'k', sizeof(longest) - 1);
    longest[sizeof(longest) - 1] = '\0';
    memset(over, 'k', sizeof(over) - 1);
    over[sizeof(over) - 1] = '\0';
    assert_key(longest, longest);
    assert_refused(over, "the key is longer than 128 bytes");
    snprintf(quoted, sizeof(quoted), "\"%s\"", over);
    assert_refused(quoted, "the key is longer than 128 bytes");
    assert_refused("\"with space\"", "not an operation ID: ");
    assert_refused("\"\"", "not an operation ID: ");
    assert_refused("", "not an operation ID: ");
}
