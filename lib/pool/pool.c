/* Checkout and release (include/idem/pool.h): every call of the contract runs on a
 * connection checked out here, healthy, and given back clean (a transaction left open is
 * rolled back) or closed when it failed, ended or outlived its lifetime. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checkout.h"
#include "core/clock.h"
#include "random.h"
#include "conn.h"
#include "error.h"
#include "log.h"
#include "pool_internal.h"

/* libpq's notices (server warnings, messages arriving while idle) would go to stderr. */
static void route_notice(void *arg, const char *message)
{
    const idem_pool *pool = arg;

    idem__log(pool->opts.log, pool->opts.log_ctx, IDEM_LOG_INFO, "pool: server says: %s", message);
}

/* Connections are closed up to 10 % before max_lifetime_ms so that those opened
 * together do not all expire together. */
static long long expiry_locked(idem_pool *pool, long long now)
{
    unsigned int life = pool->opts.max_lifetime_ms;

    if (life == 0)
        return LLONG_MAX;
    return now + life - (long long)(idem__random64() % (life / 10 + 1));
}

/* A connection comes back: the longest-waiting caller gets it (told by idem__pool_wake_all()), else
 * it goes idle. */
static void give_conn_locked(idem_pool *pool, idem_conn *conn, long long now, waiter **woken)
{
    waiter *w = idem__pool_dequeue_locked(pool);

    conn->idle_since_ms = now;
    if (w != NULL) {
        w->conn = conn;
        pool->st.acquires++;
        idem__pool_hand_over_locked(w, woken);
        return;
    }
    conn->next = pool->idle;
    pool->idle = conn;
    pool->nidle++;
}

/* A connection is gone: its slot goes to the longest-waiting caller (told by
 * idem__pool_wake_all()), else it is freed. */
static void give_slot_locked(idem_pool *pool, waiter **woken)
{
    waiter *w = idem__pool_dequeue_locked(pool);

    if (w == NULL) {
        pool->size--;
        return;
    }
    w->slot = 1;
    pool->nopening++;
    idem__pool_hand_over_locked(w, woken);
}

/* Move to *closing the idle connections past their lifetime, or idle too long above
 * min_idle. No background thread: acquire and release call this, at most every
 * prune_every_ms. */
static void prune_locked(idem_pool *pool, long long now, idem_conn **closing, waiter **woken)
{
    const idem_pool_options *o = &pool->opts;
    idem_conn **p = &pool->idle;

    if (now < pool->next_prune_ms)
        return;
    pool->next_prune_ms = now + pool->prune_every_ms;
    while (*p != NULL) {
        idem_conn *c = *p;

        if (now >= c->expires_ms)
            c->close_reason = IDEM__CLOSE_LIFETIME;
        else if (o->idle_timeout_ms > 0 && pool->nidle > o->min_idle &&
                 now - c->idle_since_ms >= o->idle_timeout_ms)
            c->close_reason = IDEM__CLOSE_IDLE;
        if (c->close_reason == 0) {
            p = &c->next;
            continue;
        }
        *p = c->next;
        pool->nidle--;
        idem__pool_count_close_locked(pool, c->close_reason);
        give_slot_locked(pool, woken);
        c->next = *closing;
        *closing = c;
    }
}

idem_conn *idem__pool_pop_idle_locked(idem_pool *pool)
{
    idem_conn *conn = pool->idle;

    pool->idle = conn->next;
    conn->next = NULL;
    pool->nidle--;
    return conn;
}

/* How long one wait of a checkout may last, and what bounds it (for the messages). */
typedef struct step_limit {
    unsigned int ms; /* 0 = no limit, where the option allows none */
    const char *by;  /* the option's name, or BY_DEADLINE */
} step_limit;

#define BY_DEADLINE "what was left of the call's deadline_ms"

/* The limit of a wait that starts now: @option_ms, the pool's option named @option (0 = no
 * limit where @zero_is_none), or what is left until @until (when the checkout must be done:
 * a monotonic time, LLONG_MAX for none) when that is sooner. */
static step_limit step_limit_for(unsigned int option_ms, int zero_is_none, const char *option,
                                 long long until)
{
    step_limit l = {option_ms, option};
    long long left;

    if (until == LLONG_MAX)
        return l;
    left = until - (long long)idem__now_ms();
    left = left < 1 ? 1 : left > UINT_MAX ? UINT_MAX : left;
    if ((zero_is_none && option_ms == 0) || left < (long long)option_ms) {
        l.ms = (unsigned int)left;
        l.by = BY_DEADLINE;
    }
    return l;
}

