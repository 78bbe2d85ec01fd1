/* Recording reconciliation items, for the store (the reading side is public: sys/reconcile.h). */
#ifndef IDEM_LIB_RECONCILE_INTERNAL_H
#define IDEM_LIB_RECONCILE_INTERNAL_H

#include "idem/fingerprint.h"
#include "idem/pool.h"
#include "idem/sys/reconcile.h"

/* The kind of a retry refused after its key's retention window. */
#define IDEM__RECONCILE_EXPIRED "expired"
/* The kind of a local record left pending after its transaction ended (sys/reconcile.h). */
#define IDEM__RECONCILE_STALLED "stalled_pending"

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
