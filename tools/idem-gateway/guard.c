/* The connections' records, their limit and the watchdog that cuts slow clients. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "core/clock.h"
#include "guard.h"
#include "metrics.h"

#define TICK_MS 1000U

static struct timespec at_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000U), (long)(ms % 1000U) * 1000000L};

    return ts;
}

/* A connection's state word (guard.h): its phase and when it began. */
#define PHASE_BITS 2U

static uint64_t state_of(gw_phase phase, uint64_t since_ms)
{
    return since_ms << PHASE_BITS | (uint64_t)phase;
}

static gw_phase phase_of(uint64_t state)
{
    return (gw_phase)(state & ((1U << PHASE_BITS) - 1U));
}

/* How long a connection may stay in @phase, in ms; 0: no limit. */
static uint64_t allowed_ms(const gw_guard *g, gw_phase phase)
{
    if (phase == GW_WAITING)
        return (uint64_t)g->idle_s * 1000U;
    if (phase == GW_CALL)
        return 0;
    return (uint64_t)g->request_s * 1000U;
}

/* When a phase began, and the watchdog's now: the coarse clock (within a few ms of the
 * monotonic one, limits are seconds), read four times a request. */
static uint64_t phase_clock(void)
{
    return (uint64_t)idem__coarse_ms();
}

static const char *const phase_names[] = {"its request's headers", "its request's body", "",
                                          "its answer"};

/* Shut down every connection over its phase's limit. Called with the lock held: a record
 * (and so its socket) lives until gw_guard_closed(), which takes the lock. A phase may
 * begin meanwhile, after @now: such a connection is within its limit. */
static void sweep(gw_guard *g, uint64_t now)
{
    for (gw_conn *c = g->head; c != NULL; c = c->next) {
        uint64_t state = atomic_load(&c->state), since = state >> PHASE_BITS;
        gw_phase phase = phase_of(state);
        uint64_t limit = allowed_ms(g, phase);

        if (limit == 0 || c->cut || now <= since || now - since <= limit)
            continue;
        c->cut = 1;
        shutdown(c->fd, SHUT_RDWR);
        if (phase != GW_WAITING) /* an idle one is no news */
            fprintf(stderr,
                    "idem-gateway: a connection was cut: %s took longer than "
                    "http.request_timeout_s\n",
                    phase_names[phase]);
    }
}