static int exhausted_locked(const idem_pool *pool, step_limit wait, idem_error *err)
{
    unsigned int open = pool->size - pool->nopening;

    return idem__error_set(err, IDEM_EUNAVAIL,
                           "pool exhausted: no connection free within %u ms "
                           "(%s); size %u of max_size %u, idle %u, in use %u, "
                           "waiting %u; acquires %llu, timeouts %llu",
                           wait.ms, wait.by, open, pool->opts.max_size, pool->nidle,
                           open - pool->nidle, pool->nwaiting, pool->st.acquires,
                           pool->st.timeouts);
}

/* Wait, queued as @w since the pool's lock was last held, until a release hands over a
 * connection or a slot, or the time is up (acquire_timeout_ms, or the call's deadline when
 * sooner). Called and returns without the pool's lock; takes it only when the time is up. */
static int wait_handed(idem_conn **out, idem_pool *pool, waiter *w, step_limit limit,
                       idem_error *err)
{
    struct timespec deadline;
    int timed_out = 0, done, rc = 0;

    idem__deadline_after(&deadline, limit.ms);
    pthread_mutex_lock(&w->lock);
    while (!w->done && !timed_out)
        timed_out = pthread_cond_timedwait(&w->wake, &w->lock, &deadline) == ETIMEDOUT;
    done = w->done;
    pthread_mutex_unlock(&w->lock);
    if (!done) {
        pthread_mutex_lock(&pool->lock);
        if (w->conn == NULL && !w->slot) {
            idem__pool_unlink_waiter_locked(pool, w);
            pool->st.timeouts++;
            rc = exhausted_locked(pool, limit, err);
        }
        pthread_mutex_unlock(&pool->lock);
        /* Handed over as the time ran out: the hand-over's idem__pool_wake_all() is under way and
         * touches *w; go only once it is done. */
        pthread_mutex_lock(&w->lock);
        while (rc == 0 && !w->done)
            pthread_cond_wait(&w->wake, &w->lock);
        pthread_mutex_unlock(&w->lock);
    }
    if (rc == 0)
        *out = w->conn;
    return rc;
}

/* An idle connection (*out), else a reserved slot to open one in (*out NULL), else wait
 * for either, until @until at the latest. *now_out: the time it started. */
static int checkout(idem_conn **out, long long *now_out, idem_pool *pool, long long until,
                    idem_error *err)
{
    idem_conn *pruned = NULL;
    waiter w = {.conn = NULL, .slot = 0, .done = 0, .next = NULL}, *woken = NULL;
    step_limit limit = {0, NULL};
    long long now = idem__coarse_ms();
    int rc = 0, queued = 0;

    *now_out = now;
    pthread_mutex_lock(&pool->lock);
    prune_locked(pool, now, &pruned, &woken);
    if (pool->idle != NULL) {
        *out = idem__pool_pop_idle_locked(pool);
        pool->st.acquires++;
    } else if (pool->size < pool->opts.max_size) {
        pool->size++;
        pool->nopening++;
        *out = NULL;
    } else if (pthread_mutex_init(&w.lock, NULL) != 0) {
        rc = idem__error_set(err, IDEM_ENOMEM, "cannot create a mutex");
    } else if (pthread_cond_init(&w.wake, &pool->cond_attr) != 0) {
        pthread_mutex_destroy(&w.lock);
        rc = idem__error_set(err, IDEM_ENOMEM, "cannot create a condition variable");
    } else {
        limit = step_limit_for(pool->opts.acquire_timeout_ms, 0, "acquire_timeout_ms", until);
        idem__pool_enqueue_locked(pool, &w);
        queued = 1;
    }
    pthread_mutex_unlock(&pool->lock);
    idem__pool_wake_all(woken);
    idem__pool_close_list(pool, pruned);
    if (queued) {
        rc = wait_handed(out, pool, &w, limit, err);
        pthread_cond_destroy(&w.wake);
        pthread_mutex_destroy(&w.lock);
    }
    return rc;
}

/* PgBouncer refuses the startup option that carries statement_timeout_ms (unless told to
 * ignore it, and then the timeout is lost): say which setting avoids sending it. Its
 * refusal carries no SQLSTATE that libpq passes on, so it is told by PgBouncer's own words,
 * which it never translates (the one message idem reads besides a refused login's,
 * core/connect.c). Asking the server again without the option would not tell it: a server
 * starting up refuses the first connection and takes the second. */
