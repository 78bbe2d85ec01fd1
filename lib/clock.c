/* Time for the bounds of the contract: the monotonic milliseconds that a call's deadline
 * and every wait under it are counted in, the coarse clock of the pool's bookkeeping, the
 * pause between attempts, and the random numbers of backoff jitter. */
#include <errno.h>
#include <openssl/rand.h>
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
