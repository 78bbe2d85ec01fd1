/* The core's redaction (core/redact.c): a connection string's password masked in a text,
 * for the library and the tools. No state. */
#ifndef IDEM_CORE_REDACT_H
#define IDEM_CORE_REDACT_H

#include <stddef.h>

/* idem_conninfo_redact() (include/idem/pool.h says what it does), which only calls this. */
size_t idem__conninfo_redact(char *text, size_t size, const char *conninfo);

#endif
