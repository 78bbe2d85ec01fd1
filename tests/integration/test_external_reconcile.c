/* External effects and reconciliation: resolving an unknown outcome (later calls replay the
 * resolution), what resolve refuses, the sweeper leaving pending and unknown records alone,
 * the new tables' keys and comments, and bad input on every entry point. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "idem/sys/external.h"
#include "idem/sys/reconcile.h"
#include "idem/sys/sweep.h"

#include "extest.h"
#include "support_tasks.h"

#define ARGS "{\"amount\":1250,\"currency\":\"EUR\"}"

static fake_provider *provider;

static void open_all(void)
{
    extest_open("xreconcile", 30000, 4);
    provider = fake_provider_new(1);
}

static void close_all(void)
{
    fake_provider_free(provider);
    extest_close();
}

TestSuite(xreconcile, .init = open_all, .fini = close_all, .timeout = 60);

/* Leave @tenant/@op in outcome_unknown. */
static void make_unknown(const char *tenant, const char *op)
{
    idem_external_attempt *a = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;

    cr_assert_eq(extest_begin(&a, &out, tenant, op, ARGS), 0);
    fake_provider_script(provider, FAKE_LOSE_REPLY, 1);
    cr_assert_eq(extest_dispatch(&out, a, provider), IDEM_EUNKNOWN);
    idem_outcome_clear(&out);
    idem_external_attempt_free(a);
}

static int resolve(const char *tenant, const char *op, idem_resolution_kind as, const char *receipt,
                   idem_error *err)
{
    idem_resolution r = IDEM_RESOLUTION_INIT;

    r.as = as;
    r.provider_ref = "pay_77";
    r.receipt = receipt;
    r.receipt_len = receipt != NULL ? strlen(receipt) : 0;
    r.note = "found at the provider's dashboard";
    r.by = "Zoë Ops";
    return idem_external_resolve(ex.check, tenant, op, &r, err);
}

static int begin_answer(idem_outcome *out, const char *tenant, const char *op)
{
    idem_external_attempt *a = NULL;
    int rc = extest_begin(&a, out, tenant, op, ARGS);

    cr_assert_null(a, "never dispatched again");
    return rc;
}

Test(xreconcile, resolving_as_completed_makes_every_later_call_replay_the_receipt)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_request req = extest_request("acme", "pay-1", ARGS);
    idem_error err = IDEM_ERROR_INIT;
    idem_reconcile_filter f = IDEM_RECONCILE_FILTER_INIT;
    idem_reconcile_items *items = NULL;
    idem_external_history *h = NULL;

    make_unknown("acme", "pay-1");
    cr_assert_eq(resolve("acme", "pay-1", IDEM_RESOLVE_COMPLETED,
                         "{ \"payment\": \"pay_77\", \"amount\": 1250 }", &err),
                 0, "%s", err.message);
    cr_assert_eq(begin_answer(&out, "acme", "pay-1"), 0);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_str_eq(out.receipt, "{\"amount\":1250,\"payment\":\"pay_77\"}", "canonical JSON");
    cr_assert_eq(idem_store_execute(&out, ex.store, &req, example_create_support_task, NULL, &err),
                 0, "the local path replays it too");
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_eq(idem_external_history_get(&h, ex.check, "acme", "pay-1", &err), 0);
    cr_assert_str_eq(idem_external_history_state(h), "completed");
    cr_assert_str_eq(idem_external_history_provider_ref(h), "pay_77");
    cr_assert_eq(idem_external_history_count(h), 1);
    cr_assert_str_eq(idem_external_history_at(h, 0)->outcome, "unknown");
    f.kind = "outcome_unknown";
    cr_assert_eq(idem_reconcile_list(&items, ex.check, &f, &err), 0);
    cr_assert_eq(idem_reconcile_items_count(items), 1);
    cr_assert_str_eq(idem_reconcile_items_at(items, 0)->resolved_by, "Zoë Ops");
    cr_assert_str_eq(idem_reconcile_items_at(items, 0)->note, "found at the provider's dashboard");
    cr_assert_eq(resolve("acme", "pay-1", IDEM_RESOLVE_COMPLETED, NULL, &err), IDEM_ECONFLICT,
                 "once");
    cr_assert(strstr(err.message, "already completed") != NULL, "%s", err.message);
    cr_assert_eq(fake_provider_requests(provider), 1);
    idem_reconcile_items_free(items);
    idem_external_history_free(h);
    idem_outcome_clear(&out);
}

