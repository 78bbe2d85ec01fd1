/* A call's deadline (deadline.h). */
#include <limits.h>

#include "core/clock.h"
#include "deadline.h"

long long idem__deadline_wait_until(uint64_t deadline_ms)
{
    long long now = (long long)idem__now_ms();
    long long deadline = (long long)deadline_ms;

    if (deadline_ms == 0)
        return LLONG_MAX;
    return deadline > now + IDEM__MIN_WAIT_MS ? deadline : now + IDEM__MIN_WAIT_MS;
}
