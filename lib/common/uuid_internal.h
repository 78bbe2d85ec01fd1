/* What the tests may ask of the identifiers' random bits (uuid.c). */
#ifndef IDEM_LIB_UUID_INTERNAL_H
#define IDEM_LIB_UUID_INTERNAL_H

#ifdef IDEM_TESTING
/* Whether a child process is told from its parent by a page the kernel wipes in a child
 * (1), or by the process ID on every draw (0: no such page to be had). Tests only:
 * compiled into the test library, never into the installed one. */
int idem__uuid_fork_canary(void);
#endif

#endif