Test(xreconcile, resolving_as_failed_or_abandoned_rejects_every_later_call)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;

    make_unknown("acme", "pay-1");
    make_unknown("acme", "pay-2");
    cr_assert_eq(
        resolve("acme", "pay-1", IDEM_RESOLVE_FAILED, "{\"error\":\"card declined\"}", &err), 0,
        "%s", err.message);
    cr_assert_eq(resolve("acme", "pay-2", IDEM_RESOLVE_ABANDONED, NULL, &err), 0, "%s",
                 err.message);
    cr_assert_eq(begin_answer(&out, "acme", "pay-1"), IDEM_EREJECTED);
    cr_assert_str_eq(out.receipt, "{\"error\":\"card declined\"}");
    cr_assert_eq(begin_answer(&out, "acme", "pay-2"), IDEM_EREJECTED);
    cr_assert_str_eq(out.receipt,
                     "{\"note\":\"found at the provider's dashboard\",\"provider_ref\":\"pay_77\","
                     "\"resolution\":\"abandoned\"}");
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.reconciliation_items"
                               " WHERE resolved_at IS NULL"),
                 0);
    idem_outcome_clear(&out);
}

Test(xreconcile, resolve_refuses_a_live_lease_a_local_key_and_another_tenants_key)
{
    idem_external_attempt *a = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_request req = extest_request("acme", "local-1", "{\"subject\":\"x\"}");
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(extest_begin(&a, &out, "acme", "pay-1", ARGS), 0);
    cr_assert_eq(resolve("acme", "pay-1", IDEM_RESOLVE_FAILED, NULL, &err), IDEM_EBUSY);
    extest_lapse("acme", "pay-1");
    cr_assert_eq(resolve("acme", "pay-1", IDEM_RESOLVE_ABANDONED, NULL, &err), 0,
                 "a lapsed, abandoned attempt can be closed: %s", err.message);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.external_attempts"
                               " WHERE outcome = 'lease_expired'"),
                 1);
    req.tool = EXAMPLE_TOOL_NAME;
    cr_assert_eq(idem_store_execute(&out, ex.store, &req, example_create_support_task, NULL, &err),
                 0);
    cr_assert_eq(resolve("acme", "local-1", IDEM_RESOLVE_FAILED, NULL, &err), IDEM_ENOTFOUND);
    make_unknown("acme", "pay-2");
    cr_assert_eq(resolve("globex", "pay-2", IDEM_RESOLVE_COMPLETED, NULL, &err), IDEM_ENOTFOUND);
    cr_assert_eq(resolve("acme", "pay-3", IDEM_RESOLVE_COMPLETED, NULL, &err), IDEM_ENOTFOUND);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.operations WHERE operation_id ="
                               " 'pay-2' AND state = 'outcome_unknown'"),
                 1, "untouched from another tenant");
    idem_outcome_clear(&out);
    idem_external_attempt_free(a);
}

Test(xreconcile, the_sweeper_never_expires_a_pending_or_unknown_record_and_forgets_history_with_it)
{
    idem_external_attempt *a = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_sweep_result r = IDEM_SWEEP_RESULT_INIT;
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(extest_begin(&a, &out, "acme", "pending-1", ARGS), 0);
    idem_external_attempt_free(a);
    make_unknown("acme", "unknown-1");
    cr_assert_eq(extest_begin(&a, &out, "acme", "done-1", ARGS), 0);
    cr_assert_eq(extest_dispatch(&out, a, provider), 0);
    idem_external_attempt_free(a);
    extest_exec("UPDATE idem.operations SET expires_at = now() - interval '1 day',"
                " forget_at = now() + interval '1 hour'");
    cr_assert_eq(idem_sweep_run(&r, ex.check, NULL, &err), 0, "%s", err.message);
    cr_assert_eq(r.expired, 1, "only the completed record");
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.operations WHERE state IN"
                               " ('pending', 'outcome_unknown')"),
                 2);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.external_attempts"), 3,
                 "a tombstone keeps its history");
    extest_exec("UPDATE idem.operations SET expires_at = now() - interval '1 day'");
    cr_assert_eq(idem_sweep_run(&r, ex.check, NULL, &err), 0, "%s", err.message);
    cr_assert_eq(r.purged, 1);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.external_attempts"), 2,
                 "forgotten with its key");
    cr_assert_eq(begin_answer(&out, "acme", "unknown-1"), IDEM_EUNKNOWN);
    idem_outcome_clear(&out);
}

