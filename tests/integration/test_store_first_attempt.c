/* Requests marked as first attempts (idem_request.attempt == 1): the store claims the key
 * without a lookup in front, and the claim answers when the key has a record after all. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "idem/idem.h"
#include "pgtest.h"

static idem_pool *pool;
static idem_store *store;
static PGconn *check;

static void close_all(void)
{
    idem_store_free(store);
    idem_pool_free(pool);
    PQfinish(check);
}

TestSuite(first_attempt, .fini = close_all);

static void open_store(const char *tag)
{
    idem_pool_options popts = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;

    char *conninfo = pgtest_new_migrated_database(tag);
    check = pgtest_connect(conninfo);
    PQclear(pgtest_exec(check, "CREATE TABLE notes (tenant text, operation_id text, text text,"
                               " note_id bigint GENERATED ALWAYS AS IDENTITY)"));
    popts.max_size = 8;
    popts.connect_timeout_ms = 30000;
    popts.acquire_timeout_ms = 30000;
    cr_assert_eq(idem_pool_new(&pool, conninfo, &popts, &err), 0, "%s", err.message);
    cr_assert_eq(idem_store_new(&store, pool, NULL, &err), 0, "%s", err.message);
    free(conninfo);
}

/* Inserts a note; refuses (final failure) an empty text. ctx: run counter, or NULL. */
static int note_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                       idem_error *err)
{
    const char *text = json_string_value(json_object_get(arguments, "text"));
    const char *values[3] = {idem_tx_tenant(tx), idem_tx_operation_id(tx), text};
    PGresult *res = NULL;
    int rc;

    if (ctx != NULL)
        __atomic_add_fetch((int *)ctx, 1, __ATOMIC_SEQ_CST);
    if (text == NULL || text[0] == '\0') {
        *response = json_pack("{s:s}", "error", "text is required");
        return IDEM_EFFECT_FINAL_FAILURE;
    }
    rc = idem_tx_exec(&res, tx,
                      "INSERT INTO notes (tenant, operation_id, text) VALUES ($1, $2, $3)"
                      " RETURNING note_id",
                      3, values, err);
    if (rc != 0)
        return rc;
    *response = json_pack("{s:s}", "note_id", PQgetvalue(res, 0, 0));
    PQclear(res);
    return IDEM_EFFECT_OK;
}

/* No statement at all: the record is written alone. */
static int constant_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                           idem_error *err)
{
    (void)tx, (void)arguments, (void)ctx, (void)err;
    *response = json_pack("{s:s}", "status", "noted");
    return IDEM_EFFECT_OK;
}

/* A request of tenant acme's create_note. */
static idem_request note_request(const char *op, const char *args, unsigned int attempt)
{
    idem_request req = IDEM_REQUEST_INIT;

    req.tenant = "acme";
    req.operation_id = op;
    req.tool = "create_note";
    req.arguments = args;
    req.arguments_len = strlen(args);
    req.attempt = attempt;
    return req;
}

static int call_with(idem_outcome *out, const char *op, const char *args, unsigned int attempt,
                     idem_effect_fn effect, void *ctx)
{
    idem_request req = note_request(op, args, attempt);
    idem_error err = IDEM_ERROR_INIT;

    idem_outcome_clear(out);
    return idem_store_execute(out, store, &req, effect, ctx, &err);
}

static long notes(void)
{
    return pgtest_scalar(check, "SELECT count(*) FROM notes");
}

Test(first_attempt, a_new_key_is_created_and_a_first_attempt_on_it_again_replays_byte_for_byte)
{
    idem_outcome a = IDEM_OUTCOME_INIT, b = IDEM_OUTCOME_INIT;

    open_store("first_new");
    cr_assert_eq(call_with(&a, "op-1", "{\"text\":\"hi\"}", 1, note_effect, NULL), 0);
    cr_assert_eq(a.status, IDEM_STATUS_CREATED);
    cr_assert_eq(a.attempts, 1);
    cr_assert_eq(call_with(&b, "op-1", "{\"text\":\"hi\"}", 1, note_effect, NULL), 0,
                 "a request wrongly marked as a first attempt still replays");
    cr_assert_eq(b.status, IDEM_STATUS_REPLAYED);
    cr_assert_eq(b.receipt_len, a.receipt_len);
    cr_assert_eq(memcmp(a.receipt, b.receipt, a.receipt_len), 0);
    cr_assert_eq(notes(), 1, "the speculative statement of the second call was rolled back");
    idem_outcome_clear(&a);
    idem_outcome_clear(&b);
}

/* A first attempt on a key that exists writes nothing: on plain PostgreSQL the
 * reservation reads no record (store_sql.c), so the effect's INSERT runs and is rolled
 * back when the record's INSERT finds the key taken (as a declared statement's is),
 * drawing an identity value; on Citus the claim finds the record and makes the void
 * attempt read-only, so the INSERT fails before it draws one. */
