/* The retention sweeper (include/idem/sys/sweep.h): expire records into tombstones, purge
 * tombstones, in bounded batches under a session-level advisory lock.
 *
 * Each batch is one statement in autocommit, so one short transaction: a CTE picks the
 * due rows in expires_at order (the index operations_expires_at) with FOR UPDATE SKIP
 * LOCKED, and the outer UPDATE or DELETE changes exactly those, found again by their ctid
 * (a row this statement has locked keeps its ctid until the statement changes it; a TID
 * scan saves a primary-key lookup per row). The passes run one after
 * the other, expire first: while records are due, the purge pass's index range is full of
 * them, so purging after the expire pass has emptied that range keeps its scan short. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "error.h"
#include "exec.h"
#include "idem/sys/sweep.h"
#include "idem/validate.h"
#include "log.h"
#include "citus.h"

#define MAX_BATCH   1000000u
#define MAX_SKEW_S  86400u
#define MAX_LOCK_MS 3600000u

/* $1 batch size, $2 default key memory in seconds (rows claimed before forget_at). Only
 * completed and failed records expire: never a pending one, nor an outcome_unknown one. */
static const char SQL_EXPIRE[] =
    "WITH due AS (SELECT ctid FROM idem.operations"
    " WHERE expires_at <= now() AND state IN ('completed', 'failed')"
    " ORDER BY expires_at LIMIT $1::int8 FOR UPDATE SKIP LOCKED)"
    " UPDATE idem.operations o SET state = 'expired', response = NULL, trace_id = NULL,"
    " identity_digests = NULL,"
    " expired_at = now(),"
    " expires_at = coalesce(o.forget_at, o.expires_at + make_interval(secs => $2::int8))"
    " FROM due WHERE o.ctid = due.ctid";

/* $1 batch size, $2 twice the clock skew allowance in seconds. */
static const char SQL_PURGE[] =
    "WITH due AS (SELECT ctid FROM idem.operations"
    " WHERE state = 'expired' AND expires_at <= now() - make_interval(secs => $2::int8)"
    " ORDER BY expires_at LIMIT $1::int8 FOR UPDATE SKIP LOCKED)"
    " DELETE FROM idem.operations o USING due WHERE o.ctid = due.ctid";

/* On Citus a multi-shard statement cannot lock rows (FOR UPDATE): the batches go tenant by
 * tenant ($3), each on one shard, where they run as above, except that the rows are found
 * again by their key: a ctid names a row only within its shard, and Citus does not copy
 * the sweeper's grant on the ctid column to the shards. The tenants come from a
 * multi-shard read that locks nothing. No transaction spans shards: a tenant's batch
 * commits on its own. */
/* coalesce(forget_at, expires_at + $2 s) in immutable functions only, as Citus wants them
 * in an UPDATE (timestamptz + interval depends on the time zone): least() skips the NULL,
 * and where forget_at is set the other side is 5e9 s (158 years, more than any key memory)
 * later, so forget_at wins. */
#define FORGET_AT_OR_LATER                                                                         \
    "least(o.forget_at, to_timestamp(extract(epoch FROM o.expires_at - timestamptz 'epoch')"       \
    "::float8 + $2::int8 * (o.forget_at IS NULL)::int"                                             \
    " + 5000000000 * (o.forget_at IS NOT NULL)::int))"
static const char SQL_EXPIRE_TENANT[] =
    "WITH due AS (SELECT operation_id FROM idem.operations"
    " WHERE tenant = $3 AND expires_at <= now() AND state IN ('completed', 'failed')"
    " ORDER BY expires_at LIMIT $1::int8 FOR UPDATE SKIP LOCKED)"
    " UPDATE idem.operations o SET state = 'expired', response = NULL, trace_id = NULL,"
    " identity_digests = NULL,"
    " expired_at = now(),"
    " expires_at = " FORGET_AT_OR_LATER " FROM due"
    " WHERE o.tenant = $3 AND o.operation_id = due.operation_id";
