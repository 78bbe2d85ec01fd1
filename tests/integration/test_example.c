/* The example tool's own schema: example_support_tasks_setup(), run by every program that
 * uses the example, outside idem's migrations. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pgtest.h"
#include "support_tasks.h"

/* The lock the setup takes, "idemexam" in ASCII. */
#define SETUP_LOCK "7594306392181727597"
/* How many sessions wait for an advisory lock of the current database. */
#define WAITING_SQL                                                                                \
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"                    \
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"

Test(example, setup_again_keeps_the_table_and_its_rows)
{
    char *ci = pgtest_new_migrated_database("ex_again");
    PGconn *conn = pgtest_connect(ci);
    idem_error err = IDEM_ERROR_INIT;
    PGresult *res;

    cr_assert_eq(example_support_tasks_setup(conn, &err), 0, "%s", err.message);
    PQclear(pgtest_exec(conn, "INSERT INTO idem_example.support_tasks"
                              " (tenant, subject, operation_id) VALUES ('acme', 's', 'op')"));
    cr_assert_eq(example_support_tasks_setup(conn, &err), 0, "%s", err.message);
    cr_assert_eq(pgtest_scalar(conn, "SELECT count(*) FROM idem_example.support_tasks"), 1);
    res = pgtest_exec(conn, "SHOW client_min_messages");
    cr_assert_str_eq(PQgetvalue(res, 0, 0), "notice", "the session's setting is back");
    PQclear(res);
    cr_assert_eq(pgtest_scalar(conn, "SELECT count(*) FROM pg_tables WHERE schemaname = 'idem'"
                                     " AND tablename = 'support_tasks'"),
                 0);
    PQfinish(conn);
    free(ci);
}

static void child_setup(const char *conninfo)
{
    PGconn *conn = PQconnectdb(conninfo);
    int rc = example_support_tasks_setup(conn, NULL);

    PQfinish(conn);
    _exit(rc == 0 ? 0 : 1);
}

Test(example, two_first_setups_at_once_take_turns_and_both_succeed)
{
    char *ci = pgtest_new_database("ex_race");
    PGconn *holder = pgtest_connect(ci);
    pid_t pids[2];
    int status;
    long waiting;

    /* Both children must find the lock taken, so that they really start together. */
    PQclear(pgtest_exec(holder, "SELECT pg_advisory_lock(" SETUP_LOCK ")"));
    for (int i = 0; i < 2; i++) {
        pids[i] = fork();
        cr_assert_geq(pids[i], 0);
        if (pids[i] == 0)
            child_setup(ci);
    }
    /* Up to 30 s on a loaded machine. Only this database's locks: other tests' processes wait
     * on advisory locks of their own (on Citus, to make their databases one at a time). */
    for (int i = 0; i < 3000 && pgtest_scalar(holder, WAITING_SQL) < 2; i++)
        pgtest_sleep_ms(10);
    waiting = pgtest_scalar(holder, WAITING_SQL);
    /* Let the children go before asserting, so that a failure does not leave them waiting. */
    PQclear(pgtest_exec(holder, "SELECT pg_advisory_unlock(" SETUP_LOCK ")"));
    cr_assert_eq(waiting, 2, "both setups wait for the lock");
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(waitpid(pids[i], &status, 0), pids[i]);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: status %d", i, status);
    }
    cr_assert_eq(pgtest_scalar(holder, "SELECT count(*) FROM idem_example.support_tasks"), 0);
    PQfinish(holder);
    free(ci);
}
