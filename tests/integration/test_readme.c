/* The README's external-effect example (send_confirmation, "External effects"), compiled
 * from README.md itself (readme-snippet.py) and run against a real server, with a fake mail
 * API standing in for the provider: what it tells its caller is what the manual promises. */
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
