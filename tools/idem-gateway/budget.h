/* Per-tenant budgets (README.md in this folder, "Budgets"): for each tenant, a token bucket
 * of calls and one of new operations, as configured (config.h: the rates are data); the
 * buckets themselves live here, one process-wide table keyed by the tenant's name, so that
 * a reload keeps what each tenant has spent. */
#ifndef IDEM_GATEWAY_BUDGET_H
#define IDEM_GATEWAY_BUDGET_H

#include "config.h"

typedef enum gw_budget_kind {
    GW_BUDGET_CALLS = 0, /* every tool call, replays included */
    GW_BUDGET_NEW,       /* calls that create an operation */
    GW_BUDGET_KINDS
} gw_budget_kind;

/* A bucket as the RateLimit fields tell it (draft-ietf-httpapi-ratelimit-headers). */
typedef struct gw_budget_view {
    unsigned int quota;     /* q: the burst */
    unsigned int window_s;  /* w: seconds to fill the bucket from empty */
    unsigned int remaining; /* r: whole tokens left */
    unsigned int reset_s;   /* t: seconds until the bucket is full again */
    unsigned int retry_s;   /* seconds until one token is back (0: one is there) */
} gw_budget_view;

/* The policy name of @kind in the RateLimit fields and the metrics: "calls",
 * "new_operations". */
const char *gw_budget_name(gw_budget_kind kind);

/* Take one token from @tenant's @kind bucket at @rate (per_minute > 0). 1: taken; 0: the
 * budget is spent (nothing taken); -1: out of memory (nothing taken). @view (NULL: none) is
 * told the bucket after the attempt. */
int gw_budget_take(const char *tenant, gw_budget_kind kind, const gw_rate *rate,
                   gw_budget_view *view);

/* The same at @now_s seconds of a monotonic clock (for the unit tests). */
int gw_budget_take_at(const char *tenant, gw_budget_kind kind, const gw_rate *rate, double now_s,
                      gw_budget_view *view);

/* Count a call refused for @tenant's @kind budget (for the metrics). */
void gw_budget_refused(const char *tenant, gw_budget_kind kind);

/* Give back a token taken for a call that did not use it (a new operation's token, when the
 * call replayed or was refused). */
void gw_budget_give_back(const char *tenant, gw_budget_kind kind, const gw_rate *rate);

/* Call @fn for each bucket (for /metrics, metrics.c): its tenant, kind, the tokens taken
 * (given back ones not counted) and the calls refused; under the table's lock, so @fn must
 * not call back. */
void gw_budget_each(void (*fn)(void *arg, const char *tenant, gw_budget_kind kind,
                               unsigned long long taken, unsigned long long refused),
                    void *arg);

/* Forget every bucket (at exit, and between unit tests). */
void gw_budget_free(void);

#endif