static const char SQL_PURGE_TENANT[] = "WITH due AS (SELECT operation_id FROM idem.operations"
                                       " WHERE tenant = $3 AND state = 'expired'"
                                       " AND expires_at <= now() - make_interval(secs => $2::int8)"
                                       " ORDER BY expires_at LIMIT $1::int8 FOR UPDATE SKIP LOCKED)"
                                       " DELETE FROM idem.operations o USING due"
                                       " WHERE o.tenant = $3 AND o.operation_id = due.operation_id";
/* $1 how many tenants, $2 as the batch's, $3 the tenants after this one (each is visited
 * once per pass, as a pass without Citus ends at its first short batch: rows that live
 * calls hold wait for the next run). */
#define DUE_TENANTS(cond)                                                                          \
    "SELECT DISTINCT tenant FROM idem.operations WHERE tenant > $3 AND " cond                      \
    " ORDER BY tenant LIMIT $1::int8"
static const char SQL_DUE_TENANTS_EXPIRE[] = DUE_TENANTS(
    "expires_at <= now() AND state IN ('completed', 'failed') AND $2::int8 IS NOT NULL");
static const char SQL_DUE_TENANTS_PURGE[] =
    DUE_TENANTS("state = 'expired' AND expires_at <= now() - make_interval(secs => $2::int8)");
#define TENANTS_AT_ONCE "1000"

/* $1 twice the clock skew allowance. */
static const char SQL_DUE[] =
    "SELECT (SELECT count(*) FROM idem.operations"
    "  WHERE expires_at <= now() AND state IN ('completed', 'failed')),"
    " (SELECT count(*) FROM idem.operations"
    "  WHERE state = 'expired' AND expires_at <= now() - make_interval(secs => $1::int8))";

static const char SQL_ITEMS[] =
    "SELECT coalesce(sum(count) FILTER (WHERE kind = 'expired'), 0),"
    " count(*) FILTER (WHERE resolved_at IS NULL) FROM idem.reconciliation_items";

static const char SQL_LOCK[] =
    "SELECT pg_try_advisory_lock($1::int8), current_setting('lock_timeout')";
static const char SQL_SET_LOCK_TIMEOUT[] = "SELECT set_config('lock_timeout', $1, false)";
static const char SQL_UNLOCK[] =
    "SELECT pg_advisory_unlock($1::int8), set_config('lock_timeout', $2, false)";
/* pg_locks shows a bigint advisory key as classid (high half), objid (low half); advisory
 * locks are per database. */
static const char SQL_LOCK_HOLDER[] =
    "SELECT l.pid, coalesce(a.application_name, '') FROM pg_locks l"
    " LEFT JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND l.classid = $1::oid AND l.objid = $2::oid LIMIT 1";

/* One run in progress. */
typedef struct sweep {
    PGconn *conn;
    idem_sweep_options opts;
    idem_sweep_result res;
    idem_error *err;
    uint64_t start_ms;
    char batch[16], key_memory[16], purge_after[16];
    int by_tenant;      /* Citus: batches tenant by tenant (SQL_EXPIRE_TENANT) */
    const char *tenant; /* the tenant of the batches now, when by_tenant */
} sweep;

#define sweep_log(s, ...) idem__log((s)->opts.log, (s)->opts.log_ctx, IDEM_LOG_INFO, __VA_ARGS__)

static const idem_sweep_options sweep_defaults = IDEM_SWEEP_OPTIONS_INIT;

int idem_sweep_options_init(idem_sweep_options *opts, unsigned int version)
{
    return idem__struct_init(opts, &sweep_defaults, sizeof(sweep_defaults), version,
                             IDEM_SWEEP_OPTIONS_VERSION);
}

int idem_sweep_result_init(idem_sweep_result *out, unsigned int version)
{
    static const idem_sweep_result defaults = IDEM_SWEEP_RESULT_INIT;

    return idem__struct_init(out, &defaults, sizeof(defaults), version, IDEM_SWEEP_RESULT_VERSION);
}

