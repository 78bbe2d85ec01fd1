/* Prepared statements: prepared once per connection, again on a new one, and a
 * connection that lost them is replaced. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "pooltest.h"
#include "exec.h"

TestSuite(pool_prepared, .init = pooltest_init, .fini = pooltest_fini);

static const idem__stmt stmt_add = {"idem_pooltest_add", "SELECT $1::int + 1", 1};

static int exec_add(idem_conn *conn, long *sum, idem_error *err)
{
    const char *values[1] = {"41"};
    PGresult *res = NULL;
    int rc = idem__conn_exec_prepared(&res, conn, &stmt_add, values, NULL, NULL, 0, err);

    if (rc == 0) {
        *sum = strtol(PQgetvalue(res, 0, 0), NULL, 10);
        PQclear(res);
    }
    return rc;
}

static long prepared_here(idem_conn *conn)
{
    return pooltest_query_long(conn,
                               "SELECT count(*) FROM pg_prepared_statements "
                               "WHERE name LIKE 'idem\\_pooltest\\_add\\_%' AND NOT from_sql");
}

Test(pool_prepared, statement_is_prepared_once_per_connection)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    long sum = 0;

    o.max_size = 1;
    idem_pool *pool = pooltest_open(&o);
    for (int i = 0; i < 3; i++) {
        idem_conn *conn = pooltest_acquire(pool);
        cr_assert_eq(exec_add(conn, &sum, &err), 0, "%s", err.message);
        cr_assert_eq(sum, 42);
        cr_assert_eq(prepared_here(conn), 1);
        idem_pool_release(conn);
    }
    /* Inside a transaction, a second PREPARE of the same name would abort it. */
    idem_conn *conn = pooltest_acquire(pool);
    free(pooltest_query(conn, "BEGIN"));
    cr_assert_eq(exec_add(conn, &sum, &err), 0, "%s", err.message);
    cr_assert_eq(PQtransactionStatus(idem_conn_pg(conn)), PQTRANS_INTRANS);
    free(pooltest_query(conn, "COMMIT"));
    idem_pool_release(conn);
}

Test(pool_prepared, statement_is_prepared_on_each_connection)
{
    idem_error err = IDEM_ERROR_INIT;
    long sum = 0;
    idem_pool *pool = pooltest_open(NULL);
    idem_conn *a = pooltest_acquire(pool);
    idem_conn *b = pooltest_acquire(pool);

    cr_assert_eq(exec_add(a, &sum, &err), 0, "%s", err.message);
    cr_assert_eq(prepared_here(b), 0);
    cr_assert_eq(exec_add(b, &sum, &err), 0, "%s", err.message);
    cr_assert_eq(prepared_here(a), 1);
    cr_assert_eq(prepared_here(b), 1);
    idem_pool_release(a);
    idem_pool_release(b);
}

Test(pool_prepared, statement_is_prepared_again_on_a_new_connection_after_a_kill)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    long sum = 0;

    o.max_size = 1;
    idem_pool *pool = pooltest_open(&o);
    idem_conn *conn = pooltest_acquire(pool);
    cr_assert_eq(exec_add(conn, &sum, &err), 0, "%s", err.message);
    pooltest_kill_backend(pooltest_backend_pid(conn));
    cr_assert_eq(exec_add(conn, &sum, &err), IDEM_EUNAVAIL);
    idem_pool_release(conn);

    conn = pooltest_acquire(pool);
    sum = 0;
    cr_assert_eq(exec_add(conn, &sum, &err), 0, "%s", err.message);
    cr_assert_eq(sum, 42);
    cr_assert_eq(prepared_here(conn), 1);
    idem_pool_release(conn);
    cr_assert_eq(pooltest_stats(pool).opened, 2);
}

Test(pool_prepared, forgetting_prepared_statements_makes_the_next_use_prepare_again)
{
    idem_error err = IDEM_ERROR_INIT;
    long sum = 0;
    idem_pool *pool = pooltest_open(NULL);
    idem_conn *conn = pooltest_acquire(pool);

    cr_assert_eq(exec_add(conn, &sum, &err), 0, "%s", err.message);
    free(pooltest_query(conn, "DEALLOCATE ALL"));
    cr_assert_eq(exec_add(conn, &sum, &err), IDEM_EINVAL, "the statement was prepared again");
    cr_assert_str_eq(err.sqlstate, "26000");
    idem__conn_forget_prepared(conn);
    cr_assert_eq(exec_add(conn, &sum, &err), 0, "%s", err.message);
    cr_assert_eq(sum, 42);
    idem_pool_release(conn);
}

