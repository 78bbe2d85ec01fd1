/* Internal time helpers: the core's clock (core/clock.h), and random jitter. */
#ifndef IDEM_LIB_CLOCK_H
#define IDEM_LIB_CLOCK_H

#include <stdint.h>

#include "core/clock.h"

/* A uniformly distributed 64-bit random number from a per-thread generator seeded by the
 * system CSPRNG: for jitter, never for identifiers. */
uint64_t idem__random64(void);

#endif
