/* What each kind of call sends to the server: round trips and statements, counted by the
 * execution layer's trace (exec.h, test builds). The create path's promise (README,
 * Performance): a new key marked as a first attempt costs 2 round trips and 5 statements
 * with an effect of one statement, 1 round trip with a declared effect; a retry that
 * replays costs 1 round trip of 1 statement. The counts are those of plain PostgreSQL,
 * connected as the application role (row-level security on): on Citus the tenant and
 * the lock timeouts travel as SET LOCAL statements of their own (more statements, the
 * same round trips). Every case runs once on a key of its own before it is counted, so
 * that the statements are prepared on the pool's one connection. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "pgtest.h"
#include "pooltest.h"
#include "storetest.h"
#include "support_tasks.h"

static idem_declared *create_task;

static void round_trips_init(void)
{
    static const char *const params[] = {"$tenant", "subject", "$operation_id"};
    idem_error err = IDEM_ERROR_INIT;

    storetest_init();
    cr_assert_eq(idem_declared_new(&create_task,
                                   "INSERT INTO idem_example.support_tasks"
                                   " (tenant, subject, operation_id) VALUES ($1, $2, $3)"
                                   " RETURNING '{\"task_id\" : ' || task_id::text || '}'",
                                   params, 3, &err),
                 0, "%s", err.message);
    storetest_open_as(NULL, 1, PGTEST_APP);
}

static void round_trips_fini(void)
{
    idem_declared_free(create_task);
    create_task = NULL;
    storetest_fini();
}

TestSuite(round_trips, .init = round_trips_init, .fini = round_trips_fini, .timeout = 120);

#define ARGS "{\"subject\":\"printer on fire\"}"

enum how { CALLBACK, NO_STATEMENT, DECLARED };

static int no_statement(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                        idem_error *err)
{
    (void)tx, (void)arguments, (void)ctx, (void)err;
    *response = json_pack("{s:s}", "status", "noted");
    return IDEM_EFFECT_OK;
}

static idem_status call(enum how how, const char *op, unsigned int attempt)
{
    idem_request req = storetest_request("acme", op, ARGS);
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_status status;
    int rc;

    req.attempt = attempt;
    if (how == DECLARED)
        rc = idem_store_execute_declared(&out, fx.store, &req, create_task, &err);
    else
        rc = idem_store_execute(&out, fx.store, &req,
                                how == CALLBACK ? example_create_support_task : no_statement, NULL,
                                &err);
    cr_assert_eq(rc, 0, "%s: %s", op, err.message);
    status = out.status;
    idem_outcome_clear(&out);
    return status;
}

typedef struct sent {
    unsigned long round_trips, statements;
} sent;

/* Run the call (after a first run on "<op>-warm"), returning what it sent. */
static sent counted(enum how how, const char *op, unsigned int attempt, idem_status want)
{
    char warm[64];
    sent s;

    snprintf(warm, sizeof(warm), "%s-warm", op);
    call(how, warm, 1);
    if (attempt != 1)
        call(how, warm, attempt);
    idem__exec_trace_take(&s.round_trips, &s.statements);
    cr_assert_eq(call(how, op, attempt), want, "%s", op);
    idem__exec_trace_take(&s.round_trips, &s.statements);
    return s;
}

static int on_citus(void)
{
    return pgtest_citus_workers() != NULL;
}

static void expect(sent s, unsigned long round_trips, unsigned long statements, const char *what)
{
    cr_expect_eq(s.round_trips, round_trips, "%s: %lu round trips, expected %lu", what,
                 s.round_trips, round_trips);
    if (!on_citus())
        cr_expect_eq(s.statements, statements, "%s: %lu statements, expected %lu", what,
                     s.statements, statements);
}

Test(round_trips, a_new_key_with_a_one_statement_effect_costs_two_round_trips_of_five_statements)
{
    /* [BEGIN, the reservation, the effect's INSERT] [the record, COMMIT] (on Citus the
     * claim and the finishing UPDATE in their places) */
    expect(counted(CALLBACK, "rt-callback", 1, IDEM_STATUS_CREATED), 2, 5, "callback create");
    cr_assert_eq(storetest_tasks(), 2);
}

