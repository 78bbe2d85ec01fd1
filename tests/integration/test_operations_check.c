/* The rules of a row of idem.operations (migration 0008's operations_consistent, its
 * function's body rewritten by 0014): every shape the library writes is accepted, and each
 * broken rule is refused by the server. */
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

/* The rules as migration 0008 states them, for idem.operation_consistent()'s arguments. */
static int rules_hold(const char *state, int fingerprint_bytes, const int b[6])
{
    int pending = !strcmp(state, "pending"), expired = !strcmp(state, "expired");
    int unknown = !strcmp(state, "outcome_unknown");
    int known =
        pending || expired || unknown || !strcmp(state, "completed") || !strcmp(state, "failed");
    /* b: no response, not completed, not expired, no downstream key, no attempts, no lease */
    return known && fingerprint_bytes == 32 && (pending || expired || unknown) == b[0] &&
           (pending || unknown) == b[1] && expired == !b[2] && b[3] == b[4] && (b[5] || pending) &&
           (!unknown || !b[3]);
}

/* The function behind the constraint (its body rewritten by migration 0014 to cost less)
 * answers every combination of its arguments as the rules say: every state the table
 * knows and two it does not, three fingerprint lengths, each of the six columns set or
 * not. */
Test(operations_check, the_rules_function_answers_every_combination_as_the_rules_say)
{
    char *conninfo = pgtest_new_migrated_database("oprules");
    PGconn *conn = pgtest_connect(conninfo);
    PGresult *res = PQexec(
        conn, "SELECT s, f, g, idem.operation_consistent(s, f, (g & 1) > 0, (g & 2) > 0,"
              " (g & 4) > 0, (g & 8) > 0, (g & 16) > 0, (g & 32) > 0)::text"
              " FROM unnest(ARRAY['pending', 'completed', 'failed', 'expired', 'outcome_unknown',"
              " 'claimed', '']) AS s, unnest(ARRAY[32, 31, 0]) AS f, generate_series(0, 63) AS g");
    int accepted = 0;

    cr_assert_eq(PQresultStatus(res), PGRES_TUPLES_OK, "%s", PQerrorMessage(conn));
    cr_assert_eq(PQntuples(res), 7 * 3 * 64);
    for (int i = 0; i < PQntuples(res); i++) {
        const char *state = PQgetvalue(res, i, 0);
        int f = atoi(PQgetvalue(res, i, 1)), g = atoi(PQgetvalue(res, i, 2)), b[6];
        int want, got = !strcmp(PQgetvalue(res, i, 3), "true");

        for (int k = 0; k < 6; k++)
            b[k] = (g >> k) & 1;
        want = rules_hold(state, f, b);
        cr_assert_eq(got, want, "state %s, fingerprint %d bytes, nulls %d: %s, the rules say %s",
                     state, f, g, PQgetvalue(res, i, 3), want ? "true" : "false");
        cr_assert(!PQgetisnull(res, i, 3), "never NULL, which a CHECK would take for true");
        accepted += got;
    }
    cr_assert_eq(accepted, 11,
                 "the shapes of a row: 4 pending, 2 completed, 2 failed, 2 expired,"
                 " 1 outcome_unknown");
    PQclear(res);
    PQfinish(conn);
    free(conninfo);
}

/* The constraint's form: the row whole (migration 0017) outside Citus, 0008's one argument
 * per column where the citus extension is installed (a shard's row is of its own type). */
static int constraint_reads_the_row_whole(PGconn *conn)
{
    return pgtest_scalar(conn,
                         "SELECT count(*) FROM pg_constraint"
                         " WHERE conrelid = 'idem.operations'::regclass"
                         " AND conname = 'operations_consistent'"
                         " AND pg_get_constraintdef(oid) LIKE '%operation_row_consistent%'") == 1;
}

/* Migration 0017's function on a row answers as 0008's on that row's columns, for every
 * state the table knows and two it does not, three fingerprint lengths (the column is NOT
 * NULL), each of the six columns set or not: the constraint refuses no row that stood
 * before it. */
