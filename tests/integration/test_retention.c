/* Retention through the store: per-tool windows fixed at the claim, late retries answered
 * expired with no effect and recorded for reconciliation, the UUIDv7 horizon, and the
 * sweeper running beside live calls. Time passes by backdating columns, never by sleeping. */
#include <criterion/criterion.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "idem/idem.h"
#include "idem/sys/sweep.h"
#include "pgtest.h"

#define TOOL_FAST "fast_tool" /* retention 60 s, key memory 1 day */
#define TOOL_SLOW "slow_tool" /* the store's defaults: 7 days, 30 days */
#define ARGS      "{\"n\":1}"

static char *conninfo;
static idem_pool *pool;
static idem_store *store;
static PGconn *check;

static void open_db(void)
{
    idem_pool_options popts = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;

    conninfo = pgtest_new_migrated_database("retention");
    check = pgtest_connect(conninfo);
    /* n: a sequence counts every row an effect began to write, rolled back or not. */
    PQclear(pgtest_exec(check, "CREATE TABLE effects (tenant text, operation_id text, n serial)"));
    popts.max_size = 6;
    popts.acquire_timeout_ms = 30000;
    popts.connect_timeout_ms = 30000;
    cr_assert_eq(idem_pool_new(&pool, conninfo, &popts, &err), 0, "%s", err.message);
}

static void close_db(void)
{
    idem_store_free(store);
    idem_pool_free(pool);
    PQfinish(check);
    free(conninfo);
}

TestSuite(retention, .init = open_db, .fini = close_db, .timeout = 120);

static const idem_tool_retention fast_tool[] = {{TOOL_FAST, 60, 86400}};

/* The store: the defaults, with TOOL_FAST's own windows. */
static void open_store(void)
{
    idem_store_options opts = IDEM_STORE_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;

    opts.tools = fast_tool;
    opts.ntools = 1;
    idem_store_free(store);
    store = NULL;
    cr_assert_eq(idem_store_new(&store, pool, &opts, &err), 0, "%s", err.message);
}

/* The effect: one row in effects, so that "no new effect" can be counted. */
static int effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                  idem_error *err)
{
    const char *values[2] = {idem_tx_tenant(tx), idem_tx_operation_id(tx)};
    PGresult *res = NULL;
    int rc;

    (void)arguments, (void)ctx;
    rc = idem_tx_exec(&res, tx, "INSERT INTO effects VALUES ($1, $2)", 2, values, err);
    if (rc != 0)
        return rc;
    PQclear(res);
    *response = json_pack("{s:s}", "done", idem_tx_operation_id(tx));
    return IDEM_EFFECT_OK;
}

/* Which transport attempt the calls say they are: 0 (unknown: the store looks the key up
 * first) or 1 (a first attempt: the store claims at once, and the claim answers). */
static unsigned int attempt;

static int call(idem_outcome *out, const char *tool, const char *op, const char *args,
                idem_error *err)
{
    idem_request req = IDEM_REQUEST_INIT;

    req.attempt = attempt;
    req.tenant = "acme";
    req.operation_id = op;
    req.tool = tool;
    req.arguments = args;
    req.arguments_len = strlen(args);
    idem_outcome_clear(out);
    return idem_store_execute(out, store, &req, effect, NULL, err);
}

static long effects(void)
{
    return pgtest_scalar(check, "SELECT count(*) FROM effects");
}

/* Make @seconds pass for every record and item: all their times move back, in immutable
 * functions only (Citus refuses timestamptz - interval, which is stable, on a column in an
 * UPDATE of a distributed table). */
static void time_passes(long seconds)
{
    static const char *const cols[] = {"created_at", "completed_at", "expires_at", "forget_at",
                                       "expired_at"};
    char sql[768];
    int at = snprintf(sql, sizeof(sql), "UPDATE idem.operations SET");

    for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
        at += snprintf(sql + at, sizeof(sql) - (size_t)at,
                       "%s %s = to_timestamp(extract(epoch FROM %s - timestamptz 'epoch') - %ld)",
                       i > 0 ? "," : "", cols[i], cols[i], seconds);
    cr_assert_lt((size_t)at, sizeof(sql));
    PQclear(pgtest_exec(check, sql));
}

