#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "error.h"
#include "log.h"
#include "pool_conn.h"

enum close_reason { CLOSE_BROKEN = 1, CLOSE_LIFETIME, CLOSE_IDLE, CLOSE_HEALTH };

/* A thread queued in idem_pool_acquire(). Callers are served in arrival order, and a
 * release hands its connection (or a closed connection's slot) straight to the first. */
typedef struct waiter {
    pthread_cond_t wake;
    idem_conn *conn; /* handed over: the caller's now */
    int slot;        /* or: a slot reserved for the caller to open a connection in */
    struct waiter *next;
} waiter;

#define MAX_KEYS 9

/* TCP defaults, given before the conninfo so that it can override them: a peer that
 * vanished (a failover, a cable, a firewall that drops instead of refusing) is noticed on
 * an idle connection in about a minute, and with data unacknowledged in 30 s, instead of
 * the kernel's two hours and fifteen minutes. Unix-domain sockets ignore them. */
static const char *const tcp_keys[] = {"keepalives", "keepalives_idle", "keepalives_interval",
                                       "keepalives_count", "tcp_user_timeout"};
static const char *const tcp_values[] = {"1", "30", "10", "3", "30000"};
#define TCP_KEYS (sizeof(tcp_keys) / sizeof(tcp_keys[0]))

struct idem_pool {
    pthread_mutex_t lock;
    pthread_condattr_t cond_attr; /* CLOCK_MONOTONIC, for the waiters' conditions */
    idem_pool_options opts;       /* application_name points to app_name */
    unsigned long generation;     /* fork_generation when created */
    const char *keys[MAX_KEYS];
    const char *values[MAX_KEYS];
    char *conninfo;
    char *app_name;
    char *pg_options;
    /* Below: under lock. Invariant: waiters queue only when no connection is idle and
     * every slot is taken, so a release always serves the queue first. */
    idem_conn *idle; /* most recently released first */
    waiter *first;
    waiter *last;
    unsigned int size;     /* open connections plus slots being opened */
    unsigned int nidle;    /* connections in the idle list */
    unsigned int nopening; /* slots being opened */
    unsigned int nwaiting;
    long long next_prune_ms;
    long long prune_every_ms;
    idem_pool_stats st; /* the counters; idem_pool_stats_get() adds the gauges */
};

/* Incremented in the child of every fork(): a pool used where it differs from the value
 * it was created with belongs to another process. */
static unsigned long fork_generation;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static int fork_hook_rc;

static void on_fork_child(void)
{
    fork_generation++;
}

static void install_fork_hook(void)
{
    fork_hook_rc = pthread_atfork(NULL, NULL, on_fork_child);
}

static void chomp(char *s)
{
    size_t n = strlen(s);

    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' '))
        s[--n] = '\0';
}

/* libpq's notices (server warnings, messages arriving while idle) would go to stderr. */
static void route_notice(void *arg, const char *message)
{
    const idem_pool *pool = arg;

    idem__log(pool->opts.log, pool->opts.log_ctx, IDEM_LOG_INFO, "pool: server says: %s", message);
}

static const char *reason_text(int reason)
{
    switch (reason) {
    case CLOSE_LIFETIME:
        return "max_lifetime_ms reached";
    case CLOSE_IDLE:
        return "idle_timeout_ms reached";
    case CLOSE_HEALTH:
        return "failed the check on checkout";
    default:
        return "broken, discarded or left busy";
    }
}

static void close_conn(const idem_pool *pool, idem_conn *conn)
{
    int bad = conn->close_reason == CLOSE_BROKEN || conn->close_reason == CLOSE_HEALTH;
    const char *why = bad ? PQerrorMessage(conn->pg) : "";

    idem__log(pool->opts.log, pool->opts.log_ctx, bad ? IDEM_LOG_WARNING : IDEM_LOG_DEBUG,
              "pool: closing a connection (%s)%s%s", reason_text(conn->close_reason),
              why[0] != '\0' ? ": " : "", why);
    idem__conn_close(conn);
}

static void close_list(const idem_pool *pool, idem_conn *list)
{
    while (list != NULL) {
        idem_conn *next = list->next;

        close_conn(pool, list);
        list = next;
    }
}

