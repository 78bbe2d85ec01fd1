/* Durable intents on the external-effect path: the dispatch runs with the intent's stored
 * operation ID and arguments, a replay dispatches nothing, an unknown outcome moves the
 * intent to reconciliation, a cancelled intent is never dispatched, and a worker that dies
 * after the provider acted is recovered without a second dispatch. Against a real server,
 * with the fake provider. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "extest.h"
#include "intenttest.h"

#define ARGS "{\"subject\":\"Your order\",\"to\":\"ada@example.com\"}"

static fake_provider *provider;

static void open_all(void)
{
    provider = extest_init_provider();
}

static void close_all(void)
{
    extest_close_provider(provider);
}

TestSuite(intents_external, .init = open_all, .fini = close_all, .timeout = 120);

/* The dispatch: the fake provider, with the arguments it was given checked. */
static int dispatch(idem_outcome *out, idem_external_attempt *a, const json_t *arguments, void *ctx,
                    idem_error *err)
{
    (void)err;
    cr_assert_str_eq(json_string_value(json_object_get(arguments, "to")), "ada@example.com");
    return extest_dispatch(out, a, ctx);
}

static int execute(idem_outcome *out, idem_intent *t)
{
    idem_error err = IDEM_ERROR_INIT;

    idem_outcome_clear(out);
    return idem_intent_execute_external(out, ex.ext, t, dispatch, provider, NULL, &err);
}

static idem_intent *approve(const char *ref)
{
    return intenttest_approve(ex.store, "acme", ref, EXTEST_TOOL, ARGS);
}

Test(intents_external, executing_dispatches_once_and_a_second_execution_replays)
{
    idem_intent *t = approve("msg-1");
    idem_outcome out = IDEM_OUTCOME_INIT;

    cr_assert_eq(execute(&out, t), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_str_eq(out.receipt, "{\"message_id\":\"msg-1\"}");
    cr_assert_eq(idem_intent_current_state(t), IDEM_INTENT_DONE);
    cr_assert_eq(idem_intent_result_attempt(t), 1);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.operations WHERE operation_id = "
                               "(SELECT operation_id FROM idem.intents) AND state = 'completed'"),
                 1, "under the intent's operation ID");
    cr_assert_eq(execute(&out, t), 0);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_eq(fake_provider_requests(provider), 1);
    idem_outcome_clear(&out);
    idem_intent_free(t);
}

Test(intents_external, an_unknown_outcome_moves_the_intent_to_reconciliation)
{
    idem_intent *t = approve("msg-1");
    idem_outcome out = IDEM_OUTCOME_INIT;

    fake_provider_script(provider, FAKE_LOSE_REPLY, 1);
    cr_assert_eq(execute(&out, t), IDEM_EUNKNOWN);
    cr_assert_eq(out.status, IDEM_STATUS_OUTCOME_UNKNOWN);
    cr_assert_eq(idem_intent_current_state(t), IDEM_INTENT_NEEDS_RECONCILIATION);
    cr_assert_str_eq(idem_intent_result_status(t), "outcome_unknown");
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.reconciliation_items WHERE kind = "
                               "'intent' AND resolved_at IS NULL"),
                 1);
    cr_assert_eq(execute(&out, t), IDEM_EUNKNOWN, "never dispatched again by itself");
    cr_assert_eq(fake_provider_requests(provider), 1);
    idem_outcome_clear(&out);
    idem_intent_free(t);
}

Test(intents_external, a_cancelled_intent_is_never_dispatched)
{
    idem_intent *t = approve("msg-1");
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(
        idem_intent_cancel(NULL, ex.store, "acme", idem_intent_operation_id(t), "bob", &err), 0,
        "%s", err.message);
    cr_assert_eq(execute(&out, t), IDEM_ECONFLICT);
    cr_assert_eq(fake_provider_requests(provider), 0);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.operations"), 0);
    idem_intent_free(t);
}

Test(intents_external, a_crash_after_the_provider_acted_is_recovered_without_a_second_dispatch)
{
    idem_intent *t = approve("msg-1");
    idem_intent_list *list = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;

    idem__fault_inject("idem_intent_finish", IDEM__FAULT_DROP_BEFORE_SEND, 1);
    cr_assert_eq(execute(&out, t), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    intenttest_lapse(ex.check, "acme", idem_intent_operation_id(t));
    cr_assert_eq(idem_intent_recover(&list, ex.store, "acme", NULL, &err), 0, "%s", err.message);
    cr_assert_eq(idem_intent_list_count(list), 1);
    cr_assert_eq(execute(&out, idem_intent_list_at(list, 0)), 0);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_eq(idem_intent_current_state(idem_intent_list_at(list, 0)), IDEM_INTENT_DONE);
    cr_assert_eq(idem_intent_result_attempt(idem_intent_list_at(list, 0)), 1);
    cr_assert_eq(fake_provider_requests(provider), 1);
    idem_outcome_clear(&out);
    idem_intent_list_free(list);
    idem_intent_free(t);
}

Test(intents_external, a_transient_failure_leaves_the_intent_attempted)
{
    idem_intent *t = approve("msg-1");
    idem_outcome out = IDEM_OUTCOME_INIT;

    fake_provider_script(provider, FAKE_FAIL, 1);
    cr_assert_eq(execute(&out, t), IDEM_EEFFECT);
    cr_assert_eq(idem_intent_current_state(t), IDEM_INTENT_ATTEMPTED);
    cr_assert_eq(execute(&out, t), 0, "the next attempt dispatches again");
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(idem_intent_result_attempt(t), 2);
    cr_assert_eq(fake_provider_acts(provider), 1);
    idem_outcome_clear(&out);
    idem_intent_free(t);
}
