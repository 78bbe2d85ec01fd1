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
 *    idem-reconcile): sys/sweep.h, sys/reconcile.h, sys/external.h. Include them by name:
 *    this header includes them only for programs of idem 0.1 (deprecated.h).
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

/* The administration calls this header included until 0.1: deprecated.h */
#define IDEM__IDEM_H_DONE
#include "deprecated.h"

#endif
