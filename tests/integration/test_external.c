/* External effects: begin, the reports, what every later call finds, attempt history,
 * tenant scoping. Against a real server, with the fake provider. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/outbox.h"
#include "idem/sys/external.h"

#include "exec.h"
#include "extest.h"
#include "support_tasks.h"

#define ARGS "{\"to\":\"ada@example.com\",\"subject\":\"Your order\"}"

static fake_provider *provider;

static void open_all(void)
{
    provider = extest_init_provider();
}

static void close_all(void)
{
    extest_close_provider(provider);
}

TestSuite(external, .init = open_all, .fini = close_all, .timeout = 60);

/* begin on a new key, which must give a lease. */
static idem_external_attempt *lease(const char *tenant, const char *op, const char *args)
{
    idem_external_attempt *a = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;
    int rc = extest_begin(&a, &out, tenant, op, args);

    cr_assert_eq(rc, 0, "begin %s/%s: %s", tenant, op, idem_err_name(rc));
    cr_assert_not_null(a, "a lease");
    cr_assert_eq(out.status, IDEM_STATUS_IN_PROGRESS, "held by this call");
    idem_outcome_clear(&out);
    return a;
}

/* A later begin that must be answered without a lease. */
static int answer(idem_outcome *out, const char *tenant, const char *op, const char *args)
{
    idem_external_attempt *a = NULL;
    int rc = extest_begin(&a, out, tenant, op, args);

    cr_assert_null(a, "no lease for %s/%s (%s)", tenant, op, idem_status_name(out->status));
    return rc;
}

static idem_external_history *history(const char *tenant, const char *op)
{
    idem_external_history *h = NULL;
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_external_history_get(&h, ex.check, tenant, op, &err), 0, "%s", err.message);
    return h;
}

Test(external, begin_claims_the_key_with_a_downstream_key_a_lease_and_attempt_1)
{
    idem_external_attempt *a = lease("acme", "op-1", ARGS);
    idem_external_history *h = history("acme", "op-1");
    long now_us = extest_scalar("SELECT (extract(epoch FROM now()) * 1000000)::int8");

    cr_assert_eq(idem_external_attempt_number(a), 1);
    cr_assert_eq(strlen(idem_external_attempt_downstream_key(a)), 36, "a UUID");
    cr_assert_str_eq(idem_external_attempt_tool(a), EXTEST_TOOL);
    cr_assert_null(idem_external_attempt_arguments(a), "the caller has them");
    cr_assert_gt(idem_external_attempt_lease_expires_at(a), now_us + 25 * 1000000L,
                 "a 30 s lease on the database's clock");
    cr_assert_str_eq(idem_external_history_state(h), "pending");
    cr_assert_str_eq(idem_external_history_downstream_key(h),
                     idem_external_attempt_downstream_key(a), "stored before dispatch");
    cr_assert(idem_external_history_lease_live(h));
    cr_assert_eq(idem_external_history_count(h), 1);
    cr_assert_null(idem_external_history_at(h, 0)->outcome, "running");
    cr_assert_eq(idem_external_history_at(h, 0)->ended_at, 0);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.operations WHERE state = 'pending'"
                               " AND attempts = 1 AND response IS NULL"),
                 1, "committed, outliving the call");
    idem_external_history_free(h);
    idem_external_attempt_free(a);
}

