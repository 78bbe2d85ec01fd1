/* The library guide's external-effect example (send_confirmation, "External effects") and its
 * resolver (ask_mail_api), compiled from lib/README.md itself (readme-snippet.py) and run
 * against a real server, with a fake mail API standing in for the provider: what they tell
 * their caller is what the manual promises. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "extest.h"

#define ARGS "{\"to\":\"ada@example.com\",\"subject\":\"Your order\"}"

/* The mail API the example calls ("your HTTP client's"): each call answers what the test
 * set in @mail, and remembers the downstream key it was given. */
enum mail_result { MAIL_SENT, MAIL_REFUSED, MAIL_NOT_SENT, MAIL_TIMED_OUT };

struct mail_reply {
    char id[64];
    char error[128];
};

static struct {
    enum mail_result result;
    const char *id, *error;
    int calls;
    char key[IDEM_UUID_STRING_SIZE];
} mail;

static enum mail_result mail_send(struct mail_reply *reply, const char *arguments,
                                  const char *downstream_key)
{
    (void)arguments;
    mail.calls++;
    snprintf(mail.key, sizeof(mail.key), "%s", downstream_key);
    snprintf(reply->id, sizeof(reply->id), "%s", mail.id != NULL ? mail.id : "");
    snprintf(reply->error, sizeof(reply->error), "%s", mail.error != NULL ? mail.error : "");
    return mail.result;
}

#include "readme_external.h"

/* The mail API's status request the resolver makes: it answers what the test set in
 * mail.status, for the key it was given. */
enum mail_status_result {
    MAIL_STATUS_SENT,
    MAIL_STATUS_REFUSED,
    MAIL_STATUS_NOT_FOUND,
    MAIL_STATUS_ERROR
};

struct mail_status {
    char id[64];
    char error[128];
};

static struct {
    enum mail_status_result status;
    int asked;
    char key[IDEM_UUID_STRING_SIZE];
} api;

static enum mail_status_result mail_status(struct mail_status *st, void *client,
                                           const char *downstream_key, unsigned int timeout_ms)
{
    (void)client;
    (void)timeout_ms;
    api.asked++;
    snprintf(api.key, sizeof(api.key), "%s", downstream_key);
    snprintf(st->id, sizeof(st->id), "%s", mail.id != NULL ? mail.id : "");
    snprintf(st->error, sizeof(st->error), "%s", mail.error != NULL ? mail.error : "");
    return api.status;
}

#include "readme_resolver.h"

TestSuite(readme, .init = extest_init, .fini = extest_close, .timeout = 60);

/* The example on @op, the mail API answering @result. */
static int send(idem_outcome *out, const char *op, enum mail_result result, idem_error *err)
{
    idem_request req = extest_request("acme", op, ARGS);

    mail.result = result;
    idem_outcome_clear(out);
    return send_confirmation(out, ex.ext, &req, err);
}

Test(readme, the_external_example_hands_a_transient_failure_s_message_to_its_caller)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char key[IDEM_UUID_STRING_SIZE];

    mail.error = "503 Service Unavailable";
    cr_assert_eq(send(&out, "op-1", MAIL_NOT_SENT, &err), IDEM_EEFFECT);
    cr_assert_eq(out.status, IDEM_STATUS_EFFECT_FAILED);
    cr_assert_eq(err.code, IDEM_EEFFECT);
    cr_assert_not_null(strstr(err.message, "503 Service Unavailable"),
                       "the caller's error has the provider's words: '%s'", err.message);
    memcpy(key, mail.key, sizeof(key));
    mail.id = "msg_8Hq2";
    cr_assert_eq(send(&out, "op-1", MAIL_SENT, &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_str_eq(mail.key, key, "the retry sent the same downstream key");
    cr_assert_str_eq(out.receipt, "{\"message_id\":\"msg_8Hq2\"}");
    cr_assert_eq(send(&out, "op-1", MAIL_SENT, &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_eq(mail.calls, 2, "a replay sends nothing");
    idem_outcome_clear(&out);
}

Test(readme, the_external_example_hands_a_refusal_and_an_unknown_outcome_to_its_caller)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;

    mail.error = "550 mailbox unavailable";
    cr_assert_eq(send(&out, "op-1", MAIL_REFUSED, &err), IDEM_EREJECTED);
    cr_assert_eq(out.status, IDEM_STATUS_REJECTED);
    cr_assert_neq(err.message[0], '\0', "the caller hears why");
    cr_assert_not_null(strstr(out.receipt, "550 mailbox unavailable"), "%s", out.receipt);
    cr_assert_eq(send(&out, "op-2", MAIL_TIMED_OUT, &err), IDEM_EUNKNOWN);
    cr_assert_eq(out.status, IDEM_STATUS_OUTCOME_UNKNOWN);
    cr_assert_neq(err.message[0], '\0', "the caller hears why");
    idem_outcome_clear(&out);
}

/* The manual's resolver settles the outcome its example left unknown: sent → the retry
 * replays the receipt send_confirmation() would have stored, asking nothing more; not found →
 * the retry sends again with the same key; a 503 → still unknown, saying so. */
Test(readme, the_resolver_example_settles_an_unknown_outcome)
{
    idem_external_resolver resolver = IDEM_EXTERNAL_RESOLVER_INIT;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char key[IDEM_UUID_STRING_SIZE];

    resolver.probe = ask_mail_api;
    resolver.name = "mail API status";
    resolver.timeout_ms = 30000;
    cr_assert_eq(idem_external_set_resolver(ex.ext, "send_email", &resolver, &err), 0, "%s",
                 err.message);
    mail.id = "msg_9Kd1";
    cr_assert_eq(send(&out, "op-1", MAIL_TIMED_OUT, &err), IDEM_EUNKNOWN);
    memset(&api, 0, sizeof(api));
    api.status = MAIL_STATUS_SENT;
    cr_assert_eq(send(&out, "op-1", MAIL_SENT, &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_str_eq(out.receipt, "{\"message_id\":\"msg_9Kd1\"}");
    cr_assert_str_eq(api.key, mail.key, "asked about the downstream key it was sent with");
    cr_assert_eq(mail.calls, 1, "not sent again");

    cr_assert_eq(send(&out, "op-2", MAIL_TIMED_OUT, &err), IDEM_EUNKNOWN);
    memcpy(key, mail.key, sizeof(key));
    api.status = MAIL_STATUS_NOT_FOUND;
    cr_assert_eq(send(&out, "op-2", MAIL_SENT, &err), 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED, "sent again");
    cr_assert_str_eq(mail.key, key, "with the same downstream key");
    cr_assert_eq(mail.calls, 3);

    mail.error = "503 Service Unavailable";
    cr_assert_eq(send(&out, "op-3", MAIL_TIMED_OUT, &err), IDEM_EUNKNOWN);
    api.status = MAIL_STATUS_ERROR;
    cr_assert_eq(send(&out, "op-3", MAIL_SENT, &err), IDEM_EUNKNOWN);
    cr_assert_eq(out.status, IDEM_STATUS_OUTCOME_UNKNOWN);
    cr_assert_not_null(strstr(err.message, "503 Service Unavailable"), "%s", err.message);
    cr_assert_eq(mail.calls, 4, "not sent again");
    idem_outcome_clear(&out);
}