static int check_options(idem_sweep_options *out, const idem_sweep_options *opts, idem_error *err)
{
    int rc;

    if (opts == NULL)
        opts = &sweep_defaults;
    if ((rc = idem__check_version(err, opts->version, IDEM_SWEEP_OPTIONS_VERSION, "options")) != 0)
        return rc;
    if (opts->batch_size == 0 || opts->batch_size > MAX_BATCH)
        return idem__error_field(err, IDEM_EINVAL, "options.batch_size", "must be 1 to %u, got %u",
                                 MAX_BATCH, opts->batch_size);
    if ((rc = idem__check_window("options.key_memory_s", opts->key_memory_s, err)) != 0)
        return rc;
    if (opts->clock_skew_s > MAX_SKEW_S)
        return idem__error_field(err, IDEM_EINVAL, "options.clock_skew_s",
                                 "must be at most %u, got %u", MAX_SKEW_S, opts->clock_skew_s);
    if (opts->lock_timeout_ms == 0 || opts->lock_timeout_ms > MAX_LOCK_MS)
        return idem__error_field(err, IDEM_EINVAL, "options.lock_timeout_ms",
                                 "must be 1 to %u, got %u", MAX_LOCK_MS, opts->lock_timeout_ms);
    *out = *opts;
    return 0;
}

static unsigned long long cell_ull(const PGresult *res, int row, int col)
{
    return strtoull(PQgetvalue(res, row, col), NULL, 10);
}

/* " by pid 123 (idem-sweep)", or "" when the holder cannot be seen. */
static void lock_holder(char *buf, size_t size, PGconn *conn)
{
    unsigned long long key = (unsigned long long)IDEM_SWEEP_LOCK_KEY;
    char classid[16], objid[16];
    const char *values[2] = {classid, objid};
    PGresult *res = NULL;

    buf[0] = '\0';
    snprintf(classid, sizeof(classid), "%llu", key >> 32);
    snprintf(objid, sizeof(objid), "%llu", key & 0xffffffffULL);
    if (idem__pg_exec(&res, conn, SQL_LOCK_HOLDER, 2, values, NULL, NULL, 0, "", NULL) != 0)
        return;
    if (PQntuples(res) == 1)
        snprintf(buf, size, " by pid %s (%s)", PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1));
    PQclear(res);
}

/* Take the lock; *old gets the lock_timeout setting to restore. */
static int lock(sweep *s, char *old, size_t size)
{
    char key[24], holder[128];
    const char *values[1] = {key};
    PGresult *res = NULL;
    int rc, held;

    snprintf(key, sizeof(key), "%lld", (long long)IDEM_SWEEP_LOCK_KEY);
    rc = idem__pg_exec(&res, s->conn, SQL_LOCK, 1, values, NULL, NULL, 0, "taking the sweep lock",
                       s->err);
    if (rc != 0)
        return rc;
    held = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    snprintf(old, size, "%s", PQgetvalue(res, 0, 1));
    PQclear(res);
    if (!held) {
        lock_holder(holder, sizeof(holder), s->conn);
        return idem__error_set(s->err, IDEM_ELOCKED,
                               "another sweep holds the sweep lock (advisory lock %lld)%s; "
                               "nothing done",
                               (long long)IDEM_SWEEP_LOCK_KEY, holder);
    }
    return 0;
}

static int set_lock_timeout(sweep *s)
{
    char timeout[24];
    const char *values[1] = {timeout};
    PGresult *res = NULL;
    int rc;

    snprintf(timeout, sizeof(timeout), "%u", s->opts.lock_timeout_ms);
    rc = idem__pg_exec(&res, s->conn, SQL_SET_LOCK_TIMEOUT, 1, values, NULL, NULL, 0,
                       "setting lock_timeout", s->err);
    PQclear(res);
    return rc;
}

static void unlock(sweep *s, const char *old)
{
    char key[24];
    const char *values[2] = {key, old};
    PGresult *res = NULL;

    snprintf(key, sizeof(key), "%lld", (long long)IDEM_SWEEP_LOCK_KEY);
    if (idem__pg_exec(&res, s->conn, SQL_UNLOCK, 2, values, NULL, NULL, 0, "", NULL) == 0)
        PQclear(res);
}

