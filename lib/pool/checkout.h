/* How the library's calls take a pooled connection (pool.c): one checkout that takes the
 * call's deadline, decided once when the call starts (for a store's calls
 * idem__store_deadline(), store_internal.h), and bounds every wait of the checkout by it:
 * the wait for a free connection, opening one, checking an idle one. The connection carries
 * the deadline to every statement the call sends on it (exec.h) until it is released
 * (idem_pool_release()). Private to the library. */
#ifndef IDEM_LIB_CHECKOUT_H
#define IDEM_LIB_CHECKOUT_H

#include <stdint.h>

#include "idem/pool.h"

/* Check out a connection of @pool for a call that must be done by @deadline_ms (an
 * idem__now_ms() time; 0 = none, as idem_pool_acquire()). Each wait lasts as long as the
 * pool's option for it allows (acquire_timeout_ms for a free connection; connect_timeout_ms
 * to open one and ask it whether the database has Citus, and for the round trip that checks
 * a long-idle one), or until the deadline when that is sooner; a checkout started with less
 * than IDEM__MIN_WAIT_MS left (deadline.h), to resolve a lost reply, gets that long. On success
 * *out is the caller's until idem_pool_release(), stamped with @deadline_ms. Returns as
 * idem_pool_acquire(): 0, IDEM_EUNAVAIL (pool exhausted, or the server did not answer, in
 * time: the message names the limit), IDEM_EPERM, IDEM_EINVAL, IDEM_ENOMEM. */
int idem__pool_checkout(idem_conn **out, idem_pool *pool, uint64_t deadline_ms, idem_error *err);

#endif
