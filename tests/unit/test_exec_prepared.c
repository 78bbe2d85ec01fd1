/* What a connection has prepared (lib/exec/exec_prepared.c): a statement is found by its
 * address and its name together, so that a declared effect freed and another made at the
 * same address is never taken for the one the server holds. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "exec_io.h"
#include "conn.h"

static idem_conn *conn_holding(const idem__stmt *stmt)
{
    idem_conn *conn = calloc(1, sizeof(*conn));
    idem_error err = IDEM_ERROR_INIT;
    char name[IDEM__PREPARED_NAME_MAX + 1];

    cr_assert_not_null(conn);
    idem__exec_server_name(name, sizeof(name), stmt);
    cr_assert_eq(idem__exec_remember_prepared(conn, stmt, name, &err), 0, "%s", err.message);
    return conn;
}

static void conn_free(idem_conn *conn)
{
    free(conn->prepared);
    free(conn);
}

Test(exec_prepared, a_statement_is_found_under_its_own_name)
{
    idem__stmt stmt = {"idem_declared_1", "SELECT 1", 0};
    idem_conn *conn = conn_holding(&stmt);
    const char *name = idem__exec_prepared_name(conn, &stmt);

    cr_assert_not_null(name);
    cr_assert_eq(strncmp(name, "idem_declared_1_", 16), 0, "%s", name);
    conn_free(conn);
}

/* Another statement at the same address (the first freed, the next made there) is not
 * prepared, whichever name is the longer. */
Test(exec_prepared, another_statement_at_the_same_address_is_not_taken_for_it)
{
    static const char *const pairs[][2] = {{"idem_declared_1", "idem_declared_2"},
                                           {"idem_declared_1", "idem_declared_12"},
                                           {"idem_declared_12", "idem_declared_1"}};

    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        idem__stmt stmt = {pairs[i][0], "SELECT 1", 0};
        idem_conn *conn = conn_holding(&stmt);

        stmt = (idem__stmt){pairs[i][1], "SELECT 2", 0};
        cr_assert_null(idem__exec_prepared_name(conn, &stmt), "%s then %s", pairs[i][0],
                       pairs[i][1]);
        conn_free(conn);
    }
}

/* A statement's name is cut to fit the server's: a long one is still found. */
Test(exec_prepared, a_long_name_is_found_under_its_cut_form)
{
    idem__stmt stmt = {"idem_a_statement_name_longer_than_forty_characters_is_cut", "SELECT 1", 0};
    idem_conn *conn = conn_holding(&stmt);

    cr_assert_not_null(idem__exec_prepared_name(conn, &stmt));
    conn_free(conn);
}