/* Whether the run's time or batch limit forbids another batch. */
static int out_of_budget(const sweep *s)
{
    if (s->opts.max_batches > 0 && s->res.batches >= s->opts.max_batches)
        return 1;
    return s->opts.max_runtime_ms > 0 && idem__now_ms() - s->start_ms >= s->opts.max_runtime_ms;
}

/* A statement's lock timeout is a table lock held too long: IDEM_ETIMEDOUT. Else @rc. */
static int lock_timed_out(sweep *s, int rc)
{
    if (rc != 0 && idem__sqlstate_is_timeout(s->err->sqlstate)) {
        idem__error_context(s->err,
                            "a table lock was held longer than %u ms (a migration?); "
                            "the next run continues",
                            s->opts.lock_timeout_ms);
        s->err->code = IDEM_ETIMEDOUT;
        return IDEM_ETIMEDOUT;
    }
    return rc;
}

/* One batch of @sql; *n gets the rows it changed. */
static int batch(sweep *s, const char *sql, const char *param2, const char *what,
                 unsigned long long *n)
{
    const char *values[3] = {s->batch, param2, s->tenant};
    PGresult *res = NULL;
    int rc = idem__pg_exec(&res, s->conn, sql, s->by_tenant ? 3 : 2, values, NULL, NULL, 0, what,
                           s->err);

    if ((rc = lock_timed_out(s, rc)) != 0)
        return rc;
    *n = strtoull(PQcmdTuples(res), NULL, 10);
    PQclear(res);
    s->res.batches++;
    return 0;
}

/* Run batches of one pass until one comes back short or the budget is spent; *done is
 * set when nothing more is due. */
static int pass(sweep *s, const char *sql, const char *param2, const char *what,
                unsigned long long *total, int *done)
{
    unsigned long long n = 0;
    int rc = 0;

    *done = 0;
    while (!*done && !out_of_budget(s)) {
        rc = batch(s, sql, param2, what, &n);
        if (rc != 0)
            return rc;
        *total += n;
        *done = n < s->opts.batch_size;
        sweep_log(s, "%s: %llu in batch %u (%llu this run)", what, n, s->res.batches, *total);
    }
    return 0;
}

/* pass() tenant by tenant (Citus), for each tenant with rows due, in tenant order. */
static int pass_by_tenant(sweep *s, int purge, const char *param2, const char *what,
                          unsigned long long *total, int *done)
{
    char after[IDEM_TENANT_MAX + 1] = "";
    const char *values[3] = {TENANTS_AT_ONCE, param2, after};
    PGresult *res = NULL;
    int rc = 0, n = atoi(TENANTS_AT_ONCE), tenant_done = 1;

    *done = 0;
    while (rc == 0 && n == atoi(TENANTS_AT_ONCE) && tenant_done && !out_of_budget(s)) {
        rc = idem__pg_exec(&res, s->conn, purge ? SQL_DUE_TENANTS_PURGE : SQL_DUE_TENANTS_EXPIRE, 3,
                           values, NULL, NULL, 0, "listing tenants with rows due", s->err);
        rc = lock_timed_out(s, rc); /* the coordinator's lock, waited for in the listing */
        n = rc == 0 ? PQntuples(res) : 0;
        for (int i = 0; rc == 0 && i < n && tenant_done && !out_of_budget(s); i++) {
            s->tenant = PQgetvalue(res, i, 0);
            snprintf(after, sizeof(after), "%s", s->tenant);
            rc = pass(s, purge ? SQL_PURGE_TENANT : SQL_EXPIRE_TENANT, param2, what, total,
                      &tenant_done);
        }
        *done = rc == 0 && tenant_done && n < atoi(TENANTS_AT_ONCE);
        PQclear(res);
        res = NULL;
        s->tenant = NULL;
    }
    return rc;
}

static int sweep_pass(sweep *s, int purge, unsigned long long *total, int *done)
{
    const char *param2 = purge ? s->purge_after : s->key_memory;
    const char *what = purge ? "purged" : "expired";

    if (s->by_tenant)
        return pass_by_tenant(s, purge, param2, what, total, done);
    return pass(s, purge ? SQL_PURGE : SQL_EXPIRE, param2, what, total, done);
}

