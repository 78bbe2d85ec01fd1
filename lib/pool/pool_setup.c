/* Creating, configuring and freeing a pool (pool_internal.h): its options, the connection
 * string with idem's server options, the pooler mode detected or declared, the first
 * connections, the counters, and the fork generation that keeps a child off its parent's
 * connections. */
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "pool_internal.h"

unsigned long idem__fork_generation;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static int fork_hook_rc;

static void on_fork_child(void)
{
    idem__fork_generation++;
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

/* How many bytes of idem_pool_options each version has: a caller built against an older
 * header passes a shorter struct, whose missing fields keep their defaults. */
static const size_t options_size[IDEM_POOL_OPTIONS_VERSION + 1] = {
    [1] = offsetof(idem_pool_options, pooler),
    [2] = sizeof(idem_pool_options),
};

int idem_pool_options_init(idem_pool_options *opts, unsigned int version)
{
    static const idem_pool_options defaults = IDEM_POOL_OPTIONS_INIT;

    if (version > IDEM_POOL_OPTIONS_VERSION)
        return IDEM_EINVAL;
    return idem__struct_init(opts, &defaults, options_size[version], version,
                             IDEM_POOL_OPTIONS_VERSION);
}

int idem_pooler_detect(int *out, PGconn *conn, idem_error *err)
{
    if (out == NULL || conn == NULL)
        return idem__error_field(err, IDEM_EINVAL, out == NULL ? "out" : "conn",
                                 "must not be NULL");
    return idem__pg_through_pooler(out, conn, 0, err);
}

int idem_pool_stats_init(idem_pool_stats *stats, unsigned int version)
{
    static const idem_pool_stats zero = IDEM_POOL_STATS_INIT;

    return idem__struct_init(stats, &zero, sizeof(zero), version, IDEM_POOL_STATS_VERSION);
}

int idem_pool_stats_get(idem_pool_stats *out, idem_pool *pool)
{
    static const idem_pool_stats zero = IDEM_POOL_STATS_INIT;

    if (out == NULL || idem__check_version(NULL, out->version, IDEM_POOL_STATS_VERSION, "") != 0)
        return IDEM_EINVAL;
    *out = zero;
    /* After fork() the mutex may be held by a thread that does not exist here. */
    if (pool == NULL || pool->generation != idem__fork_generation)
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
    if (o->max_size == 0)
        return idem__error_field(err, IDEM_EINVAL, "max_size", "must be at least 1");
    if (o->min_idle > o->max_size)
        return idem__error_field(err, IDEM_EINVAL, "min_idle", "is %u, more than max_size (%u)",
                                 o->min_idle, o->max_size);
    if (o->pooler != IDEM_POOLER_NONE && o->pooler != IDEM_POOLER_TRANSACTION &&
        o->pooler != IDEM_POOLER_AUTO)
        return idem__error_field(err, IDEM_EINVAL, "pooler",
                                 "is %d: IDEM_POOLER_NONE, IDEM_POOLER_TRANSACTION or "
                                 "IDEM_POOLER_AUTO",
                                 (int)o->pooler);
    return 0;
}

/* @opts as this version of the library reads it: an older caller's shorter struct over
 * the defaults. */
static int read_options(idem_pool_options *o, const idem_pool_options *opts, idem_error *err)
{
    static const idem_pool_options defaults = IDEM_POOL_OPTIONS_INIT;
    int rc;

    *o = defaults;
    if (opts == NULL)
        return 0;
    rc = idem__check_version(err, opts->version, IDEM_POOL_OPTIONS_VERSION, "options");
    if (rc != 0)
        return rc;
    memcpy(o, opts, options_size[opts->version]);
    o->version = IDEM_POOL_OPTIONS_VERSION;
    return check_options(o, err);
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
    pool->unnamed = opts->pooler == IDEM_POOLER_TRANSACTION;
    pool->generation = idem__fork_generation;
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
        rc = idem__error_field(err, IDEM_EINVAL, "conninfo", "%s", why);
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

/* TCP defaults, given before the conninfo so that it can override them: a peer that
 * vanished (a failover, a cable, a firewall that drops instead of refusing) is noticed on
 * an idle connection in about a minute, and with data unacknowledged in 30 s, instead of
 * the kernel's two hours and fifteen minutes. Unix-domain sockets ignore them. */
static const char *const tcp_keys[] = {"keepalives", "keepalives_idle", "keepalives_interval",
                                       "keepalives_count", "tcp_user_timeout"};
static const char *const tcp_values[] = {"1", "30", "10", "3", "30000"};
#define TCP_KEYS (sizeof(tcp_keys) / sizeof(tcp_keys[0]))

/* The user's conninfo goes in as dbname, which libpq expands; the keywords before it
 * (the TCP defaults) yield to it, those after it override it. The application name is
 * libpq's fallback, so that an application_name in the conninfo or PGAPPNAME still wins.
 * The statement timeout is added to the user's own server options (from the conninfo,
 * else PGOPTIONS), not put in their place. */
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
    if (pool->opts.statement_timeout_ms > 0 && pool->opts.pooler == IDEM_POOLER_NONE)
        pool->pg_options = server_options(user_options != NULL ? user_options : "",
                                          pool->opts.statement_timeout_ms);
    free(user_options);
    if (pool->conninfo == NULL || pool->app_name == NULL ||
        (pool->opts.statement_timeout_ms > 0 && pool->opts.pooler == IDEM_POOLER_NONE &&
         pool->pg_options == NULL))
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

/* IDEM_POOLER_AUTO: the first connection tells whether a pooler is in between. A
 * connection that could not be asked is closed. */
static int resolve_pooler(idem_pool *pool, idem_conn *conn, idem_error *err)
{
    int pooled = 0;
    int rc = idem__pg_through_pooler(&pooled, conn->pg, pool->opts.connect_timeout_ms, err);

    if (rc != 0) {
        idem_conn_discard(conn);
        return idem__error_context(err, "pooler = IDEM_POOLER_AUTO");
    }
    pool->unnamed = pooled;
    conn->unnamed = pooled;
    idem__log(pool->opts.log, pool->opts.log_ctx, IDEM_LOG_INFO,
              "pool: %s (pooler = IDEM_POOLER_AUTO)",
              pooled ? "connected through a connection pooler: statements go unnamed"
                     : "connected directly: statements are prepared once per connection");
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
        rc = idem__pool_open_in_slot(&conn, pool, 0, LLONG_MAX, err);
        if (rc == 0 && i == 0 && pool->opts.pooler == IDEM_POOLER_AUTO)
            rc = resolve_pooler(pool, conn, err);
        if (conn != NULL)
            idem_pool_release(conn);
    }
    return rc;
}

int idem_pool_new(idem_pool **out, const char *conninfo, const idem_pool_options *opts,
                  idem_error *err)
{
    idem_pool_options o;
    idem_pool *pool = NULL;
    int rc;

    if (out == NULL)
        return idem__error_field(err, IDEM_EINVAL, "out", "must not be NULL");
    rc = read_options(&o, opts, err);
    if (rc < 0)
        return rc;
    opts = &o;
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
        idem__error_redact(err, conninfo);
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
    if (pool->generation != idem__fork_generation)
        return;
    while (pool->idle != NULL)
        idem__conn_close(idem__pool_pop_idle_locked(pool));
    pthread_condattr_destroy(&pool->cond_attr);
    pthread_mutex_destroy(&pool->lock);
    free(pool->conninfo);
    free(pool->app_name);
    free(pool->pg_options);
    free(pool);
}