Test(first_attempt, a_first_attempt_on_a_key_that_exists_writes_nothing)
{
    idem_outcome out = IDEM_OUTCOME_INIT;

    open_store("first_void");
    cr_assert_eq(call_with(&out, "op-v1", "{\"text\":\"one\"}", 1, note_effect, NULL), 0);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(call_with(&out, "op-v1", "{\"text\":\"one\"}", 1, note_effect, NULL), 0);
        cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    }
    cr_assert_eq(call_with(&out, "op-v2", "{\"text\":\"two\"}", 1, note_effect, NULL), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(notes(), 2);
    cr_assert_eq(pgtest_scalar(check, "SELECT count(*) FROM notes WHERE operation_id = 'op-v1'"), 1,
                 "the three void attempts' notes were rolled back");
    if (pgtest_citus_workers() != NULL)
        cr_assert_eq(pgtest_scalar(check, "SELECT note_id FROM notes WHERE operation_id = 'op-v2'"),
                     2, "the three void attempts drew no identity value");
    idem_outcome_clear(&out);
}

Test(first_attempt, changed_arguments_conflict_and_write_nothing)
{
    idem_outcome out = IDEM_OUTCOME_INIT;

    open_store("first_conflict");
    cr_assert_eq(call_with(&out, "op-c", "{\"text\":\"one\"}", 1, note_effect, NULL), 0);
    cr_assert_eq(call_with(&out, "op-c", "{\"text\":\"two\"}", 1, note_effect, NULL),
                 IDEM_ECONFLICT);
    cr_assert_eq(out.status, IDEM_STATUS_CONFLICT);
    cr_assert_null(out.receipt);
    cr_assert_eq(notes(), 1);
    idem_outcome_clear(&out);
}

Test(first_attempt, a_stored_refusal_answers_rejected)
{
    idem_outcome out = IDEM_OUTCOME_INIT;

    open_store("first_rejected");
    cr_assert_eq(call_with(&out, "op-r", "{\"text\":\"\"}", 1, note_effect, NULL), IDEM_EREJECTED);
    cr_assert_eq(call_with(&out, "op-r", "{\"text\":\"\"}", 1, note_effect, NULL), IDEM_EREJECTED);
    cr_assert_eq(out.status, IDEM_STATUS_REJECTED);
    cr_assert_str_eq(out.receipt, "{\"error\":\"text is required\"}");
    idem_outcome_clear(&out);
}

Test(first_attempt, an_effect_without_statements_replays_instead_of_claiming_to_create)
{
    idem_outcome out = IDEM_OUTCOME_INIT;

    open_store("first_const");
    cr_assert_eq(call_with(&out, "op-k", "{}", 1, constant_effect, NULL), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(call_with(&out, "op-k", "{}", 1, constant_effect, NULL), 0);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_eq(pgtest_scalar(check, "SELECT count(*) FROM idem.operations"), 1);
    idem_outcome_clear(&out);
}

static int runs;

static void *hammer(void *arg)
{
    int *created = arg;

    for (int i = 0; i < 20; i++) {
        idem_outcome out = IDEM_OUTCOME_INIT;
        int rc = 1;
        /* A caller's own retry loop: retry the same key while it is busy. */
        for (unsigned int attempt = 1; attempt <= 50 && rc != 0; attempt++) {
            rc = call_with(&out, "op-hot", "{\"text\":\"hot\"}", attempt, note_effect, &runs);
            if (rc != 0 && out.status != IDEM_STATUS_IN_PROGRESS &&
                out.status != IDEM_STATUS_UNAVAILABLE)
                break;
        }
        cr_assert_eq(rc, 0, "status %s", idem_status_name(out.status));
        if (out.status == IDEM_STATUS_CREATED)
            (*created)++;
        idem_outcome_clear(&out);
    }
    return NULL;
}

Test(first_attempt, many_threads_first_attempting_one_key_create_exactly_one_effect)
{
    pthread_t t[8];
    int created[8] = {0}, total = 0;

    open_store("first_hot");
    for (int i = 0; i < 8; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, hammer, &created[i]), 0);
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        total += created[i];
    }
    cr_assert_eq(total, 1, "exactly one call created (got %d)", total);
    cr_assert_eq(notes(), 1);
    cr_assert_eq(pgtest_scalar(check, "SELECT count(*) FROM idem.operations"), 1);
}

/* Inserts a note into a table whose key is the operation: a second run for the same key
 * fails on that constraint (23505) whatever the effect means by it. */
static int unique_note_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                              idem_error *err)
{
    const char *values[2] = {idem_tx_tenant(tx), idem_tx_operation_id(tx)};
    PGresult *res = NULL;
    int rc = idem_tx_exec(&res, tx,
                          "INSERT INTO unique_notes (tenant, operation_id) VALUES ($1, $2)"
                          " RETURNING operation_id",
                          2, values, err);

    (void)arguments, (void)ctx;
    if (rc != 0)
        return rc;
    *response = json_pack("{s:s}", "noted", PQgetvalue(res, 0, 0));
    PQclear(res);
    return IDEM_EFFECT_OK;
}

/* A first attempt on a key that has a record, whose effect fails because the first
 * attempt's row is there (its own unique constraint): the record answers, a replay, not
 * effect_failed; nothing more is written. */
