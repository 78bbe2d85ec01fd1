/* What the bench says on stderr: its progress, and its failures with the password of the
 * run's DSN masked. */
#include <stdarg.h>
#include <stdio.h>

#include "bench.h"

/* The --dsn of the run: its password is masked in every message (libpq repeats a
 * malformed URI whole). */
static const char *run_dsn;

void bench_mask_dsn(const char *dsn)
{
    run_dsn = dsn;
}

int bench_error(const char *what, const char *detail)
{
    char text[1024];

    snprintf(text, sizeof(text), "%s", detail != NULL && *detail ? detail : "failed");
    if (run_dsn != NULL)
        idem_conninfo_redact(text, sizeof(text), run_dsn);
    fprintf(stderr, "idem-bench: %s: %s\n", what, text);
    return -1;
}

void bench_say(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "==> ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
}