Test(xreconcile, a_retry_past_retention_is_answered_expired_and_never_dispatched)
{
    idem_external_attempt *a = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;
    char old_id[IDEM_UUID_STRING_SIZE];
    unsigned long long ms = ((unsigned long long)time(NULL) - 60ULL * 86400) * 1000;

    cr_assert_eq(extest_begin(&a, &out, "acme", "pay-1", ARGS), 0);
    cr_assert_eq(extest_dispatch(&out, a, provider), 0);
    idem_external_attempt_free(a);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.operations"
                               " WHERE forget_at > expires_at"),
                 1, "both windows fixed at the claim");
    extest_exec("UPDATE idem.operations SET state = 'expired', response = NULL,"
                " expired_at = now(), expires_at = forget_at");
    cr_assert_eq(begin_answer(&out, "acme", "pay-1"), IDEM_EEXPIRED);
    cr_assert_eq(out.status, IDEM_STATUS_EXPIRED);
    /* A UUIDv7 older than the key memory, with no record left: not claimed either. */
    snprintf(old_id, sizeof(old_id), "%08x-%04x-7000-8000-000000000001",
             (unsigned int)((ms >> 16) & 0xffffffffu), (unsigned int)(ms & 0xffff));
    cr_assert_eq(begin_answer(&out, "acme", old_id), IDEM_EEXPIRED);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.operations"), 1);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.reconciliation_items"
                               " WHERE kind = 'expired'"),
                 2);
    cr_assert_eq(fake_provider_requests(provider), 1);
    idem_outcome_clear(&out);
}

Test(xreconcile, new_tables_are_keyed_by_tenant_first_and_every_column_is_explained)
{
    cr_assert_eq(extest_scalar("SELECT count(*) FROM pg_index i"
                               " JOIN pg_class c ON c.oid = i.indrelid"
                               " JOIN pg_attribute a ON a.attrelid = c.oid"
                               " AND a.attnum = i.indkey[0]"
                               " WHERE c.relnamespace = 'idem'::regnamespace"
                               " AND c.relname IN ('external_attempts', 'outbox')"
                               " AND a.attname <> 'tenant'"),
                 0, "every key and index starts with tenant");
    cr_assert_eq(extest_scalar("SELECT count(*) FROM pg_index i JOIN pg_class c"
                               " ON c.oid = i.indrelid WHERE c.relnamespace = 'idem'::regnamespace"
                               " AND c.relname IN ('external_attempts', 'outbox')"),
                 3);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM information_schema.columns"
                               " WHERE table_schema = 'idem' AND (table_name IN"
                               " ('external_attempts', 'outbox') OR column_name IN"
                               " ('downstream_key', 'attempts', 'lease_expires_at',"
                               " 'provider_ref')) AND col_description(('idem.' ||"
                               " table_name)::regclass, ordinal_position) IS NULL"),
                 0);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM pg_class WHERE relnamespace ="
                               " 'idem'::regnamespace AND relname IN ('external_attempts',"
                               " 'outbox') AND obj_description(oid, 'pg_class') IS NOT NULL"),
                 2);
}