static int explain_refused_options(const idem_pool *pool, int rc, idem_error *err)
{
    if (rc == 0 || err == NULL || pool->pg_options == NULL ||
        strstr(err->message, "unsupported startup parameter") == NULL)
        return rc;
    err->code = IDEM_EINVAL;
    snprintf(err->field, sizeof(err->field), "pooler");
    snprintf(err->hint, sizeof(err->hint),
             "behind PgBouncer set idem_pool_options.pooler to IDEM_POOLER_TRANSACTION (or "
             "IDEM_POOLER_AUTO): statement_timeout_ms is then set inside each transaction");
    return idem__error_context(err, "pooler: a connection pooler refuses the startup option that "
                                    "carries statement_timeout_ms; set idem_pool_options.pooler");
}

/* Open @conn's libpq connection and ask whether its database has the citus extension
 * (tenant.h), both within one limit: connect_timeout_ms, or the call's deadline when
 * sooner. A question the server refused counts as no; one it did not answer in time fails
 * the opening, the connection closed. */
static int open_conn(idem_conn *conn, idem_pool *pool, long long until, idem_error *err)
{
    step_limit open = step_limit_for(pool->opts.connect_timeout_ms, 1, "connect_timeout_ms", until);
    long long open_until = (long long)idem__now_ms() + open.ms;
    idem_error asked = IDEM_ERROR_INIT;
    long long left;
    int rc = explain_refused_options(pool,
                                     idem__pg_connect(&conn->pg, pool->keys, pool->values, open.ms,
                                                      open.by, route_notice, pool, err),
                                     err);

    if (rc == 0) {
        left = open_until - (long long)idem__now_ms();
        rc = idem__pg_has_citus(&conn->citus, conn->pg,
                                open.ms == 0 ? 0
                                : left < 1   ? 1
                                             : (unsigned int)left,
                                &asked);
        if (rc == IDEM_EUNAVAIL && err != NULL) {
            idem__error_copy(err, &asked);
            idem__error_context(err, "cannot open a connection within %u ms (%s)", open.ms,
                                open.by);
        }
        rc = rc == IDEM_EUNAVAIL ? rc : 0;
    }
    if (rc != 0)
        idem__error_redact(err, pool->conninfo);
    return rc;
}

/* Open a connection in a slot the caller reserved (counted in size and nopening),
 * outside the lock; on failure the slot goes to the next waiter or is given up. */
int idem__pool_open_in_slot(idem_conn **out, idem_pool *pool, int count_acquire, long long until,
                            idem_error *err)
{
    idem_conn *conn = calloc(1, sizeof(*conn));
    waiter *woken = NULL;
    long long now;
    int rc;

    if (conn == NULL)
        rc = idem__error_set(err, IDEM_ENOMEM, "out of memory opening a connection");
    else
        rc = open_conn(conn, pool, until, err);
    now = idem__coarse_ms();
    pthread_mutex_lock(&pool->lock);
    pool->nopening--;
    if (rc == 0) {
        pool->st.opened++;
        pool->st.acquires += count_acquire != 0;
        conn->expires_ms = expiry_locked(pool, now);
    } else {
        pool->st.connect_failures++;
        give_slot_locked(pool, &woken);
    }
    pthread_mutex_unlock(&pool->lock);
    idem__pool_wake_all(woken);
    if (rc < 0) {
        idem__conn_close(conn);
        return rc;
    }
    conn->pool = pool;
    conn->pool_text_epoch = &pool->text_epoch;
    conn->idle_since_ms = now;
    conn->unnamed = pool->unnamed;
    conn->statement_timeout_ms = pool->opts.statement_timeout_ms;
    conn->session_timeout = pool->pg_options != NULL && pool->opts.statement_timeout_ms > 0;
    conn->kept_timeout_ms = 0;
    conn->keep_refused = 0;
    *out = conn;
    return 0;
}

static unsigned int connect_limit(const idem_pool *pool, long long until)
{
    return step_limit_for(pool->opts.connect_timeout_ms, 1, "connect_timeout_ms", until).ms;
}

/* Past health_check_idle_ms, a round trip. Below it, a look for input waiting (the
 * server saying goodbye), except on a connection released within the current clock tick:
 * that would cost a system call per acquire under load for almost nothing, and a
 * connection that fails in use is discarded anyway. */
