/* A configuration's live objects (runtime.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

static int make_pool(gw_runtime *rt, const gw_runtime_options *opts, idem_error *err, char *why,
                     size_t size)
{
    int rc;

    rt->pool_opts = rt->cfg->pool;
    rt->pool_opts.log = opts->log;
    if (opts->application != NULL)
        rt->pool_opts.application_name = opts->application;
    if (opts->pool_size != 0)
        rt->pool_opts.max_size = opts->pool_size;
    if ((rc = idem_pool_new(&rt->pool, opts->dsn, &rt->pool_opts, err)) != 0) {
        /* The library's message says "cannot create the pool" and why: said once. */
        if (opts->dsn != NULL)
            idem_conninfo_redact(err->message, sizeof(err->message), opts->dsn);
        snprintf(why, size, "%s", err->message);
        return rc;
    }
    rt->owns_pool = 1;
    return 0;
}

static int make_store(gw_runtime *rt, const gw_runtime_options *opts, idem_error *err, char *why,
                      size_t size)
{
    int rc;

    rt->store_opts = rt->cfg->store;
    rt->store_opts.log = opts->log;
    if ((rc = idem_store_new(&rt->store, rt->pool, &rt->store_opts, err)) != 0)
        snprintf(why, size, "cannot create the store: %s%s%s", err->field,
                 err->field[0] != '\0' ? ": " : "", err->message);
    return rc;
}

/* The client of the tool at @i and its resolver, when it is an http tool @opts wants. */
static int make_client(gw_runtime *rt, size_t i, const gw_runtime_options *opts, char *why,
                       size_t size)
{
    const gw_tool *t = &rt->cfg->tools[i];
    char inner[512];

    if (t->http == NULL || (opts->resolvers_only && t->http->resolver == NULL))
        return 0;
    if (gw_upstream_open(&rt->upstreams[i], t->http, rt->store, inner, sizeof(inner)) != 0 ||
        (t->http->resolver != NULL && gw_resolver_start(&rt->resolvers[i], rt->upstreams[i],
                                                        t->name, inner, sizeof(inner)) != 0)) {
        snprintf(why, size, "tool %s: %s", t->name, inner);
        return IDEM_ENOMEM;
    }
    return 0;
}

static int make_clients(gw_runtime *rt, const gw_runtime_options *opts, char *why, size_t size)
{
    size_t n = rt->cfg->ntools;
    int rc = 0;

    rt->upstreams = calloc(n + 1, sizeof(gw_upstream *));
    rt->resolvers = calloc(n + 1, sizeof(gw_resolver_run *));
    if (rt->upstreams == NULL || rt->resolvers == NULL)
        return snprintf(why, size, "out of memory"), IDEM_ENOMEM;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = make_client(rt, i, opts, why, size);
    return rc;
}

int gw_runtime_open(gw_runtime **out, const gw_config *cfg, const gw_runtime_options *opts,
                    gw_runtime_part *part, idem_error *err, char *why, size_t size)
{
    static const gw_runtime_options defaults = {0};
    gw_runtime *rt = calloc(1, sizeof(*rt));
    int rc;

    if (opts == NULL)
        opts = &defaults;
    *part = GW_RUNTIME_POOL;
    if (rt == NULL)
        return snprintf(why, size, "out of memory"), IDEM_ENOMEM;
    rt->cfg = cfg;
    rt->pool = opts->pool;
    if ((opts->pool == NULL && (rc = make_pool(rt, opts, err, why, size)) != 0) ||
        (*part = GW_RUNTIME_STORE, (rc = make_store(rt, opts, err, why, size)) != 0) ||
        (*part = GW_RUNTIME_CLIENT, (rc = make_clients(rt, opts, why, size)) != 0)) {
        gw_runtime_close(rt);
        return rc;
    }
    *out = rt;
    return 0;
}

gw_upstream *gw_runtime_upstream(const gw_runtime *rt, const gw_tool *tool)
{
    size_t i = (size_t)(tool - rt->cfg->tools);

    return i < rt->cfg->ntools ? rt->upstreams[i] : NULL;
}

idem_pool *gw_runtime_take_pool(gw_runtime *rt)
{
    rt->owns_pool = 0;
    return rt->pool;
}

void gw_runtime_close(gw_runtime *rt)
{
    if (rt == NULL)
        return;
    for (size_t i = 0; rt->resolvers != NULL && i < rt->cfg->ntools; i++)
        gw_resolver_stop(rt->resolvers[i]);
    for (size_t i = 0; rt->upstreams != NULL && i < rt->cfg->ntools; i++)
        gw_upstream_close(rt->upstreams[i]);
    free(rt->resolvers);
    free(rt->upstreams);
    idem_store_free(rt->store);
    if (rt->owns_pool)
        idem_pool_free(rt->pool);
    free(rt);
}
