#include <criterion/criterion.h>
#include <string.h>

#include "idem/idem.h"

Test(status, names_are_the_briefs_words)
{
    static const char *names[] = {"created", "replayed",        "conflict",
                                  "invalid", "in_progress",     "unavailable",
                                  "expired", "outcome_unknown", "effect_failed"};
    for (int s = IDEM_STATUS_CREATED; s <= IDEM_STATUS_EFFECT_FAILED; s++)
        cr_assert_str_eq(idem_status_name((idem_status)s), names[s]);
    cr_assert_str_eq(idem_status_name((idem_status)99), "unknown");
}

Test(status, next_step_follows_the_classification_table)
{
    cr_assert_eq(idem_status_next_step(IDEM_STATUS_CREATED), IDEM_NEXT_DONE);
    cr_assert_eq(idem_status_next_step(IDEM_STATUS_REPLAYED), IDEM_NEXT_DONE);
    cr_assert_eq(idem_status_next_step(IDEM_STATUS_CONFLICT), IDEM_NEXT_RETURN_TO_CALLER);
    cr_assert_eq(idem_status_next_step(IDEM_STATUS_INVALID), IDEM_NEXT_RETURN_TO_CALLER);
    cr_assert_eq(idem_status_next_step(IDEM_STATUS_IN_PROGRESS), IDEM_NEXT_RETRY_SAME_KEY);
    cr_assert_eq(idem_status_next_step(IDEM_STATUS_UNAVAILABLE), IDEM_NEXT_RETRY_SAME_KEY);
    cr_assert_eq(idem_status_next_step(IDEM_STATUS_EXPIRED), IDEM_NEXT_RECONCILE);
    cr_assert_eq(idem_status_next_step(IDEM_STATUS_OUTCOME_UNKNOWN), IDEM_NEXT_RECONCILE);
    cr_assert_eq(idem_status_next_step(IDEM_STATUS_EFFECT_FAILED), IDEM_NEXT_RETURN_TO_CALLER);
    cr_assert_str_eq(idem_next_step_name(IDEM_NEXT_RECONCILE), "reconcile");
}

Test(status, error_codes_map_to_statuses)
{
    cr_assert_eq(idem_status_from_error(0), IDEM_STATUS_CREATED);
    cr_assert_eq(idem_status_from_error(IDEM_ECONFLICT), IDEM_STATUS_CONFLICT);
    cr_assert_eq(idem_status_from_error(IDEM_EINVAL), IDEM_STATUS_INVALID);
    cr_assert_eq(idem_status_from_error(IDEM_EBUSY), IDEM_STATUS_IN_PROGRESS);
    cr_assert_eq(idem_status_from_error(IDEM_EEXPIRED), IDEM_STATUS_EXPIRED);
    cr_assert_eq(idem_status_from_error(IDEM_EUNKNOWN), IDEM_STATUS_OUTCOME_UNKNOWN);
    cr_assert_eq(idem_status_from_error(IDEM_EEFFECT), IDEM_STATUS_EFFECT_FAILED);
    cr_assert_eq(idem_status_from_error(IDEM_EDB), IDEM_STATUS_UNAVAILABLE);
    cr_assert_eq(idem_status_from_error(IDEM_ETIMEDOUT), IDEM_STATUS_UNAVAILABLE);
}

Test(retry, backoff_stays_within_the_exponential_ceiling_and_cap)
{
    idem_retry_policy p = IDEM_RETRY_POLICY_INIT;
    p.base_delay_ms = 10;
    p.max_delay_ms = 100;
    unsigned int max_seen[6] = {0};
    for (int i = 0; i < 4000; i++) {
        for (unsigned int n = 1; n <= 5; n++) {
            unsigned int d = idem_retry_backoff_ms(&p, n);
            unsigned int ceiling = 10u << (n - 1);
            cr_assert_leq(d, ceiling > 100 ? 100 : ceiling, "retry %u drew %u", n, d);
            if (d > max_seen[n])
                max_seen[n] = d;
        }
    }
    /* Full jitter spreads over the whole range: the maxima come close to the ceilings. */
    cr_assert_geq(max_seen[1], 8);
    cr_assert_geq(max_seen[4], 70);
    cr_assert_geq(max_seen[5], 90);
}