static idem_sweep_result sweep(void)
{
    idem_sweep_options opts = IDEM_SWEEP_OPTIONS_INIT;
    idem_sweep_result r = IDEM_SWEEP_RESULT_INIT;
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_sweep_run(&r, check, &opts, &err), 0, "%s", err.message);
    return r;
}

/* A UUIDv7 whose embedded time is the database's now() + @offset_s. */
static void uuid_at(char out[IDEM_UUID_STRING_SIZE], long offset_s)
{
    pgtest_uuid_v7_at(out, check, offset_s);
}

static long item_count(const char *op)
{
    const char *values[1] = {op};
    PGresult *res =
        PQexecParams(check,
                     "SELECT coalesce(sum(count), 0) FROM idem.reconciliation_items"
                     " WHERE tenant = 'acme' AND operation_id = $1 AND kind = 'expired'",
                     1, NULL, values, NULL, NULL, 0);
    long n = strtol(PQgetvalue(res, 0, 0), NULL, 10);

    PQclear(res);
    return n;
}

static const char *item_matches(const char *op)
{
    static char text[8];
    const char *values[1] = {op};
    PGresult *res = PQexecParams(check,
                                 "SELECT coalesce(fingerprint_matches::text, 'null')"
                                 " FROM idem.reconciliation_items WHERE operation_id = $1",
                                 1, NULL, values, NULL, NULL, 0);

    cr_assert_eq(PQntuples(res), 1, "one item for %s", op);
    snprintf(text, sizeof(text), "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    return text;
}

Test(retention, claim_fixes_each_record_s_deadlines_from_its_tool_s_windows)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_operation *op = NULL;

    open_store();
    cr_assert_eq(call(&out, TOOL_FAST, "f-1", ARGS, NULL), 0);
    cr_assert_eq(call(&out, TOOL_SLOW, "s-1", ARGS, NULL), 0);
    cr_assert_eq(pgtest_scalar(check, "SELECT count(*) FROM idem.operations WHERE"
                                      " operation_id = 'f-1' AND expires_at - created_at = '60 s'"
                                      " AND forget_at - created_at = '1 day'"),
                 1);
    cr_assert_eq(pgtest_scalar(check, "SELECT count(*) FROM idem.operations WHERE"
                                      " operation_id = 's-1' AND expires_at - created_at = '7 days'"
                                      " AND forget_at - created_at = '30 days'"),
                 1);
    cr_assert_eq(idem_store_get(&op, store, "acme", "f-1", NULL), 0);
    cr_assert_eq(idem_operation_forget_at(op) - idem_operation_created_at(op), 86400000000LL);
    cr_assert_eq(idem_operation_expired_at(op), 0);
    idem_operation_free(op);
    idem_outcome_clear(&out);
}

Test(retention, records_expire_only_after_their_own_deadline_per_tool)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_store_options shorter = IDEM_STORE_OPTIONS_INIT;
    const idem_tool_retention slow_now_fast[] = {{TOOL_SLOW, 10, 20}};
    idem_error err = IDEM_ERROR_INIT;

    open_store();
    cr_assert_eq(call(&out, TOOL_FAST, "f-1", ARGS, NULL), 0);
    cr_assert_eq(call(&out, TOOL_SLOW, "s-1", ARGS, NULL), 0);
    time_passes(59);
    cr_assert_eq(sweep().expired, 0, "59 s: nothing is past its deadline");
    time_passes(2);
    cr_assert_eq(sweep().expired, 1, "61 s: the fast tool's record expires");
    cr_assert_eq(pgtest_scalar(check, "SELECT count(*) FROM idem.operations"
                                      " WHERE operation_id = 'f-1' AND state = 'expired'"),
                 1);
    /* A configuration that shortens the slow tool's window does not shorten the window its
     * existing record was promised. */
    shorter.tools = slow_now_fast;
    shorter.ntools = 1;
    idem_store_free(store);
    store = NULL;
    cr_assert_eq(idem_store_new(&store, pool, &shorter, &err), 0, "%s", err.message);
    time_passes(3600);
    cr_assert_eq(sweep().expired, 0);
    cr_assert_eq(call(&out, TOOL_SLOW, "s-1", ARGS, NULL), 0);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    idem_outcome_clear(&out);
}

