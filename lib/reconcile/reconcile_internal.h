/* Recording reconciliation items, for the store (the reading side is public: sys/reconcile.h). */
#ifndef IDEM_LIB_RECONCILE_INTERNAL_H
#define IDEM_LIB_RECONCILE_INTERNAL_H

#include "idem/fingerprint.h"
#include "idem/pool.h"
#include "idem/sys/reconcile.h"

/* The kinds of item idem records (sys/reconcile.h), and only these: a filter or a
 * resolution naming another is refused. A retry refused after its key's retention window: */
#define IDEM__RECONCILE_EXPIRED "expired"
/* a local record left pending after its transaction ended: */
#define IDEM__RECONCILE_STALLED "stalled_pending"
/* an external effect whose result is not known, whose lease was taken over while it
 * dispatched, or whose outbox item spent its attempts: */
#define IDEM__RECONCILE_OUTCOME_UNKNOWN  "outcome_unknown"
#define IDEM__RECONCILE_LEASE_LOST       "lease_lost"
#define IDEM__RECONCILE_OUTBOX_EXHAUSTED "outbox_exhausted"
/* an intent that needs reconciliation: */
#define IDEM__RECONCILE_INTENT "intent"
#define IDEM__RECONCILE_KINDS_TEXT                                                                 \
    IDEM__RECONCILE_EXPIRED ", " IDEM__RECONCILE_STALLED ", " IDEM__RECONCILE_OUTCOME_UNKNOWN      \
                            ", " IDEM__RECONCILE_LEASE_LOST ", " IDEM__RECONCILE_OUTBOX_EXHAUSTED  \
                            ", " IDEM__RECONCILE_INTENT

#define IDEM__STR_(x) #x
#define IDEM__STR(x)  IDEM__STR_(x)
/* SQL: row @o of idem.operations is a local record (no downstream key, no lease) pending
 * for longer than IDEM_RECONCILE_STALLED_AFTER_S. */
#define IDEM__STALLED_SQL(o)                                                                       \
    " " o ".state = 'pending' AND " o ".attempts IS NULL AND " o ".lease_expires_at IS NULL"       \
    " AND " o ".created_at < now() - interval '" IDEM__STR(IDEM_RECONCILE_STALLED_AFTER_S) " s'"

/* Record one more request of @kind for the key, in autocommit on a pooled connection:
 * insert the item, or raise its count, update last_seen, tool, fingerprint and whether it
 * matches, and reopen it. @matches: 1, 0, or -1 when there is nothing to compare with (an
 * unknown kept from the previous request when it had the same fingerprint). Returns 0,
 * IDEM_EDB, IDEM_EUNAVAIL. */
int idem__reconcile_record(idem_conn *conn, const char *tenant, const char *operation_id,
                           const char *kind, const char *tool, const idem_fingerprint *fp,
                           int matches, idem_error *err);

#endif
