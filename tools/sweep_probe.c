/* idem-sweep --config: the gateway's own resolvers (tools/common/probe.h) when built
 * with libcurl. Library callbacks live in the application's process and cannot run here. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "sweep_probe.h"

#define say(...) cli_say("idem-sweep", __VA_ARGS__)

#ifndef IDEM_HTTP_RESOLVERS

int sp_probe(sp_summary *out, const sp_options *o, PGconn *conn, idem_error *err)
{
    snprintf(err->message, sizeof(err->message),
             "this idem-sweep was built without HTTP support (libcurl): it cannot "
             "make the status requests of %s",
             o->config);
    return IDEM_EINVAL;
}

#else

#include "probe.h"

#define BACKOFF_MAX_S 86400LL /* a day */

static int64_t now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Whether @it's backoff has passed: @base_s after the first question, doubled after each. */
static int due(const gw_probe_item *it, unsigned int base_s, int64_t now)
{
    long long wait = base_s;

    if (it->asked == 0)
        return 1;
    for (unsigned int i = 1; i < it->asked && wait < BACKOFF_MAX_S; i++)
        wait *= 2;
    if (wait > BACKOFF_MAX_S)
        wait = BACKOFF_MAX_S;
    return now - it->last_asked >= wait * 1000000LL;
}

/* Ask about @it; 0 with the answer counted, or the code that stops the run. */
static int ask(sp_summary *out, const sp_options *o, const gw_probes *p, const gw_probe_item *it,
               idem_error *err)
{
    idem_external_probe_result res = IDEM_EXTERNAL_PROBE_RESULT_INIT;
    const idem_reconcile_item *item = it->item;
    int rc = gw_probes_ask(&res, p, item->tool, item->tenant, item->operation_id, err);

    if (rc != 0 && rc != IDEM_EUNKNOWN && rc != IDEM_ECONFLICT)
        return rc;
    out->asked++;
    out->unknown += rc == IDEM_EUNKNOWN;
    out->settled += rc != IDEM_EUNKNOWN;
    if (o->verbose)
        say("asked about %s %s (%s): %s%s%s", item->tenant, item->operation_id, item->tool,
            rc == IDEM_ECONFLICT
                ? "settled meanwhile"
                : gw_probe_verdict_name(rc == 0 ? res.verdict : IDEM_PROBE_UNKNOWN),
            rc == IDEM_EUNKNOWN ? ": " : "", rc == IDEM_EUNKNOWN ? err->message : "");
    return 0;
}

static int run(sp_summary *out, const sp_options *o, const gw_probes *p, const gw_probe_list *list,
               idem_error *err)
{
    int64_t now = now_us();
    int rc;

    for (size_t i = 0; i < list->n; i++) {
        const gw_probe_item *it = &list->at[i];

        if (!it->has_resolver)
            continue;
        if (!due(it, o->backoff_s, now)) {
            out->waiting++;
            continue;
        }
        out->due++;
        if (o->dry_run || out->asked >= o->limit)
            continue;
        if ((rc = ask(out, o, p, it, err)) != 0)
            return rc;
    }
    return 0;
}

int sp_probe(sp_summary *out, const sp_options *o, PGconn *conn, idem_error *err)
{
    gw_probes *p = NULL;
    gw_probe_list list = {NULL, NULL, 0};
    char why[1200];
    int rc = gw_probes_open(&p, o->config, o->dsn, "idem-sweep", why, sizeof(why));

    memset(out, 0, sizeof(*out));
    if (rc == GW_EXIT_NOINPUT || rc == GW_EXIT_DATAERR) {
        say("%s", why);
        return rc == GW_EXIT_NOINPUT ? EXIT_NOINPUT : EXIT_DATAERR;
    }
    if (rc != 0) {
        snprintf(err->message, sizeof(err->message), "%.500s", why);
        return rc;
    }
    if ((rc = gw_probes_list(&list, p, conn, NULL, 0, err)) == 0)
        rc = run(out, o, p, &list, err);
    gw_probe_list_clear(&list);
    gw_probes_free(p);
    return rc;
}

#endif
