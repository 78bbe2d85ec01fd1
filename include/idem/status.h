/**
 * @file status.h
 * @brief The closed set of outcomes of an idempotent call, and what the caller does next.
 *
 * | status          | meaning                                             | next step          |
 * | --------------- | --------------------------------------------------- | ------------------ |
 * | created         | the effect ran now and committed with its record    | done               |
 * | replayed        | the stored receipt was returned                     | done               |
 * | conflict        | same key, different arguments                       | return to caller   |
 * | invalid         | bad input (the error names the field and why)       | return to caller   |
 * | in_progress     | another attempt holds a live lease on this key      | retry later, same key |
 * | unavailable     | database unreachable, pool exhausted, retries spent | retry later, same key |
 * | expired         | key past retention; marked for reconciliation       | reconcile          |
 * | outcome_unknown | external dispatch happened, result not recorded     | reconcile          |
 * | effect_failed   | the effect failed (its own error); nothing stored   | return to caller   |
 * | rejected        | the effect's final refusal, stored and replayed     | return to caller   |
 * | misconfigured   | schema missing or out of date, a privilege missing  | return to caller;  |
 * |                 | (idem's or the application's), a login refused      | an operator fixes  |
 *
 * A refusal never looks like success to a caller that reads only the status, and a
 * permanent error is never classified "retry".
 */
#ifndef IDEM_STATUS_H
#define IDEM_STATUS_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The outcome of one call. */
typedef enum idem_status {
    IDEM_STATUS_CREATED = 0,
    IDEM_STATUS_REPLAYED,
    IDEM_STATUS_CONFLICT,
    IDEM_STATUS_INVALID,
    IDEM_STATUS_IN_PROGRESS,
    IDEM_STATUS_UNAVAILABLE,
    IDEM_STATUS_EXPIRED,
    IDEM_STATUS_OUTCOME_UNKNOWN,
    IDEM_STATUS_EFFECT_FAILED,
    IDEM_STATUS_REJECTED,      /**< the effect's final refusal, stored and replayed */
    IDEM_STATUS_MISCONFIGURED, /**< the deployment is wrong; retrying cannot help */
} idem_status;

/** What the caller does after a status. */
typedef enum idem_next_step {
    IDEM_NEXT_DONE = 0,         /**< the call is finished; use the receipt */
    IDEM_NEXT_RETURN_TO_CALLER, /**< report to whoever asked; do not retry */
    IDEM_NEXT_RETRY_SAME_KEY,   /**< retry later with the same key, within the retry budget */
    IDEM_NEXT_RECONCILE,        /**< a person or process must find out what happened;
                                     never re-execute under a new key */
} idem_next_step;

/** "created", "replayed", ...; "unknown" outside the set. Static, never NULL. */
IDEM_API const char *idem_status_name(idem_status status);

/** The documented next step for @p status (see the table above). */
IDEM_API idem_next_step idem_status_next_step(idem_status status);

/** "done", "return_to_caller", "retry_same_key", "reconcile"; static, never NULL. */
IDEM_API const char *idem_next_step_name(idem_next_step step);

/**
 * The status that an idem error code stands for: IDEM_ECONFLICT → conflict,
 * IDEM_EINVAL → invalid, IDEM_EBUSY → in_progress, IDEM_EEXPIRED → expired,
 * IDEM_EUNKNOWN → outcome_unknown, IDEM_EEFFECT → effect_failed, IDEM_EREJECTED →
 * rejected, IDEM_ESCHEMA and IDEM_EPERM → misconfigured, and every other failure
 * (database, timeout, memory) → unavailable. 0 maps to created.
 */
IDEM_API idem_status idem_status_from_error(int code);

#ifdef __cplusplus
}
#endif

#endif
