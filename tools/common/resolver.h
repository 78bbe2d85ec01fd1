/* An `http` tool's resolver at work (tools/idem-gateway/README.md, "Resolvers"): the
 * library's callback (include/idem/external.h, "Resolvers") that makes the declared status
 * request (gw_resolver, upstream.h) about a downstream key with the tool's client and reads
 * its answer. Above the client: upstream.h knows nothing of it. Started for each http tool
 * that declares one by the runtime (runtime.h), in the gateway as in idem-reconcile and
 * idem-sweep (probe.h). */
#ifndef IDEM_TOOLS_RESOLVER_H
#define IDEM_TOOLS_RESOLVER_H

#include <stddef.h>

#include "upstream.h"

/* A resolver registered on a client; opaque. */
typedef struct gw_resolver_run gw_resolver_run;

/* Register the resolver @u->decl->resolver (not NULL) for @tool on @u's external-effect
 * path. @u is borrowed: it must outlive the resolver. @out: caller owns,
 * gw_resolver_stop(). Returns 0, or -1 with @why. */
int gw_resolver_start(gw_resolver_run **out, gw_upstream *u, const char *tool, char *why,
                      size_t size);

/* Wait for the status requests under way (one the library gave up on may still run; each
 * is bounded by its timeout), then free @r; NULL is accepted. */
void gw_resolver_stop(gw_resolver_run *r);

#endif