Test(operations_check, the_row_function_answers_as_the_per_column_one_for_every_row)
{
    char *conninfo = pgtest_new_migrated_database("oprow");
    PGconn *conn = pgtest_connect(conninfo);
    PGresult *res = PQexec(
        conn, "SELECT s, f, g, idem.operation_row_consistent(r)::text,"
              " coalesce(idem.operation_consistent(s, octet_length((r).fingerprint), (g & 1) > 0,"
              " (g & 2) > 0, (g & 4) > 0, (g & 8) > 0, (g & 16) > 0, (g & 32) > 0), false)::text"
              " FROM unnest(ARRAY['pending', 'completed', 'failed', 'expired', 'outcome_unknown',"
              " 'claimed', '']) AS s, unnest(ARRAY[32, 31, 0]) AS f, generate_series(0, 63) AS g,"
              " LATERAL (SELECT jsonb_populate_record(NULL::idem.operations, jsonb_build_object("
              " 'tenant', 'acme', 'operation_id', 'op-1', 'state', s,"
              " 'fingerprint', '\\x' || repeat('ab', f),"
              " 'response', CASE WHEN (g & 1) = 0 THEN '\\x7b7d' END,"
              " 'completed_at', CASE WHEN (g & 2) = 0 THEN now() END,"
              " 'expired_at', CASE WHEN (g & 4) = 0 THEN now() END,"
              " 'downstream_key', CASE WHEN (g & 8) = 0 THEN 'down-1' END,"
              " 'attempts', CASE WHEN (g & 16) = 0 THEN 1 END,"
              " 'lease_expires_at', CASE WHEN (g & 32) = 0 THEN now() END)) AS r) AS one");
    int accepted = 0;

    cr_assert_eq(PQresultStatus(res), PGRES_TUPLES_OK, "%s", PQerrorMessage(conn));
    cr_assert_eq(PQntuples(res), 7 * 3 * 64);
    for (int i = 0; i < PQntuples(res); i++) {
        cr_assert(!PQgetisnull(res, i, 3), "never NULL, which a CHECK would take for true");
        cr_assert_str_eq(PQgetvalue(res, i, 3), PQgetvalue(res, i, 4),
                         "state '%s', fingerprint %s bytes, nulls %s: the row's %s, the "
                         "columns' %s",
                         PQgetvalue(res, i, 0), PQgetvalue(res, i, 1), PQgetvalue(res, i, 2),
                         PQgetvalue(res, i, 3), PQgetvalue(res, i, 4));
        accepted += !strcmp(PQgetvalue(res, i, 3), "true");
    }
    cr_assert_eq(accepted, 11, "the shapes of a row, as above");
    PQclear(res);
    PQfinish(conn);
    free(conninfo);
}

/* What `idem-migrate distribute` does before distributing idem.operations: 0008's form
 * comes back, under the same name, with the same rules; a second call changes nothing. */
Test(operations_check, the_per_column_form_comes_back_for_citus_with_the_same_rules)
{
    char *conninfo = pgtest_new_migrated_database("opfield");
    PGconn *conn = pgtest_connect(conninfo);
    char sql[1024];
    PGresult *res;

    cr_assert_eq(constraint_reads_the_row_whole(conn), pgtest_citus_workers() == NULL,
                 "the row whole outside Citus, one argument per column on it");
    for (int round = 0; round < 2; round++)
        PQclear(pgtest_exec(conn, "SELECT idem.operations_check_per_field()"));
    cr_assert_not(constraint_reads_the_row_whole(conn));
    cr_assert_eq(pgtest_scalar(conn, "SELECT count(*) FROM pg_constraint WHERE conrelid ="
                                     " 'idem.operations'::regclass AND contype = 'c'"),
                 1, "one CHECK constraint");
    for (size_t i = 0; i < NCASES; i++) {
        insert_row(sql, sizeof(sql), &cases[i]);
        res = PQexec(conn, sql);
        cr_assert_eq(PQresultStatus(res) == PGRES_COMMAND_OK, cases[i].accepted, "%s: %s",
                     cases[i].why, PQerrorMessage(conn));
        if (!cases[i].accepted)
            cr_assert_str_eq(PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME) != NULL
                                 ? PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME)
                                 : "",
                             "operations_consistent", "%s", cases[i].why);
        PQclear(res);
        PQclear(pgtest_exec(conn, "DELETE FROM idem.operations"));
    }
    PQfinish(conn);
    free(conninfo);
}
