/* idem_conninfo_redact(), the public face of the core's redaction (core/redact.c). */
#include "idem/pool.h"

#include "core/redact.h"

size_t idem_conninfo_redact(char *text, size_t size, const char *conninfo)
{
    return idem__conninfo_redact(text, size, conninfo);
}
