/* The keys seen: a direct-mapped table of 64-bit hashes of (tenant, key), each slot
 * overwritten by the latest key that maps to it. */
#include <stdatomic.h>
#include <stdint.h>

#include "seen.h"

static _Atomic uint64_t slots[GW_SEEN_SLOTS];

/* FNV-1a over @s and its terminating NUL, from @h. */
static uint64_t hash(uint64_t h, const char *s)
{
    do {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ULL;
    } while (*s++ != '\0');
    return h;
}

int gw_seen(const char *tenant, const char *key)
{
    uint64_t h = hash(hash(0xcbf29ce484222325ULL, tenant), key);
    _Atomic uint64_t *slot;

    h = h != 0 ? h : 1; /* 0 is an empty slot */
    slot = &slots[(h ^ (h >> 32)) % GW_SEEN_SLOTS];
    return atomic_exchange_explicit(slot, h, memory_order_relaxed) == h;
}
