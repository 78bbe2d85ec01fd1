/*
 * The entry point of every integration test executable: Criterion's own, preceded by a
 * check that the throwaway PostgreSQL answers (and, for a run through PgBouncer, that
 * one was started). Without a server the executable exits 77, which meson reports as
 * SKIP, instead of running tests that could only fail; with IDEM_REQUIRE_PG set (tools/run
 * test sets it) a missing server is a failure.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "pgtest.h"

#define EXIT_SKIP 77

/* EXIT_SKIP, or 1 when a server is required; 0 when one answers. */
static int check_server(void)
{
    const char *problem = pgtest_server_problem();

    if (problem == NULL && pgtest_through_pgbouncer() && pgtest_pgbouncer() == NULL)
        problem = "no PgBouncer (IDEM_PGBOUNCER unset; run under tools/with-postgres --pgbouncer)";
    if (problem == NULL)
        return 0;
    if (getenv("IDEM_REQUIRE_PG") != NULL) {
        fprintf(stderr, "PostgreSQL required but unreachable: %s\n", problem);
        return 1;
    }
    fprintf(stderr, "SKIPPED: no PostgreSQL server (%s); run under tools/with-postgres\n", problem);
    return EXIT_SKIP;
}

int main(int argc, char *argv[])
{
    struct criterion_test_set *tests = criterion_initialize();
    int rc = 0;

    /* Arguments first: --help needs no server. */
    if (criterion_handle_args(argc, argv, true)) {
        rc = check_server();
        if (rc == 0)
            rc = !criterion_run_all_tests(tests);
    }
    criterion_finalize(tests);
    return rc;
}
