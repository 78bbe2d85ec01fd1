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

/* How long @c may stay in its phase, in ms; 0: no limit. */
static uint64_t allowed_ms(const gw_guard *g, const gw_conn *c)
{
    if (c->phase == GW_WAITING)
        return (uint64_t)g->idle_s * 1000U;
    if (c->phase == GW_CALL)
        return 0;
    return (uint64_t)g->request_s * 1000U;
}

static const char *const phase_names[] = {"its request's headers", "its request's body", "",
                                          "its answer"};

/* Shut down every connection over its phase's limit. Called with the lock held: a record
 * (and so its socket) lives until gw_guard_closed(), which takes the lock. */
static void sweep(gw_guard *g, uint64_t now)
{
    for (gw_conn *c = g->head; c != NULL; c = c->next) {
        uint64_t limit = allowed_ms(g, c);

        if (limit == 0 || c->cut || now - c->since_ms <= limit)
            continue;
        c->cut = 1;
        shutdown(c->fd, SHUT_RDWR);
        if (c->phase != GW_WAITING) /* an idle one is no news */
            fprintf(stderr, "idem-gateway: a connection was cut: %s took longer than %s\n",
                    phase_names[c->phase],
                    c->phase == GW_WAITING ? "http.idle_timeout_s" : "http.request_timeout_s");
    }
}

static void *watch(void *arg)
{
    gw_guard *g = arg;

    pthread_mutex_lock(&g->lock);
    while (!g->stop) {
        struct timespec until = at_ms(idem__now_ms() + TICK_MS);

        pthread_cond_timedwait(&g->wake, &g->lock, &until);
        sweep(g, idem__now_ms());
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

int gw_guard_start(gw_guard *g, unsigned int max, unsigned int idle_s, unsigned int request_s)
{
    pthread_condattr_t attr;

    g->head = NULL;
    g->open = g->active = g->handed = 0;
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
        c->phase = GW_WAITING;
        c->since_ms = idem__now_ms();
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

/* Leave @c's phase: one request fewer under way when it was in one. Lock held. */
static void leave(gw_guard *g, gw_conn *c)
{
    if (c->phase != GW_WAITING && --g->active == 0)
        pthread_cond_broadcast(&g->wake);
}

void gw_guard_closed(gw_guard *g, gw_conn *c)
{
    pthread_mutex_lock(&g->lock);
    g->open--;
    if (c != NULL) {
        leave(g, c);
        unlist(g, c);
    }
    pthread_mutex_unlock(&g->lock);
    free(c);
    gw_metrics_connection(-1);
}

void gw_guard_phase(gw_guard *g, gw_conn *c, gw_phase phase)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&g->lock);
    if (phase == GW_WAITING)
        leave(g, c);
    else if (c->phase == GW_WAITING)
        g->active++;
    c->phase = phase;
    c->since_ms = idem__now_ms();
    pthread_mutex_unlock(&g->lock);
}

unsigned int gw_guard_drain(gw_guard *g, uint64_t deadline_ms)
{
    unsigned int left;

    pthread_mutex_lock(&g->lock);
    while (g->active > 0 && idem__now_ms() < deadline_ms) {
        struct timespec until = at_ms(deadline_ms);

        pthread_cond_timedwait(&g->wake, &g->lock, &until);
    }
    left = g->active;
    pthread_mutex_unlock(&g->lock);
    return left;
}
