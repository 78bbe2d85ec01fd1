/* The rules of a row of idem.operations (migration 0008's operations_consistent): every
 * shape the library writes is accepted, and each broken rule is refused by the server. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgtest.h"

/* A row to insert: its state and which columns are set. */
struct row_case {
    const char *state;
    int fingerprint_bytes;
    int response, completed_at, expired_at, downstream_key, attempts, lease;
    int accepted;
    const char *why;
};

static const struct row_case cases[] = {
    {"pending", 32, 0, 0, 0, 0, 0, 0, 1, "a claim"},
    {"pending", 32, 0, 0, 0, 1, 1, 1, 1, "an external effect's leased claim"},
    {"completed", 32, 1, 1, 0, 0, 0, 0, 1, "a record"},
    {"failed", 32, 1, 1, 0, 0, 0, 0, 1, "a final failure"},
    {"expired", 32, 0, 1, 1, 0, 0, 0, 1, "a tombstone"},
    {"outcome_unknown", 32, 0, 0, 0, 1, 1, 0, 1, "an external outcome unknown"},
    {"claimed", 32, 0, 0, 0, 0, 0, 0, 0, "an unknown state"},
    {"pending", 31, 0, 0, 0, 0, 0, 0, 0, "a short fingerprint"},
    {"pending", 32, 1, 0, 0, 0, 0, 0, 0, "a claim with a receipt"},
    {"pending", 32, 0, 1, 0, 0, 0, 0, 0, "a claim with completed_at"},
    {"completed", 32, 0, 1, 0, 0, 0, 0, 0, "a record without a receipt"},
    {"completed", 32, 1, 0, 0, 0, 0, 0, 0, "a record without completed_at"},
    {"completed", 32, 1, 1, 1, 0, 0, 0, 0, "a record with expired_at"},
    {"expired", 32, 0, 1, 0, 0, 0, 0, 0, "a tombstone without expired_at"},
    {"expired", 32, 1, 1, 1, 0, 0, 0, 0, "a tombstone with a receipt"},
    {"pending", 32, 0, 0, 0, 1, 0, 0, 0, "a downstream key without attempts"},
    {"pending", 32, 0, 0, 0, 0, 1, 0, 0, "attempts without a downstream key"},
    {"completed", 32, 1, 1, 0, 1, 1, 1, 0, "a lease on a record"},
    {"outcome_unknown", 32, 0, 0, 0, 0, 0, 0, 0, "outcome unknown without a downstream key"},
};

#define NCASES (sizeof(cases) / sizeof(cases[0]))

static const char insert_sql[] =
    "INSERT INTO idem.operations (tenant, operation_id, tool, payload_version, fingerprint,"
    " state, response, claim_token, expires_at, completed_at, expired_at, downstream_key,"
    " attempts, lease_expires_at) VALUES ('acme', 'op-1', 'create_support_task', 1,"
    " decode(repeat('ab', %d), 'hex'), '%s', %s, gen_random_uuid(), now(), %s, %s, %s, %s, %s)";

static void insert_row(char *sql, size_t size, const struct row_case *c)
{
    snprintf(sql, size, insert_sql, c->fingerprint_bytes, c->state,
             c->response ? "convert_to('{}', 'UTF8')" : "NULL", c->completed_at ? "now()" : "NULL",
             c->expired_at ? "now()" : "NULL", c->downstream_key ? "'down-1'" : "NULL",
             c->attempts ? "1" : "NULL", c->lease ? "now()" : "NULL");
}

ParameterizedTestParameters(operations_check, each_rule_of_a_row_is_enforced_by_the_server)
{
    static size_t index[NCASES];

    for (size_t i = 0; i < NCASES; i++)
        index[i] = i;
    return cr_make_param_array(size_t, index, NCASES);
}

ParameterizedTest(size_t *i, operations_check, each_rule_of_a_row_is_enforced_by_the_server)
{
    const struct row_case *c = &cases[*i];
    char *conninfo = pgtest_new_migrated_database("opcheck");
    PGconn *conn = pgtest_connect(conninfo);
    char sql[1024];
    PGresult *res;

    insert_row(sql, sizeof(sql), c);
    res = PQexec(conn, sql);
    if (c->accepted) {
        cr_assert_eq(PQresultStatus(res), PGRES_COMMAND_OK, "%s: %s", c->why, PQerrorMessage(conn));
    } else {
        const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        const char *name = PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME);

        cr_assert_str_eq(state != NULL ? state : "", "23514", "%s: %s", c->why,
                         PQerrorMessage(conn));
        /* Citus relays a worker's error without its constraint field; its message names it. */
        if (name == NULL && pgtest_citus_workers() != NULL)
            cr_assert_not_null(strstr(PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY),
                                      "check constraint \"operations_consistent\""),
                               "%s: %s", c->why, PQerrorMessage(conn));
        else
            cr_assert_str_eq(name != NULL ? name : "", "operations_consistent", "%s", c->why);
        cr_assert_eq(pgtest_scalar(conn, "SELECT count(*) FROM idem.operations"), 0);
    }
    PQclear(res);
    PQfinish(conn);
    free(conninfo);
}
