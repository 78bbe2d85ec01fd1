/* A fake external provider for the tests: an in-process stand-in for an email or payment
 * service. It records every request it receives, honours downstream idempotency keys or
 * ignores them, and, on command, fails, hangs, or acts and then loses its reply.
 * Thread-safe (one mutex). */
#ifndef IDEM_TESTS_FAKE_PROVIDER_H
#define IDEM_TESTS_FAKE_PROVIDER_H

#include <stddef.h>

typedef struct fake_provider fake_provider;

/* What the next calls do (fake_provider_script). */
enum fake_behaviour {
    FAKE_OK = 0,            /* act (or, honouring keys, find the earlier act) and reply */
    FAKE_FAIL,              /* refuse without acting: FAKE_FAILED */
    FAKE_HANG,              /* block until fake_provider_unhang(), then act and reply */
    FAKE_LOSE_REPLY,        /* act, then lose the reply: FAKE_TIMEOUT */
    FAKE_LOSE_REQUEST,      /* the request never arrives: nothing recorded, FAKE_TIMEOUT */
    FAKE_REFUSE_LOSE_REPLY, /* refuse for good (recorded for the key), then lose the reply:
                               FAKE_TIMEOUT */
};

/* What a call returned to its caller. */
enum fake_result {
    FAKE_SENT = 0,     /* done; *ref is the provider's reference */
    FAKE_FAILED = -1,  /* refused; nothing was done */
    FAKE_TIMEOUT = -2, /* no reply: the caller cannot tell whether anything was done */
};

#define FAKE_REF_SIZE 32

/* @honours_keys: 1 = a request with a key seen before returns the first act's reference
 * without acting again; 0 = every request acts. */
fake_provider *fake_provider_new(int honours_keys);
void fake_provider_free(fake_provider *p);

/* The next @count calls behave as @b (queued after what is already scripted); unscripted
 * calls are FAKE_OK. */
void fake_provider_script(fake_provider *p, enum fake_behaviour b, unsigned int count);

/* Send one request carrying @downstream_key and @payload. Returns a fake_result; on
 * FAKE_SENT, @ref gets the reference. */
int fake_provider_send(fake_provider *p, const char *downstream_key, const char *payload,
                       char ref[FAKE_REF_SIZE]);

/* Let every hanging call go on, and every held status request (the hold ends). */
void fake_provider_unhang(fake_provider *p);
/* Calls blocked in FAKE_HANG right now. */
unsigned int fake_provider_hanging(fake_provider *p);

/* Status requests: what the provider says when asked about a downstream key. */
enum fake_status_behaviour {
    FAKE_STATUS_OK = 0,  /* answer from what was recorded under the key */
    FAKE_STATUS_HANG,    /* block until fake_provider_unhang(), then answer */
    FAKE_STATUS_ERROR,   /* answer 503 */
    FAKE_STATUS_GARBAGE, /* answer 200 with a body that is not JSON */
};

/* What a status request returned. */
enum fake_status {
    FAKE_STATUS_SENT = 0,      /* it acted: *ref, body {"message_id":ref,"status":"sent"} */
    FAKE_STATUS_REFUSED = 1,   /* it refused for good: body {"error":"mailbox unavailable"} */
    FAKE_STATUS_NOT_FOUND = 2, /* no request under the key reached it */
    FAKE_STATUS_FAILED = 3,    /* 503: it could not tell */
    FAKE_STATUS_MANGLED = 4,   /* 200 with a body that is not JSON */
};

#define FAKE_BODY_SIZE 128

/* The next @count status requests behave as @b; unscripted ones are FAKE_STATUS_OK. */
void fake_provider_script_status(fake_provider *p, enum fake_status_behaviour b,
                                 unsigned int count);

/* From now on each status request waits until @n have arrived (counted from this call),
 * then all answer. */
void fake_provider_hold_status(fake_provider *p, unsigned int n);

/* Ask about @downstream_key. Returns a fake_status; @ref and @body (NUL-terminated) get the
 * reference and the reply's body. */
int fake_provider_status(fake_provider *p, const char *downstream_key, char ref[FAKE_REF_SIZE],
                         char body[FAKE_BODY_SIZE]);

/* Status requests received so far, and those still being answered (a hanging one, or one
 * held). */
unsigned int fake_provider_status_requests(fake_provider *p);
unsigned int fake_provider_status_active(fake_provider *p);

/* Requests received, acts performed (emails sent, payments taken), and acts for one key. */
unsigned int fake_provider_requests(fake_provider *p);
unsigned int fake_provider_acts(fake_provider *p);
unsigned int fake_provider_acts_for(fake_provider *p, const char *downstream_key);
/* The downstream key of request @i (from 0), or NULL. Borrowed until the provider is freed. */
const char *fake_provider_key_of(fake_provider *p, unsigned int i);

#endif