static int detect_citus(sweep *s)
{
    PGresult *res = NULL;
    int rc = idem__pg_exec(&res, s->conn, IDEM__SQL_HAS_CITUS, 0, NULL, NULL, NULL, 0,
                           "looking for Citus", s->err);

    if (rc == 0)
        s->by_tenant = PQgetvalue(res, 0, 0)[0] == 't';
    PQclear(res);
    return rc;
}

static int work(sweep *s)
{
    int expired_all = 0, purged_all = 0;
    int rc = detect_citus(s);

    if (rc == 0)
        rc = sweep_pass(s, 0, &s->res.expired, &expired_all);
    if (rc == 0 && expired_all)
        rc = sweep_pass(s, 1, &s->res.purged, &purged_all);
    s->res.complete = expired_all && purged_all;
    if (rc == 0 && !s->res.complete)
        sweep_log(s, "stopped at the %s limit; the next run continues",
                  s->opts.max_batches > 0 && s->res.batches >= s->opts.max_batches ? "batch"
                                                                                   : "time");
    return rc;
}

static int count_due(sweep *s)
{
    const char *values[1] = {s->purge_after};
    PGresult *res = NULL;
    int rc = idem__pg_exec(&res, s->conn, SQL_DUE, 1, values, NULL, NULL, 0, "counting due rows",
                           s->err);

    if (rc != 0)
        return rc;
    s->res.expired = cell_ull(res, 0, 0);
    s->res.purged = cell_ull(res, 0, 1);
    PQclear(res);
    sweep_log(s, "dry run: %llu records due to expire, %llu tombstones due to purge",
              s->res.expired, s->res.purged);
    return 0;
}

static int count_items(sweep *s)
{
    PGresult *res = NULL;
    int rc = idem__pg_exec(&res, s->conn, SQL_ITEMS, 0, NULL, NULL, NULL, 0,
                           "reading reconciliation items", s->err);

    if (rc != 0)
        return rc;
    s->res.late_retries = cell_ull(res, 0, 0);
    s->res.open_items = cell_ull(res, 0, 1);
    PQclear(res);
    return 0;
}

int idem_sweep_run(idem_sweep_result *out, PGconn *conn, const idem_sweep_options *opts,
                   idem_error *err)
{
    idem_error local = IDEM_ERROR_INIT;
    sweep s = {.conn = conn, .err = err != NULL ? err : &local};
    char old_timeout[64];
    int rc;

    if (out == NULL)
        return idem__error_field(err, IDEM_EINVAL, "out", "must not be NULL");
    if ((rc = idem__check_version(err, out->version, IDEM_SWEEP_RESULT_VERSION, "out")) != 0)
        return rc;
    if (conn == NULL || PQstatus(conn) != CONNECTION_OK)
        return idem__error_field(err, IDEM_EINVAL, "conn", "must be an open connection");
    if (PQtransactionStatus(conn) != PQTRANS_IDLE)
        return idem__error_field(err, IDEM_EINVAL, "conn",
                                 "must be idle (not inside a transaction)");
    if ((rc = check_options(&s.opts, opts, err)) != 0)
        return rc;
    s.start_ms = idem__now_ms();
    snprintf(s.batch, sizeof(s.batch), "%u", s.opts.batch_size);
    snprintf(s.key_memory, sizeof(s.key_memory), "%u", s.opts.key_memory_s);
    snprintf(s.purge_after, sizeof(s.purge_after), "%u", 2 * s.opts.clock_skew_s);
    if ((rc = lock(&s, old_timeout, sizeof(old_timeout))) != 0)
        return rc;
    rc = set_lock_timeout(&s);
    if (rc == 0)
        rc = s.opts.dry_run ? count_due(&s) : work(&s);
    if (rc == 0)
        rc = count_items(&s);
    unlock(&s, old_timeout);
    if (rc != 0)
        return rc;
    s.res.duration_ms = idem__now_ms() - s.start_ms;
    s.res.version = out->version;
    *out = s.res;
    return 0;
}
