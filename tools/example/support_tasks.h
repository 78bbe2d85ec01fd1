/*
 * The example write tool, "create_support_task" (payload version 1), from the article
 * idem grew from: it creates a support task for a tenant and answers
 * {"status": "created", "task_id": N}. Used by idem-demo, idem-bench and the tests.
 * It is built on the public API only, as a user's tool would be; it is not installed.
 *
 * Its table, idem_example.support_tasks, is the example's own, in its own schema: idem's
 * migrations do not create it. Programs that use the example call
 * example_support_tasks_setup() once at start.
 *
 * Arguments: {"subject": "<1-200 characters>"}.
 */
#ifndef IDEM_EXAMPLE_SUPPORT_TASKS_H
#define IDEM_EXAMPLE_SUPPORT_TASKS_H

#include <idem/idem.h>

#define EXAMPLE_TOOL_NAME    "create_support_task"
#define EXAMPLE_TOOL_VERSION 1

/* Create the schema idem_example and its table support_tasks if they are missing, on a
 * borrowed idle connection. Safe to run again, and from two processes at once. Returns 0
 * or IDEM_EDB (the server's message, with context in front). */
int example_support_tasks_setup(PGconn *conn, idem_error *err);

/* The effect (an idem_effect_fn); ctx is unused. A missing or bad subject is a final
 * failure, stored and replayed: {"status": "rejected", "reason": "..."}. */
int example_create_support_task(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                                idem_error *err);

/* The task's current status ("open"/"closed") into out (at least 16 bytes): current
 * state, read separately from any receipt. Returns 0, IDEM_ENOTFOUND, or a pool error. */
int example_support_task_status(char *out, size_t size, idem_pool *pool, const char *tenant,
                                long long task_id, idem_error *err);

/* Close a task (to show that a receipt does not follow current state). */
int example_support_task_close(idem_pool *pool, const char *tenant, long long task_id,
                               idem_error *err);

#endif
