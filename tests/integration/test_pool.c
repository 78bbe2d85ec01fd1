#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "idem/pool.h"
#include "pgtest.h"
#include "exec.h"

static const idem__stmt stmt_add = {"idem_pooltest_add", "SELECT $1::int + 1", 1};

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* A fresh database, and an application_name unique to the test. */
static char *setup(const char *tag, char *app, size_t app_size)
{
    snprintf(app, app_size, "idem-pooltest-%s-%ld", tag, (long)getpid());
    return pgtest_new_database(tag);
}

static idem_pool *new_pool(const char *conninfo, const idem_pool_options *opts)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_pool *pool = NULL;
    int rc = idem_pool_new(&pool, conninfo, opts, &err);

    cr_assert_eq(rc, 0, "idem_pool_new: %s (%s)", err.message, idem_err_name(rc));
    return pool;
}

static idem_conn *acquire(idem_pool *pool)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_conn *conn = NULL;
    int rc = idem_pool_acquire(&conn, pool, &err);

    cr_assert_eq(rc, 0, "acquire: %s (%s)", err.message, idem_err_name(rc));
    return conn;
}

/* Run a query on a pooled connection that must succeed; returns its first cell. */
static char *query(idem_conn *conn, const char *sql)
{
    idem_error err = IDEM_ERROR_INIT;
    PGresult *res = NULL;
    char *value;
    int rc = idem__conn_exec(&res, conn, sql, &err);

    cr_assert_eq(rc, 0, "%s: %s", sql, err.message);
    value = strdup(PQntuples(res) > 0 ? PQgetvalue(res, 0, 0) : "");
    PQclear(res);
    return value;
}

static long query_long(idem_conn *conn, const char *sql)
{
    char *text = query(conn, sql);
    long v = strtol(text, NULL, 10);

    free(text);
    return v;
}

static long backend_pid(idem_conn *conn)
{
    return query_long(conn, "SELECT pg_backend_pid()");
}

/* One integer from an admin connection; the parameter is $1. */
static long admin_scalar(const char *sql, const char *param)
{
    PGconn *admin = pgtest_connect("dbname=postgres");
    PGresult *res = PQexecParams(admin, sql, 1, NULL, &param, NULL, NULL, 0);
    long v;

    cr_assert_eq(PQresultStatus(res), PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(admin));
    v = strtol(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    PQfinish(admin);
    return v;
}

/* End a backend, waiting until it is gone. The pool does not look at a connection
 * released within the current tick of its (coarse) clock, so the test lets one pass. */
static void kill_backend(long pid)
{
    char text[32];

    snprintf(text, sizeof(text), "%ld", pid);
    cr_assert_eq(admin_scalar("SELECT pg_terminate_backend($1::int, 10000)::int", text), 1);
    sleep_ms(20);
}

static long sessions_named(const char *app)
{
    return admin_scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app);
}

/* Sessions end a little after their client closes: wait for the count, bounded. */
static long wait_sessions(const char *app, long want)
{
    long n = sessions_named(app);

    for (int i = 0; i < 100 && n != want; i++) {
        sleep_ms(50);
        n = sessions_named(app);
    }
    return n;
}

static idem_pool_stats stats(idem_pool *pool)
{
    idem_pool_stats st;

    idem_pool_stats_get(&st, pool);
    return st;
}

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
    return query_long(conn, "SELECT count(*) FROM pg_prepared_statements "
                            "WHERE name = 'idem_pooltest_add' AND NOT from_sql");
}

/* ---- creation ---- */

Test(pool, new_rejects_malformed_conninfo_naming_the_field)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_pool *pool = (idem_pool *)&err; /* must stay untouched */
    int rc = idem_pool_new(&pool, "this is not a conninfo", NULL, &err);

    cr_assert_eq(rc, IDEM_EINVAL, "%s", idem_err_name(rc));
    cr_assert_str_eq(err.field, "conninfo");
    cr_assert(strstr(err.message, "conninfo") != NULL, "%s", err.message);
    cr_assert_eq(pool, (idem_pool *)&err);
}

Test(pool, new_rejects_unknown_conninfo_keyword)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_pool *pool = NULL;
    int rc = idem_pool_new(&pool, "dbname=x no_such_keyword=1", NULL, &err);

    cr_assert_eq(rc, IDEM_EINVAL, "%s", idem_err_name(rc));
    cr_assert_str_eq(err.field, "conninfo");
    cr_assert(strstr(err.message, "no_such_keyword") != NULL, "%s", err.message);
    cr_assert_null(pool);
}

Test(pool, new_fails_at_creation_when_the_database_does_not_exist)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_pool *pool = NULL;
    int rc = idem_pool_new(&pool, "dbname=idem_no_such_database", NULL, &err);

    cr_assert_eq(rc, IDEM_EUNAVAIL, "%s", idem_err_name(rc));
    cr_assert(strstr(err.message, "does not exist") != NULL, "%s", err.message);
    cr_assert_null(pool);
}

