/* The retention sweeper (idem_sweep_run) against a real PostgreSQL. Time passes by
 * backdating expires_at and forget_at, never by sleeping. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/idem.h"
#include "idem/sys/sweep.h"
#include "pgtest.h"
#include "records.h"

static char *conninfo;
static PGconn *conn;  /* the sweeper's */
static PGconn *check; /* a second session, for looking and for holding locks */

static void open_db(void)
{
    conninfo = pgtest_new_migrated_database("sweep");
    conn = pgtest_connect(conninfo);
    check = pgtest_connect(conninfo);
}

static void close_db(void)
{
    PQfinish(conn);
    PQfinish(check);
    free(conninfo);
}

TestSuite(sweep, .init = open_db, .fini = close_db, .timeout = 120);

static idem_sweep_options options(unsigned int batch)
{
    idem_sweep_options opts = IDEM_SWEEP_OPTIONS_INIT;
    opts.batch_size = batch;
    return opts;
}

static int sweep(idem_sweep_result *out, const idem_sweep_options *opts)
{
    idem_error err = IDEM_ERROR_INIT;
    int rc = idem_sweep_run(out, conn, opts, &err);

    cr_assert(rc == 0 || rc == IDEM_ELOCKED || rc == IDEM_ETIMEDOUT, "sweep: %s: %s",
              idem_err_name(rc), err.message);
    return rc;
}

static long scalar(const char *sql)
{
    return pgtest_scalar(check, sql);
}

Test(sweep, records_expire_only_after_their_own_deadline)
{
    idem_sweep_result r = IDEM_SWEEP_RESULT_INIT;
    idem_sweep_options opts = options(100);

    records_insert(check, "acme", "due-", 0, 5, "completed", "-1 second", "+30 days");
    records_insert(check, "acme", "failed-", 0, 2, "failed", "-1 hour", "+30 days");
    records_insert(check, "acme", "kept-", 0, 4, "completed", "+1 minute", "+30 days");
    cr_assert_eq(sweep(&r, &opts), 0);
    cr_assert_eq(r.expired, 7);
    cr_assert_eq(r.purged, 0);
    cr_assert_eq(r.complete, 1);
    cr_assert_eq(scalar("SELECT count(*) FROM idem.operations WHERE state = 'expired'"
                        " AND (operation_id LIKE 'due-%' OR operation_id LIKE 'failed-%')"),
                 7);
    cr_assert_eq(scalar("SELECT count(*) FROM idem.operations WHERE operation_id LIKE 'kept-%'"
                        " AND state = 'completed' AND response IS NOT NULL"),
                 4);
    /* A tombstone keeps the key, tool, fingerprint and times; drops receipt and trace ID;
     * its expires_at is now its forget_at. */
    cr_assert_eq(
        scalar("SELECT count(*) FROM idem.operations WHERE state = 'expired'"
               " AND response IS NULL AND trace_id IS NULL AND expired_at IS NOT NULL"
               " AND expires_at = forget_at AND tool = 't'"
               " AND fingerprint = sha256(operation_id::bytea) AND completed_at IS NOT NULL"),
        7);
    /* Nothing else is due: a second run changes nothing. */
    cr_assert_eq(sweep(&r, &opts), 0);
    cr_assert_eq(r.expired, 0);
}

Test(sweep, pending_record_is_never_swept)
{
    idem_sweep_result r = IDEM_SWEEP_RESULT_INIT;
    idem_sweep_options opts = options(10);

    records_insert(check, "acme", "pending-", 0, 3, "pending", "-10 days", "-5 days");
    cr_assert_eq(sweep(&r, &opts), 0);
    cr_assert_eq(r.expired + r.purged, 0);
    cr_assert_eq(records_count(check, "pending"), 3);
}