Test(external, complete_stores_the_receipt_and_every_retry_replays_it_byte_for_byte)
{
    idem_external_attempt *a = lease("acme", "op-1", ARGS);
    idem_outcome out = IDEM_OUTCOME_INIT, again = IDEM_OUTCOME_INIT;
    idem_external_history *h;
    char *first;

    cr_assert_eq(extest_dispatch(&out, a, provider), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_str_eq(out.receipt, "{\"message_id\":\"msg-1\"}");
    first = strdup(out.receipt);
    cr_assert_eq(answer(&again, "acme", "op-1", ARGS), 0);
    cr_assert_eq(again.status, IDEM_STATUS_REPLAYED);
    cr_assert_str_eq(again.receipt, first);
    cr_assert_eq(fake_provider_requests(provider), 1, "the replay dispatched nothing");
    h = history("acme", "op-1");
    cr_assert_str_eq(idem_external_history_state(h), "completed");
    cr_assert_str_eq(idem_external_history_provider_ref(h), "msg-1");
    cr_assert_eq(idem_external_history_lease_expires_at(h), 0, "no lease once done");
    cr_assert_str_eq(idem_external_history_at(h, 0)->outcome, "completed");
    cr_assert_str_eq(idem_external_history_at(h, 0)->provider_ref, "msg-1");
    cr_assert_gt(idem_external_history_at(h, 0)->ended_at, 0);
    idem_external_history_free(h);
    free(first);
    idem_outcome_clear(&out);
    idem_outcome_clear(&again);
    idem_external_attempt_free(a);
}

Test(external, a_reported_attempt_cannot_report_again)
{
    idem_external_attempt *a = lease("acme", "op-1", ARGS);
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    json_t *response = json_pack("{s:i}", "n", 1);

    cr_assert_eq(idem_external_complete(&out, a, NULL, response, &err), 0);
    cr_assert_eq(idem_external_complete(&out, a, NULL, response, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "attempt");
    cr_assert_eq(idem_external_unknown(&out, a, NULL, NULL, &err), IDEM_EINVAL);
    cr_assert_eq(idem_external_extend(a, &err), IDEM_ELOCKED);
    cr_assert_eq(idem_external_release(a, &err), IDEM_ELOCKED);
    json_decref(response);
    idem_outcome_clear(&out);
    idem_external_attempt_free(a);
}

Test(external, a_final_failure_is_stored_and_every_retry_is_rejected_with_it)
{
    idem_external_attempt *a = lease("acme", "op-1", ARGS);
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    json_t *refusal = json_pack("{s:s}", "error", "mailbox does not exist");

    cr_assert_eq(idem_external_fail(&out, a, IDEM_EXTERNAL_FINAL, refusal, "550 5.1.1", &err),
                 IDEM_EREJECTED);
    cr_assert_eq(out.status, IDEM_STATUS_REJECTED);
    cr_assert_str_eq(out.receipt, "{\"error\":\"mailbox does not exist\"}");
    cr_assert_eq(answer(&out, "acme", "op-1", ARGS), IDEM_EREJECTED);
    cr_assert_eq(out.status, IDEM_STATUS_REJECTED);
    cr_assert_str_eq(out.receipt, "{\"error\":\"mailbox does not exist\"}");
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.external_attempts"
                               " WHERE outcome = 'failed' AND error = '550 5.1.1'"),
                 1);
    json_decref(refusal);
    idem_outcome_clear(&out);
    idem_external_attempt_free(a);
}

Test(external, a_transient_failure_lets_the_next_begin_dispatch_again_with_the_same_key)
{
    idem_external_attempt *a = lease("acme", "op-1", ARGS), *b;
    idem_outcome out = IDEM_OUTCOME_INIT;
    char key[64];

    snprintf(key, sizeof(key), "%s", idem_external_attempt_downstream_key(a));
    fake_provider_script(provider, FAKE_FAIL, 1);
    cr_assert_eq(extest_dispatch(&out, a, provider), IDEM_EEFFECT);
    cr_assert_eq(out.status, IDEM_STATUS_EFFECT_FAILED);
    cr_assert_null(out.receipt);
    b = lease("acme", "op-1", ARGS);
    cr_assert_eq(idem_external_attempt_number(b), 2);
    cr_assert_str_eq(idem_external_attempt_downstream_key(b), key, "never fresh per attempt");
    cr_assert_eq(extest_dispatch(&out, b, provider), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(fake_provider_acts(provider), 1);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.external_attempts WHERE attempt = 1"
                               " AND outcome = 'retry' AND error = 'provider said 503'"),
                 1);
    idem_outcome_clear(&out);
    idem_external_attempt_free(a);
    idem_external_attempt_free(b);
}

