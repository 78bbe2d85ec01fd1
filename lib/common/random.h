/* Random jitter for retries and the pool (random.c). The clock itself is the core's
 * (core/clock.h), which keeps no state; this generator keeps one per thread, so it stays
 * out of the core. */
#ifndef IDEM_LIB_RANDOM_H
#define IDEM_LIB_RANDOM_H

#include <stdint.h>

/* A uniformly distributed 64-bit random number from a per-thread generator seeded by the
 * system CSPRNG: for jitter, never for identifiers. */
uint64_t idem__random64(void);

#endif
