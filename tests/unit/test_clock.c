/* Deadlines on the one clock (lib/core/clock.h): the core's, for the waits of connecting
 * and of one connection in the library and the tools alike, and the call's
 * (lib/common/deadline.h), which gives a last statement a short wait of its own. */
#include <criterion/criterion.h>
#include <limits.h>

#include "core/clock.h"
#include "deadline.h"

Test(clock, deadline_in_is_now_plus_the_limit)
{
    long long before = (long long)idem__now_ms();
    long long deadline = idem__deadline_in(5000);
    long long after = (long long)idem__now_ms();

    cr_assert_geq(deadline, before + 5000);
    cr_assert_leq(deadline, after + 5000);
}

Test(clock, deadline_in_without_a_limit_is_none)
{
    cr_assert_eq(idem__deadline_in(0), LLONG_MAX, "0 ms is no limit");
    cr_assert_eq(idem__deadline_in(-1), LLONG_MAX, "a negative limit is no limit");
}

Test(clock, call_without_deadline_waits_without_limit)
{
    cr_assert_eq(idem__deadline_wait_until(0), LLONG_MAX);
}

Test(clock, call_deadline_far_off_bounds_the_wait)
{
    uint64_t deadline = idem__now_ms() + 60000;

    cr_assert_eq(idem__deadline_wait_until(deadline), (long long)deadline);
}

Test(clock, call_deadline_passed_still_gives_the_shortest_wait)
{
    long long before = (long long)idem__now_ms();
    long long until = idem__deadline_wait_until(1); /* long past */
    long long after = (long long)idem__now_ms();

    cr_assert_geq(until, before + IDEM__MIN_WAIT_MS);
    cr_assert_leq(until, after + IDEM__MIN_WAIT_MS);
}