Test(first_attempt, an_effect_that_fails_on_the_first_attempts_row_still_replays)
{
    idem_outcome a = IDEM_OUTCOME_INIT, b = IDEM_OUTCOME_INIT;

    open_store("first_unique");
    PQclear(pgtest_exec(check, "CREATE TABLE unique_notes (tenant text, operation_id text,"
                               " PRIMARY KEY (tenant, operation_id))"));
    cr_assert_eq(call_with(&a, "op-u", "{}", 1, unique_note_effect, NULL), 0);
    cr_assert_eq(a.status, IDEM_STATUS_CREATED);
    cr_assert_eq(call_with(&b, "op-u", "{}", 1, unique_note_effect, NULL), 0, "status %s",
                 idem_status_name(b.status));
    cr_assert_eq(b.status, IDEM_STATUS_REPLAYED);
    cr_assert_eq(b.receipt_len, a.receipt_len);
    cr_assert_eq(memcmp(a.receipt, b.receipt, a.receipt_len), 0);
    cr_assert_eq(pgtest_scalar(check, "SELECT count(*) FROM unique_notes"), 1);
    cr_assert_eq(pgtest_scalar(check, "SELECT count(*) FROM idem.operations"), 1);
    idem_outcome_clear(&a);
    idem_outcome_clear(&b);
}

/* The fingerprint a call stores, as hex, and the request's own. */
static char *stored_fingerprint(const char *op)
{
    const char *values[1] = {op};
    PGresult *res = PQexecParams(check,
                                 "SELECT encode(fingerprint, 'hex') FROM idem.operations"
                                 " WHERE operation_id = $1",
                                 1, NULL, values, NULL, NULL, 0);
    char *hex;

    cr_assert_eq(PQresultStatus(res), PGRES_TUPLES_OK, "%s", PQerrorMessage(check));
    cr_assert_eq(PQntuples(res), 1, "%s has no record", op);
    hex = strdup(PQgetvalue(res, 0, 0));
    PQclear(res);
    return hex;
}

static void expect_fingerprint(const char *op, const char *args)
{
    idem_fingerprint fp;
    idem_error err = IDEM_ERROR_INIT;
    char hex[IDEM_FINGERPRINT_HEX_SIZE];
    char *stored = stored_fingerprint(op);

    cr_assert_eq(
        idem_fingerprint_compute_text(&fp, "create_note", 1, args, strlen(args), NULL, &err), 0,
        "%s", err.message);
    idem_fingerprint_hex(hex, &fp);
    cr_assert_str_eq(stored, hex, "%s: the record holds another fingerprint than its request's",
                     op);
    free(stored);
}

/* A retry hashes its arguments while its lookup is on the wire (lib/README.md): one whose
 * lookup finds no record goes on to create, and the record holds the request's
 * fingerprint, on the callback path and on the declared one; its retries replay, and a
 * retry with other arguments conflicts. */
Test(first_attempt, a_retry_that_finds_no_record_stores_its_requests_fingerprint)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_declared *declared = NULL;
    const char *params[3] = {"$tenant", "$operation_id", "/text"};
    const char *args = "{\"text\":\"late\"}";
    const char *nested = "{\"text\":\"late\",\"n\":[1,2.50,{\"b\":1,\"a\":null}]}";

    open_store("first_retry_fp");
    cr_assert_eq(call_with(&out, "op-f0", nested, 2, note_effect, NULL), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    expect_fingerprint("op-f0", nested);
    cr_assert_eq(call_with(&out, "op-f1", args, 2, note_effect, NULL), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    expect_fingerprint("op-f1", args);
    cr_assert_eq(call_with(&out, "op-f1", args, 2, note_effect, NULL), 0);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_eq(call_with(&out, "op-f1", "{\"text\":\"other\"}", 2, note_effect, NULL),
                 IDEM_ECONFLICT);
    cr_assert_eq(out.status, IDEM_STATUS_CONFLICT);

    cr_assert_eq(idem_declared_new(&declared,
                                   "INSERT INTO notes (tenant, operation_id, text)"
                                   " VALUES ($1, $2, $3) RETURNING json_build_object('note_id',"
                                   " note_id)",
                                   params, 3, &err),
                 0, "%s", err.message);
    for (int i = 0; i < 3; i++) {
        static const idem_status want[3] = {IDEM_STATUS_CREATED, IDEM_STATUS_REPLAYED,
                                            IDEM_STATUS_CONFLICT};
        idem_request req = note_request("op-f2", i < 2 ? args : "{\"text\":\"other\"}", 2);

        idem_outcome_clear(&out);
        idem_store_execute_declared(&out, store, &req, declared, &err);
        cr_assert_eq(out.status, want[i], "call %d: %s (%s)", i, idem_status_name(out.status),
                     err.message);
        if (i == 0)
            expect_fingerprint("op-f2", args);
    }
    cr_assert_eq(notes(), 3);
    idem_declared_free(declared);
    idem_outcome_clear(&out);
}
