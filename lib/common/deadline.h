/* A call's deadline (deadline.c): an idem__now_ms() time, decided once when the call starts
 * (idem__store_deadline(), store_internal.h), past which the call's waits give up. The
 * checkout (checkout.h) bounds its waits by it and stamps it on the connection; the
 * execution layer bounds every send and reply by it (exec.h); a transaction's lock and
 * statement timeouts end a margin before it (settings.h). Private to the library. */
#ifndef IDEM_LIB_DEADLINE_H
#define IDEM_LIB_DEADLINE_H

#include <stdint.h>

/* A wait that starts now under @deadline_ms (0 = none) lasts until the deadline, or
 * IDEM__MIN_WAIT_MS from now when less is left: a statement sent at the last moment (the
 * store's lookup after its final backoff, a COMMIT), or a connection checked out to resolve
 * a lost reply, gets that long, so that a healthy server's answer is not thrown away.
 * Returns a monotonic time in ms, LLONG_MAX for no deadline. */
#define IDEM__MIN_WAIT_MS 100
long long idem__deadline_wait_until(uint64_t deadline_ms);

#endif
