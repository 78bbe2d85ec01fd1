/* Reading an `http` tool's resolver (config_resolver.c; README.md in this folder,
 * "Resolvers"). */
#ifndef IDEM_GATEWAY_CONFIG_RESOLVER_H
#define IDEM_GATEWAY_CONFIG_RESOLVER_H

#include <jansson.h>

#include "config_read.h"
#include "upstream.h"

/* The member "resolver" (@resolver, NULL when absent: *@out stays NULL) of the http
 * declaration at @r->at. *@out is set first (owned by the caller, free(), also on
 * failure); returns 0 or GW_EXIT_DATAERR. */
int cfg_resolver(cfg_reader *r, gw_resolver **out, const json_t *resolver);

#endif
