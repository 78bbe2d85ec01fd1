/* What a caller does after a status that says to retry with the same key
 * (include/idem/retry.h): capped attempts within a deadline, exponential backoff with full
 * jitter, and a shared budget so that retries cannot multiply the load during an outage.
 * The store's own serialization retries wait by the same backoff. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "core/clock.h"
#include "random.h"
#include "error.h"
#include "idem/retry.h"

struct idem_retry_budget {
    pthread_mutex_t lock;
    double tokens;
    double ratio;
    double per_ms;
    double max_tokens;
    uint64_t refilled_ms;
};

int idem_retry_policy_init(idem_retry_policy *policy, unsigned int version)
{
    static const idem_retry_policy defaults = IDEM_RETRY_POLICY_INIT;

    return idem__struct_init(policy, &defaults, sizeof(defaults), version,
                             IDEM_RETRY_POLICY_VERSION);
}

int idem_retry_budget_options_init(idem_retry_budget_options *opts, unsigned int version)
{
    static const idem_retry_budget_options defaults = IDEM_RETRY_BUDGET_OPTIONS_INIT;

    return idem__struct_init(opts, &defaults, sizeof(defaults), version,
                             IDEM_RETRY_BUDGET_OPTIONS_VERSION);
}

unsigned int idem_retry_backoff_ms(const idem_retry_policy *policy, unsigned int retry_number)
{
    static const idem_retry_policy defaults = IDEM_RETRY_POLICY_INIT;
    uint64_t ceiling;

    if (policy == NULL)
        policy = &defaults;
    if (retry_number == 0)
        retry_number = 1;
    ceiling = policy->base_delay_ms;
    for (unsigned int i = 1; i < retry_number && ceiling < policy->max_delay_ms; i++)
        ceiling *= 2;
    if (ceiling > policy->max_delay_ms)
        ceiling = policy->max_delay_ms;
    return (unsigned int)(idem__random64() % (ceiling + 1));
}

int idem_retry_budget_new(idem_retry_budget **out, const idem_retry_budget_options *opts,
                          idem_error *err)
{
    static const idem_retry_budget_options defaults = IDEM_RETRY_BUDGET_OPTIONS_INIT;
    idem_retry_budget *b;

    if (opts == NULL)
        opts = &defaults;
    if (out == NULL)
        return idem__error_field(err, IDEM_EINVAL, "out", "must not be NULL");
    if (idem__check_version(err, opts->version, IDEM_RETRY_BUDGET_OPTIONS_VERSION, "options") != 0)
        return IDEM_EINVAL;
    if (!isfinite(opts->ratio) || opts->ratio < 0)
        return idem__error_field(err, IDEM_EINVAL, "ratio", "must be a finite number >= 0");
    if (opts->max_tokens == 0)
        return idem__error_field(err, IDEM_EINVAL, "max_tokens", "must be at least 1");
    b = calloc(1, sizeof(*b));
    if (b == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "retry budget: out of memory");
    pthread_mutex_init(&b->lock, NULL);
    b->ratio = opts->ratio;
    b->per_ms = opts->min_per_second / 1000.0;
    b->max_tokens = opts->max_tokens;
    b->tokens = b->max_tokens;
    b->refilled_ms = idem__now_ms();
    *out = b;
    return 0;
}

void idem_retry_budget_free(idem_retry_budget *budget)
{
    if (budget == NULL)
        return;
    pthread_mutex_destroy(&budget->lock);
    free(budget);
}

/* Add tokens: the time-based floor since the last refill, plus @extra. Lock held. */
static void budget_add(idem_retry_budget *b, double extra)
{
    uint64_t now = idem__now_ms();

    b->tokens += (double)(now - b->refilled_ms) * b->per_ms + extra;
    b->refilled_ms = now;
    if (b->tokens > b->max_tokens)
        b->tokens = b->max_tokens;
}

void idem_retry_budget_deposit(idem_retry_budget *budget)
{
    pthread_mutex_lock(&budget->lock);
    budget_add(budget, budget->ratio);
    pthread_mutex_unlock(&budget->lock);
}

int idem_retry_budget_withdraw(idem_retry_budget *budget)
{
    int ok;

    pthread_mutex_lock(&budget->lock);
    budget_add(budget, 0);
    ok = budget->tokens >= 1.0;
    if (ok)
        budget->tokens -= 1.0;
    pthread_mutex_unlock(&budget->lock);
    return ok;
}

void idem_retry_state_init(idem_retry_state *state)
{
    state->attempts = 0;
    state->started_ms = idem__now_ms();
}

int idem_retry_next(unsigned int *delay_ms_out, idem_retry_state *state,
                    const idem_retry_policy *policy, idem_retry_budget *budget, idem_status status)
{
    static const idem_retry_policy defaults = IDEM_RETRY_POLICY_INIT;
    unsigned int delay;

    if (policy == NULL)
        policy = &defaults;
    if (state->attempts++ == 0 && budget != NULL)
        idem_retry_budget_deposit(budget);
    if (idem_status_next_step(status) != IDEM_NEXT_RETRY_SAME_KEY)
        return 0;
    if (state->attempts >= policy->max_attempts)
        return 0;
    delay = idem_retry_backoff_ms(policy, state->attempts);
    if (idem__now_ms() + delay - state->started_ms > policy->deadline_ms)
        return 0;
    if (budget != NULL && !idem_retry_budget_withdraw(budget))
        return 0;
    *delay_ms_out = delay;
    return 1;
}
