/* What a configuration runs with: the live objects made from a parsed configuration
 * (config.h, plain data) — the pool, the store over it, each http tool's client
 * (upstream.h) and resolver (resolver.h). One function makes them, for the gateway's HTTP
 * server (a generation of live.c), its stdio host and the operators' probe (probe.h). */
#ifndef IDEM_TOOLS_RUNTIME_H
#define IDEM_TOOLS_RUNTIME_H

#include <idem/idem.h>
#include <stddef.h>

#include "config.h"
#include "resolver.h"
#include "upstream.h"

typedef struct gw_runtime_options {
    idem_pool *pool;         /* borrowed, outlives the runtime; NULL: one is made on @dsn */
    const char *dsn;         /* the new pool's (NULL: libpq's PG* environment variables) */
    const char *application; /* the new pool's application_name; NULL: the configuration's */
    unsigned int pool_size;  /* the new pool's size; 0: the configuration's */
    idem_log_fn log;         /* the new pool's and the store's log; NULL: none */
    int resolvers_only;      /* make only the clients of http tools that declare a resolver */
} gw_runtime_options;

typedef struct gw_runtime {
    const gw_config *cfg;          /* borrowed: outlives the runtime */
    idem_pool *pool;               /* owned when made here (gw_runtime_take_pool()) */
    idem_store *store;             /* owned */
    gw_upstream **upstreams;       /* owned; one per cfg->tools, NULL: none made */
    gw_resolver_run **resolvers;   /* owned; one per cfg->tools, NULL: none */
    idem_pool_options pool_opts;   /* what the pool was made with */
    idem_store_options store_opts; /* what the store was made with */
    int owns_pool;
} gw_runtime;

/* Which part gw_runtime_open() could not make. */
typedef enum gw_runtime_part {
    GW_RUNTIME_POOL = 1,   /* @err is the library's */
    GW_RUNTIME_STORE = 2,  /* @err is the library's */
    GW_RUNTIME_CLIENT = 3, /* an http tool's client or resolver */
} gw_runtime_part;

/* Make the runtime of @cfg (borrowed: it must outlive the runtime) as @opts says (NULL: the
 * defaults, a pool on cfg's own settings and libpq's environment). @out: caller owns,
 * gw_runtime_close(). Returns 0, or an IDEM_E* code with @part saying what failed, @err
 * the library's error (pool, store) and @why the message to print (a DSN's password
 * redacted); nothing is left to free. */
int gw_runtime_open(gw_runtime **out, const gw_config *cfg, const gw_runtime_options *opts,
                    gw_runtime_part *part, idem_error *err, char *why, size_t size);

/* The client of @tool (one of rt->cfg's tools), or NULL when it has none. */
gw_upstream *gw_runtime_upstream(const gw_runtime *rt, const gw_tool *tool);

/* The pool that gw_runtime_open() made, now the caller's (idem_pool_free()): it outlives
 * this runtime, and later ones borrow it. */
idem_pool *gw_runtime_take_pool(gw_runtime *rt);

/* Stop the resolvers (waiting for their status requests), then free the clients, the store
 * and the pool when owned; nothing may use them any more. NULL is accepted. */
void gw_runtime_close(gw_runtime *rt);

#endif
