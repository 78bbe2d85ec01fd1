/* What the tests may ask of the identifiers' random bits (uuid.c). */
#ifndef IDEM_LIB_UUID_INTERNAL_H
#define IDEM_LIB_UUID_INTERNAL_H

#ifdef IDEM_TESTING
/* Whether the calling thread's identifier bits come from a page the kernel wipes in a
 * child process: 0 before its first identifier, and where no such page can be had. Tests
 * only: compiled into the test library, never into the installed one. */
int idem__uuid_batch_wiped(void);
#endif

#endif
