/* The monotonic clock in milliseconds, deadlines and sleeping: for the library and the
 * tools alike. */
#include <errno.h>
#include <limits.h>
#include <time.h>

#include "clock.h"

/* Pool bookkeeping counts milliseconds: the coarse clock, where there is one, is precise
 * enough (a few ms) and costs a few nanoseconds instead of tens on each acquire. */
#ifdef CLOCK_MONOTONIC_COARSE
#define COARSE_CLOCK CLOCK_MONOTONIC_COARSE
#else
#define COARSE_CLOCK CLOCK_MONOTONIC
#endif

long long idem__coarse_ms(void)
{
    struct timespec ts;

    clock_gettime(COARSE_CLOCK, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long long idem__deadline_in(long long ms)
{
    return ms > 0 ? (long long)idem__now_ms() + ms : LLONG_MAX;
}

void idem__deadline_after(struct timespec *ts, unsigned int ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

uint64_t idem__now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void idem__sleep_ms(unsigned int ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}