Test(retention, retry_after_expiry_is_expired_runs_no_effect_and_is_recorded_once)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_store_stats stats = IDEM_STORE_STATS_INIT;

    open_store();
    cr_assert_eq(call(&out, TOOL_FAST, "op-1", ARGS, NULL), 0);
    time_passes(61);
    cr_assert_eq(sweep().expired, 1);

    cr_assert_eq(call(&out, TOOL_FAST, "op-1", ARGS, &err), IDEM_EEXPIRED);
    cr_assert_eq(out.status, IDEM_STATUS_EXPIRED);
    cr_assert_eq(idem_status_next_step(out.status), IDEM_NEXT_RECONCILE);
    cr_assert_null(out.receipt);
    cr_assert(strstr(err.message, "retention") != NULL, "%s", err.message);
    cr_assert_eq(effects(), 1, "the effect did not run again");
    cr_assert_eq(item_count("op-1"), 1);
    cr_assert_str_eq(item_matches("op-1"), "true");

    cr_assert_eq(call(&out, TOOL_FAST, "op-1", ARGS, NULL), IDEM_EEXPIRED);
    cr_assert_eq(item_count("op-1"), 2, "the same item's count grows");
    cr_assert_eq(call(&out, TOOL_FAST, "op-1", "{\"n\":2}", NULL), IDEM_EEXPIRED,
                 "changed arguments on a tombstone: expired, not conflict");
    cr_assert_eq(item_count("op-1"), 3);
    cr_assert_str_eq(item_matches("op-1"), "false");
    cr_assert_eq(pgtest_scalar(check, "SELECT count(*) FROM idem.reconciliation_items"), 1);
    cr_assert_eq(effects(), 1);
    cr_assert_eq(idem_store_stats_get(&stats, store), 0);
    cr_assert_eq(stats.expired, 3);
    idem_outcome_clear(&out);
}

/* A first attempt claims without a lookup: the claim meets the tombstone, or claims
 * nothing for a key beyond the horizon, and the answer is the same. */
Test(retention, first_attempt_claiming_a_tombstone_or_a_forgotten_key_is_expired_too)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char op[IDEM_UUID_STRING_SIZE];

    open_store();
    cr_assert_eq(call(&out, TOOL_FAST, "op-1", ARGS, NULL), 0);
    time_passes(61);
    cr_assert_eq(sweep().expired, 1);
    attempt = 1;
    cr_assert_eq(call(&out, TOOL_FAST, "op-1", ARGS, &err), IDEM_EEXPIRED, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_EXPIRED);
    cr_assert_eq(call(&out, TOOL_FAST, "op-1", "{\"n\":3}", &err), IDEM_EEXPIRED);
    cr_assert_str_eq(item_matches("op-1"), "false");
    cr_assert_eq(item_count("op-1"), 2);
    uuid_at(op, -(86400 + 400));
    cr_assert_eq(call(&out, TOOL_FAST, op, ARGS, &err), IDEM_EEXPIRED, "%s", err.message);
    cr_assert_str_eq(item_matches(op), "null");
    uuid_at(op, -60);
    cr_assert_eq(call(&out, TOOL_FAST, op, ARGS, &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(effects(), 2, "the first call's effect and the fresh key's, nothing more");
    cr_assert_eq(pgtest_scalar(check, "SELECT count(*) FROM idem.operations WHERE forget_at -"
                                      " created_at = '1 day'"),
                 2, "the first attempt's claim fixes key memory too");
    idem_outcome_clear(&out);
}

/* A declared effect writes its record in its own statement: the same windows, the same
 * horizon, the same tombstones. */
static int call_declared(idem_outcome *out, const char *op, idem_error *err)
{
    static const char *const params[] = {"$tenant", "$operation_id"};
    idem_declared *d = NULL;
    idem_request req = IDEM_REQUEST_INIT;
    int rc;

    cr_assert_eq(idem_declared_new(&d,
                                   "INSERT INTO effects VALUES ($1, $2)"
                                   " RETURNING json_build_object('done', operation_id)",
                                   params, 2, err),
                 0);
    req.attempt = attempt;
    req.tenant = "acme";
    req.operation_id = op;
    req.tool = TOOL_FAST;
    req.arguments = ARGS;
    req.arguments_len = strlen(ARGS);
    idem_outcome_clear(out);
    rc = idem_store_execute_declared(out, store, &req, d, err);
    idem_declared_free(d);
    return rc;
}

Test(retention, declared_effects_keep_the_same_windows_horizon_and_tombstones)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char op[IDEM_UUID_STRING_SIZE];

    open_store();
    for (attempt = 0; attempt <= 1; attempt++) {
        char first[16];

        snprintf(first, sizeof(first), "d-%u", attempt);
        cr_assert_eq(call_declared(&out, first, &err), 0, "%s", err.message);
        cr_assert_eq(out.status, IDEM_STATUS_CREATED);
        uuid_at(op, -(86400 + 400));
        cr_assert_eq(call_declared(&out, op, &err), IDEM_EEXPIRED, "attempt %u: %s", attempt,
                     err.message);
        cr_assert_str_eq(item_matches(op), "null");
    }
    cr_assert_eq(pgtest_scalar(check, "SELECT count(*) FROM idem.operations WHERE"
                                      " expires_at - created_at = '60 s'"
                                      " AND forget_at - created_at = '1 day'"),
                 2);
    time_passes(61);
    cr_assert_eq(sweep().expired, 2);
    for (attempt = 0; attempt <= 1; attempt++) {
        cr_assert_eq(call_declared(&out, "d-0", &err), IDEM_EEXPIRED, "%s", err.message);
        cr_assert_eq(out.status, IDEM_STATUS_EXPIRED);
    }
    cr_assert_eq(item_count("d-0"), 2);
    cr_assert_eq(effects(), 2);
    idem_outcome_clear(&out);
}

