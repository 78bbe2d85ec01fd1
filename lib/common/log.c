/* The library's records (log.h): one line each, handed to the caller's hook; the library
 * never prints. */
#include <stdarg.h>
#include <stdio.h>

#include "core/text.h"
#include "log.h"

void idem__log(idem_log_fn fn, void *ctx, int level, const char *fmt, ...)
{
    char msg[IDEM_ERROR_MESSAGE_MAX];
    va_list ap;

    if (fn == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    idem__one_line(msg);
    fn(ctx, level, msg);
}
