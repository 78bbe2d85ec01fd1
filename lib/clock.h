/* Internal time helpers. */
#ifndef IDEM_LIB_CLOCK_H
#define IDEM_LIB_CLOCK_H

#include <stdint.h>

/* Milliseconds on the monotonic clock. */
uint64_t idem__now_ms(void);
/* Sleep for ms milliseconds (restarted on EINTR). */
void idem__sleep_ms(unsigned int ms);
/* A uniformly distributed 64-bit random number from a per-thread generator seeded by the
 * system CSPRNG: for jitter, never for identifiers. */
uint64_t idem__random64(void);

#endif
