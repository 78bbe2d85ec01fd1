/* Test support for durable intents: approving an action, making a lease lapse, reading an
 * intent's row. Helpers fail the test when what they do fails. */
#ifndef IDEM_TESTS_INTENTTEST_H
#define IDEM_TESTS_INTENTTEST_H

#include <libpq-fe.h>

#include "idem/idem.h"

/* An approval of @tool (version 1) with @args by "alice"; must succeed. Caller frees. */
idem_intent *intenttest_approve(idem_store *store, const char *tenant, const char *ref,
                                const char *tool, const char *args);

/* The intent as the database has it now; must exist. Caller frees. */
idem_intent *intenttest_get(idem_store *store, const char *tenant, const char *op);

/* Make the intent's lease lapse now, on the database's clock (a worker that died). */
void intenttest_lapse(PGconn *check, const char *tenant, const char *op);

/* Rows of idem.intents in state @state (NULL: every state). */
long intenttest_count(PGconn *check, const char *state);

#endif
