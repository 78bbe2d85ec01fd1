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

Test(error, init_gives_the_current_version_empty)
{
    idem_error by_macro = IDEM_ERROR_INIT;
    idem_error by_call;

    memset(&by_call, 0x5a, sizeof(by_call));
    cr_assert_eq(by_macro.version, IDEM_ERROR_VERSION);
    cr_assert_eq(idem_error_init(&by_call, IDEM_ERROR_VERSION), 0);
    cr_assert_eq(by_call.version, IDEM_ERROR_VERSION);
    cr_assert_eq(by_call.code, 0);
    cr_assert_str_empty(by_call.message);
    cr_assert_str_empty(by_call.constraint);
}

Test(error, init_refuses_a_version_it_does_not_know_and_leaves_the_struct)
{
    idem_error err;
    const unsigned int bad[] = {0, IDEM_ERROR_VERSION + 1};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&err, 0x5a, sizeof(err));
        cr_assert_eq(idem_error_init(&err, bad[i]), IDEM_EINVAL);
        cr_assert_eq(err.message[0], 0x5a);
    }
    cr_assert_eq(idem_error_init(NULL, IDEM_ERROR_VERSION), IDEM_EINVAL);
}

/* Filling and clearing keep the caller's version: a later call still knows the layout. */
Test(error, every_fill_keeps_the_callers_version)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_error src = IDEM_ERROR_INIT;

    idem__error_field(&err, IDEM_EINVAL, "tenant", "must not be empty");
    cr_assert_eq(err.version, IDEM_ERROR_VERSION);
    idem_error_set(&err, IDEM_EDB, "x");
    cr_assert_eq(err.version, IDEM_ERROR_VERSION);
    idem_error_clear(&err);
    cr_assert_eq(err.version, IDEM_ERROR_VERSION);
    src.version = 0;
    idem__error_set(&src, IDEM_EBUSY, "busy");
    idem__error_copy(&err, &src);
    cr_assert_eq(err.version, IDEM_ERROR_VERSION);
    cr_assert_eq(err.code, IDEM_EBUSY);
    cr_assert_str_eq(err.message, "busy");
}

/* A struct left zeroed carries no version this library knows: filled as version 1. */
Test(error, a_zeroed_error_is_filled_as_version_1)
{
    idem_error err;

    memset(&err, 0, sizeof(err));
    cr_assert_eq(idem__error_field(&err, IDEM_EINVAL, "tool", "must not be empty"), IDEM_EINVAL);
    cr_assert_eq(err.version, 0);
    cr_assert_eq(err.code, IDEM_EINVAL);
    cr_assert_str_eq(err.field, "tool");
    cr_assert_str_eq(err.message, "tool: must not be empty");
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