Test(sweep, tombstones_are_purged_twice_the_skew_after_their_key_memory)
{
    idem_sweep_result r = IDEM_SWEEP_RESULT_INIT;
    idem_sweep_options opts = options(10);

    opts.clock_skew_s = 300;
    records_insert(check, "acme", "recent-", 0, 3, "expired", "-9 minutes", "-9 minutes");
    records_insert(check, "acme", "old-", 0, 4, "expired", "-11 minutes", "-11 minutes");
    cr_assert_eq(sweep(&r, &opts), 0);
    cr_assert_eq(r.purged, 4);
    cr_assert_eq(scalar("SELECT count(*) FROM idem.operations WHERE operation_id LIKE 'old-%'"), 0);
    cr_assert_eq(scalar("SELECT count(*) FROM idem.operations WHERE operation_id LIKE 'recent-%'"),
                 3);
    /* A tombstone is a record until purged: sweeping more does not touch it early. */
    cr_assert_eq(sweep(&r, &opts), 0);
    cr_assert_eq(r.purged, 0);
}

Test(sweep, record_from_before_forget_at_keeps_its_tombstone_for_the_default_key_memory)
{
    idem_sweep_result r = IDEM_SWEEP_RESULT_INIT;
    idem_sweep_options opts = options(10);

    opts.key_memory_s = 86400;
    records_insert(check, "acme", "legacy-", 0, 2, "completed", "-1 hour", NULL);
    cr_assert_eq(sweep(&r, &opts), 0);
    cr_assert_eq(r.expired, 2);
    /* expires_at moved from (now - 1 hour) to (now - 1 hour + 1 day). */
    cr_assert_eq(scalar("SELECT count(*) FROM idem.operations WHERE state = 'expired'"
                        " AND expires_at BETWEEN now() + interval '22 hours 58 minutes'"
                        " AND now() + interval '23 hours 1 minute'"),
                 2);
}

Test(sweep, backlog_of_several_batches_completes_across_batches_and_runs)
{
    idem_sweep_result r = IDEM_SWEEP_RESULT_INIT;
    idem_sweep_options opts = options(10);

    records_insert(check, "acme", "b-", 0, 35, "completed", "-1 hour", "-30 minutes");
    opts.max_batches = 2;
    cr_assert_eq(sweep(&r, &opts), 0);
    cr_assert_eq(r.expired, 20);
    cr_assert_eq(r.batches, 2);
    cr_assert_eq(r.complete, 0);
    cr_assert_eq(records_count(check, "completed"), 15);
    cr_assert_eq(sweep(&r, &opts), 0);
    cr_assert_eq(r.expired, 15);
    cr_assert_eq(r.complete, 0, "the batch limit came before the purge pass");
    opts.max_batches = 0;
    cr_assert_eq(sweep(&r, &opts), 0);
    cr_assert_eq(r.expired, 0);
    /* forget_at had passed by more than twice the skew: the same run purges them all. */
    cr_assert_eq(r.purged, 35);
    /* Plain: one empty expiry batch, four purge batches. On Citus the passes go tenant by
     * tenant, and a pass with no tenant due runs no batch. */
    cr_assert_eq(r.batches, pgtest_citus_workers() != NULL ? 4 : 5);
    cr_assert_eq(r.complete, 1);
    cr_assert_eq(records_count(check, ""), 0);
}

Test(sweep, max_runtime_stops_before_the_next_batch)
{
    idem_sweep_result r = IDEM_SWEEP_RESULT_INIT;
    idem_sweep_options opts = options(1);

    records_insert(check, "acme", "t-", 0, 3, "completed", "-1 hour", "+1 day");
    opts.max_runtime_ms = 1;
    cr_assert_eq(sweep(&r, &opts), 0);
    cr_assert_lt(r.expired, 3, "a run of 1 ms with batches of 1 row cannot finish 3");
    cr_assert_eq(r.complete, 0);
}

Test(sweep, dry_run_counts_and_changes_nothing)
{
    idem_sweep_result r = IDEM_SWEEP_RESULT_INIT;
    idem_sweep_options opts = options(2);
    char *before, *after;

    records_insert(check, "acme", "due-", 0, 5, "completed", "-1 hour", "+1 day");
    records_insert(check, "acme", "gone-", 0, 3, "expired", "-1 day", "-1 day");
    records_insert(check, "acme", "kept-", 0, 2, "completed", "+1 hour", "+1 day");
    before = records_digest(check);
    opts.dry_run = 1;
    cr_assert_eq(sweep(&r, &opts), 0);
    after = records_digest(check);
    cr_assert_str_eq(before, after);
    cr_assert_eq(r.expired, 5);
    cr_assert_eq(r.purged, 3);
    cr_assert_eq(r.batches, 0);
    free(before);
    free(after);
}

