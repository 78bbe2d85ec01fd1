/* A pool after fork(): the child may not use it, and the parent keeps it. */
#include <criterion/criterion.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pooltest.h"

TestSuite(pool_fork, .init = pooltest_init, .fini = pooltest_fini);

Test(pool_fork, acquire_in_a_forked_child_fails_with_einval)
{
    idem_pool *pool = pooltest_open(NULL);
    int status = 0;
    pid_t child = fork();

    cr_assert_neq(child, -1);
    if (child == 0) {
        idem_conn *conn = NULL;
        idem_error err = IDEM_ERROR_INIT;
        int rc = idem_pool_acquire(&conn, pool, &err);

        idem_pool_free(pool); /* must leave the parent's sessions alone */
        _exit(rc == IDEM_EINVAL && conn == NULL && strcmp(err.field, "pool") == 0 ? 0 : 1);
    }
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    idem_conn *conn = pooltest_acquire(pool);
    cr_assert_eq(pooltest_query_long(conn, "SELECT 5"), 5);
    idem_pool_release(conn);
    cr_assert_eq(pooltest_stats(pool).opened, 1,
                 "the parent's connection did not survive the child");
}

Test(pool_fork, stats_in_a_forked_child_are_zero_and_never_block)
{
    idem_pool *pool = pooltest_open(NULL);
    pid_t child = fork();

    cr_assert_neq(child, -1);
    if (child == 0) {
        idem_pool_stats st = IDEM_POOL_STATS_INIT;
        memset(&st, 0xff, sizeof(st));
        st.version = IDEM_POOL_STATS_VERSION;
        idem_pool_stats_get(&st, pool);
        _exit(st.size == 0 && st.opened == 0 && st.acquires == 0 ? 0 : 1);
    }
    int status = 0;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child saw the parent's counters");
    cr_assert_eq(pooltest_stats(pool).opened, 1, "the parent's counters are intact");
}
