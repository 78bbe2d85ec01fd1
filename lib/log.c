/* The library's records (log.h): one line each, handed to the caller's hook; the library
 * never prints. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

static void one_line(char *s)
{
    size_t n = strlen(s);

    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
        s[--n] = '\0';
    for (char *p = s; *p != '\0'; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    }
}

void idem__log(idem_log_fn fn, void *ctx, int level, const char *fmt, ...)
{
    char msg[IDEM_ERROR_MESSAGE_MAX];
    va_list ap;

    if (fn == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    one_line(msg);
    fn(ctx, level, msg);
}