static void *watch(void *arg)
{
    gw_guard *g = arg;

    pthread_mutex_lock(&g->lock);
    while (!g->stop) {
        struct timespec until = at_ms(idem__now_ms() + TICK_MS);

        pthread_cond_timedwait(&g->wake, &g->lock, &until);
        sweep(g, phase_clock());
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

int gw_guard_start(gw_guard *g, unsigned int max, unsigned int idle_s, unsigned int request_s)
{
    pthread_condattr_t attr;

    g->head = NULL;
    g->open = g->handed = 0;
    atomic_init(&g->active, 0);
    atomic_init(&g->draining, 0);
    g->max = max;
    g->idle_s = idle_s;
    g->request_s = request_s;
    g->stop = g->started = 0;
    pthread_mutex_init(&g->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&g->wake, &attr);
    pthread_condattr_destroy(&attr);
    if (pthread_create(&g->thread, NULL, watch, g) != 0)
        return -1;
    g->started = 1;
    return 0;
}

void gw_guard_stop(gw_guard *g)
{
    if (!g->started)
        return;
    pthread_mutex_lock(&g->lock);
    g->stop = 1;
    pthread_cond_broadcast(&g->wake);
    pthread_mutex_unlock(&g->lock);
    pthread_join(g->thread, NULL);
    g->started = 0;
    while (g->head != NULL) {
        gw_conn *next = g->head->next;

        free(g->head);
        g->head = next;
    }
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->lock);
}

int gw_guard_admit(gw_guard *g)
{
    int ok;

    pthread_mutex_lock(&g->lock);
    ok = g->open < g->max;
    pthread_mutex_unlock(&g->lock);
    if (!ok)
        gw_metrics_refused();
    return ok;
}

/* A record for @fd, listed, counted open unless it was handed; @c (NULL: out of memory)
 * is the record. Returns @c. */
static gw_conn *record(gw_guard *g, gw_conn *c, int fd, int was_handed)
{
    int counted;

    pthread_mutex_lock(&g->lock);
    counted = was_handed && g->handed > 0;
    if (counted)
        g->handed--;
    else
        g->open++;
    if (c != NULL) {
        c->fd = fd;
        atomic_init(&c->state, state_of(GW_WAITING, phase_clock()));
        c->next = g->head;
        if (g->head != NULL)
            g->head->prev = c;
        g->head = c;
    }
    pthread_mutex_unlock(&g->lock);
    if (!counted)
        gw_metrics_connection(1);
    return c;
}

gw_conn *gw_guard_opened(gw_guard *g, int fd)
{
    return record(g, calloc(1, sizeof(gw_conn)), fd, 0);
}

gw_conn *gw_guard_taken(gw_guard *g, int fd)
{
    return record(g, calloc(1, sizeof(gw_conn)), fd, 1);
}

/* Take @c off the list. Lock held. */
static void unlist(gw_guard *g, gw_conn *c)
{
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        g->head = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
}

void gw_guard_handed(gw_guard *g, gw_conn *c)
{
    pthread_mutex_lock(&g->lock);
    g->handed++;
    if (c != NULL)
        unlist(g, c);
    pthread_mutex_unlock(&g->lock);
    free(c);
}

void gw_guard_lost(gw_guard *g)
{
    int counted;

    pthread_mutex_lock(&g->lock);
    if ((counted = g->handed > 0)) {
        g->handed--;
        g->open--;
    }
    pthread_mutex_unlock(&g->lock);
    if (counted)
        gw_metrics_connection(-1);
}

/* A request ended: one fewer under way. Whether that was the last one. */
static int ended(gw_guard *g)
{
    return atomic_fetch_sub(&g->active, 1) == 1;
}

void gw_guard_closed(gw_guard *g, gw_conn *c)
{
    pthread_mutex_lock(&g->lock);
    g->open--;
    if (c != NULL) {
        if (phase_of(atomic_load(&c->state)) != GW_WAITING && ended(g))
            pthread_cond_broadcast(&g->wake);
        unlist(g, c);
    }
    pthread_mutex_unlock(&g->lock);
    free(c);
    gw_metrics_connection(-1);
}

/* Without the lock: a request's phases are its connection's thread's alone, and the count
 * of requests under way is atomic. The lock is taken only to wake a drain waiting for the
 * last one (it stores draining before it reads the count, the thread here the other way
 * round: one of the two sees the other's write). */
void gw_guard_phase(gw_guard *g, gw_conn *c, gw_phase phase)
{
    gw_phase was;

    if (c == NULL)
        return;
    was = phase_of(atomic_exchange(&c->state, state_of(phase, phase_clock())));
    if (phase != GW_WAITING && was == GW_WAITING) {
        atomic_fetch_add(&g->active, 1);
    } else if (phase == GW_WAITING && was != GW_WAITING && ended(g) && atomic_load(&g->draining)) {
        pthread_mutex_lock(&g->lock);
        pthread_cond_broadcast(&g->wake);
        pthread_mutex_unlock(&g->lock);
    }
}

unsigned int gw_guard_drain(gw_guard *g, uint64_t deadline_ms)
{
    unsigned int left;

    pthread_mutex_lock(&g->lock);
    atomic_store(&g->draining, 1);
    while (atomic_load(&g->active) > 0 && idem__now_ms() < deadline_ms) {
        struct timespec until = at_ms(deadline_ms);

        pthread_cond_timedwait(&g->wake, &g->lock, &until);
    }
    left = atomic_load(&g->active);
    pthread_mutex_unlock(&g->lock);
    return left;
}
