/* The core's clock (core/clock.c): milliseconds on the monotonic clock, deadlines and
 * sleeping, for the library and the tools. No state. */
#ifndef IDEM_CORE_CLOCK_H
#define IDEM_CORE_CLOCK_H

#include <stdint.h>

#include <time.h>

/* Milliseconds on the monotonic clock. */
uint64_t idem__now_ms(void);
/* The same clock, coarse (to within a few ms, where the system has one) and cheap: for
 * the pool's bookkeeping on every acquire. */
long long idem__coarse_ms(void);
/* The idem__now_ms() time @ms from now, as the waits of core/connect.h take a deadline:
 * LLONG_MAX (no limit) when @ms is 0 or less. */
long long idem__deadline_in(long long ms);
/* CLOCK_MONOTONIC now + ms, for pthread_cond_timedwait on a monotonic condvar. */
void idem__deadline_after(struct timespec *ts, unsigned int ms);
/* Sleep for ms milliseconds (restarted on EINTR). */
void idem__sleep_ms(unsigned int ms);

#endif
