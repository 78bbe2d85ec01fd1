/**
 * @file retry.h
 * @brief The retry policy in one layer: capped attempts within an overall deadline,
 *        exponential backoff with full jitter, and a shared retry budget so that retries
 *        cannot multiply load during an outage.
 *
 * Typical use by the caller of idem_store_execute():
 * @code
 *   idem_retry_state st;
 *   idem_retry_state_init(&st);
 *   for (;;) {
 *       rc = idem_store_execute(&out, store, &req, effect, ctx, &err);
 *       unsigned int delay;
 *       if (!idem_retry_next(&delay, &st, &policy, budget, out.status))
 *           break;                 // done, or not retryable, or out of attempts/time/budget
 *       sleep_ms(delay);           // then retry with the SAME operation ID
 *   }
 * @endcode
 */
#ifndef IDEM_RETRY_H
#define IDEM_RETRY_H

#include <stdint.h>

#include "common.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Retry policy. Initialize with ::IDEM_RETRY_POLICY_INIT. */
typedef struct idem_retry_policy {
    unsigned int version;       /**< ::IDEM_RETRY_POLICY_VERSION */
    unsigned int max_attempts;  /**< attempts in all, the first included; default 5 */
    unsigned int base_delay_ms; /**< backoff before the 2nd attempt is drawn from
                                     [0, base]; doubles each time; default 50 */
    unsigned int max_delay_ms;  /**< cap on one backoff; default 5000 */
    unsigned int deadline_ms;   /**< no retry starts later than this after the first
                                     attempt; default 30000 */
} idem_retry_policy;

#define IDEM_RETRY_POLICY_VERSION 1
#define IDEM_RETRY_POLICY_INIT                                                                     \
    {                                                                                              \
        IDEM_RETRY_POLICY_VERSION, 5, 50, 5000, 30000                                              \
    }

/** Fill @p policy with the defaults of struct version @p version (for bindings that cannot
 *  use ::IDEM_RETRY_POLICY_INIT). @return 0, or IDEM_EINVAL (NULL, unknown version). */
IDEM_API int idem_retry_policy_init(idem_retry_policy *policy, unsigned int version);

/**
 * A backoff with full jitter: uniform in [0, min(max_delay_ms, base_delay_ms * 2^(n-1))]
 * where @p retry_number n counts retries from 1. Thread-safe (per-thread generator seeded
 * from the system's CSPRNG).
 */
IDEM_API unsigned int idem_retry_backoff_ms(const idem_retry_policy *policy,
                                            unsigned int retry_number);

/** A retry budget shared by many callers. Opaque; thread-safe. */
typedef struct idem_retry_budget idem_retry_budget;

/** Budget settings. Initialize with ::IDEM_RETRY_BUDGET_OPTIONS_INIT. */
typedef struct idem_retry_budget_options {
    unsigned int version;        /**< ::IDEM_RETRY_BUDGET_OPTIONS_VERSION */
    double ratio;                /**< tokens each first attempt deposits; default 0.1
                                      (retries add at most 10 % to the load) */
    unsigned int min_per_second; /**< tokens added per second regardless of traffic, so
                                      that a quiet caller can still retry; default 10 */
    unsigned int max_tokens;     /**< the bucket's size; default 100; it starts full */
} idem_retry_budget_options;

#define IDEM_RETRY_BUDGET_OPTIONS_VERSION 1
#define IDEM_RETRY_BUDGET_OPTIONS_INIT                                                             \
    {                                                                                              \
        IDEM_RETRY_BUDGET_OPTIONS_VERSION, 0.1, 10, 100                                            \
    }

/** Fill @p opts with the defaults of struct version @p version. @return 0, or IDEM_EINVAL. */
IDEM_API int idem_retry_budget_options_init(idem_retry_budget_options *opts, unsigned int version);

/**
 * @param out  caller owns; free with idem_retry_budget_free(). Untouched on failure.
 * @param opts NULL for the defaults.
 * @return 0, IDEM_EINVAL (ratio negative or not finite, max_tokens 0), IDEM_ENOMEM.
 */
IDEM_API int idem_retry_budget_new(idem_retry_budget **out, const idem_retry_budget_options *opts,
                                   idem_error *err);
/** NULL is accepted. */
IDEM_API void idem_retry_budget_free(idem_retry_budget *budget);
/** Record a first attempt (deposits `ratio` tokens). */
IDEM_API void idem_retry_budget_deposit(idem_retry_budget *budget);
/** Take one token for a retry. @return 1 if the retry may go ahead, 0 if the budget is spent. */
IDEM_API int idem_retry_budget_withdraw(idem_retry_budget *budget);

/** Progress of one logical call across its attempts. Initialize with idem_retry_state_init(). */
typedef struct idem_retry_state {
    unsigned int attempts; /**< attempts made so far */
    uint64_t started_ms;   /**< monotonic time of the first attempt */
} idem_retry_state;

/** Start a new logical call. */
IDEM_API void idem_retry_state_init(idem_retry_state *state);

/**
 * Decide after an attempt that ended with @p status. Retries only statuses whose next step
 * is "retry later, same key" (in_progress, unavailable), while attempts, deadline and
 * budget (NULL: no budget) allow. The first call deposits into the budget.
 *
 * @param delay_ms_out  set to the backoff to sleep before retrying, when 1 is returned.
 * @return 1 to retry with the same key after *delay_ms_out, 0 to stop.
 */
IDEM_API int idem_retry_next(unsigned int *delay_ms_out, idem_retry_state *state,
                             const idem_retry_policy *policy, idem_retry_budget *budget,
                             idem_status status);

#ifdef __cplusplus
}
#endif

#endif