Test(round_trips, a_new_key_whose_effect_sends_nothing_costs_one_round_trip)
{
    /* [BEGIN, the reservation, the record, COMMIT] */
    expect(counted(NO_STATEMENT, "rt-nothing", 1, IDEM_STATUS_CREATED), 1, 4, "no statement");
}

/* The first declared create on the connection leaves its statement_timeout on the session
 * (settings.h, idem__tx_settings_keep_cmd()); the next ones leave it to the session. */
Test(round_trips, a_new_key_with_a_declared_effect_costs_one_round_trip)
{
    /* [BEGIN, the statement, COMMIT]; behind PgBouncer [BEGIN, the settings, the
     * statement, COMMIT] */
    expect(counted(DECLARED, "rt-declared", 1, IDEM_STATUS_CREATED), 1,
           pgtest_through_pgbouncer() ? 4 : 3, "declared create");
    cr_assert_eq(storetest_tasks(), 2);
}

/* A connection an application takes from the pool has the session's own statement_timeout,
 * whatever a declared create left there; the next declared create on it leaves its own
 * there again, with the settings' statement, once. */
Test(round_trips, an_application_gets_the_sessions_own_statement_timeout_back)
{
    unsigned long direct = !pgtest_through_pgbouncer();
    char *timeout;
    sent s;

    expect(counted(DECLARED, "rt-kept", 1, IDEM_STATUS_CREATED), 1, direct ? 3 : 4,
           "declared create");
    timeout = pooltest_query_acquired(fx.pool, "SHOW statement_timeout");
    cr_assert_str_eq(timeout, "0", "the session's statement_timeout");
    free(timeout);
    idem__exec_trace_take(&s.round_trips, &s.statements);
    cr_assert_eq(call(DECLARED, "rt-kept-again", 1), IDEM_STATUS_CREATED);
    idem__exec_trace_take(&s.round_trips, &s.statements);
    expect(s, 1, 4, "the first declared create after the application's");
    expect(counted(DECLARED, "rt-kept-after", 1, IDEM_STATUS_CREATED), 1, direct ? 3 : 4,
           "the next");
    cr_assert_eq(storetest_tasks(), 5);
}

/* With the pool's statement_timeout_ms the session's own (a startup option) and the call's
 * statement timeout that cap, the statement makes the other settings itself. */
Test(round_trips, a_declared_create_under_the_pools_statement_timeout_sends_no_settings)
{
    /* Caps the server shows in each of its units ("1500ms", "5s", "1min", "1h", "1d"):
     * the statement compares the session's setting, as shown, with the cap. */
    static const unsigned int caps_ms[] = {1500, 5000, 60000, 3600000, 86400000};
    int pooled = pgtest_through_pgbouncer();

    for (size_t i = 0; i < sizeof(caps_ms) / sizeof(caps_ms[0]); i++) {
        idem_store_options opts = IDEM_STORE_OPTIONS_INIT;
        char op[64], what[96];

        opts.deadline_ms = caps_ms[i] + 10000;
        storetest_close();
        storetest_open_statement_timeout(&opts, caps_ms[i]);
        snprintf(op, sizeof(op), "rt-declared-capped-%u", caps_ms[i]);
        snprintf(what, sizeof(what), "declared create under a statement timeout of %u ms",
                 caps_ms[i]);
        /* [BEGIN, the statement, COMMIT]; behind PgBouncer the timeout is no startup
         * option: [BEGIN, the settings, the statement, COMMIT] */
        expect(counted(DECLARED, op, 1, IDEM_STATUS_CREATED), 1, pooled ? 4 : 3, what);
    }
    cr_assert_eq(storetest_tasks(), 10);
}

Test(round_trips, a_retry_replays_in_one_statement)
{
    /* [the lookup, which sets the tenant itself] */
    call(CALLBACK, "rt-replay", 1);
    expect(counted(CALLBACK, "rt-replay", 2, IDEM_STATUS_REPLAYED), 1, 1, "callback replay");
    call(DECLARED, "rt-replay-declared", 1);
    expect(counted(DECLARED, "rt-replay-declared", 2, IDEM_STATUS_REPLAYED), 1, 1,
           "declared replay");
    cr_assert_eq(storetest_tasks(), 4, "replays ran no effect");
}

/* A retry's lookup reads no clock (store_sql.c, stmt_replay): a key without a record is
 * looked up again with it before the claim, a round trip that only a retry whose first
 * attempt never reached the database pays. */
