/*
 * Test support for the store tests: a per-test fixture and the helpers they share.
 *
 *     TestSuite(store_xxx, .init = storetest_init, .fini = storetest_fini, .timeout = 240);
 *
 * Each test gets a fresh database with idem's schema and the example tool's table, and a
 * connection of its own for reading rows directly; it opens its store with
 * storetest_open(), with the options it tests. Helpers fail the test when what they do
 * fails. The timeouts are generous: other test executables load the same cores meanwhile.
 */
#ifndef IDEM_TESTS_STORETEST_H
#define IDEM_TESTS_STORETEST_H

#include "idem/idem.h"
#include "pgtest.h"
#include "support_tasks.h"

typedef struct store_fixture {
    char *conninfo;    /* the test's database */
    PGconn *check;     /* a separate connection, for counting rows */
    idem_pool *pool;   /* set by storetest_open() */
    idem_store *store; /* set by storetest_open() */
} store_fixture;

/* The running test's fixture. */
extern store_fixture fx;

void storetest_init(void);
void storetest_fini(void);

/* Open fx.pool (@pool_size connections) and fx.store over it (@opts, NULL for the
 * defaults); closed by storetest_fini() or storetest_close(). In a run through PgBouncer
 * (pgtest_through_pgbouncer()) the pool connects through it, with IDEM_POOLER_TRANSACTION;
 * fx.check stays a direct connection. */
void storetest_open(const idem_store_options *opts, unsigned int pool_size);

/* storetest_open(), the library connecting as @role (one of pgtest.h's login roles)
 * instead of PGTEST_APP. */
void storetest_open_as(const idem_store_options *opts, unsigned int pool_size, const char *role);

/* storetest_open() of one connection, the pool's statement_timeout_ms set. */
void storetest_open_statement_timeout(const idem_store_options *opts,
                                      unsigned int statement_timeout_ms);

/* Free fx.store and fx.pool now (the database and fx.check stay). */
void storetest_close(void);

/* Rows in idem_example.support_tasks and in idem.operations. */
long storetest_tasks(void);
long storetest_operations(void);

/* A request for the example tool (arguments borrowed; NULL gives length 0). */
idem_request storetest_request(const char *tenant, const char *op, const char *args);

/* Execute the example tool through fx.store; returns the code, fills out. */
int storetest_create_task(idem_outcome *out, const char *tenant, const char *op, const char *args,
                          idem_error *err);

/* The example tool's effect declared as SQL (the same INSERT, its receipt built by the
 * statement); caller frees it with idem_declared_free(). */
idem_declared *storetest_declared_task(void);

/* Insert, directly (fx.check), a completed record of the example tool for @args (its
 * fingerprint) with @receipt stored as given and receipt_canonical NULL: as a callback
 * call writes one, and as versions before migration 0013 wrote a declared one. */
void storetest_insert_completed(const char *tenant, const char *op, const char *args,
                                const char *receipt);

/* The receipt bytes stored for a key, read directly (malloc'd, caller frees). */
char *storetest_receipt(const char *tenant, const char *op);

/* An effect counting its runs in ctx (an effect_counter), then running the example's. */
typedef struct effect_counter {
    int runs;
} effect_counter;

int counting_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                    idem_error *err);

#endif
