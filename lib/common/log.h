/* Internal logging: every module's records go through one helper to the caller's hook. */
#ifndef IDEM_LIB_LOG_H
#define IDEM_LIB_LOG_H

#include "idem/common.h"

/* Format a record and hand it to @fn (nothing when @fn is NULL). The record is one line:
 * trailing newlines are dropped and other control characters (a server message's
 * newlines and tabs) become spaces, so that a log line is always one record. */
void idem__log(idem_log_fn fn, void *ctx, int level, const char *fmt, ...) IDEM_PRINTF(4, 5);

#endif
