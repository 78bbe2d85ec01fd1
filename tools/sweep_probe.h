/* idem-sweep --config (sweep_probe.c): a gateway configuration's declarative resolvers
 * asked about open outcome_unknown items, with backoff and a cap per run
 * (tools/README.md, "Asking the provider"). */
#ifndef IDEM_SWEEP_PROBE_H
#define IDEM_SWEEP_PROBE_H

#include <libpq-fe.h>
#include <stddef.h>

#include "exit.h"
#include "idem/idem.h"

typedef struct sp_options {
    const char *config;     /* the gateway configuration file */
    const char *dsn;        /* NULL: the PG* environment */
    unsigned int limit;     /* the most items asked about in one run */
    unsigned int backoff_s; /* after the first question; doubled after each, up to a day */
    int dry_run;            /* say what is due; ask nothing */
    int verbose;            /* each answer on stderr */
} sp_options;

typedef struct sp_summary {
    unsigned int due;     /* items whose tool has a resolver and whose backoff has passed */
    unsigned int asked;   /* of those, asked (at most the limit) */
    unsigned int settled; /* of those, settled */
    unsigned int unknown; /* of those, still unknown */
    unsigned int waiting; /* items with a resolver still in their backoff */
} sp_summary;

/* Ask about what is due, on @conn's database for the listing. Returns 0; EXIT_DATAERR or
 * EXIT_NOINPUT (the file; said on stderr); or an IDEM_E* code (@err). */
int sp_probe(sp_summary *out, const sp_options *o, PGconn *conn, idem_error *err);

#endif
