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
    FAKE_OK = 0,     /* act (or, honouring keys, find the earlier act) and reply */
    FAKE_FAIL,       /* refuse without acting: FAKE_FAILED */
    FAKE_HANG,       /* block until fake_provider_unhang(), then act and reply */
    FAKE_LOSE_REPLY, /* act, then lose the reply: FAKE_TIMEOUT */
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

/* Let every hanging call go on. */
void fake_provider_unhang(fake_provider *p);
/* Calls blocked in FAKE_HANG right now. */
unsigned int fake_provider_hanging(fake_provider *p);

/* Requests received, acts performed (emails sent, payments taken), and acts for one key. */
unsigned int fake_provider_requests(fake_provider *p);
unsigned int fake_provider_acts(fake_provider *p);
unsigned int fake_provider_acts_for(fake_provider *p, const char *downstream_key);
/* The downstream key of request @i (from 0), or NULL. Borrowed until the provider is freed. */
const char *fake_provider_key_of(fake_provider *p, unsigned int i);

#endif
