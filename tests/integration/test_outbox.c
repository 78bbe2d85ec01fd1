/* The outbox: external work enqueued by a local effect commits with it; workers claim due
 * items once each, back off after transient failures, and send an item that spends its
 * attempts to reconciliation. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/outbox.h"

#include "extest.h"
#include "support_tasks.h"

static fake_provider *provider;

static void open_all(void)
{
    extest_open("outbox", 30000, 8);
    provider = fake_provider_new(0); /* ignores keys: a second dispatch would show */
}

static void close_all(void)
{
    fake_provider_free(provider);
    extest_close();
}

TestSuite(outbox, .init = open_all, .fini = close_all, .timeout = 60);

/* What the effect does besides creating the task. */
typedef struct plan {
    unsigned int max_attempts; /* 0: the default */
    const char *tool;          /* what it enqueues; default EXTEST_TOOL */
    int fail_after;            /* fail (transiently) after enqueueing */
    int no_arguments;          /* enqueue NULL arguments */
    idem_error enqueue_err;    /* what idem_tx_enqueue() said */
    int enqueue_rc;
} plan;

/* A tool that creates a support task and, in the same transaction, enqueues the email that
 * confirms it. */
static int create_and_confirm(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                              idem_error *err)
{
    plan *p = ctx;
    idem_enqueue_options opts = IDEM_ENQUEUE_OPTIONS_INIT;
    char item[IDEM_UUID_STRING_SIZE];
    json_t *email = json_pack("{s:s, s:O}", "to", "ada@example.com", "subject",
                              json_object_get(arguments, "subject"));
    int rc = example_create_support_task(response, tx, arguments, NULL, err);

    if (p->max_attempts > 0)
        opts.max_attempts = p->max_attempts;
    if (rc == 0) {
        rc = p->enqueue_rc =
            idem_tx_enqueue(item, tx, p->tool != NULL ? p->tool : EXTEST_TOOL, 1,
                            p->no_arguments ? NULL : email, &opts, &p->enqueue_err);
        if (rc != 0)
            *err = p->enqueue_err;
    }
    if (rc == 0 && p->fail_after)
        rc = idem_error_set(err, IDEM_EEFFECT, "the effect failed after enqueueing");
    if (rc == 0)
        json_object_set_new(*response, "confirmation", json_string(item));
    json_decref(email);
    if (rc != 0) {
        json_decref(*response);
        *response = NULL;
    }
    return rc;
}

static int execute(const char *op, plan *p)
{
    idem_request req = extest_request("acme", op, "{\"subject\":\"Parcel late\"}");
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    int rc;

    req.tool = EXAMPLE_TOOL_NAME;
    rc = idem_store_execute(&out, ex.store, &req, create_and_confirm, p, &err);
    idem_outcome_clear(&out);
    return rc;
}

static idem_outbox_batch *claim(idem_external *ext, const char *tenant, unsigned int limit)
{
    idem_outbox_batch *b = NULL;
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(idem_outbox_claim(&b, ext, tenant, NULL, limit, &err), 0, "%s", err.message);
    return b;
}

/* Claim and dispatch until nothing is due; returns how many items this worker dispatched. */
static int work(idem_external *ext)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_outbox_batch *b;
    int n = 0;

    while ((b = claim(ext, "acme", 3)) != NULL && idem_outbox_batch_count(b) > 0) {
        for (size_t i = 0; i < idem_outbox_batch_count(b); i++, n++)
            cr_assert_eq(extest_dispatch(&out, idem_outbox_batch_at(b, i), provider), 0);
        idem_outbox_batch_free(b);
    }
    idem_outbox_batch_free(b);
    idem_outcome_clear(&out);
    return n;
}

Test(outbox, an_enqueued_item_commits_with_the_effect_or_not_at_all)
{
    plan ok = {0}, failing = {.fail_after = 1};
    idem_outbox_batch *b;
    idem_external_attempt *item;

    cr_assert_eq(execute("op-1", &ok), 0);
    cr_assert_eq(execute("op-2", &failing), IDEM_EEFFECT);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem_example.support_tasks"), 1);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.outbox"), 1, "rolled back with it");
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.outbox WHERE tenant = 'acme'"
                               " AND parent_operation_id = 'op-1' AND state = 'queued'"),
                 1);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.operations o JOIN idem.outbox b"
                               " USING (tenant, operation_id) WHERE o.state = 'pending'"
                               " AND o.downstream_key IS NOT NULL AND o.attempts = 0"),
                 1, "the item is an operation of its own, pending with its downstream key");
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.operations WHERE forget_at IS NULL"), 0,
                 "with the windows of its tool");
    b = claim(ex.ext, "acme", 10);
    cr_assert_eq(idem_outbox_batch_count(b), 1);
    item = idem_outbox_batch_at(b, 0);
    cr_assert_str_eq(idem_external_attempt_tool(item), EXTEST_TOOL);
    cr_assert_str_eq(idem_external_attempt_arguments(item),
                     "{\"subject\":\"Parcel late\",\"to\":\"ada@example.com\"}", "canonical");
    cr_assert_eq(idem_external_attempt_number(item), 1);
    cr_assert_eq(strlen(idem_external_attempt_downstream_key(item)), 36);
    idem_outbox_batch_free(b);
}

