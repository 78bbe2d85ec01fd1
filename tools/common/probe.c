/* A gateway configuration's resolvers for the operators' tools (probe.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <idem/sys/external.h>

#include "probe.h"

/* The client of @tool when it declares a resolver, else NULL. */
static gw_upstream *resolver_tool(const gw_probes *p, const char *tool)
{
    const gw_tool *t = gw_config_tool(p->cfg, tool, strlen(tool));

    return t != NULL && t->http != NULL && t->http->resolver != NULL ? gw_runtime_upstream(p->rt, t)
                                                                     : NULL;
}

int gw_probes_open(gw_probes **out, const char *path, const char *dsn, const char *application,
                   char *why, size_t size)
{
    gw_runtime_options opts = {0};
    gw_runtime_part part;
    idem_error err = IDEM_ERROR_INIT;
    gw_probes *p = calloc(1, sizeof(*p));
    int rc;

    if (p == NULL)
        return snprintf(why, size, "out of memory"), IDEM_ENOMEM;
    opts.dsn = dsn;
    opts.application = application;
    opts.pool_size = 2;
    opts.resolvers_only = 1;
    if ((rc = gw_config_load(&p->cfg, path, why, size)) == 0)
        rc = gw_runtime_open(&p->rt, p->cfg, &opts, &part, &err, why, size);
    if (rc != 0)
        gw_probes_free(p);
    else
        *out = p;
    return rc;
}

int gw_probes_has_resolver(const gw_probes *p, const char *tool)
{
    return tool != NULL && resolver_tool(p, tool) != NULL;
}

int gw_probes_ask(idem_external_probe_result *out, const gw_probes *p, const char *tool,
                  const char *tenant, const char *operation_id, idem_error *err)
{
    return idem_external_probe(out, resolver_tool(p, tool)->ext, tenant, operation_id, err);
}

void gw_probes_free(gw_probes *p)
{
    if (p == NULL)
        return;
    gw_runtime_close(p->rt);
    gw_config_free(p->cfg);
    free(p);
}

/* How often the provider was asked about the item, and when last. */
static void read_asked(gw_probe_item *it, PGconn *conn)
{
    idem_external_history *h = NULL;
    idem_error err = IDEM_ERROR_INIT;
    size_t n;

    if (idem_external_history_get(&h, conn, it->item->tenant, it->item->operation_id, &err) != 0)
        return;
    n = idem_external_history_probe_count(h);
    it->asked = (unsigned int)n;
    if (n > 0)
        it->last_asked = idem_external_history_probe_at(h, n - 1)->answered_at;
    idem_external_history_free(h);
}

static int by_last_asked(const void *a, const void *b)
{
    const gw_probe_item *x = a, *y = b;

    return (x->last_asked > y->last_asked) - (x->last_asked < y->last_asked);
}

int gw_probes_list(gw_probe_list *out, const gw_probes *p, PGconn *conn, const char *tenant,
                   unsigned int limit, idem_error *err)
{
    idem_reconcile_filter f = IDEM_RECONCILE_FILTER_INIT;
    gw_probe_list list = {NULL, NULL, 0};
    int rc;

    f.tenant = tenant;
    f.kind = "outcome_unknown";
    f.state = IDEM_RECONCILE_OPEN;
    f.limit = limit;
    if ((rc = idem_reconcile_list(&list.items, conn, &f, err)) != 0)
        return rc;
    list.n = idem_reconcile_items_count(list.items);
    if ((list.at = calloc(list.n + 1, sizeof(gw_probe_item))) == NULL) {
        idem_reconcile_items_free(list.items);
        snprintf(err->message, sizeof(err->message), "out of memory");
        return IDEM_ENOMEM;
    }
    for (size_t i = 0; i < list.n; i++) {
        gw_probe_item *it = &list.at[i];

        it->item = idem_reconcile_items_at(list.items, i);
        it->has_resolver = gw_probes_has_resolver(p, it->item->tool);
        read_asked(it, conn);
    }
    qsort(list.at, list.n, sizeof(gw_probe_item), by_last_asked);
    *out = list;
    return 0;
}

void gw_probe_list_clear(gw_probe_list *list)
{
    idem_reconcile_items_free(list->items);
    free(list->at);
    list->items = NULL;
    list->at = NULL;
    list->n = 0;
}

const char *gw_probe_verdict_name(idem_external_verdict v)
{
    switch (v) {
    case IDEM_PROBE_DONE:
        return "done";
    case IDEM_PROBE_FAILED:
        return "failed";
    case IDEM_PROBE_NOT_DONE:
        return "not_done";
    default:
        return "unknown";
    }
}
