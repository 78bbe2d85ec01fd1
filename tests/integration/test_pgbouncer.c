/* Through the real PgBouncer in transaction mode (tools/with-postgres --pgbouncer, four
 * server connections per database): IDEM_POOLER_TRANSACTION serves many threads with one
 * effect per key; the default setting fails loudly, naming the setting, and leaves the
 * records whole; detection and IDEM_POOLER_AUTO see the pooler. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec.h"
#include "storetest.h"

TestSuite(pgbouncer, .init = storetest_init, .fini = storetest_fini, .timeout = 240);

/* A pool through PgBouncer on the test's database. */
static idem_pool *bouncer_pool(idem_pooler pooler, unsigned int max_size,
                               unsigned int statement_timeout_ms, idem_error *err, int *rc)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    char *where = pgtest_pgbouncer_conninfo(fx.conninfo);
    idem_pool *pool = NULL;

    o.max_size = max_size;
    o.pooler = pooler;
    o.statement_timeout_ms = statement_timeout_ms;
    o.acquire_timeout_ms = 30000;
    o.connect_timeout_ms = 30000;
    *rc = idem_pool_new(&pool, where, &o, err);
    free(where);
    return pool;
}

/* fx.pool and fx.store through PgBouncer with @pooler. */
static void open_store(idem_pooler pooler, unsigned int max_size)
{
    idem_error err = IDEM_ERROR_INIT;
    int rc;

    fx.pool = bouncer_pool(pooler, max_size, 0, &err, &rc);
    cr_assert_eq(rc, 0, "%s", err.message);
    cr_assert_eq(idem_store_new(&fx.store, fx.pool, NULL, &err), 0, "%s", err.message);
}

/* ---- load --------------------------------------------------------------------------- */

#define MAX_KEYS 50

typedef struct load_worker {
    pthread_t thread;
    int index, calls, keys;
    int created, replayed, refused, other;
    char first_error[IDEM_ERROR_MESSAGE_MAX + 32];
    char receipts[MAX_KEYS][64];
    int mismatches;
} load_worker;

/* One call, retried as the status says (in_progress, unavailable) within the policy. */
static idem_status call_key(load_worker *w, int key, idem_outcome *out, idem_error *err)
{
    idem_retry_policy policy = IDEM_RETRY_POLICY_INIT;
    idem_retry_state st;
    unsigned int delay;
    char op[32], args[64];

    snprintf(op, sizeof(op), "key-%d", key);
    snprintf(args, sizeof(args), "{\"subject\":\"task for key %d\"}", key);
    idem_retry_state_init(&st);
    for (;;) {
        idem_outcome_clear(out);
        idem_error_clear(err);
        storetest_create_task(out, "load", op, args, err);
        if (!idem_retry_next(&delay, &st, &policy, NULL, out->status))
            return out->status;
        nanosleep(&(struct timespec){0, (long)delay * 1000000L}, NULL);
    }
}

static void *load_main(void *arg)
{
    load_worker *w = arg;

    for (int i = 0; i < w->calls; i++) {
        int key = (i * 7 + w->index) % w->keys;
        idem_outcome out = IDEM_OUTCOME_INIT;
        idem_error err = IDEM_ERROR_INIT;
        idem_status status = call_key(w, key, &out, &err);

        w->created += status == IDEM_STATUS_CREATED;
        w->replayed += status == IDEM_STATUS_REPLAYED;
        if (status == IDEM_STATUS_INVALID && strcmp(err.field, "pooler") == 0)
            w->refused++;
        else if (status != IDEM_STATUS_CREATED && status != IDEM_STATUS_REPLAYED)
            w->other++;
        if (status != IDEM_STATUS_CREATED && status != IDEM_STATUS_REPLAYED &&
            w->first_error[0] == '\0')
            snprintf(w->first_error, sizeof(w->first_error), "%s: [%.20s] %.400s",
                     idem_status_name(status), err.field, err.message);
        if (out.receipt != NULL && w->receipts[key][0] == '\0')
            snprintf(w->receipts[key], sizeof(w->receipts[key]), "%s", out.receipt);
        else if (out.receipt != NULL && strcmp(w->receipts[key], out.receipt) != 0)
            w->mismatches++;
        idem_outcome_clear(&out);
    }
    return NULL;
}

/* @threads threads, @calls calls each over @keys keys; the workers are the caller's. */
static load_worker *run_load(int threads, int calls, int keys)
{
    load_worker *w = calloc((size_t)threads, sizeof(*w));

    cr_assert_not_null(w);
    for (int t = 0; t < threads; t++) {
        w[t] = (load_worker){.index = t, .calls = calls, .keys = keys};
        cr_assert_eq(pthread_create(&w[t].thread, NULL, load_main, &w[t]), 0);
    }
    for (int t = 0; t < threads; t++)
        pthread_join(w[t].thread, NULL);
    return w;
}

