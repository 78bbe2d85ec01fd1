/* Test support: operation records and reconciliation items written directly with SQL, and
 * time made to pass by backdating their columns (never by sleeping). */
#ifndef IDEM_TESTS_RECORDS_H
#define IDEM_TESTS_RECORDS_H

#include <libpq-fe.h>

/* Insert records @tenant/<prefix><i> for i in [from, to) of tool "t": @state ("completed",
 * "failed", "pending" or "expired"), a receipt unless pending or expired, expires_at =
 * now() + @expires_in and forget_at = now() + @forget_in (intervals as text, "-1 hour";
 * forget_in NULL leaves forget_at NULL, as for rows claimed before migration 0003). */
void records_insert(PGconn *conn, const char *tenant, const char *prefix, int from, int to,
                    const char *state, const char *expires_in, const char *forget_in);

/* Rows of idem.operations in @state ("" for all). */
long records_count(PGconn *conn, const char *state);

/* An md5 over every row of idem.operations and idem.reconciliation_items: equal before and
 * after means nothing changed. Caller frees. */
char *records_digest(PGconn *conn);

/* Insert a reconciliation item of kind @kind, last seen now() + @seen_in, open. */
void records_insert_item(PGconn *conn, const char *tenant, const char *operation_id,
                         const char *kind, long count, const char *seen_in);

#endif
