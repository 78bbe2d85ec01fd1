/* idem-reconcile probe: the declarative resolvers of a gateway configuration's http tools,
 * the gateway's own code (tools/common/probe.h) when built with libcurl. Library
 * callbacks live in the application's process and cannot run here. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "reconcile_probe.h"
#include "reconcile_text.h"

#define say(...) cli_say("idem-reconcile", __VA_ARGS__)

#ifndef IDEM_HTTP_RESOLVERS

int rp_probe(const rp_options *o, PGconn *conn)
{
    say("probe: this idem-reconcile was built without HTTP support (libcurl): it cannot make "
        "the status requests of %s",
        o->config);
    return EXIT_USAGE;
}

#else

#include "probe.h"

/* What an answer did, in words. */
static const char *effect(idem_external_verdict v)
{
    switch (v) {
    case IDEM_PROBE_DONE:
        return "completed, the provider's result stored as the receipt";
    case IDEM_PROBE_FAILED:
        return "failed, the provider's refusal stored: calls are rejected";
    case IDEM_PROBE_NOT_DONE:
        return "pending again: the next attempt dispatches it with the same downstream key";
    default:
        return "still unknown";
    }
}

/* One line (or JSON object) for an answer to the question about @it's operation. */
static json_t *say_answer(const rp_options *o, const char *tenant, const char *operation_id,
                          const char *tool, const idem_external_probe_result *res, int rc,
                          const idem_error *err)
{
    const char *reason = rc == IDEM_EUNKNOWN ? err->message : NULL;

    if (o->json)
        return json_pack("{s:s, s:s, s:s, s:s, s:b, s:s?}", "tenant", tenant, "operation_id",
                         operation_id, "tool", tool, "verdict",
                         gw_probe_verdict_name(rc == 0 ? res->verdict : IDEM_PROBE_UNKNOWN),
                         "changed", rc == 0 && res->changed, "reason", reason);
    if (rc == 0)
        printf("%s %s (%s): %s: %s%s\n", tenant, operation_id, tool,
               gw_probe_verdict_name(res->verdict), effect(res->verdict),
               res->changed ? "" : " (settled already by another question)");
    else
        printf("%s %s (%s): unknown: %s\n", tenant, operation_id, tool, reason);
    return NULL;
}

static int print_json(json_t *doc)
{
    if (cli_print_json(doc) != 0) {
        say("out of memory");
        return EXIT_OSERR;
    }
    return 0;
}

/* probe TENANT OPERATION_ID. */
static int probe_one(const rp_options *o, const gw_probes *p, PGconn *conn)
{
    idem_external_probe_result res = IDEM_EXTERNAL_PROBE_RESULT_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_reconcile_key *key = NULL;
    const idem_reconcile_record *record;
    char tool[IDEM_TOOL_MAX + 1];
    int rc = idem_reconcile_show(&key, conn, o->tenant, o->operation_id, &err);

    if (rc != 0)
        return o->fail("probe", rc, &err);
    record = idem_reconcile_key_record(key);
    snprintf(tool, sizeof(tool), "%s", record != NULL ? record->tool : "");
    idem_reconcile_key_free(key);
    if (tool[0] == '\0') {
        say("probe: not asked: the key has been forgotten (no record)");
        return EXIT_NOT_ASKED;
    }
    if (!gw_probes_has_resolver(p, tool)) {
        say("probe: not asked: tool %s has no resolver in %s", tool, o->config);
        return EXIT_NOT_ASKED;
    }
    rc = gw_probes_ask(&res, p, tool, o->tenant, o->operation_id, &err);
    if (rc == IDEM_ECONFLICT) {
        say("probe: not asked: %s", err.message);
        return EXIT_NOT_ASKED;
    }
    if (rc != 0 && rc != IDEM_EUNKNOWN)
        return o->fail("probe", rc, &err);
    if (o->json)
        return print_json(say_answer(o, o->tenant, o->operation_id, tool, &res, rc, &err)) != 0
                   ? 1
                   : (rc == 0 ? 0 : EXIT_STILL_UNKNOWN);
    say_answer(o, o->tenant, o->operation_id, tool, &res, rc, &err);
    return rc == 0 ? 0 : EXIT_STILL_UNKNOWN;
}