Test(retention, get_shows_a_tombstone_without_its_receipt)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_operation *op = NULL;

    open_store();
    cr_assert_eq(call(&out, TOOL_FAST, "op-1", ARGS, NULL), 0);
    time_passes(61);
    sweep();
    cr_assert_eq(idem_store_get(&op, store, "acme", "op-1", NULL), 0);
    cr_assert_eq(idem_operation_state(op), IDEM_STATE_EXPIRED);
    cr_assert_str_eq(idem_state_name(idem_operation_state(op)), "expired");
    cr_assert_null(idem_operation_receipt(op, NULL));
    cr_assert_null(idem_operation_trace_id(op));
    cr_assert_gt(idem_operation_expired_at(op), 0);
    cr_assert_eq(idem_operation_expires_at(op), idem_operation_forget_at(op),
                 "a tombstone's expires_at is its end of key memory");
    cr_assert_str_eq(idem_operation_tool(op), TOOL_FAST);
    idem_operation_free(op);
    idem_outcome_clear(&out);
}

Test(retention, purged_key_with_an_old_uuidv7_is_still_expired)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    char op[IDEM_UUID_STRING_SIZE];

    open_store();
    uuid_at(op, 0);
    cr_assert_eq(call(&out, TOOL_FAST, op, ARGS, NULL), 0);
    /* One day of key memory and twice the skew later, the tombstone is purged; the ID's
     * embedded time has aged with it. Move the ID instead of the clock: the same key
     * claimed a day and 11 minutes ago. */
    time_passes(86400 + 660);
    cr_assert_eq(sweep().purged, 1);
    cr_assert_eq(pgtest_scalar(check, "SELECT count(*) FROM idem.operations"), 0);
    uuid_at(op, -(86400 + 660));
    cr_assert_eq(call(&out, TOOL_FAST, op, ARGS, NULL), IDEM_EEXPIRED);
    cr_assert_eq(out.status, IDEM_STATUS_EXPIRED);
    cr_assert_eq(effects(), 1);
    cr_assert_str_eq(item_matches(op), "null", "nothing left to compare with");
    idem_outcome_clear(&out);
}

