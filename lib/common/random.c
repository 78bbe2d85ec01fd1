/* Jitter for retries and the pool: a per-thread random generator (random.h). The clock is
 * the core's (core/clock.c). */
#include <openssl/rand.h>
#include <time.h>

#include "random.h"

static _Thread_local uint64_t rng_state;

/* splitmix64: small, fast, and good enough for spreading retries. */
uint64_t idem__random64(void)
{
    uint64_t z;

    while (rng_state == 0) {
        if (RAND_bytes((unsigned char *)&rng_state, sizeof(rng_state)) != 1)
            rng_state = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)&rng_state;
    }
    z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