/* probe --all: every listed item whose tool has a resolver, least recently asked first. */
static int probe_all(const rp_options *o, const gw_probes *p, PGconn *conn, gw_probe_list *list)
{
    json_t *items = json_array();
    unsigned int asked = 0, unknown = 0, skipped = 0;
    int code = 0;

    for (size_t i = 0; i < list->n && code == 0; i++) {
        idem_external_probe_result res = IDEM_EXTERNAL_PROBE_RESULT_INIT;
        idem_error err = IDEM_ERROR_INIT;
        const idem_reconcile_item *it = list->at[i].item;
        int rc;

        if (!list->at[i].has_resolver) {
            skipped++;
            continue;
        }
        rc = gw_probes_ask(&res, p, it->tool, it->tenant, it->operation_id, &err);
        if (rc != 0 && rc != IDEM_EUNKNOWN && rc != IDEM_ECONFLICT) {
            code = o->fail("probe", rc, &err);
            break;
        }
        if (rc == IDEM_ECONFLICT) { /* settled since it was listed: not asked */
            if (!o->json)
                printf("%s %s (%s): not asked: %s\n", it->tenant, it->operation_id, it->tool,
                       err.message);
            continue;
        }
        asked++;
        unknown += rc == IDEM_EUNKNOWN;
        json_array_append_new(
            items, say_answer(o, it->tenant, it->operation_id, it->tool, &res, rc, &err));
    }
    if (code == 0 && o->json)
        code = print_json(json_pack("{s:i, s:i, s:i, s:i, s:o}", "asked", asked, "settled",
                                    asked - unknown, "unknown", unknown, "without_resolver",
                                    skipped, "items", json_incref(items)));
    else if (code == 0)
        printf("asked %u: %u settled, %u still unknown; %u without a resolver\n", asked,
               asked - unknown, unknown, skipped);
    json_decref(items);
    return code != 0 ? code : unknown > 0 ? EXIT_STILL_UNKNOWN : 0;
}

/* probe: the open items, whether their tool has a resolver, how often and when last asked. */
static int probe_list(const rp_options *o, const gw_probe_list *list)
{
    json_t *items = json_array();
    size_t with = 0;
    char when[64];

    if (list->n > 0 && !o->json)
        printf("%-16s %-36s %-24s %-8s %5s  %s\n", "TENANT", "OPERATION ID", "TOOL", "RESOLVER",
               "ASKED", "LAST ASKED (UTC)");
    for (size_t i = 0; i < list->n; i++) {
        const gw_probe_item *it = &list->at[i];

        with += it->has_resolver != 0;
        if (o->json)
            json_array_append_new(
                items, json_pack("{s:s, s:s, s:s, s:b, s:i, s:o}", "tenant", it->item->tenant,
                                 "operation_id", it->item->operation_id, "tool", it->item->tool,
                                 "resolver", it->has_resolver, "asked", (int)it->asked,
                                 "last_asked", rt_time_json(it->last_asked)));
        else
            printf("%-16s %-36s %-24s %-8s %5u  %s\n", it->item->tenant, it->item->operation_id,
                   it->item->tool, it->has_resolver ? "yes" : "no", it->asked,
                   it->last_asked != 0 ? rt_format_time(when, sizeof(when), it->last_asked, 0)
                                       : "never");
    }
    if (o->json)
        return print_json(json_pack("{s:i, s:i, s:o}", "count", (int)list->n, "with_resolver",
                                    (int)with, "items", items));
    json_decref(items);
    printf("%zu open outcome_unknown item%s, %zu with a resolver\n", list->n,
           list->n == 1 ? "" : "s", with);
    return 0;
}

int rp_probe(const rp_options *o, PGconn *conn)
{
    gw_probes *p = NULL;
    gw_probe_list list = {NULL, NULL, 0};
    idem_error err = IDEM_ERROR_INIT;
    char why[1200];
    int rc = gw_probes_open(&p, o->config, o->dsn, "idem-reconcile", why, sizeof(why));

    if (rc == GW_EXIT_NOINPUT || rc == GW_EXIT_DATAERR) {
        say("%s", why);
        return rc == GW_EXIT_NOINPUT ? EXIT_NOINPUT : EXIT_DATAERR;
    }
    if (rc != 0) {
        snprintf(err.message, sizeof(err.message), "%.500s", why);
        return o->fail("probe", rc, &err);
    }
    if (o->operation_id != NULL) {
        rc = probe_one(o, p, conn);
    } else if ((rc = gw_probes_list(&list, p, conn, o->tenant, o->limit, &err)) != 0) {
        rc = o->fail("probe", rc, &err);
    } else {
        rc = o->all ? probe_all(o, p, conn, &list) : probe_list(o, &list);
        gw_probe_list_clear(&list);
    }
    gw_probes_free(p);
    return rc;
}

#endif