Test(retention, uuidv7_horizon_is_the_tool_s_key_memory_plus_the_skew)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    char op[IDEM_UUID_STRING_SIZE];

    open_store();
    uuid_at(op, -(86400 + 400)); /* past one day + 300 s: the fast tool forgot it */
    cr_assert_eq(call(&out, TOOL_FAST, op, ARGS, NULL), IDEM_EEXPIRED);
    cr_assert_eq(item_count(op), 1);
    uuid_at(op, -(86400 + 200)); /* within the skew allowance */
    cr_assert_eq(call(&out, TOOL_FAST, op, ARGS, NULL), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    uuid_at(op, -(29 * 86400)); /* old, but within the slow tool's 30 days */
    cr_assert_eq(call(&out, TOOL_SLOW, op, ARGS, NULL), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    uuid_at(op, -(31 * 86400));
    cr_assert_eq(call(&out, TOOL_SLOW, op, ARGS, NULL), IDEM_EEXPIRED);
    cr_assert_eq(effects(), 2);
    idem_outcome_clear(&out);
}

/* Refused as invalid, naming the operation ID, saying how far ahead it is, from @min_s to
 * @max_s seconds, give or take the second a millisecond rounds up to (the time a call takes
 * is not asserted on). */
static void expect_dated_ahead(int rc, const idem_outcome *out, const idem_error *err,
                               long long min_s, long long max_s)
{
    const char *at = strstr(err->message, " is a UUIDv7 dated ");
    long long s = -1;

    cr_assert_eq(rc, IDEM_EINVAL, "%s", err->message);
    cr_assert_eq(out->status, IDEM_STATUS_INVALID);
    cr_assert_str_eq(err->field, "operation_id");
    cr_assert_not_null(at, "%s", err->message);
    sscanf(at, " is a UUIDv7 dated %lld s in the future on the database's clock", &s);
    cr_assert(s >= min_s && s <= max_s + 1, "%s", err->message);
    cr_assert_not_null(strstr(err->message, "(clock_skew_s, 300 s)"), "%s", err->message);
    cr_assert_null(out->receipt);
}

/* A UUIDv7 dated further ahead than the clock skew allowance would never be caught by the
 * horizon once its tombstone were purged: every path refuses it, writing nothing, and
 * runs no effect. */
Test(retention, a_uuidv7_dated_ahead_of_the_skew_allowance_is_invalid_on_every_path)
{
    static const long centuries = 200L * 365 * 86400;
    idem_store_stats stats = IDEM_STORE_STATS_INIT;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char op[IDEM_UUID_STRING_SIZE];

    open_store();
    for (attempt = 0; attempt <= 1; attempt++) {
        uuid_at(op, 3600);
        expect_dated_ahead(call(&out, TOOL_FAST, op, ARGS, &err), &out, &err, 3000, 3600);
        /* The callback's first statement, sent behind the claim, began no write: the attempt
         * was made read-only (no value of a sequence used up), as for a key taken. A
         * declared statement runs the tool's statement before its record says no, and rolls
         * it back. (On Citus the claim sets nothing itself, read-only neither: there the
         * statement runs and is rolled back, as behind a key taken.) */
        if (attempt == 1 && pgtest_citus_workers() == NULL)
            cr_assert_eq(pgtest_scalar(check, "SELECT count(*) FROM effects_n_seq WHERE is_called"),
                         0);
        expect_dated_ahead(call_declared(&out, op, &err), &out, &err, 3000, 3600);
        uuid_at(op, centuries);
        expect_dated_ahead(call(&out, TOOL_SLOW, op, ARGS, &err), &out, &err, centuries - 600,
                           centuries);
        expect_dated_ahead(call_declared(&out, op, &err), &out, &err, centuries - 600, centuries);
    }
    cr_assert_eq(effects(), 0, "no effect ran, or it was rolled back");
    cr_assert_eq(pgtest_scalar(check, "SELECT count(*) FROM idem.operations"), 0);
    cr_assert_eq(pgtest_scalar(check, "SELECT count(*) FROM idem.reconciliation_items"), 0);
    cr_assert_eq(idem_store_stats_get(&stats, store), 0);
    cr_assert_eq(stats.invalid, 8);
    cr_assert_eq(stats.created + stats.expired, 0);
    cr_assert_eq(stats.claim_races, 0, "a claim that wrote nothing for a key without a record");
    uuid_at(op, 200); /* within the allowance */
    cr_assert_eq(call_declared(&out, op, &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    idem_outcome_clear(&out);
}

/* A key dated ahead that already has a record (claimed under a wider allowance) is
 * answered from its record: the check is for keys that have none. */
Test(retention, a_key_dated_ahead_that_has_a_record_is_answered_from_it)
{
    idem_store_options wide = IDEM_STORE_OPTIONS_INIT;
    idem_store *lenient = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = IDEM_REQUEST_INIT;
    char op[IDEM_UUID_STRING_SIZE];

    wide.clock_skew_s = 86400;
    cr_assert_eq(idem_store_new(&lenient, pool, &wide, &err), 0, "%s", err.message);
    uuid_at(op, 3600);
    req.tenant = "acme";
    req.operation_id = op;
    req.tool = TOOL_FAST;
    req.arguments = ARGS;
    req.arguments_len = strlen(ARGS);
    cr_assert_eq(idem_store_execute(&out, lenient, &req, effect, NULL, &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    open_store();
    for (attempt = 0; attempt <= 1; attempt++) {
        cr_assert_eq(call(&out, TOOL_FAST, op, ARGS, &err), 0, "%s", err.message);
        cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
        cr_assert_eq(call_declared(&out, op, &err), 0, "%s", err.message);
        cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    }
    cr_assert_eq(effects(), 1);
    idem_store_free(lenient);
    idem_outcome_clear(&out);
}

Test(retention, fresh_uuidv7_and_other_ids_are_created)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    char op[IDEM_UUID_STRING_SIZE];

    open_store();
    cr_assert_eq(idem_uuid_v7(op, NULL), 0);
    cr_assert_eq(call(&out, TOOL_FAST, op, ARGS, NULL), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    uuid_at(op, 200); /* a client clock ahead, within the skew allowance: accepted */
    cr_assert_eq(call(&out, TOOL_FAST, op, ARGS, NULL), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    /* Not UUIDv7: no embedded time, nothing to judge (a UUIDv4, a UUIDv7 with a bad
     * variant, an order number). */
    cr_assert_eq(call(&out, TOOL_FAST, "0190a6e2-1c4b-4f4e-8a6b-2b5f0e3d9c11", ARGS, NULL), 0);
    cr_assert_eq(call(&out, TOOL_FAST, "0000a6e2-1c4b-7f4e-0a6b-2b5f0e3d9c11", ARGS, NULL), 0);
    cr_assert_eq(call(&out, TOOL_FAST, "order-2024-0042", ARGS, NULL), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(effects(), 5);
    cr_assert_eq(pgtest_scalar(check, "SELECT count(*) FROM idem.reconciliation_items"), 0);
    idem_outcome_clear(&out);
}

Test(retention, replay_is_not_blocked_by_a_sweep_batch_in_progress)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    PGconn *sweeper = pgtest_connect(conninfo);
    struct timespec t0, t1;

    open_store();
    cr_assert_eq(call(&out, TOOL_FAST, "op-1", ARGS, NULL), 0);
    time_passes(61);
    /* A batch that has tombstoned op-1 and not committed yet. */
    PQclear(pgtest_exec(sweeper, "BEGIN"));
    PQclear(pgtest_exec(sweeper, "UPDATE idem.operations SET state = 'expired', response = NULL,"
                                 " expired_at = now(), expires_at = forget_at"
                                 " WHERE operation_id = 'op-1'"));
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_assert_eq(call(&out, TOOL_FAST, "op-1", ARGS, NULL), 0);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED, "the receipt it is about to lose is served");
    cr_assert_eq(call(&out, TOOL_FAST, "op-2", ARGS, NULL), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    cr_assert_lt(t1.tv_sec - t0.tv_sec, 5, "neither call waited for the batch");
    PQclear(pgtest_exec(sweeper, "COMMIT"));
    cr_assert_eq(call(&out, TOOL_FAST, "op-1", ARGS, NULL), IDEM_EEXPIRED);
    PQfinish(sweeper);
    idem_outcome_clear(&out);
}

/* ---- a sweep beside live calls on the same keys ------------------------------------------ */

#define RACE_KEYS    1500
#define RACE_THREADS 4

struct race {
    atomic_int stop;
    atomic_long replayed, expired, wrong;
    char first_wrong[1024];
};

static void *replayer(void *arg)
{
    struct race *r = arg;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    unsigned int seed = (unsigned int)(uintptr_t)&out;
    char op[32], want[64];

    while (!atomic_load(&r->stop)) {
        int k = (int)(rand_r(&seed) % RACE_KEYS), rc;

        snprintf(op, sizeof(op), "race-%d", k);
        snprintf(want, sizeof(want), "{\"done\":\"%s\"}", op);
        rc = call(&out, TOOL_FAST, op, ARGS, &err);
        if (rc == 0 && out.status == IDEM_STATUS_REPLAYED && strcmp(out.receipt, want) == 0) {
            atomic_fetch_add(&r->replayed, 1);
        } else if (rc == IDEM_EEXPIRED && out.status == IDEM_STATUS_EXPIRED) {
            atomic_fetch_add(&r->expired, 1);
        } else if (atomic_fetch_add(&r->wrong, 1) == 0) {
            snprintf(r->first_wrong, sizeof(r->first_wrong), "%s: %s %.64s: %.400s", op,
                     idem_status_name(out.status), out.receipt ? out.receipt : "", err.message);
        }
    }
    idem_outcome_clear(&out);
    return NULL;
}

static void *sweeper(void *arg)
{
    struct race *r = arg;
    PGconn *own = pgtest_connect(conninfo);
    idem_sweep_options opts = IDEM_SWEEP_OPTIONS_INIT;
    idem_sweep_result res = IDEM_SWEEP_RESULT_INIT;
    unsigned long long total = 0;

    opts.batch_size = 50;
    opts.max_batches = 3; /* several runs, each a few batches */
    do {
        if (idem_sweep_run(&res, own, &opts, NULL) != 0)
            break;
        total += res.expired;
    } while (total < RACE_KEYS);
    atomic_store(&r->stop, 1);
    PQfinish(own);
    return NULL;
}

Test(retention, sweep_beside_calls_on_the_same_keys_never_loses_a_receipt_or_runs_an_effect)
{
    struct race r = {0};
    pthread_t threads[RACE_THREADS], sw;
    idem_outcome out = IDEM_OUTCOME_INIT;
    char sql[512];

    open_store();
    /* RACE_KEYS completed records, with the receipts the effect would have made. */
    {
        idem_fingerprint fp;
        char hex[IDEM_FINGERPRINT_HEX_SIZE];

        cr_assert_eq(
            idem_fingerprint_compute_text(&fp, TOOL_FAST, 1, ARGS, strlen(ARGS), NULL, NULL), 0);
        idem_fingerprint_hex(hex, &fp);
        snprintf(sql, sizeof(sql),
                 "INSERT INTO idem.operations (tenant, operation_id, tool, payload_version,"
                 " fingerprint, state, response, claim_token, completed_at, expires_at,"
                 " forget_at) SELECT 'acme', 'race-' || i, '%s', 1, decode('%s', 'hex'),"
                 " 'completed', convert_to('{\"done\":\"race-' || i || '\"}', 'UTF8'),"
                 " gen_random_uuid(), now(), now() - interval '1 s', now() + interval '1 day'"
                 " FROM generate_series(0, %d) AS i",
                 TOOL_FAST, hex, RACE_KEYS - 1);
    }
    PQclear(pgtest_exec(check, sql));
    for (int i = 0; i < RACE_THREADS; i++)
        pthread_create(&threads[i], NULL, replayer, &r);
    pthread_create(&sw, NULL, sweeper, &r);
    pthread_join(sw, NULL);
    for (int i = 0; i < RACE_THREADS; i++)
        pthread_join(threads[i], NULL);

    cr_assert_eq(atomic_load(&r.wrong), 0, "%ld wrong answers; first: %s", atomic_load(&r.wrong),
                 r.first_wrong);
    cr_assert_gt(atomic_load(&r.replayed) + atomic_load(&r.expired), 0);
    cr_assert_eq(effects(), 0, "no effect ran for any key");
    cr_assert_eq(pgtest_scalar(check, "SELECT count(*) FROM idem.operations WHERE state = "
                                      "'expired'"),
                 RACE_KEYS);
    cr_assert_eq(pgtest_scalar(check, "SELECT coalesce(sum(count), 0) FROM "
                                      "idem.reconciliation_items"),
                 atomic_load(&r.expired), "every expired answer was recorded");
    cr_assert_eq(call(&out, TOOL_FAST, "race-7", ARGS, NULL), IDEM_EEXPIRED);
    idem_outcome_clear(&out);
}

/* ---- options ------------------------------------------------------------------------------ */

/* UINT_MAX seconds would expire in 2163: windows are bounded, 1 s to 3650 days, and one
 * beyond is refused naming the member and the bound. */
Test(retention, a_window_beyond_3650_days_is_refused_naming_the_member)
{
    idem_store_options o = IDEM_STORE_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_store *s = NULL;

    o.retention_s = UINT_MAX;
    o.key_memory_s = UINT_MAX;
    cr_assert_eq(idem_store_new(&s, pool, &o, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.message,
                     "options.retention_s: 4294967295 s is beyond the longest window, 3650 days");
    cr_assert_null(s);
    o.retention_s = IDEM_WINDOW_MAX_S;
    o.key_memory_s = IDEM_WINDOW_MAX_S;
    cr_assert_eq(idem_store_new(&s, pool, &o, &err), 0, "the longest window is accepted: %s",
                 err.message);
    idem_store_free(s);
    cr_assert_eq(IDEM_WINDOW_MAX_S, 3650u * 86400u);
    cr_assert_eq(IDEM_WINDOW_MIN_S, 1u);
}

Test(retention, version_1_options_get_the_default_key_memory)
{
    idem_store_options v1 = IDEM_STORE_OPTIONS_INIT;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;

    v1.version = 1;
    v1.retention_s = 3600;
    v1.key_memory_s = 1; /* not part of version 1: ignored */
    cr_assert_eq(idem_store_new(&store, pool, &v1, &err), 0, "%s", err.message);
    cr_assert_eq(call(&out, TOOL_SLOW, "v1-1", ARGS, NULL), 0);
    cr_assert_eq(pgtest_scalar(check, "SELECT count(*) FROM idem.operations WHERE"
                                      " expires_at - created_at = '1 hour'"
                                      " AND forget_at - created_at = '30 days'"),
                 1);
    idem_outcome_clear(&out);
}

struct bad_options {
    const char *field;
    unsigned int retention_s, key_memory_s, clock_skew_s;
    const idem_tool_retention *tools;
    size_t ntools;
};

Test(retention, bad_options_name_the_field)
{
    static const idem_tool_retention bad_name[] = {{"Bad Tool", 0, 0}};
    static const idem_tool_retention no_name[] = {{NULL, 0, 0}};
    static const idem_tool_retention twice[] = {{"a", 0, 0}, {"b", 0, 0}, {"a", 10, 10}};
    static const idem_tool_retention short_memory[] = {{"a", 0, 0}, {"b", 100, 50}};
    static const idem_tool_retention long_retention[] = {{"a", 40 * 86400, 0}};
    static const idem_tool_retention forever[] = {{"a", UINT_MAX, UINT_MAX}};
    static const idem_tool_retention remembered_forever[] = {{"a", 0, IDEM_WINDOW_MAX_S + 1}};
    const struct bad_options cases[] = {
        {"options.retention_s", UINT_MAX, UINT_MAX, 300, NULL, 0},
        {"options.retention_s", 0, 7200, 300, NULL, 0},
        {"options.key_memory_s", 3600, IDEM_WINDOW_MAX_S + 1, 300, NULL, 0},
        {"options.tools[0].retention_s", 3600, 7200, 300, forever, 1},
        {"options.tools[0].key_memory_s", 3600, 7200, 300, remembered_forever, 1},
        {"options.key_memory_s", 3600, 60, 300, NULL, 0},
        {"options.clock_skew_s", 3600, 7200, 86401, NULL, 0},
        {"options.tools", 3600, 7200, 300, NULL, 2},
        {"options.tools[0].tool", 3600, 7200, 300, bad_name, 1},
        {"options.tools[0].tool", 3600, 7200, 300, no_name, 1},
        {"options.tools[2].tool", 3600, 7200, 300, twice, 3},
        {"options.tools[1].key_memory_s", 3600, 7200, 300, short_memory, 2},
        {"options.tools[0].key_memory_s", 3600, 30 * 86400, 300, long_retention, 1},
    };
    idem_store *s = NULL;
    idem_error err = IDEM_ERROR_INIT;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        idem_store_options o = IDEM_STORE_OPTIONS_INIT;
        o.retention_s = cases[i].retention_s;
        o.key_memory_s = cases[i].key_memory_s;
        o.clock_skew_s = cases[i].clock_skew_s;
        o.tools = cases[i].tools;
        o.ntools = cases[i].ntools;
        cr_assert_eq(idem_store_new(&s, pool, &o, &err), IDEM_EINVAL, "case %zu", i);
        cr_assert_str_eq(err.field, cases[i].field, "case %zu: %s", i, err.message);
        cr_assert(strstr(err.message, cases[i].field) != NULL, "%s", err.message);
        cr_assert_null(s);
    }
    cr_assert_eq(idem_store_new(&s, pool, &(idem_store_options)IDEM_STORE_OPTIONS_INIT, NULL), 0,
                 "the defaults are valid");
    idem_store_free(s);
}
