/**
 * @file idem.h
 * @brief Umbrella header: includes every public idem module of the library's users.
 *
 * One header per module, for one reader:
 *  - a server that runs tool calls: common.h, version.h, validate.h, status.h, retry.h,
 *    uuid.h, json.h, jcs.h, fingerprint.h, pool.h, store.h, identity.h, external.h, outbox.h,
 *    intent.h, and migrate.h (idem_migrate_check() at start-up; the other calls are the
 *    migrator's);
 *  - administration on your own connection (operators' tools, idem-sweep,
 *    idem-reconcile): sys/sweep.h, sys/reconcile.h, sys/external.h. This header does not
 *    include them when IDEM_NO_DEPRECATED is defined; include them by name.
 */
#ifndef IDEM_IDEM_H
#define IDEM_IDEM_H

#include "common.h"
#include "version.h"
#include "migrate.h"
#include "status.h"
#include "retry.h"
#include "uuid.h"
#include "store.h"
#include "identity.h"
#include "validate.h"
#include "json.h"
#include "jcs.h"
#include "fingerprint.h"
#include "pool.h"
#include "external.h"
#include "outbox.h"
#include "intent.h"

#ifndef IDEM_NO_DEPRECATED
/* Until 0.1 this header included the administration calls too. */
#include "sys/sweep.h"
#include "sys/reconcile.h"
#include "sys/external.h"
#endif

#endif