/* Every receipt a worker saw for a key is the key's stored receipt. */
static void assert_receipts_stored(const load_worker *w, int threads, int keys)
{
    for (int k = 0; k < keys; k++) {
        char op[32], *stored = NULL;

        snprintf(op, sizeof(op), "key-%d", k);
        for (int t = 0; t < threads; t++) {
            if (w[t].receipts[k][0] == '\0')
                continue;
            if (stored == NULL)
                stored = storetest_receipt("load", op);
            cr_assert_str_eq(w[t].receipts[k], stored, "thread %d key %d", t, k);
        }
        free(stored);
    }
}

Test(pgbouncer, sixteen_threads_over_fifty_keys_make_one_effect_per_key_and_equal_receipts)
{
    idem_store_stats st = IDEM_STORE_STATS_INIT;
    int created = 0, replayed = 0;
    load_worker *w;

    open_store(IDEM_POOLER_TRANSACTION, 16);
    w = run_load(16, 200, 50);
    for (int t = 0; t < 16; t++) {
        cr_assert_eq(w[t].refused + w[t].other, 0, "thread %d: %s", t, w[t].first_error);
        cr_assert_eq(w[t].mismatches, 0, "thread %d saw two receipts for one key", t);
        created += w[t].created;
        replayed += w[t].replayed;
    }
    cr_assert_eq(created, 50, "one creation per key: %d", created);
    cr_assert_eq(created + replayed, 16 * 200);
    assert_receipts_stored(w, 16, 50);
    free(w);
    cr_assert_eq(storetest_tasks(), 50);
    cr_assert_eq(storetest_operations(), 50);
    idem_store_stats_get(&st, fx.store);
    cr_assert_eq(st.created, 50);
}

Test(pgbouncer, default_setting_fails_loudly_naming_the_setting_and_keeps_records_whole)
{
    int refused = 0, created = 0;
    load_worker *w;

    open_store(IDEM_POOLER_NONE, 8);
    w = run_load(8, 25, 10);
    for (int t = 0; t < 8; t++) {
        cr_assert_eq(w[t].other, 0, "thread %d: %s", t, w[t].first_error);
        cr_assert_eq(w[t].mismatches, 0, "thread %d saw two receipts for one key", t);
        refused += w[t].refused;
        created += w[t].created;
    }
    cr_assert_gt(refused, 0, "the mismatch was noticed");
    cr_assert_leq(created, 10);
    assert_receipts_stored(w, 8, 10);
    free(w);
    /* Whatever was refused, every task has its record and no key has two. */
    cr_assert_eq(storetest_tasks(), storetest_operations());
    cr_assert_eq(pgtest_scalar(fx.check, "SELECT count(*) FROM idem.operations"
                                         " WHERE state <> 'completed'"),
                 0);
}

/* ---- the execution layer's view ------------------------------------------------------ */

static const idem__stmt stmt_add = {"idem_pgbtest_add", "SELECT $1::int + 1", 1};

static int exec_add(idem_conn *conn, idem_error *err)
{
    const char *values[1] = {"41"};
    PGresult *res = NULL;
    int rc = idem__conn_exec_prepared(&res, conn, &stmt_add, values, NULL, NULL, 0, err);

    if (rc == 0) {
        cr_assert_str_eq(PQgetvalue(res, 0, 0), "42");
        PQclear(res);
    }
    return rc;
}

static idem_conn *acquire(idem_pool *pool)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_conn *conn = NULL;

    cr_assert_eq(idem_pool_acquire(&conn, pool, &err), 0, "%s", err.message);
    return conn;
}

/* A connection of the test's own through PgBouncer that holds its server session in an
 * open transaction, so that the next transaction of anyone else lands on another one. */
static PGconn *hold_a_server_session(void)
{
    char *where = pgtest_pgbouncer_conninfo(fx.conninfo);
    PGconn *holder = pgtest_connect(where);

    free(where);
    PQclear(pgtest_exec(holder, "BEGIN"));
    PQclear(pgtest_exec(holder, "SELECT 1"));
    return holder;
}

Test(pgbouncer, default_setting_names_the_setting_when_a_session_already_has_the_statement)
{
    idem_error err = IDEM_ERROR_INIT;
    int rc;
    idem_pool *pool = bouncer_pool(IDEM_POOLER_NONE, 2, 0, &err, &rc);
    idem_conn *a, *b;

    cr_assert_eq(rc, 0, "%s", err.message);
    a = acquire(pool);
    b = acquire(pool);
    cr_assert_eq(exec_add(a, &err), 0, "%s", err.message);
    /* PgBouncer gives b the server session a just used, and prepared on. */
    rc = exec_add(b, &err);
    cr_assert_eq(rc, IDEM_EINVAL, "%s: %s", idem_err_name(rc), err.message);
    cr_assert_str_eq(err.sqlstate, "42P05");
    cr_assert_str_eq(err.field, "pooler");
    cr_assert(strstr(err.message, "idem_pool_options.pooler = IDEM_POOLER_TRANSACTION") != NULL,
              "%s", err.message);
    idem_pool_release(a);
    idem_pool_release(b);
    idem_pool_free(pool);
}