Test(sweep, second_sweep_is_locked_out_and_changes_nothing)
{
    idem_sweep_result r = IDEM_SWEEP_RESULT_INIT;
    idem_sweep_options opts = options(10);
    idem_error err = IDEM_ERROR_INIT;
    char *before;
    char sql[96];

    records_insert(check, "acme", "due-", 0, 4, "completed", "-1 hour", "+1 day");
    snprintf(sql, sizeof(sql), "SELECT pg_advisory_lock(%lld)", (long long)IDEM_SWEEP_LOCK_KEY);
    PQclear(pgtest_exec(check, sql));
    before = records_digest(check);
    r.expired = 12345;
    cr_assert_eq(idem_sweep_run(&r, conn, &opts, &err), IDEM_ELOCKED);
    cr_assert_eq(r.expired, 12345, "out is untouched");
    cr_assert(strstr(err.message, "another sweep") != NULL, "%s", err.message);
    cr_assert(strstr(err.message, "pid") != NULL, "names the holder: %s", err.message);
    char *after = records_digest(check);
    cr_assert_str_eq(before, after);
    free(before);
    free(after);
    /* Released: the next run works. */
    snprintf(sql, sizeof(sql), "SELECT pg_advisory_unlock(%lld)", (long long)IDEM_SWEEP_LOCK_KEY);
    PQclear(pgtest_exec(check, sql));
    cr_assert_eq(sweep(&r, &opts), 0);
    cr_assert_eq(r.expired, 4);
}

struct racer {
    const char *conninfo;
    int rc;
    idem_sweep_result r;
};

static void *race(void *arg)
{
    struct racer *x = arg;
    PGconn *own = PQconnectdb(x->conninfo);
    idem_sweep_options opts = options(50);

    x->rc = idem_sweep_run(&x->r, own, &opts, NULL);
    PQfinish(own);
    return NULL;
}

