/* The queue of callers waiting for a connection, and the hand-over that wakes them
 * (pool_internal.h): served in arrival order, woken once the pool's lock is released. */
#include <pthread.h>
#include <stddef.h>

#include "pool_internal.h"

waiter *idem__pool_dequeue_locked(idem_pool *pool)
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

void idem__pool_enqueue_locked(idem_pool *pool, waiter *w)
{
    if (pool->last != NULL)
        pool->last->next = w;
    else
        pool->first = w;
    pool->last = w;
    pool->nwaiting++;
}

void idem__pool_unlink_waiter_locked(idem_pool *pool, waiter *w)
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

void idem__pool_wake_all(waiter *woken)
{
    while (woken != NULL) {
        waiter *w = woken;

        woken = w->next_woken;
        pthread_mutex_lock(&w->lock);
        w->done = 1;
        pthread_cond_signal(&w->wake);
        pthread_mutex_unlock(&w->lock);
    }
}

void idem__pool_hand_over_locked(waiter *w, waiter **woken)
{
    w->next_woken = *woken;
    *woken = w;
}