Test(xreconcile, bad_input_on_every_entry_point_names_the_field)
{
    idem_external_attempt *a = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT, old = {0};
    idem_request req = extest_request("acme", "pay-1", ARGS);
    idem_resolution r = IDEM_RESOLUTION_INIT;
    idem_external_history *h = NULL;
    idem_error err = IDEM_ERROR_INIT;
    json_t *ok = json_pack("{s:i}", "n", 1);
    char long_ref[400];

    memset(long_ref, 'x', sizeof(long_ref) - 1);
    long_ref[sizeof(long_ref) - 1] = '\0';
#define FIELD(call, want)                                                                          \
    do {                                                                                           \
        idem_error_clear(&err);                                                                    \
        cr_assert_eq(call, IDEM_EINVAL, "%s", #call);                                              \
        cr_assert_str_eq(err.field, want, "%s: %s", #call, err.message);                           \
    } while (0)
    /* begin */
    FIELD(idem_external_begin(NULL, &out, ex.ext, &req, &err), "out");
    FIELD(idem_external_begin(&a, NULL, ex.ext, &req, &err), "outcome");
    FIELD(idem_external_begin(&a, &old, ex.ext, &req, &err), "outcome.version");
    FIELD(idem_external_begin(&a, &out, NULL, &req, &err), "ext");
    cr_assert_eq(out.status, IDEM_STATUS_INVALID);
    FIELD(idem_external_begin(&a, &out, ex.ext, NULL, &err), "request");
    req.tenant = "not a tenant";
    FIELD(idem_external_begin(&a, &out, ex.ext, &req, &err), "tenant");
    req = extest_request("acme", "pay-1", "{\"amount\":");
    FIELD(idem_external_begin(&a, &out, ex.ext, &req, &err), "arguments");
    cr_assert_eq(out.status, IDEM_STATUS_INVALID);
    req = extest_request("acme", "pay-1", "{\"amount\":9007199254740993}");
    FIELD(idem_external_begin(&a, &out, ex.ext, &req, &err), "arguments");
    req = extest_request("acme", "pay-1", ARGS);
    req.payload_version = 0;
    FIELD(idem_external_begin(&a, &out, ex.ext, &req, &err), "payload_version");
    cr_assert_null(a);
    /* the reports */
    cr_assert_eq(extest_begin(&a, &out, "acme", "pay-1", ARGS), 0);
    FIELD(idem_external_complete(NULL, a, NULL, ok, &err), "outcome");
    FIELD(idem_external_complete(&out, NULL, NULL, ok, &err), "attempt");
    FIELD(idem_external_complete(&out, a, NULL, NULL, &err), "response");
    FIELD(idem_external_complete(&out, a, long_ref, ok, &err), "provider_ref");
    FIELD(idem_external_complete(&out, a, "ref\n2", ok, &err), "provider_ref");
    FIELD(idem_external_fail(&out, a, IDEM_EXTERNAL_FINAL, NULL, NULL, &err), "response");
    FIELD(idem_external_fail(&out, a, (idem_external_failure)9, ok, NULL, &err), "how");
    FIELD(idem_external_fail(&out, a, IDEM_EXTERNAL_TRANSIENT, NULL, "\x01", &err), "error");
    FIELD(idem_external_unknown(&out, a, NULL, "", &err), "error");
    FIELD(idem_external_extend(NULL, &err), "attempt");
    FIELD(idem_external_release(NULL, &err), "attempt");
    cr_assert_eq(out.status, IDEM_STATUS_INVALID);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.operations WHERE state = 'pending'"
                               " AND lease_expires_at > now()"),
                 1, "nothing reported: still held");
    /* history and resolve */
    FIELD(idem_external_history_get(NULL, ex.check, "acme", "pay-1", &err), "out");
    FIELD(idem_external_history_get(&h, NULL, "acme", "pay-1", &err), "conn");
    FIELD(idem_external_history_get(&h, ex.check, "acme", "", &err), "operation_id");
    FIELD(idem_external_resolve(ex.check, "acme", "pay-1", NULL, &err), "resolution");
    FIELD(idem_external_resolve(NULL, "acme", "pay-1", &r, &err), "conn");
    FIELD(idem_external_resolve(ex.check, "acme", "pay-1", &r, &err), "resolution.note");
    r.note = "n";
    r.as = (idem_resolution_kind)5;
    FIELD(idem_external_resolve(ex.check, "acme", "pay-1", &r, &err), "resolution.as");
    r.as = IDEM_RESOLVE_COMPLETED;
    r.receipt = "{not json";
    r.receipt_len = strlen(r.receipt);
    FIELD(idem_external_resolve(ex.check, "acme", "pay-1", &r, &err), "resolution.receipt");
    r.receipt = NULL;
    r.by = "tab\there";
    FIELD(idem_external_resolve(ex.check, "acme", "pay-1", &r, &err), "resolution.by");
    r.by = NULL;
    r.version = 3;
    FIELD(idem_external_resolve(ex.check, "acme", "pay-1", &r, &err), "resolution.version");
    FIELD(idem_external_new(NULL, ex.store, NULL, &err), "out");
#undef FIELD
    json_decref(ok);
    idem_outcome_clear(&out);
    idem_external_attempt_free(a);
}
