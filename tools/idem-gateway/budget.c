/* The budgets' token buckets: a list under one mutex (a bucket per tenant and kind that has
 * a budget; few), refilled lazily at each take from the monotonic clock. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "budget.h"

typedef struct bucket {
    struct bucket *next;
    gw_budget_kind kind;
    double tokens;
    double at; /* when tokens was last brought up to date */
    unsigned long long taken, refused;
    char tenant[]; /* its name */
} bucket;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bucket *all;

const char *gw_budget_name(gw_budget_kind kind)
{
    return kind == GW_BUDGET_NEW ? "new_operations" : "calls";
}

static double monotonic_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* @tenant's @kind bucket if it was made. Called with the lock held. */
static bucket *existing(const char *tenant, gw_budget_kind kind)
{
    bucket *b;

    for (b = all; b != NULL; b = b->next) {
        if (b->kind == kind && strcmp(b->tenant, tenant) == 0)
            break;
    }
    return b;
}

/* @tenant's @kind bucket, made full when first seen; NULL when out of memory. Called with
 * the lock held. */
static bucket *find(const char *tenant, gw_budget_kind kind, const gw_rate *rate, double now)
{
    size_t n = strlen(tenant) + 1;
    bucket *b = existing(tenant, kind);

    if (b != NULL)
        return b;
    if ((b = calloc(1, sizeof(*b) + n)) == NULL)
        return NULL;
    memcpy(b->tenant, tenant, n);
    b->kind = kind;
    b->tokens = rate->burst;
    b->at = now;
    b->next = all;
    all = b;
    return b;
}

/* @b's tokens at @now: what came back since, up to the burst (a burst lowered by a reload
 * takes effect at once). */
static void refill(bucket *b, const gw_rate *rate, double now)
{
    if (now > b->at)
        b->tokens += (now - b->at) * rate->per_minute / 60.0;
    b->at = now > b->at ? now : b->at;
    if (b->tokens > rate->burst)
        b->tokens = rate->burst;
}

/* Seconds, rounded up, for @tokens to come back at @rate. */
static unsigned int seconds_for(double tokens, const gw_rate *rate)
{
    return tokens <= 0 ? 0 : (unsigned int)ceil(tokens * 60.0 / rate->per_minute);
}

static void view_of(gw_budget_view *view, const bucket *b, const gw_rate *rate)
{
    view->quota = rate->burst;
    view->window_s = seconds_for(rate->burst, rate);
    view->remaining = b->tokens >= 1 ? (unsigned int)floor(b->tokens) : 0;
    view->reset_s = seconds_for(rate->burst - b->tokens, rate);
    view->retry_s = b->tokens >= 1 ? 0 : seconds_for(1 - b->tokens, rate);
    if (b->tokens < 1 && view->retry_s == 0)
        view->retry_s = 1;
}

int gw_budget_take_at(const char *tenant, gw_budget_kind kind, const gw_rate *rate, double now_s,
                      gw_budget_view *view)
{
    bucket *b;
    int taken;

    pthread_mutex_lock(&lock);
    if ((b = find(tenant, kind, rate, now_s)) == NULL) {
        pthread_mutex_unlock(&lock);
        return -1;
    }
    refill(b, rate, now_s);
    taken = b->tokens >= 1;
    if (taken) {
        b->tokens -= 1;
        b->taken++;
    }
    if (view != NULL)
        view_of(view, b, rate);
    pthread_mutex_unlock(&lock);
    return taken;
}

int gw_budget_take(const char *tenant, gw_budget_kind kind, const gw_rate *rate,
                   gw_budget_view *view)
{
    return gw_budget_take_at(tenant, kind, rate, monotonic_s(), view);
}

void gw_budget_refused(const char *tenant, gw_budget_kind kind)
{
    bucket *b;

    pthread_mutex_lock(&lock);
    if ((b = existing(tenant, kind)) != NULL)
        b->refused++;
    pthread_mutex_unlock(&lock);
}

void gw_budget_give_back(const char *tenant, gw_budget_kind kind, const gw_rate *rate)
{
    bucket *b;

    pthread_mutex_lock(&lock);
    if ((b = existing(tenant, kind)) != NULL) {
        b->tokens = b->tokens + 1 > rate->burst ? rate->burst : b->tokens + 1;
        b->taken -= b->taken > 0;
    }
    pthread_mutex_unlock(&lock);
}

void gw_budget_each(void (*fn)(void *arg, const char *tenant, gw_budget_kind kind,
                               unsigned long long taken, unsigned long long refused),
                    void *arg)
{
    pthread_mutex_lock(&lock);
    for (const bucket *b = all; b != NULL; b = b->next)
        fn(arg, b->tenant, b->kind, b->taken, b->refused);
    pthread_mutex_unlock(&lock);
}

void gw_budget_free(void)
{
    pthread_mutex_lock(&lock);
    while (all != NULL) {
        bucket *next = all->next;

        free(all);
        all = next;
    }
    pthread_mutex_unlock(&lock);
}