Test(external, an_unknown_outcome_answers_outcome_unknown_to_every_later_call_and_is_reconciled)
{
    idem_external_attempt *a = lease("acme", "op-1", ARGS);
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_request req = extest_request("acme", "op-1", ARGS);
    idem_operation *op = NULL;
    idem_error err = IDEM_ERROR_INIT;

    fake_provider_script(provider, FAKE_LOSE_REPLY, 1);
    cr_assert_eq(extest_dispatch(&out, a, provider), IDEM_EUNKNOWN);
    cr_assert_eq(out.status, IDEM_STATUS_OUTCOME_UNKNOWN);
    cr_assert_eq(idem_status_next_step(out.status), IDEM_NEXT_RECONCILE);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(answer(&out, "acme", "op-1", ARGS), IDEM_EUNKNOWN);
        cr_assert_eq(out.status, IDEM_STATUS_OUTCOME_UNKNOWN);
    }
    /* The local path finds the same. */
    cr_assert_eq(idem_store_execute(&out, ex.store, &req, example_create_support_task, NULL, &err),
                 IDEM_EUNKNOWN);
    cr_assert_eq(out.status, IDEM_STATUS_OUTCOME_UNKNOWN);
    cr_assert(strstr(err.message, "idem-reconcile show acme op-1") != NULL, "%s", err.message);
    cr_assert_eq(idem_store_get(&op, ex.store, "acme", "op-1", &err), 0);
    cr_assert_eq(idem_operation_state(op), IDEM_STATE_OUTCOME_UNKNOWN);
    cr_assert_str_eq(idem_state_name(idem_operation_state(op)), "outcome_unknown");
    cr_assert_eq(fake_provider_requests(provider), 1, "never dispatched again");
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.reconciliation_items"
                               " WHERE tenant = 'acme' AND operation_id = 'op-1'"
                               " AND kind = 'outcome_unknown' AND resolved_at IS NULL"),
                 1);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.external_attempts WHERE outcome ="
                               " 'unknown' AND error = 'no reply within 10 s'"),
                 1);
    idem_operation_free(op);
    idem_outcome_clear(&out);
    idem_external_attempt_free(a);
}

Test(external, changed_arguments_under_the_same_key_conflict_and_write_nothing)
{
    idem_external_attempt *a = lease("acme", "op-1", ARGS);
    idem_outcome out = IDEM_OUTCOME_INIT;

    cr_assert_eq(answer(&out, "acme", "op-1", "{\"to\":\"bob@example.com\"}"), IDEM_ECONFLICT);
    cr_assert_eq(out.status, IDEM_STATUS_CONFLICT);
    extest_lapse("acme", "op-1");
    cr_assert_eq(answer(&out, "acme", "op-1", "{\"to\":\"bob@example.com\"}"), IDEM_ECONFLICT,
                 "a lapsed lease is not taken over by other arguments");
    cr_assert_eq(extest_scalar("SELECT attempts FROM idem.operations"), 1);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.external_attempts"), 1);
    idem_outcome_clear(&out);
    idem_external_attempt_free(a);
}

Test(external, a_key_the_local_path_completed_is_replayed_by_begin)
{
    const char *args = "{\"subject\":\"Call back\"}";
    idem_request req = extest_request("acme", "op-1", args);
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char *receipt;

    cr_assert_eq(idem_store_execute(&out, ex.store, &req, example_create_support_task, NULL, &err),
                 0, "%s", err.message);
    receipt = strdup(out.receipt);
    cr_assert_eq(answer(&out, "acme", "op-1", args), 0);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_str_eq(out.receipt, receipt);
    cr_assert_eq(answer(&out, "acme", "op-1", ARGS), IDEM_ECONFLICT);
    free(receipt);
    idem_outcome_clear(&out);
}

Test(external, the_same_operation_id_in_another_tenant_is_an_independent_key)
{
    idem_external_attempt *a = lease("acme", "op-1", ARGS), *b = lease("globex", "op-1", ARGS);
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_external_history *h = NULL;
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_str_neq(idem_external_attempt_downstream_key(a),
                      idem_external_attempt_downstream_key(b));
    fake_provider_script(provider, FAKE_LOSE_REPLY, 1);
    cr_assert_eq(extest_dispatch(&out, b, provider), IDEM_EUNKNOWN);
    cr_assert_eq(extest_dispatch(&out, a, provider), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(answer(&out, "acme", "op-1", ARGS), 0);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_eq(answer(&out, "globex", "op-1", ARGS), IDEM_EUNKNOWN);
    idem_external_attempt_free(lease("initech", "op-1", "{}")); /* a new key there */
    h = history("acme", "op-1");
    cr_assert_eq(idem_external_history_count(h), 1);
    cr_assert_str_eq(idem_external_history_state(h), "completed");
    idem_external_history_free(h);
    cr_assert_eq(idem_external_history_get(&h, ex.check, "hooli", "op-1", &err), IDEM_ENOTFOUND);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.reconciliation_items"
                               " WHERE tenant = 'acme'"),
                 0, "only globex's unknown outcome is to reconcile");
    idem_outcome_clear(&out);
    idem_external_attempt_free(a);
    idem_external_attempt_free(b);
}

