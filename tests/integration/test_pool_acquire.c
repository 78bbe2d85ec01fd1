/* Acquiring from many threads: no connection shared, max_size kept, waiters served
 * in arrival order, a timeout when every connection stays held. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pooltest.h"
#include "exec.h"

TestSuite(pool_acquire, .init = pooltest_init, .fini = pooltest_fini);

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
    idem_pool_stats st = IDEM_POOL_STATS_INIT;

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

Test(pool_acquire, threads_never_share_a_connection_and_pool_stays_within_max_size)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    struct hammer h = {.pool = NULL};
    struct hammer_arg args[HAMMER_THREADS];
    pthread_t threads[HAMMER_THREADS];

    o.max_size = HAMMER_MAX;
    o.acquire_timeout_ms = 60000;
    o.application_name = pooltest_app();
    h.pool = pooltest_open(&o);
    pthread_mutex_init(&h.lock, NULL);
    for (int i = 0; i < HAMMER_THREADS; i++) {
        args[i] = (struct hammer_arg){&h, i};
        cr_assert_eq(pthread_create(&threads[i], NULL, hammer_thread, &args[i]), 0);
    }
    for (int i = 0; i < HAMMER_THREADS; i++)
        pthread_join(threads[i], NULL);

    idem_pool_stats st = pooltest_stats(h.pool);
    cr_assert_eq(h.failures, 0, "%d failures, first: %s", h.failures, h.failure);
    cr_assert_eq(h.shared, 0, "a connection was used by two threads at once");
    cr_assert_eq(h.over_max, 0, "more than max_size connections");
    cr_assert_eq(st.acquires, HAMMER_THREADS * HAMMER_ROUNDS);
    cr_assert_eq(st.in_use, 0);
    cr_assert_eq(st.waiting, 0);
    cr_assert_leq(st.opened, HAMMER_MAX);
    cr_assert_eq(st.idle, st.size);
    cr_assert_leq(pooltest_sessions(pooltest_app()), HAMMER_MAX);
    pooltest_close();
    cr_assert_eq(pooltest_wait_sessions(pooltest_app(), 0), 0,
                 "connections left open after idem_pool_free");
    pthread_mutex_destroy(&h.lock);
}

Test(pool_acquire, acquire_times_out_with_unavailable_when_all_connections_are_held)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_conn *extra = NULL;

    o.max_size = 2;
    o.acquire_timeout_ms = 200;
    idem_pool *pool = pooltest_open(&o);
    idem_conn *a = pooltest_acquire(pool);
    idem_conn *b = pooltest_acquire(pool);
    int rc = idem_pool_acquire(&extra, pool, &err);
    idem_pool_stats st = pooltest_stats(pool);

    cr_assert_eq(rc, IDEM_EUNAVAIL, "%s", idem_err_name(rc));
    cr_assert_null(extra);
    cr_assert(strstr(err.message, "pool exhausted") != NULL, "%s", err.message);
    cr_assert(strstr(err.message, "in use 2") != NULL, "%s", err.message);
    cr_assert_eq(st.timeouts, 1);
    cr_assert_eq(st.waiting, 0);
    cr_assert_eq(st.in_use, 2);
    idem_pool_release(a);
    idem_pool_release(b);
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
        pgtest_sleep_ms(a->hold_ms);
        idem_pool_release(conn);
    }
    return NULL;
}

static void wait_for_waiters(idem_pool *pool, unsigned int n)
{
    for (int i = 0; i < 500 && pooltest_stats(pool).waiting != n; i++)
        pgtest_sleep_ms(10);
    cr_assert_eq(pooltest_stats(pool).waiting, n);
}

Test(pool_acquire, waiting_callers_get_released_connections_in_arrival_order)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    int order[2] = {0, 0}, next = 0;
    struct waiter_arg args[2];
    pthread_t threads[2];

    o.max_size = 1;
    o.acquire_timeout_ms = 30000;
    idem_pool *pool = pooltest_open(&o);
    idem_conn *held = pooltest_acquire(pool);
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
    cr_assert_eq(pooltest_stats(pool).opened, 1);
    cr_assert_eq(pooltest_stats(pool).timeouts, 0);
}

Test(pool_acquire, waiting_caller_gets_a_slot_when_a_held_connection_is_discarded)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    int order[1] = {0}, next = 0;
    struct waiter_arg arg;
    pthread_t thread;

    o.max_size = 1;
    o.acquire_timeout_ms = 30000;
    idem_pool *pool = pooltest_open(&o);
    idem_conn *held = pooltest_acquire(pool);
    arg = (struct waiter_arg){pool, -99, order, &next, &lock, 1, 0};
    cr_assert_eq(pthread_create(&thread, NULL, waiter_thread, &arg), 0);
    wait_for_waiters(pool, 1);
    idem_conn_discard(held);
    idem_pool_release(held);
    pthread_join(thread, NULL);
    cr_assert_eq(arg.rc, 0);
    cr_assert_eq(pooltest_stats(pool).opened, 2);
    cr_assert_eq(pooltest_stats(pool).closed_broken, 1);
}
