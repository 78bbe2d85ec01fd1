/* The core's SQLSTATE classes (lib/core/sqlstate.h): one classification for the library and
 * the tools. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "core/sqlstate.h"

/* Arrays, not pointers: Criterion copies the parameters into the test's process. */
typedef struct sqlstate_case {
    char sqlstate[6];
    idem__sqlstate_class kind;
    int transient;
} sqlstate_case;

ParameterizedTestParameters(sqlstate, each_code_has_one_class_for_library_and_tools)
{
    static sqlstate_case cases[] = {
        {"08006", IDEM__SQLSTATE_DISCONNECT, 1}, /* connection_failure */
        {"08P01", IDEM__SQLSTATE_DISCONNECT, 1}, /* protocol_violation (PgBouncer's) */
        {"57P01", IDEM__SQLSTATE_DISCONNECT, 1},
        {"57P02", IDEM__SQLSTATE_DISCONNECT, 1},
        {"57P03", IDEM__SQLSTATE_DISCONNECT, 1},
        {"40001", IDEM__SQLSTATE_RETRYABLE, 1},
        {"40P01", IDEM__SQLSTATE_RETRYABLE, 1},
        {"55P03", IDEM__SQLSTATE_TIMEOUT, 1},
        {"57014", IDEM__SQLSTATE_TIMEOUT, 1},
        {"42P01", IDEM__SQLSTATE_SCHEMA, 0},
        {"42703", IDEM__SQLSTATE_SCHEMA, 0},
        {"42883", IDEM__SQLSTATE_SCHEMA, 0},
        {"3F000", IDEM__SQLSTATE_SCHEMA, 0},
        {"42501", IDEM__SQLSTATE_ACCESS, 0},
        {"3D000", IDEM__SQLSTATE_ACCESS, 0},
        {"28000", IDEM__SQLSTATE_ACCESS, 0},
        {"28P01", IDEM__SQLSTATE_ACCESS, 0},
        /* The tools took these for "try again later" where the library did not: the
         * library's classification holds for both. */
        {"53000", IDEM__SQLSTATE_RESOURCES, 1},  /* insufficient_resources */
        {"53100", IDEM__SQLSTATE_RESOURCES, 1},  /* disk_full */
        {"53200", IDEM__SQLSTATE_RESOURCES, 1},  /* out_of_memory */
        {"53300", IDEM__SQLSTATE_RESOURCES, 1},  /* too_many_connections */
        {"57P05", IDEM__SQLSTATE_DISCONNECT, 1}, /* idle_session_timeout */
        {"23505", IDEM__SQLSTATE_OTHER, 0},
        {"P0001", IDEM__SQLSTATE_OTHER, 0},
        {"", IDEM__SQLSTATE_OTHER, 0},
    };
    return cr_make_param_array(sqlstate_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(sqlstate_case *c, sqlstate, each_code_has_one_class_for_library_and_tools)
{
    cr_assert_eq(idem__sqlstate_classify(c->sqlstate), c->kind, "%s", c->sqlstate);
    cr_assert_eq(idem__sqlstate_is_transient(c->sqlstate), c->transient, "%s", c->sqlstate);
    cr_assert_eq(idem__sqlstate_is_disconnect(c->sqlstate), c->kind == IDEM__SQLSTATE_DISCONNECT);
    cr_assert_eq(idem__sqlstate_is_retryable(c->sqlstate), c->kind == IDEM__SQLSTATE_RETRYABLE);
    cr_assert_eq(idem__sqlstate_is_timeout(c->sqlstate), c->kind == IDEM__SQLSTATE_TIMEOUT);
    cr_assert_eq(idem__sqlstate_advice(c->sqlstate) != NULL,
                 c->kind == IDEM__SQLSTATE_SCHEMA || c->kind == IDEM__SQLSTATE_ACCESS, "%s",
                 c->sqlstate);
}

Test(sqlstate, null_is_no_class)
{
    cr_assert_eq(idem__sqlstate_classify(NULL), IDEM__SQLSTATE_OTHER);
    cr_assert_eq(idem__sqlstate_is_transient(NULL), 0);
    cr_assert_null(idem__sqlstate_advice(NULL));
}
