/* The keys this process has seen lately (README.md in this folder, "How it runs"): a
 * fixed table that only chooses the cheaper way into the store for a call
 * (idem_request.attempt): a key not seen here is most likely new, and is claimed at once
 * with its effect (one round trip); a key seen before is most likely a retry, and is
 * looked up first (a replay in one round trip). Either choice is correct for every key:
 * a key forgotten here, seen at another gateway or mistaken for another only costs a round
 * trip or a statement rolled back. Safe from every thread, without a lock. */
#ifndef IDEM_GATEWAY_SEEN_H
#define IDEM_GATEWAY_SEEN_H

/* The slots of the table: 8 bytes each (512 KiB). */
#define GW_SEEN_SLOTS 65536

/* Note (@tenant, @key) as seen; 1 when it was seen before (as far as the table remembers),
 * else 0. */
int gw_seen(const char *tenant, const char *key);

#endif