Test(sweep, two_sweeps_at_once_work_the_backlog_once)
{
    struct racer a = {conninfo, -99, IDEM_SWEEP_RESULT_INIT},
                 b = {conninfo, -99, IDEM_SWEEP_RESULT_INIT};
    pthread_t ta, tb;

    records_insert(check, "acme", "r-", 0, 2000, "completed", "-1 hour", "+1 day");
    pthread_create(&ta, NULL, race, &a);
    pthread_create(&tb, NULL, race, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    cr_assert(a.rc == 0 || a.rc == IDEM_ELOCKED, "%s", idem_err_name(a.rc));
    cr_assert(b.rc == 0 || b.rc == IDEM_ELOCKED, "%s", idem_err_name(b.rc));
    cr_assert(a.rc == 0 || b.rc == 0);
    cr_assert_eq((a.rc == 0 ? a.r.expired : 0) + (b.rc == 0 ? b.r.expired : 0), 2000);
    cr_assert_eq(records_count(check, "expired"), 2000);
}

Test(sweep, row_locked_by_a_live_transaction_is_skipped_not_waited_for)
{
    idem_sweep_result r = IDEM_SWEEP_RESULT_INIT;
    idem_sweep_options opts = options(10);

    opts.lock_timeout_ms = 2000;
    records_insert(check, "acme", "l-", 0, 3, "completed", "-1 hour", "+1 day");
    PQclear(pgtest_exec(check, "BEGIN"));
    PQclear(pgtest_exec(check, "SELECT 1 FROM idem.operations WHERE tenant = 'acme'"
                               " AND operation_id = 'l-1' FOR UPDATE"));
    cr_assert_eq(sweep(&r, &opts), 0, "never waits for a row a live call holds");
    cr_assert_eq(r.expired, 2);
    PQclear(pgtest_exec(check, "COMMIT"));
    cr_assert_eq(scalar("SELECT count(*) FROM idem.operations WHERE operation_id = 'l-1'"
                        " AND state = 'completed'"),
                 1);
    cr_assert_eq(sweep(&r, &opts), 0);
    cr_assert_eq(r.expired, 1, "the next run takes it");
}

Test(sweep, table_lock_held_longer_than_lock_timeout_ends_the_run_timed_out)
{
    idem_sweep_result r = IDEM_SWEEP_RESULT_INIT;
    idem_sweep_options opts = options(10);
    idem_error err = IDEM_ERROR_INIT;

    opts.lock_timeout_ms = 100;
    records_insert(check, "acme", "x-", 0, 3, "completed", "-1 hour", "+1 day");
    PQclear(pgtest_exec(check, "BEGIN"));
    PQclear(pgtest_exec(check, "LOCK TABLE idem.operations IN ACCESS EXCLUSIVE MODE"));
    cr_assert_eq(idem_sweep_run(&r, conn, &opts, &err), IDEM_ETIMEDOUT, "%s", err.message);
    cr_assert(strstr(err.message, "lock") != NULL, "%s", err.message);
    PQclear(pgtest_exec(check, "ROLLBACK"));
    /* The lock and the connection's setting were released and restored. */
    cr_assert_eq(pgtest_scalar(conn, "SELECT count(*) FROM pg_settings WHERE name = "
                                     "'lock_timeout' AND setting = '0'"),
                 1);
    cr_assert_eq(sweep(&r, &opts), 0);
    cr_assert_eq(r.expired, 3);
}

Test(sweep, summary_counts_late_retries_and_open_items)
{
    idem_sweep_result r = IDEM_SWEEP_RESULT_INIT;
    idem_sweep_options opts = options(10);

    records_insert_item(check, "acme", "a", "expired", 3, "-1 hour");
    records_insert_item(check, "acme", "b", "expired", 2, "-1 hour");
    records_insert_item(check, "acme", "b", "outcome_unknown", 1, "-1 hour");
    PQclear(pgtest_exec(check, "UPDATE idem.reconciliation_items SET resolved_at = now(),"
                               " resolved_by = 'x' WHERE operation_id = 'a'"));
    cr_assert_eq(sweep(&r, &opts), 0);
    cr_assert_eq(r.late_retries, 5);
    cr_assert_eq(r.open_items, 2);
}

Test(sweep, schema_without_migration_0003_is_a_schema_error_and_releases_the_lock)
{
    char *old = pgtest_new_database("sweep_old");
    PGconn *pg = pgtest_connect(old);
    idem_error err = IDEM_ERROR_INIT;
    idem_sweep_result r = IDEM_SWEEP_RESULT_INIT;
    char sql[96];

    cr_assert_eq(idem_migrate_up(pg, 2, NULL, &err), 0, "%s", err.message);
    cr_assert_eq(idem_sweep_run(&r, pg, NULL, &err), IDEM_ESCHEMA);
    cr_assert(strstr(err.message, "idem-migrate up") != NULL, "%s", err.message);
    snprintf(sql, sizeof(sql), "SELECT pg_try_advisory_lock(%lld)::int",
             (long long)IDEM_SWEEP_LOCK_KEY);
    cr_assert_eq(pgtest_scalar(check, sql), 1, "the lock was released");
    PQfinish(pg);
    free(old);
}

struct bad_option {
    const char *field;
    void (*spoil)(idem_sweep_options *opts);
};

static void bad_version(idem_sweep_options *o)
{
    o->version = 99;
}
static void zero_batch(idem_sweep_options *o)
{
    o->batch_size = 0;
}
static void huge_batch(idem_sweep_options *o)
{
    o->batch_size = 1000001;
}
static void zero_key_memory(idem_sweep_options *o)
{
    o->key_memory_s = 0;
}
static void endless_key_memory(idem_sweep_options *o)
{
    o->key_memory_s = IDEM_WINDOW_MAX_S + 1;
}
static void huge_skew(idem_sweep_options *o)
{
    o->clock_skew_s = 86401;
}
static void zero_lock_timeout(idem_sweep_options *o)
{
    o->lock_timeout_ms = 0;
}

Test(sweep, bad_input_names_the_field_and_changes_nothing)
{
    static const struct bad_option cases[] = {
        {"options.version", bad_version},
        {"options.batch_size", zero_batch},
        {"options.batch_size", huge_batch},
        {"options.key_memory_s", zero_key_memory},
        {"options.clock_skew_s", huge_skew},
        {"options.lock_timeout_ms", zero_lock_timeout},
        {"options.key_memory_s", endless_key_memory},
    };
    idem_sweep_result r = IDEM_SWEEP_RESULT_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char *before;

    records_insert(check, "acme", "due-", 0, 2, "completed", "-1 hour", "+1 day");
    before = records_digest(check);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        idem_sweep_options opts = options(10);
        cases[i].spoil(&opts);
        cr_assert_eq(idem_sweep_run(&r, conn, &opts, &err), IDEM_EINVAL, "%s", cases[i].field);
        cr_assert_str_eq(err.field, cases[i].field);
        cr_assert(strstr(err.message, cases[i].field) != NULL, "%s", err.message);
    }
    cr_assert_eq(idem_sweep_run(NULL, conn, NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "out");
    cr_assert_eq(idem_sweep_run(&r, NULL, NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "conn");
    PQclear(pgtest_exec(conn, "BEGIN"));
    cr_assert_eq(idem_sweep_run(&r, conn, NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "conn");
    PQclear(pgtest_exec(conn, "ROLLBACK"));
    r.version = 0;
    r.expired = 12345;
    cr_assert_eq(idem_sweep_run(&r, conn, NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "out.version", "%s", err.message);
    r.version = IDEM_SWEEP_RESULT_VERSION + 1;
    cr_assert_eq(idem_sweep_run(&r, conn, NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "out.version", "%s", err.message);
    cr_assert_eq(r.expired, 12345, "out is untouched");
    char *after = records_digest(check);
    cr_assert_str_eq(before, after);
    free(before);
    free(after);
}

Test(sweep, options_init_gives_the_defaults_and_refuses_unknown_versions)
{
    idem_sweep_options opts, defaults = IDEM_SWEEP_OPTIONS_INIT;

    cr_assert_eq(idem_sweep_options_init(&opts, IDEM_SWEEP_OPTIONS_VERSION), 0);
    cr_assert_eq(memcmp(&opts, &defaults, sizeof(opts)), 0);
    cr_assert_eq(idem_sweep_options_init(&opts, 0), IDEM_EINVAL);
    cr_assert_eq(idem_sweep_options_init(&opts, IDEM_SWEEP_OPTIONS_VERSION + 1), IDEM_EINVAL);
    cr_assert_eq(idem_sweep_options_init(NULL, 1), IDEM_EINVAL);
}

Test(sweep, lock_held_in_another_database_does_not_stop_this_one)
{
    char *other = pgtest_new_migrated_database("sweep_other");
    PGconn *elsewhere = pgtest_connect(other);
    idem_sweep_result r = IDEM_SWEEP_RESULT_INIT;
    idem_sweep_options opts = options(10);
    char sql[96];

    records_insert(check, "acme", "due-", 0, 2, "completed", "-1 hour", "+1 day");
    snprintf(sql, sizeof(sql), "SELECT pg_advisory_lock(%lld)", (long long)IDEM_SWEEP_LOCK_KEY);
    PQclear(pgtest_exec(elsewhere, sql));
    cr_assert_eq(sweep(&r, &opts), 0);
    cr_assert_eq(r.expired, 2);
    PQfinish(elsewhere);
    free(other);
}

Test(sweep, result_init_gives_an_empty_result_and_refuses_unknown_versions)
{
    idem_sweep_result r;

    memset(&r, 0xff, sizeof(r));
    cr_assert_eq(idem_sweep_result_init(&r, IDEM_SWEEP_RESULT_VERSION), 0);
    cr_assert_eq(r.version, IDEM_SWEEP_RESULT_VERSION);
    cr_assert(r.expired == 0 && r.purged == 0 && r.batches == 0 && r.complete == 0);
    cr_assert(r.late_retries == 0 && r.open_items == 0 && r.duration_ms == 0);
    cr_assert_eq(idem_sweep_result_init(&r, 0), IDEM_EINVAL);
    cr_assert_eq(idem_sweep_result_init(&r, IDEM_SWEEP_RESULT_VERSION + 1), IDEM_EINVAL);
    cr_assert_eq(idem_sweep_result_init(NULL, 1), IDEM_EINVAL);
}