static int checkout_ok(const idem_pool *pool, idem_conn *conn, long long now, long long until,
                       uint64_t deadline_ms)
{
    long long idle = now - conn->idle_since_ms;

    if (idle < 1 ? PQstatus(conn->pg) != CONNECTION_OK
                 : !idem__conn_alive(conn, idle > (long long)pool->opts.health_check_idle_ms,
                                     connect_limit(pool, until)))
        return 0;
    /* Only a store's timed call runs under the statement_timeout one of them left on the
     * session (exec.h): anything else gets the session's own back first. */
    return deadline_ms != 0 || conn->kept_timeout_ms == 0 ||
           idem__conn_reset_kept_timeout(conn, connect_limit(pool, until));
}

/* A connection failed its checkout check: close it, keeping its slot to open another. */
static void retire_unhealthy(idem_pool *pool, idem_conn *conn)
{
    pthread_mutex_lock(&pool->lock);
    idem__pool_count_close_locked(pool, IDEM__CLOSE_HEALTH);
    pool->st.acquires--; /* counted when taken; counted again if its replacement opens */
    pool->nopening++;
    pthread_mutex_unlock(&pool->lock);
    conn->close_reason = IDEM__CLOSE_HEALTH;
    idem__pool_close_conn(pool, conn);
}

int idem__pool_checkout(idem_conn **out, idem_pool *pool, uint64_t deadline_ms, idem_error *err)
{
    /* Every wait of the checkout ends by then: the deadline, or for a checkout that starts
     * past it (to settle a lost reply) IDEM__MIN_WAIT_MS from now. */
    long long until = idem__deadline_wait_until(deadline_ms);
    idem_conn *conn = NULL;
    long long now = 0;
    int rc;

    if (out == NULL || pool == NULL)
        return idem__error_field(err, IDEM_EINVAL, out == NULL ? "out" : "pool",
                                 "must not be NULL");
    if (pool->generation != idem__fork_generation)
        return idem__error_field(err, IDEM_EINVAL, "pool",
                                 "was created by the parent process; after fork(), the child "
                                 "must create its own pool");
    rc = checkout(&conn, &now, pool, until, err);
    if (rc == 0 && conn != NULL && !checkout_ok(pool, conn, now, until, deadline_ms)) {
        retire_unhealthy(pool, conn);
        conn = NULL;
    }
    if (rc == 0 && conn == NULL)
        rc = idem__pool_open_in_slot(&conn, pool, 1, until, err);
    if (rc == 0) {
        conn->deadline_ms = deadline_ms;
        *out = conn;
    }
    return rc;
}

int idem_pool_acquire(idem_conn **out, idem_pool *pool, idem_error *err)
{
    return idem__pool_checkout(out, pool, 0, err);
}

void idem_pool_release(idem_conn *conn)
{
    idem_pool *pool;
    idem_conn *pruned = NULL;
    waiter *woken = NULL;
    enum idem__conn_state state;
    long long now;
    int reason = 0;

    if (conn == NULL || conn->pool->generation != idem__fork_generation)
        return;
    pool = conn->pool;
    /* A ROLLBACK left to the release is the call's last wait, under its deadline. */
    state = idem__conn_clean(conn,
                             step_limit_for(pool->opts.connect_timeout_ms, 1, "connect_timeout_ms",
                                            idem__deadline_wait_until(conn->deadline_ms))
                                 .ms);
    conn->deadline_ms = 0;
    conn->while_waiting = NULL;
    now = idem__coarse_ms();
    if (state == IDEM__CONN_BROKEN)
        reason = IDEM__CLOSE_BROKEN;
    else if (state == IDEM__CONN_ENDED)
        reason = IDEM__CLOSE_ENDED;
    else if (now >= conn->expires_ms)
        reason = IDEM__CLOSE_LIFETIME;
    conn->close_reason = reason;
    pthread_mutex_lock(&pool->lock);
    pool->st.rolled_back += state == IDEM__CONN_ROLLED_BACK;
    if (reason == 0) {
        give_conn_locked(pool, conn, now, &woken); /* from here on, conn may be another's */
    } else {
        idem__pool_count_close_locked(pool, reason);
        give_slot_locked(pool, &woken);
    }
    prune_locked(pool, now, &pruned, &woken);
    pthread_mutex_unlock(&pool->lock);
    idem__pool_wake_all(woken);
    if (reason != 0)
        idem__pool_close_conn(pool, conn);
    idem__pool_close_list(pool, pruned);
}

PGconn *idem_conn_pg(idem_conn *conn)
{
    return conn != NULL ? conn->pg : NULL;
}

void idem_conn_discard(idem_conn *conn)
{
    if (conn != NULL)
        conn->discard = 1;
}
