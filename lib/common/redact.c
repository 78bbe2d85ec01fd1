/* The library's redaction, over the core's one implementation (core/redact.c):
 * idem_conninfo_redact(), its public face, and idem__error_redact() for an idem_error's
 * texts (error.h). */
#include "core/redact.h"
#include "error.h"
#include "idem/pool.h"

size_t idem_conninfo_redact(char *text, size_t size, const char *conninfo)
{
    return idem__conninfo_redact(text, size, conninfo);
}

void idem__error_redact(idem_error *err, const char *conninfo)
{
    if (err == NULL || conninfo == NULL)
        return;
    idem__conninfo_redact(err->message, sizeof(err->message), conninfo);
    idem__conninfo_redact(err->detail, sizeof(err->detail), conninfo);
    idem__conninfo_redact(err->hint, sizeof(err->hint), conninfo);
}