Test(pool, new_fails_at_creation_when_no_server_listens)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_pool *pool = NULL;
    int rc = idem_pool_new(&pool, "host=127.0.0.1 port=1", NULL, &err);

    cr_assert_eq(rc, IDEM_EUNAVAIL, "%s", idem_err_name(rc));
    cr_assert(strstr(err.message, "cannot connect") != NULL, "%s", err.message);
    cr_assert_null(pool);
}

Test(pool, new_rejects_zero_max_size)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_pool *pool = NULL;

    o.max_size = 0;
    cr_assert_eq(idem_pool_new(&pool, "", &o, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "max_size");
    cr_assert_null(pool);
}

Test(pool, new_rejects_min_idle_above_max_size)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_pool *pool = NULL;

    o.max_size = 2;
    o.min_idle = 3;
    cr_assert_eq(idem_pool_new(&pool, "", &o, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "min_idle");
    cr_assert_null(pool);
}

Test(pool, new_opens_min_idle_connections)
{
    char app[96];
    char *ci = setup("minidle", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.min_idle = 3;
    o.application_name = app;
    idem_pool *pool = new_pool(ci, &o);
    idem_pool_stats st = stats(pool);

    cr_assert_eq(st.size, 3);
    cr_assert_eq(st.idle, 3);
    cr_assert_eq(st.opened, 3);
    cr_assert_eq(sessions_named(app), 3);
    idem_pool_free(pool);
    free(ci);
}

Test(pool, connections_carry_application_name_and_statement_timeout)
{
    char app[96];
    char *ci = setup("settings", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.application_name = app;
    o.statement_timeout_ms = 1500;
    idem_pool *pool = new_pool(ci, &o);
    idem_conn *conn = acquire(pool);
    char *timeout = query(conn, "SHOW statement_timeout");
    char *name = query(conn, "SHOW application_name");

    cr_assert_str_eq(timeout, "1500ms");
    cr_assert_str_eq(name, app);
    free(timeout);
    free(name);
    idem_pool_release(conn);
    idem_pool_free(pool);
    free(ci);
}

Test(pool, application_name_in_the_conninfo_wins_over_the_option)
{
    char app[96], conninfo[256];
    char *ci = setup("appname", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    snprintf(conninfo, sizeof(conninfo), "%s application_name=%s", ci, app);
    o.application_name = "from-the-options";
    idem_pool *pool = new_pool(conninfo, &o);
    idem_conn *conn = acquire(pool);
    char *name = query(conn, "SHOW application_name");

    cr_assert_str_eq(name, app);
    free(name);
    idem_pool_release(conn);
    idem_pool_free(pool);
    free(ci);
}

Test(pool, statement_timeout_keeps_the_server_options_of_the_conninfo)
{
    char app[96], conninfo[256];
    char *ci = setup("options", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    snprintf(conninfo, sizeof(conninfo), "%s options='-c work_mem=7MB'", ci);
    o.statement_timeout_ms = 2500;
    idem_pool *pool = new_pool(conninfo, &o);
    idem_conn *conn = acquire(pool);
    char *work_mem = query(conn, "SHOW work_mem");
    char *timeout = query(conn, "SHOW statement_timeout");

    cr_assert_str_eq(work_mem, "7MB");
    cr_assert_str_eq(timeout, "2500ms");
    free(work_mem);
    free(timeout);
    idem_pool_release(conn);
    idem_pool_free(pool);
    free(ci);
}

Test(pool, free_closes_every_connection)
{
    char app[96];
    char *ci = setup("free", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.min_idle = 2;
    o.application_name = app;
    idem_pool *pool = new_pool(ci, &o);
    idem_conn *conn = acquire(pool);
    idem_conn *other = acquire(pool);
    idem_conn *third = acquire(pool);

    idem_pool_release(conn);
    idem_pool_release(other);
    idem_pool_release(third);
    cr_assert_eq(sessions_named(app), 3);
    idem_pool_free(pool);
    cr_assert_eq(wait_sessions(app, 0), 0);
    free(ci);
}

/* ---- concurrency ---- */

#define HAMMER_THREADS 8
#define HAMMER_ROUNDS  40
#define HAMMER_MAX     3

struct hammer {
    idem_pool *pool;
    pthread_mutex_t lock;
    PGconn *held[HAMMER_THREADS];
    long pids[HAMMER_THREADS];
    int shared;   /* a connection or backend seen in two threads at once */
    int over_max; /* more connections held or open than max_size */
    int failures; /* acquire or query failed */
    char failure[IDEM_ERROR_MESSAGE_MAX];
};

static void hammer_note_failure(struct hammer *h, const char *what)
{
    pthread_mutex_lock(&h->lock);
    if (h->failures++ == 0)
        snprintf(h->failure, sizeof(h->failure), "%s", what);
    pthread_mutex_unlock(&h->lock);
}

/* Record that thread `me` holds pg (backend pid) while the pool has size connections;
 * flag any overlap or excess. */
static void hammer_hold(struct hammer *h, int me, PGconn *pg, long pid, unsigned int size)
{
    int held = 0;

    pthread_mutex_lock(&h->lock);
    for (int i = 0; i < HAMMER_THREADS; i++) {
        if (h->held[i] == NULL)
            continue;
        held++;
        if (h->held[i] == pg || h->pids[i] == pid)
            h->shared++;
    }
    if (held + 1 > HAMMER_MAX || size > HAMMER_MAX)
        h->over_max++;
    h->held[me] = pg;
    h->pids[me] = pid;
    pthread_mutex_unlock(&h->lock);
}

static void hammer_unhold(struct hammer *h, int me)
{
    pthread_mutex_lock(&h->lock);
    h->held[me] = NULL;
    h->pids[me] = 0;
    pthread_mutex_unlock(&h->lock);
}

struct hammer_arg {
    struct hammer *h;
    int me;
};

static void hammer_round(struct hammer *h, int me)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_conn *conn = NULL;
    PGresult *res = NULL;
    idem_pool_stats st;

    if (idem_pool_acquire(&conn, h->pool, &err) < 0) {
        hammer_note_failure(h, err.message);
        return;
    }
    if (idem__conn_exec(&res, conn, "SELECT pg_backend_pid()", &err) < 0) {
        hammer_note_failure(h, err.message);
    } else {
        idem_pool_stats_get(&st, h->pool);
        hammer_hold(h, me, idem_conn_pg(conn), strtol(PQgetvalue(res, 0, 0), NULL, 10), st.size);
        PQclear(res);
        sched_yield();
        hammer_unhold(h, me);
    }
    idem_pool_release(conn);
}

static void *hammer_thread(void *p)
{
    struct hammer_arg *a = p;

    for (int i = 0; i < HAMMER_ROUNDS; i++)
        hammer_round(a->h, a->me);
    return NULL;
}

Test(pool, threads_never_share_a_connection_and_pool_stays_within_max_size)
{
    char app[96];
    char *ci = setup("hammer", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    struct hammer h = {.pool = NULL};
    struct hammer_arg args[HAMMER_THREADS];
    pthread_t threads[HAMMER_THREADS];

    o.max_size = HAMMER_MAX;
    o.acquire_timeout_ms = 60000;
    o.application_name = app;
    h.pool = new_pool(ci, &o);
    pthread_mutex_init(&h.lock, NULL);
    for (int i = 0; i < HAMMER_THREADS; i++) {
        args[i] = (struct hammer_arg){&h, i};
        cr_assert_eq(pthread_create(&threads[i], NULL, hammer_thread, &args[i]), 0);
    }
    for (int i = 0; i < HAMMER_THREADS; i++)
        pthread_join(threads[i], NULL);

    idem_pool_stats st = stats(h.pool);
    cr_assert_eq(h.failures, 0, "%d failures, first: %s", h.failures, h.failure);
    cr_assert_eq(h.shared, 0, "a connection was used by two threads at once");
    cr_assert_eq(h.over_max, 0, "more than max_size connections");
    cr_assert_eq(st.acquires, HAMMER_THREADS * HAMMER_ROUNDS);
    cr_assert_eq(st.in_use, 0);
    cr_assert_eq(st.waiting, 0);
    cr_assert_leq(st.opened, HAMMER_MAX);
    cr_assert_eq(st.idle, st.size);
    cr_assert_leq(sessions_named(app), HAMMER_MAX);
    idem_pool_free(h.pool);
    cr_assert_eq(wait_sessions(app, 0), 0, "connections left open after idem_pool_free");
    pthread_mutex_destroy(&h.lock);
    free(ci);
}

Test(pool, acquire_times_out_with_unavailable_when_all_connections_are_held)
{
    char app[96];
    char *ci = setup("timeout", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_conn *extra = NULL;

    o.max_size = 2;
    o.acquire_timeout_ms = 200;
    idem_pool *pool = new_pool(ci, &o);
    idem_conn *a = acquire(pool);
    idem_conn *b = acquire(pool);
    int rc = idem_pool_acquire(&extra, pool, &err);
    idem_pool_stats st = stats(pool);

    cr_assert_eq(rc, IDEM_EUNAVAIL, "%s", idem_err_name(rc));
    cr_assert_null(extra);
    cr_assert(strstr(err.message, "pool exhausted") != NULL, "%s", err.message);
    cr_assert(strstr(err.message, "in use 2") != NULL, "%s", err.message);
    cr_assert_eq(st.timeouts, 1);
    cr_assert_eq(st.waiting, 0);
    cr_assert_eq(st.in_use, 2);
    idem_pool_release(a);
    idem_pool_release(b);
    idem_pool_free(pool);
    free(ci);
}

struct waiter_arg {
    idem_pool *pool;
    int rc;
    int *order;
    int *next;
    pthread_mutex_t *lock;
    int id;
    long hold_ms;
};

static void *waiter_thread(void *p)
{
    struct waiter_arg *a = p;
    idem_conn *conn = NULL;

    a->rc = idem_pool_acquire(&conn, a->pool, NULL);
    if (a->rc == 0) {
        pthread_mutex_lock(a->lock);
        a->order[(*a->next)++] = a->id;
        pthread_mutex_unlock(a->lock);
        sleep_ms(a->hold_ms);
        idem_pool_release(conn);
    }
    return NULL;
}

static void wait_for_waiters(idem_pool *pool, unsigned int n)
{
    for (int i = 0; i < 500 && stats(pool).waiting != n; i++)
        sleep_ms(10);
    cr_assert_eq(stats(pool).waiting, n);
}

Test(pool, waiting_callers_get_released_connections_in_arrival_order)
{
    char app[96];
    char *ci = setup("fifo", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    int order[2] = {0, 0}, next = 0;
    struct waiter_arg args[2];
    pthread_t threads[2];

    o.max_size = 1;
    o.acquire_timeout_ms = 30000;
    idem_pool *pool = new_pool(ci, &o);
    idem_conn *held = acquire(pool);
    for (int i = 0; i < 2; i++) {
        args[i] = (struct waiter_arg){pool, -99, order, &next, &lock, i + 1, 20};
        cr_assert_eq(pthread_create(&threads[i], NULL, waiter_thread, &args[i]), 0);
        wait_for_waiters(pool, (unsigned int)i + 1);
    }
    idem_pool_release(held);
    for (int i = 0; i < 2; i++)
        pthread_join(threads[i], NULL);
    cr_assert_eq(args[0].rc, 0);
    cr_assert_eq(args[1].rc, 0);
    cr_assert_eq(order[0], 1, "the first to wait was not served first");
    cr_assert_eq(order[1], 2);
    cr_assert_eq(stats(pool).opened, 1);
    cr_assert_eq(stats(pool).timeouts, 0);
    idem_pool_free(pool);
    free(ci);
}

Test(pool, waiting_caller_gets_a_slot_when_a_held_connection_is_discarded)
{
    char app[96];
    char *ci = setup("slot", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    int order[1] = {0}, next = 0;
    struct waiter_arg arg;
    pthread_t thread;

    o.max_size = 1;
    o.acquire_timeout_ms = 30000;
    idem_pool *pool = new_pool(ci, &o);
    idem_conn *held = acquire(pool);
    arg = (struct waiter_arg){pool, -99, order, &next, &lock, 1, 0};
    cr_assert_eq(pthread_create(&thread, NULL, waiter_thread, &arg), 0);
    wait_for_waiters(pool, 1);
    idem_conn_discard(held);
    idem_pool_release(held);
    pthread_join(thread, NULL);
    cr_assert_eq(arg.rc, 0);
    cr_assert_eq(stats(pool).opened, 2);
    cr_assert_eq(stats(pool).closed_broken, 1);
    idem_pool_free(pool);
    free(ci);
}

/* ---- broken and dirty connections ---- */

Test(pool, backend_killed_while_idle_is_replaced_on_next_acquire)
{
    char app[96];
    char *ci = setup("killidle", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.max_size = 1;
    idem_pool *pool = new_pool(ci, &o);
    idem_conn *conn = acquire(pool);
    long pid = backend_pid(conn);

    idem_pool_release(conn);
    kill_backend(pid);
    conn = acquire(pool);
    cr_assert_neq(backend_pid(conn), pid);
    idem_pool_release(conn);

    idem_pool_stats st = stats(pool);
    cr_assert_eq(st.closed_health, 1);
    cr_assert_eq(st.opened, 2);
    cr_assert_eq(st.size, 1);
    idem_pool_free(pool);
    free(ci);
}

struct log_capture {
    pthread_mutex_t lock;
    char text[4096];
    int warnings;
};

static void capture_log(void *ctx, int level, const char *message)
{
    struct log_capture *c = ctx;

    pthread_mutex_lock(&c->lock);
    if (level >= IDEM_LOG_WARNING)
        c->warnings++;
    strncat(c->text, message, sizeof(c->text) - strlen(c->text) - 2);
    strcat(c->text, "\n");
    pthread_mutex_unlock(&c->lock);
}

Test(pool, backend_killed_while_in_use_gives_unavailable_and_is_discarded)
{
    char app[96];
    char *ci = setup("killused", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    PGresult *res = NULL;

    o.max_size = 1;
    idem_pool *pool = new_pool(ci, &o);
    idem_conn *conn = acquire(pool);
    long pid = backend_pid(conn);

    kill_backend(pid);
    int rc = idem__conn_exec(&res, conn, "SELECT 1", &err);
    cr_assert_eq(rc, IDEM_EUNAVAIL, "%s: %s", idem_err_name(rc), err.message);
    cr_assert_null(res);
    idem_pool_release(conn);
    cr_assert_eq(stats(pool).closed_broken, 1);
    cr_assert_eq(stats(pool).size, 0);

    conn = acquire(pool);
    cr_assert_neq(backend_pid(conn), pid);
    idem_pool_release(conn);
    idem_pool_free(pool);
    free(ci);
}

Test(pool, discarding_a_broken_connection_is_logged)
{
    char app[96];
    char *ci = setup("log", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    struct log_capture cap = {.lock = PTHREAD_MUTEX_INITIALIZER};
    PGresult *res = NULL;

    o.log = capture_log;
    o.log_ctx = &cap;
    idem_pool *pool = new_pool(ci, &o);
    idem_conn *conn = acquire(pool);

    kill_backend(backend_pid(conn));
    cr_assert_eq(idem__conn_exec(&res, conn, "SELECT 1", NULL), IDEM_EUNAVAIL);
    idem_pool_release(conn);
    cr_assert(strstr(cap.text, "closing a connection") != NULL, "log: %s", cap.text);
    cr_assert_geq(cap.warnings, 1);
    idem_pool_free(pool);
    free(ci);
}

Test(pool, connection_released_in_open_transaction_is_rolled_back)
{
    char app[96];
    char *ci = setup("dirtytx", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.max_size = 1;
    idem_pool *pool = new_pool(ci, &o);
    idem_conn *conn = acquire(pool);
    free(query(conn, "CREATE TABLE t (id int)"));
    free(query(conn, "BEGIN"));
    free(query(conn, "INSERT INTO t VALUES (1)"));
    idem_pool_release(conn);

    conn = acquire(pool);
    cr_assert_eq(PQtransactionStatus(idem_conn_pg(conn)), PQTRANS_IDLE);
    cr_assert_eq(query_long(conn, "SELECT count(*) FROM t"), 0);
    idem_pool_release(conn);
    cr_assert_eq(stats(pool).rolled_back, 1);
    cr_assert_eq(stats(pool).opened, 1);
    idem_pool_free(pool);
    free(ci);
}

Test(pool, connection_released_in_failed_transaction_is_rolled_back)
{
    char app[96];
    char *ci = setup("failedtx", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    PGresult *res = NULL;

    o.max_size = 1;
    idem_pool *pool = new_pool(ci, &o);
    idem_conn *conn = acquire(pool);
    free(query(conn, "BEGIN"));
    cr_assert_eq(idem__conn_exec(&res, conn, "SELECT 1/0", NULL), IDEM_EDB);
    cr_assert_eq(PQtransactionStatus(idem_conn_pg(conn)), PQTRANS_INERROR);
    idem_pool_release(conn);

    conn = acquire(pool);
    cr_assert_eq(PQtransactionStatus(idem_conn_pg(conn)), PQTRANS_IDLE);
    cr_assert_eq(query_long(conn, "SELECT 7"), 7);
    idem_pool_release(conn);
    cr_assert_eq(stats(pool).rolled_back, 1);
    cr_assert_eq(stats(pool).opened, 1);
    idem_pool_free(pool);
    free(ci);
}

Test(pool, connection_released_with_a_query_running_is_closed)
{
    char app[96];
    char *ci = setup("busy", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.max_size = 1;
    idem_pool *pool = new_pool(ci, &o);
    idem_conn *conn = acquire(pool);
    long pid = backend_pid(conn);

    cr_assert_eq(PQsendQuery(idem_conn_pg(conn), "SELECT pg_sleep(0.1)"), 1);
    idem_pool_release(conn);
    cr_assert_eq(stats(pool).closed_broken, 1);

    conn = acquire(pool);
    cr_assert_neq(backend_pid(conn), pid);
    idem_pool_release(conn);
    idem_pool_free(pool);
    free(ci);
}

Test(pool, discarded_connection_is_closed_on_release)
{
    char app[96];
    char *ci = setup("discard", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.application_name = app;
    idem_pool *pool = new_pool(ci, &o);
    idem_conn *conn = acquire(pool);

    idem_conn_discard(conn);
    idem_pool_release(conn);
    cr_assert_eq(stats(pool).closed_broken, 1);
    cr_assert_eq(stats(pool).size, 0);
    cr_assert_eq(wait_sessions(app, 0), 0);
    idem_pool_free(pool);
    free(ci);
}

Test(pool, sql_error_keeps_the_connection)
{
    char app[96];
    char *ci = setup("sqlerr", app, sizeof(app));
    idem_error err = IDEM_ERROR_INIT;
    PGresult *res = NULL;
    idem_pool *pool = new_pool(ci, NULL);
    idem_conn *conn = acquire(pool);
    long pid = backend_pid(conn);

    cr_assert_eq(idem__conn_exec(&res, conn, "SELECT 1/0", &err), IDEM_EDB);
    cr_assert_str_eq(err.sqlstate, "22012");
    idem_pool_release(conn);
    conn = acquire(pool);
    cr_assert_eq(backend_pid(conn), pid);
    idem_pool_release(conn);
    cr_assert_eq(stats(pool).closed_broken, 0);
    idem_pool_free(pool);
    free(ci);
}

Test(pool, statement_timeout_cancels_a_long_query_and_keeps_the_connection)
{
    char app[96];
    char *ci = setup("stmttimeout", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    PGresult *res = NULL;

    o.statement_timeout_ms = 100;
    idem_pool *pool = new_pool(ci, &o);
    idem_conn *conn = acquire(pool);

    cr_assert_eq(idem__conn_exec(&res, conn, "SELECT pg_sleep(30)", &err), IDEM_EDB);
    cr_assert_str_eq(err.sqlstate, "57014");
    cr_assert_eq(query_long(conn, "SELECT 3"), 3);
    idem_pool_release(conn);
    cr_assert_eq(stats(pool).closed_broken, 0);
    idem_pool_free(pool);
    free(ci);
}

/* ---- health check, lifetime, idle timeout ---- */

static char *last_query_of(long pid)
{
    PGconn *admin = pgtest_connect("dbname=postgres");
    char text[32];
    const char *param = text;
    PGresult *res;
    char *q;

    snprintf(text, sizeof(text), "%ld", pid);
    res = PQexecParams(admin, "SELECT query FROM pg_stat_activity WHERE pid = $1::int", 1, NULL,
                       &param, NULL, NULL, 0);
    cr_assert_eq(PQntuples(res), 1, "%s", PQerrorMessage(admin));
    q = strdup(PQgetvalue(res, 0, 0));
    PQclear(res);
    PQfinish(admin);
    return q;
}

Test(pool, connection_idle_past_the_threshold_is_checked_with_a_round_trip)
{
    char app[96];
    char *ci = setup("health", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.max_size = 1;
    o.health_check_idle_ms = 20;
    idem_pool *pool = new_pool(ci, &o);
    idem_conn *conn = acquire(pool);
    long pid = backend_pid(conn);

    idem_pool_release(conn);
    sleep_ms(60);
    conn = acquire(pool);
    char *last = last_query_of(pid);
    cr_assert_str_eq(last, "", "no round trip on checkout: last query was \"%s\"", last);
    free(last);
    idem_pool_release(conn);
    idem_pool_free(pool);
    free(ci);
}

Test(pool, connection_idle_below_the_threshold_is_handed_out_without_a_round_trip)
{
    char app[96];
    char *ci = setup("nohealth", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.max_size = 1;
    o.health_check_idle_ms = 600000;
    idem_pool *pool = new_pool(ci, &o);
    idem_conn *conn = acquire(pool);
    long pid = backend_pid(conn);

    idem_pool_release(conn);
    conn = acquire(pool);
    char *last = last_query_of(pid);
    cr_assert_str_eq(last, "SELECT pg_backend_pid()");
    free(last);
    idem_pool_release(conn);
    idem_pool_free(pool);
    free(ci);
}

Test(pool, connection_past_max_lifetime_is_closed_on_release)
{
    char app[96];
    char *ci = setup("lifetime", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.max_lifetime_ms = 100;
    idem_pool *pool = new_pool(ci, &o);
    idem_conn *conn = acquire(pool);

    sleep_ms(150);
    idem_pool_release(conn);
    cr_assert_eq(stats(pool).closed_lifetime, 1);
    cr_assert_eq(stats(pool).size, 0);
    idem_pool_free(pool);
    free(ci);
}

Test(pool, idle_connections_above_min_idle_are_closed_after_idle_timeout)
{
    char app[96];
    char *ci = setup("idletimeout", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.min_idle = 1;
    o.max_size = 3;
    o.idle_timeout_ms = 40;
    idem_pool *pool = new_pool(ci, &o);
    idem_conn *a = acquire(pool);
    idem_conn *b = acquire(pool);
    idem_conn *c = acquire(pool);

    idem_pool_release(a);
    idem_pool_release(b);
    idem_pool_release(c);
    cr_assert_eq(stats(pool).idle, 3);
    sleep_ms(100);
    idem_pool_release(acquire(pool));

    idem_pool_stats st = stats(pool);
    cr_assert_eq(st.closed_idle, 2);
    cr_assert_eq(st.size, 1);
    cr_assert_eq(st.idle, 1);
    idem_pool_free(pool);
    free(ci);
}

/* ---- fork ---- */

Test(pool, acquire_in_a_forked_child_fails_with_einval)
{
    char app[96];
    char *ci = setup("fork", app, sizeof(app));
    idem_pool *pool = new_pool(ci, NULL);
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
    idem_conn *conn = acquire(pool);
    cr_assert_eq(query_long(conn, "SELECT 5"), 5);
    idem_pool_release(conn);
    cr_assert_eq(stats(pool).opened, 1, "the parent's connection did not survive the child");
    idem_pool_free(pool);
    free(ci);
}

/* ---- prepared statements ---- */

Test(pool, statement_is_prepared_once_per_connection)
{
    char app[96];
    char *ci = setup("prepared", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    long sum = 0;

    o.max_size = 1;
    idem_pool *pool = new_pool(ci, &o);
    for (int i = 0; i < 3; i++) {
        idem_conn *conn = acquire(pool);
        cr_assert_eq(exec_add(conn, &sum, &err), 0, "%s", err.message);
        cr_assert_eq(sum, 42);
        cr_assert_eq(prepared_here(conn), 1);
        idem_pool_release(conn);
    }
    /* Inside a transaction, a second PREPARE of the same name would abort it. */
    idem_conn *conn = acquire(pool);
    free(query(conn, "BEGIN"));
    cr_assert_eq(exec_add(conn, &sum, &err), 0, "%s", err.message);
    cr_assert_eq(PQtransactionStatus(idem_conn_pg(conn)), PQTRANS_INTRANS);
    free(query(conn, "COMMIT"));
    idem_pool_release(conn);
    idem_pool_free(pool);
    free(ci);
}

Test(pool, statement_is_prepared_on_each_connection)
{
    char app[96];
    char *ci = setup("prepeach", app, sizeof(app));
    idem_error err = IDEM_ERROR_INIT;
    long sum = 0;
    idem_pool *pool = new_pool(ci, NULL);
    idem_conn *a = acquire(pool);
    idem_conn *b = acquire(pool);

    cr_assert_eq(exec_add(a, &sum, &err), 0, "%s", err.message);
    cr_assert_eq(prepared_here(b), 0);
    cr_assert_eq(exec_add(b, &sum, &err), 0, "%s", err.message);
    cr_assert_eq(prepared_here(a), 1);
    cr_assert_eq(prepared_here(b), 1);
    idem_pool_release(a);
    idem_pool_release(b);
    idem_pool_free(pool);
    free(ci);
}

Test(pool, statement_is_prepared_again_on_a_new_connection_after_a_kill)
{
    char app[96];
    char *ci = setup("prepkill", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    long sum = 0;

    o.max_size = 1;
    idem_pool *pool = new_pool(ci, &o);
    idem_conn *conn = acquire(pool);
    cr_assert_eq(exec_add(conn, &sum, &err), 0, "%s", err.message);
    kill_backend(backend_pid(conn));
    cr_assert_eq(exec_add(conn, &sum, &err), IDEM_EUNAVAIL);
    idem_pool_release(conn);

    conn = acquire(pool);
    sum = 0;
    cr_assert_eq(exec_add(conn, &sum, &err), 0, "%s", err.message);
    cr_assert_eq(sum, 42);
    cr_assert_eq(prepared_here(conn), 1);
    idem_pool_release(conn);
    cr_assert_eq(stats(pool).opened, 2);
    idem_pool_free(pool);
    free(ci);
}

Test(pool, forgetting_prepared_statements_makes_the_next_use_prepare_again)
{
    char app[96];
    char *ci = setup("forget", app, sizeof(app));
    idem_error err = IDEM_ERROR_INIT;
    long sum = 0;
    idem_pool *pool = new_pool(ci, NULL);
    idem_conn *conn = acquire(pool);

    cr_assert_eq(exec_add(conn, &sum, &err), 0, "%s", err.message);
    free(query(conn, "DEALLOCATE ALL"));
    cr_assert_eq(exec_add(conn, &sum, &err), IDEM_EDB, "the statement was prepared again");
    cr_assert_str_eq(err.sqlstate, "26000");
    idem__conn_forget_prepared(conn);
    cr_assert_eq(exec_add(conn, &sum, &err), 0, "%s", err.message);
    cr_assert_eq(sum, 42);
    idem_pool_release(conn);
    idem_pool_free(pool);
    free(ci);
}

Test(pool, prepare_error_reports_the_statement_and_sqlstate)
{
    static const idem__stmt bad = {"idem_pooltest_bad", "SELECT * FROM no_such_table", 0};
    char app[96];
    char *ci = setup("prepbad", app, sizeof(app));
    idem_error err = IDEM_ERROR_INIT;
    PGresult *res = NULL;
    idem_pool *pool = new_pool(ci, NULL);
    idem_conn *conn = acquire(pool);

    cr_assert_eq(idem__conn_exec_prepared(&res, conn, &bad, NULL, NULL, NULL, 0, &err), IDEM_EDB);
    cr_assert_null(res);
    cr_assert_str_eq(err.sqlstate, "42P01");
    cr_assert(strstr(err.message, "idem_pooltest_bad") != NULL, "%s", err.message);
    idem_pool_release(conn);
    cr_assert_eq(stats(pool).closed_broken, 0);
    idem_pool_free(pool);
    free(ci);
}

/* ---- a server that stops answering ---- */

/* Freeze a backend (as if the network dropped its packets, the socket staying open). */
static void freeze_backend(long pid, int frozen)
{
    cr_assert_eq(kill((pid_t)pid, frozen ? SIGSTOP : SIGCONT), 0, "kill(%ld): %s", pid,
                 strerror(errno));
}

/* The pool closed its side: thawed, the backend sees that and exits by itself. */
static void end_frozen_backend(long pid)
{
    freeze_backend(pid, 0);
}

Test(pool, health_round_trip_to_a_silent_server_gives_up_at_connect_timeout, .timeout = 60)
{
    char app[96];
    char *ci = setup("silenthealth", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.max_size = 1;
    o.health_check_idle_ms = 0;
    o.connect_timeout_ms = 300;
    idem_pool *pool = new_pool(ci, &o);
    idem_conn *conn = acquire(pool);
    long pid = backend_pid(conn);

    idem_pool_release(conn);
    freeze_backend(pid, 1);
    sleep_ms(20);
    /* Without a bound this acquire would wait for the kernel's TCP timeout. */
    conn = acquire(pool);
    cr_assert_neq(backend_pid(conn), pid);
    idem_pool_release(conn);
    end_frozen_backend(pid);
    cr_assert_eq(stats(pool).closed_health, 1);
    idem_pool_free(pool);
    free(ci);
}

Test(pool, rollback_on_release_to_a_silent_server_gives_up_and_closes, .timeout = 60)
{
    char app[96];
    char *ci = setup("silentrelease", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.max_size = 1;
    o.connect_timeout_ms = 300;
    idem_pool *pool = new_pool(ci, &o);
    idem_conn *conn = acquire(pool);
    long pid = backend_pid(conn);

    free(query(conn, "BEGIN"));
    freeze_backend(pid, 1);
    idem_pool_release(conn); /* must return: the ROLLBACK is bounded */
    end_frozen_backend(pid);
    idem_pool_stats st = stats(pool);
    cr_assert_eq(st.closed_broken, 1);
    cr_assert_eq(st.size, 0);
    conn = acquire(pool);
    cr_assert_neq(backend_pid(conn), pid);
    idem_pool_release(conn);
    idem_pool_free(pool);
    free(ci);
}

Test(pool, stats_in_a_forked_child_are_zero_and_never_block)
{
    char app[96];
    char *ci = setup("forkstats", app, sizeof(app));
    idem_pool *pool = new_pool(ci, NULL);
    pid_t child = fork();

    cr_assert_neq(child, -1);
    if (child == 0) {
        idem_pool_stats st;
        memset(&st, 0xff, sizeof(st));
        idem_pool_stats_get(&st, pool);
        _exit(st.size == 0 && st.opened == 0 && st.acquires == 0 ? 0 : 1);
    }
    int status = 0;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child saw the parent's counters");
    cr_assert_eq(stats(pool).opened, 1, "the parent's counters are intact");
    idem_pool_free(pool);
    free(ci);
}

Test(pool, connection_whose_statements_were_deallocated_is_replaced)
{
    char app[96];
    char *ci = setup("dealloc", app, sizeof(app));
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    long sum = 0;

    o.max_size = 1;
    idem_pool *pool = new_pool(ci, &o);
    idem_conn *conn = acquire(pool);
    long pid = backend_pid(conn);

    cr_assert_eq(exec_add(conn, &sum, &err), 0, "%s", err.message);
    free(query(conn, "DEALLOCATE ALL"));
    cr_assert_eq(exec_add(conn, &sum, &err), IDEM_EDB);
    cr_assert_str_eq(err.sqlstate, "26000");
    idem_pool_release(conn);
    conn = acquire(pool);
    cr_assert_neq(backend_pid(conn), pid, "the connection that lost its statements is gone");
    cr_assert_eq(exec_add(conn, &sum, &err), 0, "%s", err.message);
    cr_assert_eq(sum, 42);
    idem_pool_release(conn);
    idem_pool_free(pool);
    free(ci);
}
