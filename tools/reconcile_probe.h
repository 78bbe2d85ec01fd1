/* idem-reconcile probe (reconcile_probe.c): a gateway configuration's declarative resolvers
 * asked about open outcome_unknown items (tools/README.md, "Asking the provider"). */
#ifndef IDEM_RECONCILE_PROBE_H
#define IDEM_RECONCILE_PROBE_H

#include <libpq-fe.h>

#include "exit.h"
#include "idem/idem.h"

typedef struct rp_options {
    const char *config;       /* the gateway configuration file */
    const char *dsn;          /* NULL: the PG* environment */
    const char *tenant;       /* with operation_id: that operation; else a filter, or NULL */
    const char *operation_id; /* NULL: every open item (listed, or asked with @all) */
    int all;
    int json;
    unsigned int limit; /* list and --all: at most this many items (0: all) */
    /* idem-reconcile's report of a library failure, returning its exit status. */
    int (*fail)(const char *what, int rc, const idem_error *err);
} rp_options;

/* Run the command on @conn (checked for idem_operator's rights); returns the exit status. */
int rp_probe(const rp_options *o, PGconn *conn);

#endif