Test(pool_prepared, prepare_error_reports_the_statement_and_sqlstate)
{
    static const idem__stmt bad = {"idem_pooltest_bad", "SELECT * FROM no_such_table", 0};
    idem_error err = IDEM_ERROR_INIT;
    PGresult *res = NULL;
    idem_pool *pool = pooltest_open(NULL);
    idem_conn *conn = pooltest_acquire(pool);

    cr_assert_eq(idem__conn_exec_prepared(&res, conn, &bad, NULL, NULL, NULL, 0, &err), IDEM_EDB);
    cr_assert_null(res);
    cr_assert_str_eq(err.sqlstate, "42P01");
    cr_assert(strstr(err.message, "idem_pooltest_bad") != NULL, "%s", err.message);
    idem_pool_release(conn);
    cr_assert_eq(pooltest_stats(pool).closed_broken, 0);
}

Test(pool_prepared, connection_whose_statements_were_deallocated_is_replaced)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    long sum = 0;

    o.max_size = 1;
    idem_pool *pool = pooltest_open(&o);
    idem_conn *conn = pooltest_acquire(pool);
    long pid = pooltest_backend_pid(conn);

    cr_assert_eq(exec_add(conn, &sum, &err), 0, "%s", err.message);
    free(pooltest_query(conn, "DEALLOCATE ALL"));
    cr_assert_eq(exec_add(conn, &sum, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.sqlstate, "26000");
    cr_assert_str_eq(err.field, "pooler");
    cr_assert(strstr(err.message, "IDEM_POOLER_TRANSACTION") != NULL, "%s", err.message);
    idem_pool_release(conn);
    conn = pooltest_acquire(pool);
    cr_assert_neq(pooltest_backend_pid(conn), pid,
                  "the connection that lost its statements is gone");
    cr_assert_eq(exec_add(conn, &sum, &err), 0, "%s", err.message);
    cr_assert_eq(sum, 42);
    idem_pool_release(conn);
}

static const idem__stmt stmt_bad = {"idem_pooltest_bad", "SELECT $1::int + FROM", 1};

/* The one connection of a pool of one, checked out. */
static idem_conn *lone_connection(void)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.max_size = 1;
    return pooltest_acquire(pooltest_open(&o));
}

/* In a pipeline a statement not yet prepared is prepared in front of its first use, and a
 * second use of it in the same pipeline goes by the same name; the connection remembers
 * it, so the next pipeline prepares nothing. */
Test(pool_prepared, a_statement_used_twice_in_its_first_pipeline_is_prepared_once)
{
    idem_error err = IDEM_ERROR_INIT;
    const char *values[1] = {"41"};
    size_t failed_at = 0;
    idem_conn *conn = lone_connection();
    for (int round = 0; round < 2; round++) {
        idem__pipe_cmd cmds[3] = {
            {&stmt_add, NULL, 0, values, NULL, NULL, 0, NULL},
            {NULL, "SELECT 7", 0, NULL, NULL, NULL, 0, NULL},
            {&stmt_add, NULL, 0, values, NULL, NULL, 0, NULL},
        };

        cr_assert_eq(idem__conn_pipeline(conn, cmds, 3, &failed_at, &err), 0, "round %d: %s", round,
                     err.message);
        cr_assert_str_eq(PQgetvalue(cmds[0].result, 0, 0), "42");
        cr_assert_str_eq(PQgetvalue(cmds[2].result, 0, 0), "42");
        for (int i = 0; i < 3; i++)
            PQclear(cmds[i].result);
        cr_assert_eq(prepared_here(conn), 1);
    }
    idem_pool_release(conn);
}

/* A statement that cannot be prepared fails at its place in the pipeline: what came
 * before it ran, the rest did not, and it is not remembered (the next use tries again). */
Test(pool_prepared, a_statement_that_cannot_be_prepared_fails_at_its_place_in_the_pipeline)
{
    idem_error err = IDEM_ERROR_INIT;
    const char *values[1] = {"41"};
    size_t failed_at = 0;
    idem_conn *conn = lone_connection();
    for (int round = 0; round < 2; round++) {
        idem__pipe_cmd cmds[3] = {
            {&stmt_add, NULL, 0, values, NULL, NULL, 0, NULL},
            {&stmt_bad, NULL, 0, values, NULL, NULL, 0, NULL},
            {NULL, "SELECT 7", 0, NULL, NULL, NULL, 0, NULL},
        };

        cr_assert_neq(idem__conn_pipeline(conn, cmds, 3, &failed_at, &err), 0);
        cr_assert_eq(failed_at, 1, "round %d: failed at %zu", round, failed_at);
        cr_assert_str_eq(err.sqlstate, "42601", "%s", err.message);
        cr_assert(strstr(err.message, "idem_pooltest_bad") != NULL, "%s", err.message);
        cr_assert_not_null(cmds[0].result);
        cr_assert_null(cmds[2].result);
        for (int i = 0; i < 3; i++)
            PQclear(cmds[i].result);
        cr_assert_eq(prepared_here(conn), 1);
        idem_error_clear(&err);
    }
    cr_assert_eq(PQtransactionStatus(idem_conn_pg(conn)), PQTRANS_IDLE);
    idem_pool_release(conn);
}

/* idem__conn_while_waiting(): the work runs once the statement is on the server, while it
 * runs. The statement waits for an advisory lock the test holds on another connection; the
 * work finds it waiting there (pg_stat_activity) and only then lets it go, so a work run
 * before the statement was sent would never see it. */
