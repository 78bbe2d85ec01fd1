/* Test support for deadlines against a stalled server: a pooled connection's backend
 * stopped with SIGSTOP while it waits for its client (pg_stat_activity says wait_event =
 * 'ClientRead'): its kernel still acknowledges every packet, so only the client's own clock
 * can notice. A suite that stops a backend resumes it in its .fini with stalltest_resume(),
 * which runs even when a test fails; a watchdog process resumes it after
 * STALLTEST_WATCHDOG_S should the test process die first (the server could not shut down
 * otherwise). */
#ifndef IDEM_TESTS_STALLTEST_H
#define IDEM_TESTS_STALLTEST_H

#include <sys/types.h>

#include "idem/idem.h"

#define STALLTEST_WATCHDOG_S 15

/* The backend of @pool's one idle connection (acquired and released again). */
pid_t stalltest_pooled_backend(idem_pool *pool);

/* Wait until backend @backend of the database at @conninfo waits for its client, then stop
 * it; fails the test when it does not within a few seconds. */
void stalltest_stop(pid_t backend, const char *conninfo);

/* Resume the stopped backend, if any, and end its watchdog. */
void stalltest_resume(void);

#endif