Test(round_trips, a_retry_of_a_key_without_a_record_looks_twice_then_writes)
{
    /* [the lookup] [the lookup with the clock] [BEGIN, the reservation, the effect's
     * INSERT] [the record, COMMIT] */
    expect(counted(CALLBACK, "rt-retry-absent", 2, IDEM_STATUS_CREATED), 4, 7,
           "callback retry of a key without a record");
    /* [the lookup] [the lookup with the clock] [BEGIN, the statement, COMMIT] (behind
     * PgBouncer the settings' statement too) */
    expect(counted(DECLARED, "rt-retry-absent-declared", 2, IDEM_STATUS_CREATED), 3,
           pgtest_through_pgbouncer() ? 6 : 5, "declared retry of a key without a record");
    cr_assert_eq(storetest_tasks(), 4);
}

/* The reservation reads nothing (store_sql.c): the record's INSERT finds the key taken,
 * and the record is read after the ROLLBACK. On Citus the claim answers, as before. */
Test(round_trips, a_first_attempt_on_a_key_that_exists_replays_after_its_rollback)
{
    /* [BEGIN, the reservation, the effect's INSERT] [the record: the key is taken; COMMIT,
     * skipped] [ROLLBACK] [the lookup]; on Citus [BEGIN, the claim, the effect's INSERT,
     * void] [ROLLBACK] */
    call(CALLBACK, "rt-first", 1);
    expect(counted(CALLBACK, "rt-first", 1, IDEM_STATUS_REPLAYED), on_citus() ? 2 : 4,
           on_citus() ? 4 : 7, "first-attempt replay");
    cr_assert_eq(storetest_tasks(), 2, "the void attempt's INSERT was rolled back");
}

Test(round_trips, a_new_key_on_a_fresh_connection_costs_no_more_round_trips)
{
    sent s;

    /* Nothing is prepared on the pool's connection yet: the reservation, the effect's
     * INSERT and the record are prepared inside the pipelines that first run them. */
    idem__exec_trace_take(&s.round_trips, &s.statements);
    cr_assert_eq(call(CALLBACK, "rt-fresh", 1), IDEM_STATUS_CREATED);
    idem__exec_trace_take(&s.round_trips, &s.statements);
    expect(s, 2, 5, "callback create on a fresh connection");
    idem__exec_trace_take(&s.round_trips, &s.statements);
    cr_assert_eq(call(DECLARED, "rt-fresh-declared", 1), IDEM_STATUS_CREATED);
    idem__exec_trace_take(&s.round_trips, &s.statements);
    expect(s, 1, 4, "declared create on a fresh connection");
}

/* idem's statements prepared on the pool's one connection whose names start with @prefix
 * (named statements, not from SQL's PREPARE). */
static long prepared_as(const char *prefix)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_conn *conn = NULL;
    const char *values[] = {prefix};
    PGresult *res;
    long n;

    cr_assert_eq(idem_pool_acquire(&conn, fx.pool, &err), 0, "%s", err.message);
    res = PQexecParams(idem_conn_pg(conn),
                       "SELECT count(*) FROM pg_prepared_statements"
                       " WHERE NOT from_sql AND starts_with(name, $1)",
                       1, NULL, values, NULL, NULL, 0);
    cr_assert_eq(PQresultStatus(res), PGRES_TUPLES_OK, "%s", PQresultErrorMessage(res));
    n = strtol(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    idem_pool_release(conn);
    return n;
}

/* BEGIN and COMMIT are prepared once per connection like idem's other statements (a text
 * is parsed again on every call); behind a transaction pooler nothing stays prepared. */
Test(round_trips, transaction_control_is_prepared_once_per_connection)
{
    long want = pgtest_through_pgbouncer() ? 0 : 1;

    for (int i = 0; i < 3; i++) {
        char op[32];

        snprintf(op, sizeof(op), "rt-tx-%d", i);
        cr_assert_eq(call(i == 1 ? DECLARED : CALLBACK, op, 1), IDEM_STATUS_CREATED);
    }
    cr_expect_eq(prepared_as("idem_tx_begin_serializable_"), want);
    cr_expect_eq(prepared_as("idem_tx_commit_"), want);
    cr_expect_eq(prepared_as("idem_tx_begin_read_committed_"), 0, "no external effect ran");
}
