/* Test support for external effects: a migrated database with a pool, a store and the
 * external path over it, and the steps of the protocol as a tool would take them against
 * the fake provider. */
#ifndef IDEM_TESTS_EXTEST_H
#define IDEM_TESTS_EXTEST_H

#include <libpq-fe.h>

#include "fake_provider.h"
#include "idem/idem.h"

/* The tool the tests call. */
#define EXTEST_TOOL "send_email"

typedef struct extest {
    char *conninfo;
    PGconn *check; /* a session of its own, for looking and for making time pass */
    idem_pool *pool;
    idem_store *store;
    idem_external *ext;
} extest;

/* The open fixture (one per test process). */
extern extest ex;

/* A fresh migrated database, a pool of @pool_size, a store and an external path with
 * leases of @lease_ms. For a suite's .init (with the defaults: extest_init). */
void extest_open(const char *tag, unsigned int lease_ms, unsigned int pool_size);
void extest_init(void);
void extest_close(void);

/* extest_init() and a fake provider with one worker (caller frees it with
 * extest_close_provider(), which also resets the fault points and closes the fixture). */
fake_provider *extest_init_provider(void);
void extest_close_provider(fake_provider *p);

/* A request of tool EXTEST_TOOL, version 1, with @args (JSON text); strings borrowed. */
idem_request extest_request(const char *tenant, const char *operation_id, const char *args);

/* idem_external_begin() for that request; returns its code. */
int extest_begin(idem_external_attempt **a, idem_outcome *out, const char *tenant,
                 const char *operation_id, const char *args);

/* Dispatch through @p with the attempt's downstream key and report what the provider said:
 * a reply → complete with its reference and {"message_id": ref}; a refusal → a transient
 * failure; no reply → unknown. Returns the report's code. */
int extest_dispatch(idem_outcome *out, idem_external_attempt *a, fake_provider *p);

/* Make the key's lease lapse now, on the database's clock (no sleeping). */
void extest_lapse(const char *tenant, const char *operation_id);

/* A one-integer query on ex.check. */
long extest_scalar(const char *sql);

/* Run SQL on ex.check that must succeed. */
void extest_exec(const char *sql);

#endif
