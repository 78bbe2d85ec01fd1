#include <criterion/criterion.h>
#include <signal.h>
#include <string.h>

#include "error.h"
#include "idem/idem.h"

Test(error, every_code_has_distinct_text_and_name)
{
    static const int codes[] = {
#define X(name, value, text) IDEM_##name,
        IDEM_ERRNO_MAP(X)
#undef X
    };
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        cr_assert_lt(codes[i], 0);
        cr_assert_str_neq(idem_strerror(codes[i]), "unknown error");
        cr_assert_str_neq(idem_err_name(codes[i]), "UNKNOWN");
        for (size_t j = 0; j < i; j++)
            cr_assert_str_neq(idem_strerror(codes[i]), idem_strerror(codes[j]));
    }
}

Test(error, unknown_code_is_named_unknown_not_null)
{
    cr_assert_str_eq(idem_strerror(-9999), "unknown error");
    cr_assert_str_eq(idem_err_name(12345), "UNKNOWN");
    cr_assert_str_eq(idem_strerror(IDEM_OK), "success");
    cr_assert_str_eq(idem_err_name(IDEM_EINVAL), "EINVAL");
}

Test(error, clear_and_free_accept_null)
{
    idem_error err = IDEM_ERROR_INIT;
    err.code = IDEM_EDB;
    strcpy(err.message, "x");
    idem_error_clear(&err);
    cr_assert_eq(err.code, 0);
    cr_assert_str_empty(err.message);
    idem_error_clear(NULL);
    idem_free(NULL);
}

/* Invalid input has one spelling inside the library: IDEM_EINVAL, given explicitly. */
Test(error, a_field_error_returns_the_code_it_was_given)
{
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem__error_field(&err, IDEM_EINVAL, "tenant", "must not be empty"), IDEM_EINVAL);
    cr_assert_eq(err.code, IDEM_EINVAL);
    cr_assert_str_eq(err.field, "tenant");
    cr_assert_eq(idem__error_field(NULL, IDEM_ECONFLICT, "tool", "changed"), IDEM_ECONFLICT);
}

Test(error, a_field_error_without_a_code_is_a_bug, .signal = SIGABRT)
{
    idem__error_field(NULL, 0, "tenant", "must not be empty");
}

Test(version, runtime_matches_header)
{
    cr_assert_str_eq(idem_version(), IDEM_VERSION_STRING);
    cr_assert_eq(idem_version_number(), IDEM_VERSION_NUMBER);
}
