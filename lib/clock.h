/* Internal time helpers. */
#ifndef IDEM_LIB_CLOCK_H
#define IDEM_LIB_CLOCK_H

#include <stdint.h>

#include <time.h>

/* Milliseconds on the monotonic clock. */
uint64_t idem__now_ms(void);
/* The same clock, coarse (to within a few ms, where the system has one) and cheap: for
 * the pool's bookkeeping on every acquire. */
long long idem__coarse_ms(void);
/* CLOCK_MONOTONIC now + ms, for pthread_cond_timedwait on a monotonic condvar. */
void idem__deadline_after(struct timespec *ts, unsigned int ms);
/* Sleep for ms milliseconds (restarted on EINTR). */
void idem__sleep_ms(unsigned int ms);
/* A uniformly distributed 64-bit random number from a per-thread generator seeded by the
 * system CSPRNG: for jitter, never for identifiers. */
uint64_t idem__random64(void);

#endif