typedef struct worker {
    pthread_t thread;
    int dispatched;
} worker;

static void *run_worker(void *arg)
{
    ((worker *)arg)->dispatched = work(ex.ext);
    return NULL;
}

Test(outbox, two_workers_at_once_dispatch_every_item_exactly_once)
{
    plan p = {0};
    worker w[2];
    char op[16];

    for (int i = 0; i < 30; i++) {
        snprintf(op, sizeof(op), "op-%d", i);
        cr_assert_eq(execute(op, &p), 0);
    }
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&w[i].thread, NULL, run_worker, &w[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(w[i].thread, NULL);
    cr_assert_eq(w[0].dispatched + w[1].dispatched, 30);
    cr_assert_eq(fake_provider_requests(provider), 30, "no item twice");
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.outbox WHERE state = 'completed'"), 30);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.external_attempts"), 30);
    cr_assert_eq(extest_scalar("SELECT count(DISTINCT provider_ref) FROM idem.operations"
                               " WHERE state = 'completed' AND downstream_key IS NOT NULL"),
                 30);
}

Test(outbox, a_transient_failure_backs_off_and_the_cap_moves_the_item_to_reconciliation)
{
    idem_external_options opts = IDEM_EXTERNAL_OPTIONS_INIT;
    idem_external *slow = NULL;
    idem_outbox_batch *b;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    plan p = {.max_attempts = 2};

    opts.outbox_backoff_base_ms = 60000;
    cr_assert_eq(idem_external_new(&slow, ex.store, &opts, &err), 0);
    cr_assert_eq(execute("op-1", &p), 0);
    fake_provider_script(provider, FAKE_FAIL, 2);
    b = claim(slow, "acme", 10);
    cr_assert_eq(extest_dispatch(&out, idem_outbox_batch_at(b, 0), provider), IDEM_EEFFECT);
    idem_outbox_batch_free(b);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.outbox WHERE state = 'queued'"
                               " AND next_attempt_at BETWEEN now() AND now() + interval '60 s'"
                               " AND last_error = 'provider said 503'"),
                 1, "rescheduled within the first backoff");
    b = claim(slow, "acme", 10);
    cr_assert_eq(idem_outbox_batch_count(b), 0, "not due during its backoff");
    idem_outbox_batch_free(b);
    extest_exec("UPDATE idem.outbox SET next_attempt_at = now() - interval '1 s'");
    b = claim(slow, "acme", 10);
    cr_assert_eq(idem_external_attempt_number(idem_outbox_batch_at(b, 0)), 2);
    cr_assert_eq(extest_dispatch(&out, idem_outbox_batch_at(b, 0), provider), IDEM_EEFFECT);
    idem_outbox_batch_free(b);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.outbox WHERE state = 'exhausted'"), 1);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.reconciliation_items"
                               " WHERE kind = 'outbox_exhausted' AND resolved_at IS NULL"),
                 1);
    extest_exec("UPDATE idem.outbox SET next_attempt_at = now() - interval '1 s'");
    b = claim(slow, "acme", 10);
    cr_assert_eq(idem_outbox_batch_count(b), 0, "never dispatched again by itself");
    idem_outbox_batch_free(b);
    cr_assert_eq(fake_provider_requests(provider), 2);
    idem_outcome_clear(&out);
    idem_external_free(slow);
}

Test(outbox, a_crashed_workers_item_comes_back_after_its_lease_with_the_same_key)
{
    plan p = {.max_attempts = 2};
    idem_outbox_batch *b;
    char key[64];

    cr_assert_eq(execute("op-1", &p), 0);
    b = claim(ex.ext, "acme", 10);
    snprintf(key, sizeof(key), "%s",
             idem_external_attempt_downstream_key(idem_outbox_batch_at(b, 0)));
    idem_outbox_batch_free(b); /* the worker dies without a report */
    b = claim(ex.ext, "acme", 10);
    cr_assert_eq(idem_outbox_batch_count(b), 0, "held while the lease lasts");
    idem_outbox_batch_free(b);
    extest_exec("UPDATE idem.operations SET lease_expires_at = now() - interval '1 s'"
                " WHERE lease_expires_at IS NOT NULL");
    extest_exec("UPDATE idem.outbox SET next_attempt_at = now() - interval '1 s'");
    b = claim(ex.ext, "acme", 10);
    cr_assert_eq(idem_outbox_batch_count(b), 1);
    cr_assert_str_eq(idem_external_attempt_downstream_key(idem_outbox_batch_at(b, 0)), key);
    cr_assert_eq(idem_external_attempt_number(idem_outbox_batch_at(b, 0)), 2);
    idem_outbox_batch_free(b); /* and dies again: its attempts are spent */
    extest_exec("UPDATE idem.operations SET lease_expires_at = now() - interval '1 s'"
                " WHERE lease_expires_at IS NOT NULL");
    extest_exec("UPDATE idem.outbox SET next_attempt_at = now() - interval '1 s'");
    b = claim(ex.ext, "acme", 10);
    cr_assert_eq(idem_outbox_batch_count(b), 0);
    idem_outbox_batch_free(b);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.outbox WHERE state = 'exhausted'"), 1);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.external_attempts"
                               " WHERE outcome = 'lease_expired'"),
                 2);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.reconciliation_items"
                               " WHERE kind = 'outbox_exhausted'"),
                 1);
}