Test(external, a_lost_reply_to_the_claim_is_resolved_by_looking_the_token_up)
{
    idem_external_attempt *a = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;

    idem__fault_inject("COMMIT", IDEM__FAULT_LOSE_REPLY, 1);
    cr_assert_eq(extest_begin(&a, &out, "acme", "op-1", ARGS), 0);
    cr_assert_not_null(a, "the claim committed, and the lookup found it ours");
    cr_assert_eq(idem_external_attempt_number(a), 1);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.external_attempts"), 1);
    idem_external_attempt_free(a);
    a = NULL;
    idem__fault_inject("COMMIT", IDEM__FAULT_DROP_BEFORE_SEND, 1);
    cr_assert_eq(extest_begin(&a, &out, "acme", "op-2", ARGS), 0);
    cr_assert_not_null(a, "nothing committed: the next round claims it");
    cr_assert_eq(idem_external_attempt_number(a), 1);
    idem_outcome_clear(&out);
    idem_external_attempt_free(a);
}

Test(external, a_lost_reply_to_a_report_is_resolved_without_reporting_twice)
{
    idem_external_attempt *a = lease("acme", "op-1", ARGS);
    idem_outcome out = IDEM_OUTCOME_INIT;

    idem__fault_inject("idem_external_finish", IDEM__FAULT_DROP_AFTER_SEND, 1);
    cr_assert_eq(extest_dispatch(&out, a, provider), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED, "the report committed: it was ours");
    idem_external_attempt_free(a);
    a = lease("acme", "op-2", ARGS);
    idem__fault_inject("idem_external_finish", IDEM__FAULT_DROP_BEFORE_SEND, 1);
    cr_assert_eq(extest_dispatch(&out, a, provider), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED, "not committed: sent again");
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.operations WHERE state = 'completed'"),
                 2);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.reconciliation_items"), 0);
    idem_outcome_clear(&out);
    idem_external_attempt_free(a);
}

Test(external, options_and_struct_versions)
{
    idem_external_options o;
    idem_enqueue_options e;
    idem_resolution r;
    idem_external *ext = NULL;
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_external_options_init(&o, 1), 0);
    cr_assert_eq(o.lease_ms, 30000);
    cr_assert_eq(o.claim_wait_ms, 50);
    cr_assert_eq(idem_external_options_init(&o, 2), IDEM_EINVAL);
    cr_assert_eq(idem_external_options_init(NULL, 1), IDEM_EINVAL);
    cr_assert_eq(idem_enqueue_options_init(&e, 1), 0);
    cr_assert_eq(e.max_attempts, 8);
    cr_assert_eq(idem_enqueue_options_init(&e, 9), IDEM_EINVAL);
    cr_assert_eq(idem_resolution_init(&r, 1), 0);
    cr_assert_eq(r.as, IDEM_RESOLVE_COMPLETED);
    cr_assert_null(r.note);
    cr_assert_eq(idem_resolution_init(&r, 0), IDEM_EINVAL);
    o.version = 7;
    cr_assert_eq(idem_external_new(&ext, ex.store, &o, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "options.version");
    cr_assert_null(ext);
    idem_external_free(NULL);
    idem_external_attempt_free(NULL);
    idem_outbox_batch_free(NULL);
    idem_external_history_free(NULL);
    cr_assert_null(idem_external_attempt_downstream_key(NULL));
    cr_assert_eq(idem_external_attempt_number(NULL), 0);
    cr_assert_eq(idem_outbox_batch_count(NULL), 0);
    cr_assert_null(idem_outbox_batch_at(NULL, 0));
    cr_assert_eq(idem_external_history_count(NULL), 0);
}
