/* A program written against idem 0.1, built unchanged against an installed idem: the
 * header names of 0.1 (fingerprint.h for JSON and JCS; external.h for the outbox, the
 * history and the resolution; reconcile.h, sweep.h) and its names now deprecated
 * (idem_reconcile_resolve(), idem_intent_state_get()). Needs no server. lib/README.md,
 * "Release notes". */
#include <idem/external.h>
#include <idem/fingerprint.h>
#include <idem/intent.h>
#include <idem/reconcile.h>
#include <idem/store.h>
#include <idem/sweep.h>
#include <idem/version.h>
#include <stdio.h>
#include <string.h>

static int json_and_jcs(void)
{
    json_t *value = NULL;
    char *text = NULL;
    int rc = idem_json_parse(&value, "{\"b\":1,\"a\":2}", 13, NULL, NULL);

    if (rc == 0)
        rc = idem_jcs_serialize(&text, NULL, value, NULL);
    if (rc == 0 && strcmp(text, "{\"a\":2,\"b\":1}") != 0)
        rc = 1;
    idem_free(text);
    json_decref(value);
    return rc;
}

static int structs(void)
{
    idem_enqueue_options enqueue;
    idem_resolution resolution;
    idem_reconcile_filter filter;
    idem_sweep_options sweep;
    idem_store_options store;

    return idem_enqueue_options_init(&enqueue, IDEM_ENQUEUE_OPTIONS_VERSION) != 0 ||
           idem_resolution_init(&resolution, IDEM_RESOLUTION_VERSION) != 0 ||
           idem_reconcile_filter_init(&filter, IDEM_RECONCILE_FILTER_VERSION) != 0 ||
           idem_sweep_options_init(&sweep, IDEM_SWEEP_OPTIONS_VERSION) != 0 ||
           idem_store_options_init(&store, IDEM_STORE_OPTIONS_VERSION) != 0 ||
           sweep.key_memory_s > IDEM_WINDOW_MAX_S || idem_outbox_batch_count(NULL) != 0;
}

static int deprecated_names(void)
{
    idem_error err = IDEM_ERROR_INIT;

    if (idem_intent_state_get(NULL) != IDEM_INTENT_APPROVED)
        return 1;
    /* No connection: refused before anything is sent. */
    if (idem_reconcile_resolve(NULL, NULL, "acme", "op-1", NULL, "checked", NULL, &err) !=
        IDEM_EINVAL)
        return 1;
    return 0;
}

int main(void)
{
    if (json_and_jcs() != 0 || structs() != 0 || deprecated_names() != 0) {
        fprintf(stderr, "a program of idem 0.1 does not work with %s\n", idem_version());
        return 1;
    }
    printf("a program of idem 0.1 works with idem %s\n", idem_version());
    return 0;
}