Test(pgbouncer, default_setting_names_the_setting_when_a_session_lost_the_statement)
{
    idem_error err = IDEM_ERROR_INIT;
    int rc;
    idem_pool *pool = bouncer_pool(IDEM_POOLER_NONE, 1, 0, &err, &rc);
    idem_conn *conn;
    PGconn *holder;

    cr_assert_eq(rc, 0, "%s", err.message);
    conn = acquire(pool);
    cr_assert_eq(exec_add(conn, &err), 0, "%s", err.message);
    holder = hold_a_server_session();
    rc = exec_add(conn, &err);
    cr_assert_eq(rc, IDEM_EINVAL, "%s: %s", idem_err_name(rc), err.message);
    cr_assert_str_eq(err.sqlstate, "26000");
    cr_assert_str_eq(err.field, "pooler");
    cr_assert(strstr(err.hint, "IDEM_POOLER_TRANSACTION") != NULL, "%s", err.hint);
    PQfinish(holder);
    idem_pool_release(conn);
    idem_pool_free(pool);
}

Test(pgbouncer, transaction_and_auto_settings_run_on_whichever_session_they_land)
{
    static const idem_pooler settings[] = {IDEM_POOLER_TRANSACTION, IDEM_POOLER_AUTO};

    for (size_t i = 0; i < 2; i++) {
        idem_error err = IDEM_ERROR_INIT;
        int rc;
        idem_pool *pool = bouncer_pool(settings[i], 2, 0, &err, &rc);
        idem_conn *a, *b;
        PGconn *holder;

        cr_assert_eq(rc, 0, "%s", err.message);
        a = acquire(pool);
        b = acquire(pool);
        cr_assert_eq(exec_add(a, &err), 0, "%s", err.message);
        cr_assert_eq(exec_add(b, &err), 0, "%s", err.message);
        holder = hold_a_server_session();
        cr_assert_eq(exec_add(a, &err), 0, "%s", err.message);
        PQfinish(holder);
        idem_pool_release(a);
        idem_pool_release(b);
        idem_pool_free(pool);
    }
}

Test(pgbouncer, detection_tells_pgbouncer_from_a_direct_connection)
{
    idem_error err = IDEM_ERROR_INIT;
    char *where = pgtest_pgbouncer_conninfo(fx.conninfo);
    PGconn *through = pgtest_connect(where);
    int pooled = -1;

    cr_assert_eq(idem_pooler_detect(&pooled, through, &err), 0, "%s", err.message);
    cr_assert_eq(pooled, 1);
    cr_assert_eq(idem_pooler_detect(&pooled, fx.check, &err), 0, "%s", err.message);
    cr_assert_eq(pooled, 0);
    PQfinish(through);
    free(where);
}

/* ---- the statement timeout ----------------------------------------------------------- */

/* An effect that runs longer than the pool's statement timeout. */
static int slow_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                       idem_error *err)
{
    PGresult *res = NULL;
    int rc = idem_tx_exec(&res, tx, "SELECT pg_sleep(3)", 0, NULL, err);

    (void)arguments, (void)ctx;
    if (rc != 0)
        return rc;
    PQclear(res);
    *response = json_pack("{s:s}", "status", "slept");
    return IDEM_EFFECT_OK;
}

Test(pgbouncer, statement_timeout_is_refused_as_a_startup_option_and_held_per_transaction)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_request req = storetest_request("acme", "op-slow", "{\"subject\":\"s\"}");
    int rc;
    idem_pool *pool = bouncer_pool(IDEM_POOLER_NONE, 1, 200, &err, &rc);

    cr_assert_eq(rc, IDEM_EINVAL, "%s: %s", idem_err_name(rc), err.message);
    cr_assert_null(pool);
    cr_assert_str_eq(err.field, "pooler");
    cr_assert(strstr(err.message, "unsupported startup parameter") != NULL, "%s", err.message);

    fx.pool = bouncer_pool(IDEM_POOLER_TRANSACTION, 1, 200, &err, &rc);
    cr_assert_eq(rc, 0, "%s", err.message);
    cr_assert_eq(idem_store_new(&fx.store, fx.pool, NULL, &err), 0, "%s", err.message);
    rc = idem_store_execute(&out, fx.store, &req, slow_effect, NULL, &err);
    cr_assert_eq(out.status, IDEM_STATUS_UNAVAILABLE,
                 "a statement timeout is the server being busy: %s: %s",
                 idem_status_name(out.status), err.message);
    cr_assert_str_eq(err.sqlstate, "57014", "%s", err.message);
    cr_assert_eq(storetest_operations(), 0);
    idem_outcome_clear(&out);
}
