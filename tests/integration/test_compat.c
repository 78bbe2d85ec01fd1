/* A program of idem 0.1 against this library (lib/README.md, "Release notes"): the header
 * names of 0.1 still declare what they did, and the names now deprecated do what they did,
 * through their successors. The rest of the tree builds with IDEM_NO_DEPRECATED. */
#undef IDEM_NO_DEPRECATED
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "idem/external.h"
#include "idem/fingerprint.h"
#include "idem/intent.h"
#include "idem/reconcile.h"
#include "idem/sweep.h"
#include "pgtest.h"
#include "records.h"

static char *conninfo;
static PGconn *conn;

static void open_db(void)
{
    conninfo = pgtest_new_migrated_database("compat");
    conn = pgtest_connect(conninfo);
}

static void close_db(void)
{
    PQfinish(conn);
    free(conninfo);
}

TestSuite(compat, .init = open_db, .fini = close_db, .timeout = 120);

Test(compat, reconcile_resolve_of_0_1_resolves_the_items_it_names)
{
    idem_error err = IDEM_ERROR_INIT;
    unsigned int n = 0;

    records_insert_item(conn, "acme", "op-1", "expired", 1, "-1 minute");
    records_insert_item(conn, "acme", "op-1", "outcome_unknown", 1, "-2 minutes");
    cr_assert_eq(
        idem_reconcile_resolve(&n, conn, "acme", "op-1", "expired", "refunded", "Alice Ops", &err),
        0, "%s", err.message);
    cr_assert_eq(n, 1, "only the kind named");
    cr_assert_eq(pgtest_scalar(conn, "SELECT count(*) FROM idem.reconciliation_items"
                                     " WHERE kind = 'expired' AND note = 'refunded'"
                                     " AND resolved_by = 'Alice Ops'"),
                 1);
    cr_assert_eq(idem_reconcile_resolve(&n, conn, "acme", "op-1", NULL, "checked", NULL, &err), 0,
                 "%s", err.message);
    cr_assert_eq(n, 1, "every open kind");
}

Test(compat, reconcile_resolve_of_0_1_names_the_resolution_member_at_fault)
{
    idem_error err = IDEM_ERROR_INIT;

    records_insert_item(conn, "acme", "op-2", "expired", 1, "-1 minute");
    cr_assert_eq(idem_reconcile_resolve(NULL, conn, "acme", "op-2", NULL, NULL, NULL, &err),
                 IDEM_EINVAL);
    cr_assert_str_eq(err.field, "resolution.note", "%s", err.message);
    cr_assert_eq(idem_reconcile_resolve(NULL, conn, "acme", "op-2", "Expired", "n", NULL, &err),
                 IDEM_EINVAL);
    cr_assert_str_eq(err.field, "resolution.kind", "%s", err.message);
    cr_assert_eq(pgtest_scalar(conn, "SELECT count(*) FROM idem.reconciliation_items"
                                     " WHERE resolved_at IS NOT NULL"),
                 0, "nothing written");
}

Test(compat, intent_state_get_of_0_1_is_the_current_state)
{
    cr_assert_eq(idem_intent_state_get(NULL), idem_intent_current_state(NULL));
    cr_assert_eq(idem_intent_state_get(NULL), IDEM_INTENT_APPROVED);
}

Test(compat, old_header_names_declare_what_they_did)
{
    idem_enqueue_options enqueue = IDEM_ENQUEUE_OPTIONS_INIT;
    idem_resolution resolution = IDEM_RESOLUTION_INIT;
    idem_sweep_options sweep = IDEM_SWEEP_OPTIONS_INIT;
    json_t *value = NULL;
    char *text = NULL;

    /* fingerprint.h: JSON and JCS */
    cr_assert_eq(idem_json_parse(&value, "{\"b\":1,\"a\":2}", 13, NULL, NULL), 0);
    cr_assert_eq(idem_jcs_serialize(&text, NULL, value, NULL), 0);
    cr_assert_str_eq(text, "{\"a\":2,\"b\":1}");
    idem_free(text);
    json_decref(value);
    /* external.h: the outbox and the administration calls; sweep.h, store.h */
    cr_assert_eq(enqueue.max_attempts, 8);
    cr_assert_eq(resolution.as, IDEM_RESOLVE_COMPLETED);
    cr_assert_eq(idem_outbox_batch_count(NULL), 0);
    cr_assert_eq(idem_external_history_count(NULL), 0);
    cr_assert(sweep.key_memory_s <= IDEM_WINDOW_MAX_S);
}