typedef struct waiting_work {
    idem_conn *other; /* holds the lock */
    long pid;         /* the waiting statement's server process */
    int runs;
    int saw_it_waiting;
} waiting_work;

static void work_while_waiting(void *arg)
{
    waiting_work *w = arg;
    char sql[256];

    w->runs++;
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM pg_stat_activity WHERE pid = %ld AND wait_event_type = 'Lock'"
             " AND wait_event = 'advisory'",
             w->pid);
    for (int i = 0; i < 3000 && !w->saw_it_waiting; i++) { /* 30 s at most */
        w->saw_it_waiting = pooltest_query_long(w->other, sql) == 1;
        if (!w->saw_it_waiting)
            pgtest_sleep_ms(10);
    }
    free(pooltest_query(w->other, "SELECT pg_advisory_unlock(4242)"));
}

static const idem__stmt stmt_lock = {"idem_pooltest_lock", "SELECT pg_advisory_lock($1::int8)", 1};

static int exec_lock(idem_conn *conn, idem_error *err)
{
    const char *values[1] = {"4242"};
    PGresult *res = NULL;
    int rc = idem__conn_exec_prepared(&res, conn, &stmt_lock, values, NULL, NULL, 0, err);

    PQclear(res);
    free(pooltest_query(conn, "SELECT pg_advisory_unlock_all()"));
    return rc;
}

Test(pool_prepared, work_while_waiting_runs_once_while_the_statement_runs)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_pool *pool = pooltest_open(NULL);
    idem_conn *conn = pooltest_acquire(pool);
    waiting_work w = {pooltest_acquire(pool), pooltest_backend_pid(conn), 0, 0};

    /* Once as a statement of its own (prepared in the same round trip), once prepared. */
    for (int round = 0; round < 2; round++) {
        free(pooltest_query(w.other, "SELECT pg_advisory_lock(4242)"));
        w.saw_it_waiting = 0;
        idem__conn_while_waiting(conn, work_while_waiting, &w);
        cr_assert_eq(exec_lock(conn, &err), 0, "%s", err.message);
        cr_assert_eq(w.runs, round + 1, "round %d: the work ran %d times", round, w.runs);
        cr_assert(w.saw_it_waiting,
                  "round %d: the work ran before the statement reached the server", round);
    }
    /* Run once, it is gone: the next statement runs nothing. */
    cr_assert_eq(exec_lock(conn, &err), 0, "%s", err.message);
    cr_assert_eq(w.runs, 2);
    /* Taken back before a statement, it never runs. */
    idem__conn_while_waiting(conn, work_while_waiting, &w);
    idem__conn_while_waiting(conn, NULL, NULL);
    cr_assert_eq(exec_lock(conn, &err), 0, "%s", err.message);
    cr_assert_eq(w.runs, 2);
    idem_pool_release(w.other);
    idem_pool_release(conn);
}

/* In a pipeline it runs once, after the Sync went out, however many results come back; and
 * a connection released with work still set does not run it for its next user. */
Test(pool_prepared, work_while_waiting_runs_once_in_a_pipeline_and_not_after_release)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    const char *values[1] = {"4242"};
    size_t failed_at = 0;
    idem_pool *pool;
    idem_conn *conn;
    waiting_work w = {0};

    o.max_size = 2;
    pool = pooltest_open(&o);
    conn = pooltest_acquire(pool);
    w.other = pooltest_acquire(pool);
    w.pid = pooltest_backend_pid(conn);
    free(pooltest_query(w.other, "SELECT pg_advisory_lock(4242)"));
    idem__pipe_cmd cmds[3] = {
        {&stmt_add, NULL, 0, values, NULL, NULL, 0, NULL},
        {&stmt_lock, NULL, 0, values, NULL, NULL, 0, NULL},
        {NULL, "SELECT 7", 0, NULL, NULL, NULL, 0, NULL},
    };
    idem__conn_while_waiting(conn, work_while_waiting, &w);
    cr_assert_eq(idem__conn_pipeline(conn, cmds, 3, &failed_at, &err), 0, "%s", err.message);
    for (int i = 0; i < 3; i++)
        PQclear(cmds[i].result);
    cr_assert_eq(w.runs, 1);
    cr_assert(w.saw_it_waiting, "the work ran before the pipeline reached the server");
    free(pooltest_query(conn, "SELECT pg_advisory_unlock_all()"));

    idem__conn_while_waiting(conn, work_while_waiting, &w);
    idem_pool_release(conn);
    conn = pooltest_acquire(pool); /* the same connection: the other is checked out */
    cr_assert_eq(pooltest_query_long(conn, "SELECT 1"), 1);
    cr_assert_eq(exec_lock(conn, &err), 0, "%s", err.message);
    cr_assert_eq(w.runs, 1, "work left on a released connection ran for its next user");
    idem_pool_release(w.other);
    idem_pool_release(conn);
}
