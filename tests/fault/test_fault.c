/* The fault suite (fault.h): a multi-threaded workload of idempotent calls while backends
 * are terminated, the server restarts (fast and immediate), a backend stalls, locks are
 * held past the timeouts and COMMIT replies are lost; then the invariants.
 *
 * It restarts the shared throwaway server, so it runs alone (tests/meson.build). The
 * quick size runs in `tools/run test`; IDEM_FAULT_SECONDS makes a long one (`tools/run
 * soak`), which also fails if RSS or connections grow. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "fault.h"
#include "pgtest.h"

/* Ops per epoch at most: far more than a 30 s epoch makes. */
#define EPOCH_CAP 200000

static fault_run *run;

/* Whatever happened, leave the server running and no backend stopped. */
static void restore(void)
{
    if (run != NULL)
        fault_injector_restore(run);
    fault_run_free(run);
    run = NULL;
}

TestSuite(fault, .fini = restore);

static void require_pg_ctl(void)
{
    if (getenv("IDEM_PG_CTL") != NULL)
        return;
    if (getenv("IDEM_REQUIRE_PG") != NULL)
        cr_assert_fail("IDEM_PG_CTL is not set; run under tools/with-postgres");
    cr_skip_test("IDEM_PG_CTL is not set; run under tools/with-postgres");
}

/* Epochs beyond the configured time that may run for kinds not yet injected. */
#define EXTRA_EPOCHS 4

/* How many kinds of fault were not injected yet. */
static int kinds_missing(fault_run *r)
{
    int n = 0;

    for (int k = 0; k < FAULT_KIND_COUNT; k++)
        n += atomic_load(&r->counts.faults[k]) == 0;
    return n;
}

/* Workload and faults, then: nothing pending once the calls are over; every key settled;
 * the database against every answer. */
static void one_epoch(unsigned int number, unsigned int seconds)
{
    fault_injector *inj;

    run->epoch = fault_epoch_new(number, EPOCH_CAP);
    cr_assert_not_null(run->epoch);
    inj = fault_injector_start(run, seconds);
    fault_workload_run(run, seconds);
    fault_injector_stop(inj);
    fault_injector_restore(run);
    fault_check_db(run, "when the calls ended");
    fault_settle(run);
    fault_check_db(run, "settled");
    fault_check_ops(run, run->epoch);
    fault_epoch_free(run->epoch);
    run->epoch = NULL;
}

/* Once the pools are closed, none of their backends stays. */
static long workload_backends_left(void)
{
    PGconn *pg = pgtest_connect("dbname=postgres");
    long n = 0;

    for (int i = 0; i < 50; i++) {
        n = pgtest_scalar(pg, "SELECT count(*) FROM pg_stat_activity"
                              " WHERE application_name LIKE '" FAULT_APP_WORK "%'");
        if (n == 0)
            break;
        fault_sleep_ms(100);
    }
    PQfinish(pg);
    return n;
}

Test(fault, invariants_hold_under_faults)
{
    fault_config cfg;
    fault_sampler *sampler;
    char why[512], *conninfo;

    require_pg_ctl();
    fault_config_from_env(&cfg);
    conninfo = pgtest_new_migrated_database("fault");
    cr_assert_eq(fault_schema_create(conninfo, why, sizeof(why)), 0, "%s", why);
    cr_assert_eq(fault_run_new(&run, &cfg, conninfo, why, sizeof(why)), 0, "%s", why);
    sampler = fault_sampler_start(run);
    unsigned int e = 0;

    for (unsigned int done = 0; done < cfg.seconds; e++) {
        unsigned int left = cfg.seconds - done;
        unsigned int seconds = left < cfg.epoch_seconds ? left : cfg.epoch_seconds;

        one_epoch(e, seconds);
        done += seconds;
    }
    /* On a busy machine slow restarts can fill the time before every kind came round:
     * more epochs (each a first round of every kind, and checked like the others) until
     * each was injected, a bounded number of them. */
    for (unsigned int extra = 0; extra < EXTRA_EPOCHS && kinds_missing(run) > 0; extra++, e++)
        one_epoch(e, cfg.epoch_seconds);
    fault_sampler_stop(sampler, run);
    fault_run_close_servers(run);
    if (workload_backends_left() != 0)
        fault_violation(run, "the workload's backends outlived its pools");
    fault_print_summary(run, stderr);
    fault_print_violations(run, stderr);
    free(conninfo);
    cr_assert_eq(run->violations, 0, "%llu invariant violations (listed on stderr)",
                 run->violations);
    for (int k = 0; k < FAULT_KIND_COUNT; k++)
        cr_expect_gt(atomic_load(&run->counts.faults[k]), 0, "no %s fault was injected",
                     fault_kind_name((enum fault_kind)k));
}