Test(retry, only_retry_later_statuses_are_retried)
{
    idem_retry_policy p = IDEM_RETRY_POLICY_INIT;
    p.base_delay_ms = 1;
    unsigned int delay = 12345;
    idem_retry_state st;

    idem_retry_state_init(&st);
    cr_assert_eq(idem_retry_next(&delay, &st, &p, NULL, IDEM_STATUS_CONFLICT), 0);
    idem_retry_state_init(&st);
    cr_assert_eq(idem_retry_next(&delay, &st, &p, NULL, IDEM_STATUS_INVALID), 0);
    idem_retry_state_init(&st);
    cr_assert_eq(idem_retry_next(&delay, &st, &p, NULL, IDEM_STATUS_OUTCOME_UNKNOWN), 0);
    idem_retry_state_init(&st);
    cr_assert_eq(idem_retry_next(&delay, &st, &p, NULL, IDEM_STATUS_UNAVAILABLE), 1);
    cr_assert_leq(delay, 1);
}

Test(retry, attempts_are_capped)
{
    idem_retry_policy p = IDEM_RETRY_POLICY_INIT;
    p.max_attempts = 3;
    p.base_delay_ms = 0;
    unsigned int delay, retries = 0;
    idem_retry_state st;

    idem_retry_state_init(&st);
    while (idem_retry_next(&delay, &st, &p, NULL, IDEM_STATUS_IN_PROGRESS))
        retries++;
    cr_assert_eq(retries, 2, "3 attempts = 2 retries, got %u", retries);
}

Test(retry, deadline_stops_retries)
{
    idem_retry_policy p = IDEM_RETRY_POLICY_INIT;
    p.max_attempts = 1000;
    p.base_delay_ms = 1000;
    p.max_delay_ms = 1000;
    p.deadline_ms = 0;
    unsigned int delay, retries = 0;
    idem_retry_state st;

    idem_retry_state_init(&st);
    while (retries < 1000 && idem_retry_next(&delay, &st, &p, NULL, IDEM_STATUS_UNAVAILABLE))
        retries++;
    /* Only a zero-length draw can fit a zero deadline; the chance of many is nil. */
    cr_assert_lt(retries, 5);
}

Test(retry, budget_limits_retries_to_its_tokens_plus_ratio)
{
    idem_retry_budget_options o = IDEM_RETRY_BUDGET_OPTIONS_INIT;
    idem_retry_budget *b = NULL;
    o.ratio = 0.5;
    o.min_per_second = 0;
    o.max_tokens = 3;
    cr_assert_eq(idem_retry_budget_new(&b, &o, NULL), 0);
    int granted = 0;
    for (int i = 0; i < 10; i++)
        granted += idem_retry_budget_withdraw(b);
    cr_assert_eq(granted, 3, "a full bucket of 3 grants 3, got %d", granted);
    for (int i = 0; i < 4; i++)
        idem_retry_budget_deposit(b);
    granted = 0;
    for (int i = 0; i < 10; i++)
        granted += idem_retry_budget_withdraw(b);
    cr_assert_eq(granted, 2, "4 requests x 0.5 = 2 retries, got %d", granted);
    idem_retry_budget_free(b);
}

Test(retry, budget_rejects_bad_options_naming_the_field)
{
    idem_retry_budget_options o = IDEM_RETRY_BUDGET_OPTIONS_INIT;
    idem_retry_budget *b = NULL;
    idem_error err = IDEM_ERROR_INIT;
    o.ratio = -1;
    cr_assert_eq(idem_retry_budget_new(&b, &o, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "ratio");
    cr_assert_null(b);
    idem_retry_budget_free(NULL);
}
