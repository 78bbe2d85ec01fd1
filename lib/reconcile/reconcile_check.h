/* The checks of the reconciliation calls' arguments (reconcile_check.c): each refuses with
 * IDEM_EINVAL and err->field naming the member (filter.kind, resolution.note, conn). */
#ifndef IDEM_LIB_RECONCILE_CHECK_H
#define IDEM_LIB_RECONCILE_CHECK_H

#include <libpq-fe.h>
#include <stddef.h>

#include "idem/common.h"
#include "idem/sys/reconcile.h"

/* @kind is one of the kinds idem records (IDEM_RECONCILE_KINDS); @field names it. */
int idem__reconcile_check_kind(const char *field, const char *kind, idem_error *err);

/* UTF-8 text of 1 to @max bytes without control characters (but for tab and newline when
 * @multiline). */
int idem__reconcile_check_text(const char *field, const char *s, size_t max, int multiline,
                               idem_error *err);

/* A filter's version and members (filter.tenant, .operation_id, .kind, .state, .since). */
int idem__reconcile_check_filter(const idem_reconcile_filter *f, idem_error *err);

/* @conn open and idle: the calls run their own statements on it. */
int idem__reconcile_check_conn(PGconn *conn, idem_error *err);

#endif
