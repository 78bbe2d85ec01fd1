/* Library defects the fault suite found, each kept as a test of the fixed behaviour. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "pgtest.h"

static idem_pool *pool;
static idem_store *store;
static char *conninfo;

static void close_all(void)
{
    idem_store_free(store);
    idem_pool_free(pool);
    free(conninfo);
    store = NULL;
    pool = NULL;
    conninfo = NULL;
}

static void open_all(void)
{
    idem_error err = IDEM_ERROR_INIT;

    conninfo = pgtest_new_migrated_database("library_bug");
    cr_assert_eq(idem_pool_new(&pool, conninfo, NULL, &err), 0, "%s", err.message);
    cr_assert_eq(idem_store_new(&store, pool, NULL, &err), 0, "%s", err.message);
}

TestSuite(library_bug, .init = open_all, .fini = close_all);

/* 2^53 + 1: a 64-bit integer that no IEEE double holds; a receipt keeps it exactly. */
static int big_receipt(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                       idem_error *err)
{
    (void)tx, (void)arguments, (void)ctx, (void)err;
    *response = json_pack("{s:I}", "n", (json_int_t)9007199254740993LL);
    return *response != NULL ? IDEM_EFFECT_OK : IDEM_ENOMEM;
}

/* A receipt is stored and replayed exactly as the effect produced it, 64-bit integers
 * included (it used to go through a double; found by the fault suite). */
Test(library_bug, a_receipt_keeps_a_64_bit_integer_exactly)
{
    idem_request req = IDEM_REQUEST_INIT;
    idem_error err = IDEM_ERROR_INIT;
    const char *want = "{\"n\":9007199254740993}";

    req.tenant = "acme";
    req.operation_id = "op-big";
    req.tool = "big";
    req.arguments = "{}";
    req.arguments_len = 2;
    for (int call = 0; call < 2; call++) {
        idem_outcome out = IDEM_OUTCOME_INIT;
        int rc = idem_store_execute(&out, store, &req, big_receipt, NULL, &err);

        cr_assert_eq(rc, 0, "%s", err.message);
        cr_expect_str_eq(out.receipt, want, "%s receipt %s, the effect produced %s",
                         idem_status_name(out.status), out.receipt, want);
        idem_outcome_clear(&out);
    }
}

/* Its one statement waits for the row that the test holds. */
static int update_locked_row(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                             idem_error *err)
{
    PGresult *res = NULL;
    int rc = idem_tx_exec(&res, tx, "UPDATE bug_rows SET id = id WHERE id = 1", 0, NULL, err);

    (void)arguments, (void)ctx;
    if (rc != 0)
        return rc;
    PQclear(res);
    *response = json_pack("{s:b}", "updated", 1);
    return *response != NULL ? IDEM_EFFECT_OK : IDEM_ENOMEM;
}

/* Classification: the store sets lock_timeout to what is left of the call's deadline. When
 * it fires in the effect's own statement the call ends unavailable (retry later, same
 * key), as when it fires in the store's claim: the same call succeeds once the lock is
 * free. (It used to end effect_failed; found by the fault suite.) */
Test(library_bug, a_lock_wait_past_the_calls_deadline_in_the_effect_is_unavailable)
{
    idem_store_options opts = IDEM_STORE_OPTIONS_INIT;
    idem_request req = IDEM_REQUEST_INIT;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_store *quick = NULL;
    PGconn *holder;

    holder = pgtest_connect(conninfo);
    PQclear(pgtest_exec(holder, "CREATE TABLE bug_rows (id int PRIMARY KEY);"
                                " INSERT INTO bug_rows VALUES (1)"));
    PQclear(pgtest_exec(holder, "BEGIN; SELECT * FROM bug_rows WHERE id = 1 FOR UPDATE"));
    /* Long enough that the claim goes in first and the same call, once the lock is free,
     * is served on a loaded machine. */
    opts.deadline_ms = PGTEST_LOAD_SLACK_MS;
    cr_assert_eq(idem_store_new(&quick, pool, &opts, &err), 0, "%s", err.message);
    req.tenant = "acme";
    req.operation_id = "op-locked";
    req.tool = "locked";
    req.arguments = "{}";
    req.arguments_len = 2;
    idem_store_execute(&out, quick, &req, update_locked_row, NULL, &err);
    PQclear(pgtest_exec(holder, "ROLLBACK"));
    PQfinish(holder);
    cr_expect_eq(out.status, IDEM_STATUS_UNAVAILABLE,
                 "a lock wait cut by the call's own deadline ended %s (next step %s): %s [%s]",
                 idem_status_name(out.status),
                 idem_next_step_name(idem_status_next_step(out.status)), err.message, err.sqlstate);
    idem_outcome_clear(&out);
    cr_expect_eq(idem_store_execute(&out, quick, &req, update_locked_row, NULL, &err), 0,
                 "the same call, the lock free: %s", err.message);
    idem_outcome_clear(&out);
    idem_store_free(quick);
}