static void count_close_locked(idem_pool *pool, int reason)
{
    switch (reason) {
    case CLOSE_LIFETIME:
        pool->st.closed_lifetime++;
        break;
    case CLOSE_IDLE:
        pool->st.closed_idle++;
        break;
    case CLOSE_HEALTH:
        pool->st.closed_health++;
        break;
    default:
        pool->st.closed_broken++;
        break;
    }
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

static waiter *dequeue_locked(idem_pool *pool)
{
    waiter *w = pool->first;

    if (w != NULL) {
        pool->first = w->next;
        if (pool->first == NULL)
            pool->last = NULL;
        pool->nwaiting--;
    }
    return w;
}

static void enqueue_locked(idem_pool *pool, waiter *w)
{
    if (pool->last != NULL)
        pool->last->next = w;
    else
        pool->first = w;
    pool->last = w;
    pool->nwaiting++;
}

static void unlink_waiter_locked(idem_pool *pool, waiter *w)
{
    waiter **p = &pool->first;
    waiter *prev = NULL;

    while (*p != w) {
        prev = *p;
        p = &(*p)->next;
    }
    *p = w->next;
    if (pool->last == w)
        pool->last = prev;
    pool->nwaiting--;
}

/* A connection comes back: the longest-waiting caller gets it, else it goes idle. */
static void give_conn_locked(idem_pool *pool, idem_conn *conn, long long now)
{
    waiter *w = dequeue_locked(pool);

    conn->idle_since_ms = now;
    if (w != NULL) {
        w->conn = conn;
        pool->st.acquires++;
        pthread_cond_signal(&w->wake);
        return;
    }
    conn->next = pool->idle;
    pool->idle = conn;
    pool->nidle++;
}

/* A connection is gone: its slot goes to the longest-waiting caller, else it is freed. */
static void give_slot_locked(idem_pool *pool)
{
    waiter *w = dequeue_locked(pool);

    if (w == NULL) {
        pool->size--;
        return;
    }
    w->slot = 1;
    pool->nopening++;
    pthread_cond_signal(&w->wake);
}

/* Move to *closing the idle connections past their lifetime, or idle too long above
 * min_idle. No background thread: acquire and release call this, at most every
 * prune_every_ms. */
static void prune_locked(idem_pool *pool, long long now, idem_conn **closing)
{
    const idem_pool_options *o = &pool->opts;
    idem_conn **p = &pool->idle;

    if (now < pool->next_prune_ms)
        return;
    pool->next_prune_ms = now + pool->prune_every_ms;
    while (*p != NULL) {
        idem_conn *c = *p;

        if (now >= c->expires_ms)
            c->close_reason = CLOSE_LIFETIME;
        else if (o->idle_timeout_ms > 0 && pool->nidle > o->min_idle &&
                 now - c->idle_since_ms >= o->idle_timeout_ms)
            c->close_reason = CLOSE_IDLE;
        if (c->close_reason == 0) {
            p = &c->next;
            continue;
        }
        *p = c->next;
        pool->nidle--;
        count_close_locked(pool, c->close_reason);
        give_slot_locked(pool);
        c->next = *closing;
        *closing = c;
    }
}

static idem_conn *pop_idle_locked(idem_pool *pool)
{
    idem_conn *conn = pool->idle;

    pool->idle = conn->next;
    conn->next = NULL;
    pool->nidle--;
    return conn;
}

static int exhausted_locked(const idem_pool *pool, idem_error *err)
{
    unsigned int open = pool->size - pool->nopening;

    return idem__error_set(err, IDEM_EUNAVAIL,
                           "pool exhausted: no connection free within %u ms "
                           "(acquire_timeout_ms); size %u of max_size %u, idle %u, in use %u, "
                           "waiting %u; acquires %llu, timeouts %llu",
                           pool->opts.acquire_timeout_ms, open, pool->opts.max_size, pool->nidle,
                           open - pool->nidle, pool->nwaiting, pool->st.acquires,
                           pool->st.timeouts);
}

/* Queue up until a release hands over a connection or a slot, or the time is up. */
static int wait_locked(idem_conn **out, idem_pool *pool, idem_error *err)
{
    waiter w = {.conn = NULL, .slot = 0, .next = NULL};
    struct timespec deadline;
    int timed_out = 0;

    if (pthread_cond_init(&w.wake, &pool->cond_attr) != 0)
        return idem__error_set(err, IDEM_ENOMEM, "cannot create a condition variable");
    idem__deadline_after(&deadline, pool->opts.acquire_timeout_ms);
    enqueue_locked(pool, &w);
    while (w.conn == NULL && !w.slot && !timed_out)
        timed_out = pthread_cond_timedwait(&w.wake, &pool->lock, &deadline) == ETIMEDOUT;
    pthread_cond_destroy(&w.wake);
    if (w.conn == NULL && !w.slot) {
        unlink_waiter_locked(pool, &w);
        pool->st.timeouts++;
        return exhausted_locked(pool, err);
    }
    *out = w.conn;
    return 0;
}

/* An idle connection (*out), else a reserved slot to open one in (*out NULL), else wait
 * for either. *now_out: the time it started. */
static int checkout(idem_conn **out, long long *now_out, idem_pool *pool, idem_error *err)
{
    idem_conn *pruned = NULL;
    long long now = idem__coarse_ms();
    int rc = 0;

    *now_out = now;

    pthread_mutex_lock(&pool->lock);
    prune_locked(pool, now, &pruned);
    if (pool->idle != NULL) {
        *out = pop_idle_locked(pool);
        pool->st.acquires++;
    } else if (pool->size < pool->opts.max_size) {
        pool->size++;
        pool->nopening++;
        *out = NULL;
    } else {
        rc = wait_locked(out, pool, err);
    }
    pthread_mutex_unlock(&pool->lock);
    close_list(pool, pruned);
    return rc;
}

/* Open a connection in a slot the caller reserved (counted in size and nopening),
 * outside the lock; on failure the slot goes to the next waiter or is given up. */
static int open_in_slot(idem_conn **out, idem_pool *pool, int count_acquire, idem_error *err)
{
    idem_conn *conn = calloc(1, sizeof(*conn));
    long long now;
    int rc;

    if (conn == NULL)
        rc = idem__error_set(err, IDEM_ENOMEM, "out of memory opening a connection");
    else
        rc = idem__pg_connect(&conn->pg, pool->keys, pool->values, pool->opts.connect_timeout_ms,
                              route_notice, pool, err);
    now = idem__coarse_ms();
    pthread_mutex_lock(&pool->lock);
    pool->nopening--;
    if (rc == 0) {
        pool->st.opened++;
        pool->st.acquires += count_acquire != 0;
        conn->expires_ms = expiry_locked(pool, now);
    } else {
        pool->st.connect_failures++;
        give_slot_locked(pool);
    }
    pthread_mutex_unlock(&pool->lock);
    if (rc < 0) {
        free(conn);
        return rc;
    }
    conn->pool = pool;
    conn->idle_since_ms = now;
    *out = conn;
    return 0;
}

/* Past health_check_idle_ms, a round trip. Below it, a look for input waiting (the
 * server saying goodbye), except on a connection released within the current clock tick:
 * that would cost a system call per acquire under load for almost nothing, and a
 * connection that fails in use is discarded anyway. */
static int checkout_ok(const idem_pool *pool, idem_conn *conn, long long now)
{
    long long idle = now - conn->idle_since_ms;

    if (idle < 1)
        return PQstatus(conn->pg) == CONNECTION_OK;
    return idem__conn_alive(conn, idle > (long long)pool->opts.health_check_idle_ms,
                            pool->opts.connect_timeout_ms);
}

/* A connection failed its checkout check: close it, keeping its slot to open another. */
static void retire_unhealthy(idem_pool *pool, idem_conn *conn)
{
    pthread_mutex_lock(&pool->lock);
    count_close_locked(pool, CLOSE_HEALTH);
    pool->st.acquires--; /* counted when taken; counted again if its replacement opens */
    pool->nopening++;
    pthread_mutex_unlock(&pool->lock);
    conn->close_reason = CLOSE_HEALTH;
    close_conn(pool, conn);
}

int idem_pool_acquire(idem_conn **out, idem_pool *pool, idem_error *err)
{
    idem_conn *conn = NULL;
    long long now = 0;
    int rc;

    if (out == NULL || pool == NULL)
        return idem__error_field(err, 0, out == NULL ? "out" : "pool", "must not be NULL");
    if (pool->generation != fork_generation)
        return idem__error_field(err, 0, "pool",
                                 "was created by the parent process; after fork(), the child "
                                 "must create its own pool");
    rc = checkout(&conn, &now, pool, err);
    if (rc == 0 && conn != NULL && !checkout_ok(pool, conn, now)) {
        retire_unhealthy(pool, conn);
        conn = NULL;
    }
    if (rc == 0 && conn == NULL)
        rc = open_in_slot(&conn, pool, 1, err);
    if (rc == 0)
        *out = conn;
    return rc;
}

void idem_pool_release(idem_conn *conn)
{
    idem_pool *pool;
    idem_conn *pruned = NULL;
    enum idem__conn_state state;
    long long now;
    int reason = 0;

    if (conn == NULL || conn->pool->generation != fork_generation)
        return;
    pool = conn->pool;
    conn->deadline_ms = 0;
    state = idem__conn_clean(conn, pool->opts.connect_timeout_ms);
    now = idem__coarse_ms();
    if (state == IDEM__CONN_BROKEN)
        reason = CLOSE_BROKEN;
    else if (now >= conn->expires_ms)
        reason = CLOSE_LIFETIME;
    conn->close_reason = reason;
    pthread_mutex_lock(&pool->lock);
    pool->st.rolled_back += state == IDEM__CONN_ROLLED_BACK;
    if (reason == 0) {
        give_conn_locked(pool, conn, now); /* from here on, conn may be another's */
    } else {
        count_close_locked(pool, reason);
        give_slot_locked(pool);
    }
    prune_locked(pool, now, &pruned);
    pthread_mutex_unlock(&pool->lock);
    if (reason != 0)
        close_conn(pool, conn);
    close_list(pool, pruned);
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

int idem_pool_options_init(idem_pool_options *opts, unsigned int version)
{
    static const idem_pool_options defaults = IDEM_POOL_OPTIONS_INIT;

    return idem__struct_init(opts, &defaults, sizeof(defaults), version, IDEM_POOL_OPTIONS_VERSION);
}

int idem_pool_stats_get(idem_pool_stats *out, idem_pool *pool)
{
    static const idem_pool_stats zero = IDEM_POOL_STATS_INIT;

    if (out == NULL || idem__check_version(NULL, out->version, IDEM_POOL_STATS_VERSION, "") != 0)
        return IDEM_EINVAL;
    *out = zero;
    /* After fork() the mutex may be held by a thread that does not exist here. */
    if (pool == NULL || pool->generation != fork_generation)
        return 0;
    pthread_mutex_lock(&pool->lock);
    *out = pool->st;
    out->version = IDEM_POOL_STATS_VERSION;
    out->size = pool->size - pool->nopening;
    out->idle = pool->nidle;
    out->in_use = out->size - pool->nidle;
    out->waiting = pool->nwaiting;
    pthread_mutex_unlock(&pool->lock);
    return 0;
}

static int check_options(const idem_pool_options *o, idem_error *err)
{
    int rc = idem__check_version(err, o->version, IDEM_POOL_OPTIONS_VERSION, "options");

    if (rc != 0)
        return rc;
    if (o->max_size == 0)
        return idem__error_field(err, 0, "max_size", "must be at least 1");
    if (o->min_idle > o->max_size)
        return idem__error_field(err, 0, "min_idle", "is %u, more than max_size (%u)", o->min_idle,
                                 o->max_size);
    return 0;
}

static long long prune_interval(const idem_pool_options *o)
{
    long long every = 1000;

    if (o->idle_timeout_ms > 0 && o->idle_timeout_ms / 4 < every)
        every = o->idle_timeout_ms / 4;
    if (o->max_lifetime_ms > 0 && o->max_lifetime_ms / 4 < every)
        every = o->max_lifetime_ms / 4;
    return every > 0 ? every : 1;
}

static int pool_alloc(idem_pool **out, const idem_pool_options *opts, idem_error *err)
{
    idem_pool *pool = calloc(1, sizeof(*pool));

    if (pool == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "out of memory creating a pool");
    if (pthread_mutex_init(&pool->lock, NULL) != 0) {
        free(pool);
        return idem__error_set(err, IDEM_ENOMEM, "cannot create a mutex");
    }
    if (pthread_condattr_init(&pool->cond_attr) != 0 ||
        pthread_condattr_setclock(&pool->cond_attr, CLOCK_MONOTONIC) != 0) {
        pthread_mutex_destroy(&pool->lock);
        free(pool);
        return idem__error_set(err, IDEM_ENOMEM, "cannot set up condition variables");
    }
    pool->opts = *opts;
    pool->opts.application_name = NULL;
    pool->generation = fork_generation;
    pool->prune_every_ms = prune_interval(opts);
    *out = pool;
    return 0;
}

/* "<user's options> -c statement_timeout=<ms>", malloc'd. */
static char *server_options(const char *user, unsigned int timeout_ms)
{
    int len = snprintf(NULL, 0, "%s -c statement_timeout=%u", user, timeout_ms);
    char *text = len >= 0 ? malloc((size_t)len + 1) : NULL;

    if (text != NULL)
        snprintf(text, (size_t)len + 1, "%s -c statement_timeout=%u", user, timeout_ms);
    return text;
}

/* Parse to reject a bad string now, and to find the server options it already sets. */
static int parse_conninfo(char **options, const char *conninfo, idem_error *err)
{
    char *why = NULL;
    PQconninfoOption *parsed = PQconninfoParse(conninfo, &why);
    int rc = 0;

    if (parsed == NULL && why == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "out of memory parsing conninfo");
    if (parsed == NULL) {
        chomp(why);
        rc = idem__error_field(err, 0, "conninfo", "%s", why);
        PQfreemem(why);
        return rc;
    }
    for (PQconninfoOption *o = parsed; o->keyword != NULL; o++) {
        if (strcmp(o->keyword, "options") == 0 && o->val != NULL && o->val[0] != '\0')
            *options = strdup(o->val);
    }
    PQconninfoFree(parsed);
    return 0;
}

/* The user's conninfo goes in as dbname, which libpq expands; the keywords before it
 * (the TCP defaults) yield to it, those after it override it. The application name is libpq's
 * fallback, so that an application_name in the conninfo or PGAPPNAME still wins. The statement
 * timeout is added to the user's own server options (from the conninfo, else PGOPTIONS), not put in
 * their place. */
static int setup_conninfo(idem_pool *pool, const char *conninfo, const char *app_name,
                          idem_error *err)
{
    char *user_options = NULL;
    int n = 0;
    int rc = 0;

    if (conninfo[0] != '\0')
        rc = parse_conninfo(&user_options, conninfo, err);
    if (rc < 0)
        return rc;
    if (user_options == NULL && getenv("PGOPTIONS") != NULL)
        user_options = strdup(getenv("PGOPTIONS"));
    pool->conninfo = strdup(conninfo);
    pool->app_name = strdup(app_name != NULL ? app_name : "");
    if (pool->opts.statement_timeout_ms > 0)
        pool->pg_options = server_options(user_options != NULL ? user_options : "",
                                          pool->opts.statement_timeout_ms);
    free(user_options);
    if (pool->conninfo == NULL || pool->app_name == NULL ||
        (pool->opts.statement_timeout_ms > 0 && pool->pg_options == NULL))
        return idem__error_set(err, IDEM_ENOMEM, "out of memory creating a pool");
    pool->opts.application_name = pool->app_name;
    for (; n < (int)TCP_KEYS; n++) {
        pool->keys[n] = tcp_keys[n];
        pool->values[n] = tcp_values[n];
    }
    pool->keys[n] = "dbname";
    pool->values[n++] = pool->conninfo;
    if (pool->app_name[0] != '\0') {
        pool->keys[n] = "fallback_application_name";
        pool->values[n++] = pool->app_name;
    }
    if (pool->pg_options != NULL) {
        pool->keys[n] = "options";
        pool->values[n++] = pool->pg_options;
    }
    return 0;
}

/* min_idle connections, or one to prove that the server answers. */
static int open_initial(idem_pool *pool, idem_error *err)
{
    unsigned int n = pool->opts.min_idle > 0 ? pool->opts.min_idle : 1;
    int rc = 0;

    for (unsigned int i = 0; i < n && rc == 0; i++) {
        idem_conn *conn = NULL;

        pthread_mutex_lock(&pool->lock);
        pool->size++;
        pool->nopening++;
        pthread_mutex_unlock(&pool->lock);
        rc = open_in_slot(&conn, pool, 0, err);
        if (rc == 0)
            idem_pool_release(conn);
    }
    return rc;
}

int idem_pool_new(idem_pool **out, const char *conninfo, const idem_pool_options *opts,
                  idem_error *err)
{
    idem_pool_options defaults = IDEM_POOL_OPTIONS_INIT;
    idem_pool *pool = NULL;
    int rc;

    if (out == NULL)
        return idem__error_field(err, 0, "out", "must not be NULL");
    if (opts == NULL)
        opts = &defaults;
    rc = check_options(opts, err);
    if (rc < 0)
        return rc;
    pthread_once(&fork_once, install_fork_hook);
    if (fork_hook_rc != 0)
        return idem__error_set(err, IDEM_ENOMEM, "cannot register the fork() handler");
    rc = pool_alloc(&pool, opts, err);
    if (rc == 0)
        rc = setup_conninfo(pool, conninfo != NULL ? conninfo : "", opts->application_name, err);
    if (rc == 0)
        rc = open_initial(pool, err);
    if (rc < 0) {
        idem__error_context(err, "cannot create the pool");
        idem_pool_free(pool);
        return rc;
    }
    *out = pool;
    return 0;
}

void idem_pool_free(idem_pool *pool)
{
    if (pool == NULL)
        return;
    /* In a child of fork(), closing would end the parent's sessions: leave them be. */
    if (pool->generation != fork_generation)
        return;
    while (pool->idle != NULL)
        idem__conn_close(pop_idle_locked(pool));
    pthread_condattr_destroy(&pool->cond_attr);
    pthread_mutex_destroy(&pool->lock);
    free(pool->conninfo);
    free(pool->app_name);
    free(pool->pg_options);
    free(pool);
}
