/* Private to the pool (pool.c: checkout and release; pool_close.c: closing connections;
 * pool_setup.c: creating, configuring and freeing a pool, its counters). */
#ifndef IDEM_LIB_POOL_INTERNAL_H
#define IDEM_LIB_POOL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "conn.h"

/* A thread queued in idem_pool_acquire(). Callers are served in arrival order, and a
 * release hands its connection (or a closed connection's slot) straight to the first: conn
 * or slot set under the pool's lock, then, once that lock is released, done set and wake
 * signalled under the waiter's own lock, so that the woken thread never queues for the
 * pool's lock again (pool.c). */
typedef struct waiter {
    pthread_mutex_t lock; /* done and wake */
    pthread_cond_t wake;
    int done;        /* handed over and told so: the waiter may go */
    idem_conn *conn; /* handed over: the caller's now */
    int slot;        /* or: a slot reserved for the caller to open a connection in */
    struct waiter *next;
    struct waiter *next_woken; /* in the list of those to tell, once the pool's lock is free */
} waiter;

#define MAX_KEYS 9

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
    /* Set at creation (with IDEM_POOLER_AUTO, once the first connection is open), then
     * read without the lock; every connection takes them when it opens. */
    int unnamed;            /* statements unnamed: a transaction pooler in between */
    atomic_uint text_epoch; /* bumped when a kept caller's statement was found planned for
                               a table that has changed since (exec_prepared.c) */
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
extern unsigned long idem__fork_generation;

/* Open a connection in a slot already counted in pool->size and pool->nopening, within
 * connect_timeout_ms, or by @until (a monotonic time; LLONG_MAX for none) if sooner
 * (checkout.h); on success *out is the caller's (checked out). */
int idem__pool_open_in_slot(idem_conn **out, idem_pool *pool, int count_acquire, long long until,
                            idem_error *err);

/* The queue of waiters (pool_wait.c), the pool's lock held: the first out (NULL when
 * none), one in at the end, one whose time ran out taken out wherever it stands. */
waiter *idem__pool_dequeue_locked(idem_pool *pool);
void idem__pool_enqueue_locked(idem_pool *pool, waiter *w);
void idem__pool_unlink_waiter_locked(idem_pool *pool, waiter *w);

/* Add @w, handed a connection or a slot under the pool's lock, to the list *@woken of
 * waiters to tell once that lock is released. */
void idem__pool_hand_over_locked(waiter *w, waiter **woken);

/* Tell the waiters of @woken that they may go: after the pool's lock is released, so that
 * a woken thread does not wait for it again behind the thread that woke it and every
 * other caller. Once its own lock is released, a waiter may be gone (its struct lived on
 * its stack). */
void idem__pool_wake_all(waiter *woken);

/* Take the most recently released idle connection (the pool's lock held, or no other
 * user). */
idem_conn *idem__pool_pop_idle_locked(idem_pool *pool);

/* Why a connection is closed (idem_conn.close_reason), for the log and the statistics. */
enum idem__close_reason {
    IDEM__CLOSE_BROKEN = 1,
    IDEM__CLOSE_LIFETIME,
    IDEM__CLOSE_IDLE,
    IDEM__CLOSE_HEALTH,
    IDEM__CLOSE_ENDED
};

/* Close @conn, logging why (its close_reason, and libpq's words when it broke). */
void idem__pool_close_conn(const idem_pool *pool, idem_conn *conn);

/* Close every connection of the list linked by next. */
void idem__pool_close_list(const idem_pool *pool, idem_conn *list);

/* Count a connection closed for @reason in the pool's statistics (the lock held). */
void idem__pool_count_close_locked(idem_pool *pool, int reason);

#endif
