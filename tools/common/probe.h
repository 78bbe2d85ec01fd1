/* The declarative resolvers of a gateway configuration, run outside the gateway: by
 * idem-reconcile probe and idem-sweep --config (tools/README.md). The same configuration
 * reader (config.h), runtime (runtime.h) and status requests (resolver.h) as the gateway's. */
#ifndef IDEM_GATEWAY_PROBE_H
#define IDEM_GATEWAY_PROBE_H

#include <idem/idem.h>
#include <idem/sys/reconcile.h>
#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "runtime.h"

typedef struct gw_probes {
    gw_config *cfg; /* owned */
    gw_runtime *rt; /* owned: its pool, store, and the clients of the tools with a resolver */
} gw_probes;

/* Load the configuration at @path, then a pool on @dsn (NULL: the PG* environment, not the
 * file's database.dsn) named @application, a store with the file's options, and the client
 * and resolver of every http tool that declares one. @out: caller owns, gw_probes_free().
 * Returns 0; GW_EXIT_NOINPUT or GW_EXIT_DATAERR (the file, @why as gw_config_load() says);
 * or an IDEM_E* code (the pool, the store or a client could not be made; @why). */
int gw_probes_open(gw_probes **out, const char *path, const char *dsn, const char *application,
                   char *why, size_t size);

/* Whether the file's tool @tool declares a resolver. */
int gw_probes_has_resolver(const gw_probes *p, const char *tool);

/* idem_external_probe() of (@tenant, @operation_id) through the resolver of @tool, which
 * must have one. */
int gw_probes_ask(idem_external_probe_result *out, const gw_probes *p, const char *tool,
                  const char *tenant, const char *operation_id, idem_error *err);

/* NULL is accepted. */
void gw_probes_free(gw_probes *p);

/* An open reconciliation item of kind outcome_unknown, and what its history says. */
typedef struct gw_probe_item {
    const idem_reconcile_item *item; /* borrowed from the list gw_probes_list() made */
    int has_resolver;                /* whether the file declares one for its tool */
    unsigned int asked;              /* how often a resolver asked the provider */
    int64_t last_asked;              /* when last (microseconds since the epoch); 0: never */
} gw_probe_item;

typedef struct gw_probe_list {
    idem_reconcile_items *items; /* owned */
    gw_probe_item *at;           /* owned; least recently asked first (never asked first) */
    size_t n;
} gw_probe_list;

/* The open outcome_unknown items of @tenant (NULL: every tenant), at most @limit (0: all)
 * of the most recently seen, read on @conn. Returns 0 (@out filled; clear it with
 * gw_probe_list_clear()) or the IDEM_E* code of the listing (@err). */
int gw_probes_list(gw_probe_list *out, const gw_probes *p, PGconn *conn, const char *tenant,
                   unsigned int limit, idem_error *err);
void gw_probe_list_clear(gw_probe_list *list);

/* The verdict's name as the history records it: done, failed, not_done, unknown. */
const char *gw_probe_verdict_name(idem_external_verdict v);

#endif