Test(outbox, an_item_whose_outcome_is_unknown_is_not_dispatched_again)
{
    plan p = {0};
    idem_outbox_batch *b;
    idem_outcome out = IDEM_OUTCOME_INIT;

    cr_assert_eq(execute("op-1", &p), 0);
    fake_provider_script(provider, FAKE_LOSE_REPLY, 1);
    b = claim(ex.ext, "acme", 10);
    cr_assert_eq(extest_dispatch(&out, idem_outbox_batch_at(b, 0), provider), IDEM_EUNKNOWN);
    idem_outbox_batch_free(b);
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.outbox WHERE state ="
                               " 'outcome_unknown'"),
                 1);
    extest_exec("UPDATE idem.outbox SET next_attempt_at = now() - interval '1 s'");
    b = claim(ex.ext, "acme", 10);
    cr_assert_eq(idem_outbox_batch_count(b), 0);
    idem_outbox_batch_free(b);
    cr_assert_eq(fake_provider_requests(provider), 1);
    idem_outcome_clear(&out);
}

Test(outbox, a_worker_sees_only_its_tenants_items_and_tool)
{
    plan p = {0}, sms = {.tool = "send_sms"};
    idem_outbox_batch *b = NULL;
    idem_error err = IDEM_ERROR_INIT;

    cr_assert_eq(execute("op-1", &p), 0);
    cr_assert_eq(execute("op-2", &sms), 0);
    b = claim(ex.ext, "globex", 10);
    cr_assert_eq(idem_outbox_batch_count(b), 0);
    idem_outbox_batch_free(b);
    cr_assert_eq(idem_outbox_claim(&b, ex.ext, "acme", "send_sms", 10, &err), 0);
    cr_assert_eq(idem_outbox_batch_count(b), 1);
    cr_assert_str_eq(idem_external_attempt_tool(idem_outbox_batch_at(b, 0)), "send_sms");
    cr_assert_str_eq(idem_external_attempt_tenant(idem_outbox_batch_at(b, 0)), "acme");
    idem_outbox_batch_free(b);
}

Test(outbox, bad_input_names_the_field)
{
    idem_outbox_batch *b = NULL;
    idem_error err = IDEM_ERROR_INIT;
    plan bad_tool = {.tool = "Send Email"}, bad_cap = {.max_attempts = 5000},
         no_args = {.no_arguments = 1};

    cr_assert_eq(idem_outbox_claim(NULL, ex.ext, "acme", NULL, 1, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "out");
    cr_assert_eq(idem_outbox_claim(&b, NULL, "acme", NULL, 1, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "ext");
    cr_assert_eq(idem_outbox_claim(&b, ex.ext, "bad tenant", NULL, 1, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "tenant");
    cr_assert_eq(idem_outbox_claim(&b, ex.ext, "acme", "Bad Tool", 1, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "tool");
    cr_assert_eq(idem_outbox_claim(&b, ex.ext, "acme", NULL, 0, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "limit");
    cr_assert_null(b);
    cr_assert_eq(execute("op-1", &bad_tool), IDEM_EEFFECT);
    cr_assert_eq(bad_tool.enqueue_rc, IDEM_EINVAL);
    cr_assert_str_eq(bad_tool.enqueue_err.field, "tool");
    cr_assert_eq(execute("op-2", &bad_cap), IDEM_EEFFECT);
    cr_assert_str_eq(bad_cap.enqueue_err.field, "options.max_attempts");
    cr_assert_eq(execute("op-3", &no_args), IDEM_EEFFECT);
    cr_assert_str_eq(no_args.enqueue_err.field, "arguments");
    cr_assert_eq(idem_tx_enqueue(NULL, NULL, EXTEST_TOOL, 1, NULL, NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "tx");
    cr_assert_eq(extest_scalar("SELECT count(*) FROM idem.outbox"), 0);
}
