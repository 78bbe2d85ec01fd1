/* The idempotent store against a real PostgreSQL: the seed's seven behaviours and more. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/idem.h"
#include "pgtest.h"
#include "store_internal.h"
#include "support_tasks.h"

static char *conninfo;
static idem_pool *pool;
static idem_store *store;
static PGconn *check; /* a separate connection for counting rows */

/* Generous timeouts: other test binaries load the same two cores meanwhile. */
static idem_pool_options pool_options(unsigned int pool_size)
{
    idem_pool_options popts = IDEM_POOL_OPTIONS_INIT;
    popts.max_size = pool_size;
    popts.acquire_timeout_ms = 30000;
    popts.connect_timeout_ms = 30000;
    return popts;
}

static void open_store(const char *tag, const idem_store_options *opts, unsigned int pool_size)
{
    idem_pool_options popts = pool_options(pool_size);
    idem_error err = IDEM_ERROR_INIT;

    conninfo = pgtest_new_example_database(tag);
    cr_assert_eq(idem_pool_new(&pool, conninfo, &popts, &err), 0, "%s", err.message);
    cr_assert_eq(idem_store_new(&store, pool, opts, &err), 0, "%s", err.message);
    check = pgtest_connect(conninfo);
}

static void close_store(void)
{
    idem_store_free(store);
    idem_pool_free(pool);
    PQfinish(check);
    free(conninfo);
    store = NULL;
    pool = NULL;
}

static long tasks(void)
{
    return pgtest_scalar(check, "SELECT count(*) FROM idem_example.support_tasks");
}

static long operations(void)
{
    return pgtest_scalar(check, "SELECT count(*) FROM idem.operations");
}

static idem_request task_request(const char *tenant, const char *op, const char *args)
{
    idem_request req = IDEM_REQUEST_INIT;
    req.tenant = tenant;
    req.operation_id = op;
    req.tool = EXAMPLE_TOOL_NAME;
    req.payload_version = EXAMPLE_TOOL_VERSION;
    req.arguments = args;
    req.arguments_len = args != NULL ? strlen(args) : 0;
    return req;
}

/* Execute the example tool; returns the code, fills out. */
static int create_task(idem_outcome *out, const char *tenant, const char *op, const char *args,
                       idem_error *err)
{
    idem_request req = task_request(tenant, op, args);
    return idem_store_execute(out, store, &req, example_create_support_task, NULL, err);
}

/* The receipt bytes stored for a key, read directly. */
static char *stored_receipt(const char *tenant, const char *op)
{
    const char *values[2] = {tenant, op};
    PGresult *res = PQexecParams(check,
                                 "SELECT convert_from(response, 'UTF8') FROM idem.operations"
                                 " WHERE tenant = $1 AND operation_id = $2",
                                 2, NULL, values, NULL, NULL, 0);
    cr_assert_eq(PQresultStatus(res), PGRES_TUPLES_OK, "%s", PQresultErrorMessage(res));
    cr_assert_eq(PQntuples(res), 1);
    char *s = strdup(PQgetvalue(res, 0, 0));
    PQclear(res);
    return s;
}

TestSuite(store, .fini = close_store, .timeout = 240);

/* 1 */
Test(store, lost_response_retry_through_new_connection_returns_same_receipt)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    open_store("lost", NULL, 2);

    idem__store_inject_fault(store, IDEM__FAULT_REPLY_LOST_AFTER_COMMIT, 1);
    int rc =
        create_task(&out, "acme", "op-lost-1", "{\"subject\":\"Check delayed delivery\"}", &err);
    cr_assert_eq(rc, IDEM_EUNAVAIL);
    cr_assert_eq(out.status, IDEM_STATUS_UNAVAILABLE);
    cr_assert_null(out.receipt);
    cr_assert_eq(tasks(), 1);
    cr_assert_eq(operations(), 1);

    /* The retry comes through a brand-new pool, so a new connection. */
    idem_store_free(store);
    idem_pool_free(pool);
    idem_pool_options popts = pool_options(1);
    cr_assert_eq(idem_pool_new(&pool, conninfo, &popts, &err), 0, "%s", err.message);
    cr_assert_eq(idem_store_new(&store, pool, NULL, &err), 0);
    rc = create_task(&out, "acme", "op-lost-1", "{\"subject\":\"Check delayed delivery\"}", &err);
    cr_assert_eq(rc, 0, "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_str_eq(out.receipt, "{\"status\":\"created\",\"task_id\":1}");
    char *stored = stored_receipt("acme", "op-lost-1");
    cr_assert_eq(out.receipt_len, strlen(stored));
    cr_assert_eq(memcmp(out.receipt, stored, out.receipt_len), 0);
    free(stored);
    cr_assert_eq(tasks(), 1);
    cr_assert_eq(operations(), 1);
    idem_outcome_clear(&out);
}

/* 2 */
Test(store, rollback_before_commit_stores_nothing_and_retry_creates_one_task)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    open_store("rollback", NULL, 2);

    idem__store_inject_fault(store, IDEM__FAULT_FAIL_BEFORE_COMMIT, 1);
    cr_assert_eq(create_task(&out, "acme", "op-rb", "{\"subject\":\"s\"}", &err), IDEM_EUNAVAIL);
    cr_assert_eq(tasks(), 0);
    cr_assert_eq(operations(), 0);
    cr_assert_eq(create_task(&out, "acme", "op-rb", "{\"subject\":\"s\"}", &err), 0, "%s",
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(tasks(), 1);
    cr_assert_eq(operations(), 1);
    idem_outcome_clear(&out);
}

/* 3 */
Test(store, changed_arguments_under_same_key_conflict_and_write_nothing)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    open_store("conflict", NULL, 2);

    cr_assert_eq(create_task(&out, "acme", "op-c", "{\"subject\":\"first\"}", &err), 0);
    idem_outcome_clear(&out);
    cr_assert_eq(create_task(&out, "acme", "op-c", "{\"subject\":\"second\"}", &err),
                 IDEM_ECONFLICT);
    cr_assert_eq(out.status, IDEM_STATUS_CONFLICT);
    cr_assert_null(out.receipt, "a conflict never reveals the stored receipt");
    cr_assert_str_eq(err.field, "arguments");
    cr_assert(strstr(err.message, "different arguments") != NULL, "%s", err.message);

    /* Another tool name or payload version under the same key is changed intent too. */
    idem_request req = task_request("acme", "op-c", "{\"subject\":\"first\"}");
    req.payload_version = 2;
    cr_assert_eq(idem_store_execute(&out, store, &req, example_create_support_task, NULL, &err),
                 IDEM_ECONFLICT);
    req.payload_version = 1;
    req.tool = "create_support_ticket";
    cr_assert_eq(idem_store_execute(&out, store, &req, example_create_support_task, NULL, &err),
                 IDEM_ECONFLICT);
    cr_assert_eq(tasks(), 1);
    cr_assert_eq(operations(), 1);

    /* Key order and whitespace are not changed intent. */
    cr_assert_eq(create_task(&out, "acme", "op-c", " { \"subject\" : \"first\" } ", &err), 0);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    idem_outcome_clear(&out);
}

/* 4 */
Test(store, two_intents_with_the_same_subject_create_two_tasks)
{
    idem_outcome a = IDEM_OUTCOME_INIT, b = IDEM_OUTCOME_INIT;
    open_store("intents", NULL, 2);

    cr_assert_eq(create_task(&a, "acme", "op-1", "{\"subject\":\"Refund\"}", NULL), 0);
    cr_assert_eq(create_task(&b, "acme", "op-2", "{\"subject\":\"Refund\"}", NULL), 0);
    cr_assert_eq(a.status, IDEM_STATUS_CREATED);
    cr_assert_eq(b.status, IDEM_STATUS_CREATED);
    cr_assert_str_neq(a.receipt, b.receipt);
    cr_assert_eq(tasks(), 2);
    idem_outcome_clear(&a);
    idem_outcome_clear(&b);
}

/* 5 */
Test(store, same_operation_id_in_two_tenants_is_two_independent_keys)
{
    idem_outcome a = IDEM_OUTCOME_INIT, b = IDEM_OUTCOME_INIT;
    idem_operation *op = NULL;
    idem_error err = IDEM_ERROR_INIT;
    open_store("tenants", NULL, 2);

    cr_assert_eq(create_task(&a, "tenant-a", "shared-id", "{\"subject\":\"A's task\"}", NULL), 0);
    /* B cannot read A's record ... */
    cr_assert_eq(idem_store_get(&op, store, "tenant-b", "shared-id", &err), IDEM_ENOTFOUND);
    cr_assert_null(op);
    /* ... nor replay A's result, even with A's exact arguments: it gets its own effect. */
    cr_assert_eq(create_task(&b, "tenant-b", "shared-id", "{\"subject\":\"A's task\"}", NULL), 0);
    cr_assert_eq(b.status, IDEM_STATUS_CREATED);
    cr_assert_str_neq(a.receipt, b.receipt);
    idem_outcome_clear(&b);
    /* Different arguments in B are no conflict with A either. */
    cr_assert_eq(create_task(&b, "tenant-c", "shared-id", "{\"subject\":\"other\"}", NULL), 0);
    cr_assert_eq(b.status, IDEM_STATUS_CREATED);
    cr_assert_eq(tasks(), 3);
    cr_assert_eq(pgtest_scalar(check, "SELECT count(*) FROM idem_example.support_tasks"
                                      " WHERE tenant = 'tenant-a'"),
                 1);
    cr_assert_eq(idem_store_get(&op, store, "tenant-a", "shared-id", &err), 0, "%s", err.message);
    cr_assert_str_eq(idem_operation_tenant(op), "tenant-a");
    cr_assert_str_eq(idem_operation_receipt(op, NULL), a.receipt);
    idem_operation_free(op);
    idem_outcome_clear(&a);
    idem_outcome_clear(&b);
}

/* 6 */
struct bad_input {
    const char *tenant, *op, *tool;
    int version;
    const char *args;
    size_t args_len; /* 0: strlen */
    const char *trace;
    const char *field;
};

Test(store, invalid_input_names_the_field_and_writes_nothing)
{
    static char long_tenant[66], long_op[130], long_tool[66], long_trace[258];
    memset(long_tenant, 't', 65);
    memset(long_op, 'o', 129);
    memset(long_tool, 'x', 65);
    memset(long_trace, 'r', 257);
    const char *ok = "{\"subject\":\"s\"}";
    const char *T = EXAMPLE_TOOL_NAME;
    struct bad_input cases[] = {
        {NULL, "op", T, 1, ok, 0, NULL, "tenant"},
        {"", "op", T, 1, ok, 0, NULL, "tenant"},
        {long_tenant, "op", T, 1, ok, 0, NULL, "tenant"},
        {"acme corp", "op", T, 1, ok, 0, NULL, "tenant"},
        {"acm\xc3\xa9", "op", T, 1, ok, 0, NULL, "tenant"},
        {"acme\xff", "op", T, 1, ok, 0, NULL, "tenant"},
        {"acme", NULL, T, 1, ok, 0, NULL, "operation_id"},
        {"acme", "", T, 1, ok, 0, NULL, "operation_id"},
        {"acme", "op 1", T, 1, ok, 0, NULL, "operation_id"},
        {"acme", long_op, T, 1, ok, 0, NULL, "operation_id"},
        {"acme", "op\n", T, 1, ok, 0, NULL, "operation_id"},
        {"acme", "op", NULL, 1, ok, 0, NULL, "tool"},
        {"acme", "op", "", 1, ok, 0, NULL, "tool"},
        {"acme", "op", "Create", 1, ok, 0, NULL, "tool"},
        {"acme", "op", long_tool, 1, ok, 0, NULL, "tool"},
        {"acme", "op", T, 0, ok, 0, NULL, "payload_version"},
        {"acme", "op", T, -3, ok, 0, NULL, "payload_version"},
        {"acme", "op", T, 1, NULL, 0, NULL, "arguments"},
        {"acme", "op", T, 1, "", 0, NULL, "arguments"},
        {"acme", "op", T, 1, "{", 0, NULL, "arguments"},
        {"acme", "op", T, 1, "not json", 0, NULL, "arguments"},
        {"acme", "op", T, 1, "{\"subject\":\"s\"} trailing", 0, NULL, "arguments"},
        {"acme", "op", T, 1, "{\"a\":1,\"a\":2}", 0, NULL, "arguments"},
        {"acme", "op", T, 1, "{\"a\":NaN}", 0, NULL, "arguments"},
        {"acme", "op", T, 1, "{\"a\":1e999}", 0, NULL, "arguments"},
        {"acme", "op", T, 1, "{\"a\":\"\xff\"}", 0, NULL, "arguments"},
        {"acme", "op", T, 1, "{\"a\":\"\\ud800\"}", 0, NULL, "arguments"},
        {"acme", "op", T, 1, "{\"a\":\"x\"}\0{}", 12, NULL, "arguments"},
        {"acme", "op", T, 1, ok, 0, long_trace, "trace_id"},
        {"acme", "op", T, 1, ok, 0, "", "trace_id"},
    };
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_store_options opts = IDEM_STORE_OPTIONS_INIT;
    opts.max_arguments_bytes = 4096;
    open_store("invalid", &opts, 1);

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        idem_error err = IDEM_ERROR_INIT;
        idem_request req = IDEM_REQUEST_INIT;
        req.tenant = cases[i].tenant;
        req.operation_id = cases[i].op;
        req.tool = cases[i].tool;
        req.payload_version = cases[i].version;
        req.arguments = cases[i].args;
        req.arguments_len =
            cases[i].args_len ? cases[i].args_len : (cases[i].args ? strlen(cases[i].args) : 0);
        req.trace_id = cases[i].trace;
        int rc = idem_store_execute(&out, store, &req, example_create_support_task, NULL, &err);
        cr_assert_eq(rc, IDEM_EINVAL, "case %zu: rc %d (%s)", i, rc, err.message);
        cr_assert_eq(out.status, IDEM_STATUS_INVALID, "case %zu", i);
        cr_assert_str_eq(err.field, cases[i].field, "case %zu: field '%s' (%s)", i, err.field,
                         err.message);
        cr_assert(strncmp(err.message, cases[i].field, strlen(cases[i].field)) == 0,
                  "case %zu: message should start with the field: %s", i, err.message);
        cr_assert_null(out.receipt);
    }
    /* A huge payload is refused before parsing, naming the limit. */
    char *huge = malloc(8192);
    memset(huge, ' ', 8191);
    huge[0] = '[';
    huge[8190] = ']';
    huge[8191] = '\0';
    idem_error err = IDEM_ERROR_INIT;
    cr_assert_eq(create_task(&out, "acme", "op", huge, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "arguments");
    cr_assert(strstr(err.message, "limit") != NULL, "%s", err.message);
    free(huge);
    /* NULL store or out. */
    idem_request req = task_request("acme", "op", ok);
    cr_assert_eq(idem_store_execute(NULL, store, &req, example_create_support_task, NULL, NULL),
                 IDEM_EINVAL);
    cr_assert_eq(idem_store_execute(&out, store, NULL, example_create_support_task, NULL, &err),
                 IDEM_EINVAL);
    cr_assert_str_eq(err.field, "request");
    cr_assert_eq(idem_store_execute(&out, store, &req, NULL, NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "effect");
    cr_assert_eq(tasks(), 0);
    cr_assert_eq(operations(), 0);
    idem_store_stats st;
    idem_store_stats_get(&st, store);
    cr_assert_geq(st.invalid, sizeof(cases) / sizeof(cases[0]));
}

/* 7 */
struct worker {
    pthread_t thread;
    int first_key, keys, calls;
    int created, replayed, bad;
    char receipts[100][64]; /* receipt seen per key (index key - first_key) */
    int mismatch;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < w->calls; i++) {
        int k = w->keys == 1 ? 0 : (i * 7 + w->first_key) % w->keys;
        char op[32], args[64];
        idem_outcome out = IDEM_OUTCOME_INIT;
        idem_retry_policy policy = IDEM_RETRY_POLICY_INIT;
        idem_retry_state st;
        unsigned int delay;
        snprintf(op, sizeof(op), "key-%d", k);
        snprintf(args, sizeof(args), "{\"subject\":\"task for key %d\"}", k);
        idem_retry_state_init(&st);
        for (;;) {
            idem_outcome_clear(&out);
            create_task(&out, "load", op, args, NULL);
            if (!idem_retry_next(&delay, &st, &policy, NULL, out.status))
                break;
            struct timespec ts = {0, (long)delay * 1000000L};
            nanosleep(&ts, NULL);
        }
        if (out.status == IDEM_STATUS_CREATED)
            w->created++;
        else if (out.status == IDEM_STATUS_REPLAYED)
            w->replayed++;
        else
            w->bad++;
        if (out.receipt != NULL) {
            if (w->receipts[k][0] == '\0')
                snprintf(w->receipts[k], sizeof(w->receipts[k]), "%s", out.receipt);
            else if (strcmp(w->receipts[k], out.receipt) != 0)
                w->mismatch++;
        }
        idem_outcome_clear(&out);
    }
    return NULL;
}

static void run_workers(int threads, int calls, int keys)
{
    struct worker *w = calloc((size_t)threads, sizeof(*w));
    for (int t = 0; t < threads; t++) {
        w[t].first_key = t;
        w[t].keys = keys;
        w[t].calls = calls;
        cr_assert_eq(pthread_create(&w[t].thread, NULL, worker_main, &w[t]), 0);
    }
    int created = 0, replayed = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(w[t].thread, NULL);
        cr_assert_eq(w[t].bad, 0, "thread %d got %d calls that were neither created nor replayed",
                     t, w[t].bad);
        cr_assert_eq(w[t].mismatch, 0, "thread %d saw two receipts for one key", t);
        created += w[t].created;
        replayed += w[t].replayed;
    }
    cr_assert_eq(created, keys, "one creation per key: %d for %d keys", created, keys);
    cr_assert_eq(created + replayed, threads * calls);
    /* Every caller's receipt for a key is the key's stored receipt. */
    for (int k = 0; k < keys; k++) {
        char op[32];
        snprintf(op, sizeof(op), "key-%d", k);
        char *stored = stored_receipt("load", op);
        for (int t = 0; t < threads; t++)
            if (w[t].receipts[k][0] != '\0')
                cr_assert_str_eq(w[t].receipts[k], stored, "thread %d key %d", t, k);
        free(stored);
    }
    free(w);
    cr_assert_eq(tasks(), keys);
    cr_assert_eq(operations(), keys);
}

Test(store, sixteen_calls_from_eight_threads_on_one_key_make_one_task)
{
    open_store("conc8", NULL, 8);
    run_workers(8, 2, 1);
}

Test(store, many_threads_over_a_hundred_keys_make_exactly_a_hundred_tasks, .timeout = 600)
{
    int calls = getenv("IDEM_TEST_LIGHT") != NULL ? 200 : 2000;
    open_store("conc64", NULL, 16);
    run_workers(64, calls, 100);
    idem_store_stats st;
    idem_store_stats_get(&st, store);
    cr_assert_eq(st.created, 100);
}

/* 8 */
struct flaky {
    int runs;
    int failures; /* raise a serialization failure this many times, -1 forever */
};

static int flaky_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                        idem_error *err)
{
    struct flaky *f = ctx;
    PGresult *res = NULL;
    f->runs++;
    if (f->failures < 0 || f->runs <= f->failures) {
        int rc = idem_tx_exec(&res, tx,
                              "DO $$BEGIN RAISE EXCEPTION 'forced' USING ERRCODE = "
                              "'serialization_failure'; END$$",
                              0, NULL, err);
        cr_assert_neq(rc, 0);
        return rc;
    }
    return example_create_support_task(response, tx, arguments, NULL, err);
}

Test(store, serialization_failures_are_retried_and_the_effect_commits_once)
{
    struct flaky f = {0, 2};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = task_request("acme", "op-flaky", "{\"subject\":\"s\"}");
    open_store("serial", NULL, 1);

    cr_assert_eq(idem_store_execute(&out, store, &req, flaky_effect, &f, &err), 0, "%s",
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(out.attempts, 3);
    cr_assert_eq(f.runs, 3);
    idem_store_stats st;
    idem_store_stats_get(&st, store);
    cr_assert_eq(st.serialization_retries, 2);
    cr_assert_eq(tasks(), 1);
    idem_pool_stats ps;
    idem_pool_stats_get(&ps, pool);
    cr_assert_eq(ps.opened, 1, "a serialization failure keeps the connection (%llu opened)",
                 ps.opened);
    idem_outcome_clear(&out);
}

Test(store, serialization_retries_stop_at_the_attempt_cap)
{
    struct flaky f = {0, -1};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_store_options opts = IDEM_STORE_OPTIONS_INIT;
    opts.max_attempts = 4;
    opts.deadline_ms = 600000;
    idem_request req = task_request("acme", "op-cap", "{\"subject\":\"s\"}");
    open_store("cap", &opts, 1);

    cr_assert_eq(idem_store_execute(&out, store, &req, flaky_effect, &f, &err), IDEM_EUNAVAIL);
    cr_assert_eq(out.status, IDEM_STATUS_UNAVAILABLE);
    cr_assert_eq(f.runs, 4);
    cr_assert_eq(out.attempts, 4);
    cr_assert(strstr(err.message, "retries spent") != NULL, "%s", err.message);
    cr_assert_eq(operations(), 0);
    cr_assert_eq(tasks(), 0);
}

Test(store, serialization_retries_stop_at_the_deadline)
{
    struct flaky f = {0, -1};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_store_options opts = IDEM_STORE_OPTIONS_INIT;
    opts.max_attempts = 100000;
    opts.deadline_ms = 200;
    opts.backoff_base_ms = 50;
    opts.backoff_max_ms = 50;
    idem_request req = task_request("acme", "op-deadline", "{\"subject\":\"s\"}");
    open_store("deadline", &opts, 1);

    cr_assert_eq(idem_store_execute(&out, store, &req, flaky_effect, &f, &err), IDEM_EUNAVAIL);
    cr_assert_eq(out.status, IDEM_STATUS_UNAVAILABLE);
    /* Backoffs average 25 ms against a 200 ms deadline: far fewer than the cap. */
    cr_assert_lt(f.runs, 1000, "the deadline, not the cap, ended it (%d runs)", f.runs);
    cr_assert(strstr(err.message, "retries spent") != NULL, "%s", err.message);
    cr_assert_eq(operations(), 0);
}

/* 9 */
struct counting {
    int runs;
};

static int counting_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                           idem_error *err)
{
    ((struct counting *)ctx)->runs++;
    return example_create_support_task(response, tx, arguments, NULL, err);
}

Test(store, connection_dropped_before_commit_reaches_server_is_retried_cleanly)
{
    struct counting cnt = {0};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = task_request("acme", "op-drop-before", "{\"subject\":\"s\"}");
    open_store("dropb", NULL, 2);

    idem__store_inject_fault(store, IDEM__FAULT_DROP_BEFORE_COMMIT, 1);
    cr_assert_eq(idem_store_execute(&out, store, &req, counting_effect, &cnt, &err), 0, "%s",
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(cnt.runs, 2, "the first run was rolled back, the second committed");
    idem_store_stats st;
    idem_store_stats_get(&st, store);
    cr_assert_eq(st.ambiguous_commits, 1);
    cr_assert_eq(tasks(), 1);
    cr_assert_eq(operations(), 1);
    char *stored = stored_receipt("acme", "op-drop-before");
    cr_assert_str_eq(out.receipt, stored);
    free(stored);
    idem_outcome_clear(&out);
}

Test(store, connection_dropped_after_commit_was_sent_resolves_to_created)
{
    struct counting cnt = {0};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = task_request("acme", "op-drop-during", "{\"subject\":\"s\"}");
    open_store("dropd", NULL, 2);

    idem__store_inject_fault(store, IDEM__FAULT_DROP_DURING_COMMIT, 1);
    cr_assert_eq(idem_store_execute(&out, store, &req, counting_effect, &cnt, &err), 0, "%s",
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED,
                 "this call's own commit, found on a fresh connection: %s",
                 idem_status_name(out.status));
    cr_assert_eq(cnt.runs, 1, "the effect committed once and never ran again");
    idem_store_stats st;
    idem_store_stats_get(&st, store);
    cr_assert_eq(st.ambiguous_commits, 1);
    cr_assert_eq(tasks(), 1);
    char *stored = stored_receipt("acme", "op-drop-during");
    cr_assert_str_eq(out.receipt, stored);
    free(stored);
    idem_outcome_clear(&out);
}

/* 10 */
Test(store, final_failure_response_is_stored_and_replayed)
{
    idem_outcome out = IDEM_OUTCOME_INIT, again = IDEM_OUTCOME_INIT;
    open_store("final", NULL, 1);

    cr_assert_eq(create_task(&out, "acme", "op-final", "{\"subject\":\"\"}", NULL), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(out.failed, 1);
    cr_assert(strstr(out.receipt, "\"status\":\"rejected\"") != NULL, "%s", out.receipt);
    cr_assert_eq(create_task(&again, "acme", "op-final", "{\"subject\":\"\"}", NULL), 0);
    cr_assert_eq(again.status, IDEM_STATUS_REPLAYED);
    cr_assert_eq(again.failed, 1);
    cr_assert_str_eq(again.receipt, out.receipt);
    cr_assert_eq(tasks(), 0);
    cr_assert_eq(
        pgtest_scalar(check, "SELECT count(*) FROM idem.operations WHERE state = 'failed'"), 1);
    idem_outcome_clear(&out);
    idem_outcome_clear(&again);
}

static int transient_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                            idem_error *err)
{
    PGresult *res = NULL;
    ((struct counting *)ctx)->runs++;
    /* Write something, then fail: the write must not survive. */
    if (idem_tx_exec(&res, tx,
                     "INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)"
                     " VALUES ('acme', 'half', 'x')",
                     0, NULL, err) == 0)
        PQclear(res);
    snprintf(err->message, sizeof(err->message), "ticket system refused: try later");
    return IDEM_EEFFECT;
}

Test(store, transient_effect_error_stores_nothing_and_runs_again_next_time)
{
    struct counting cnt = {0};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = task_request("acme", "op-transient", "{\"subject\":\"s\"}");
    open_store("transient", NULL, 1);

    cr_assert_eq(idem_store_execute(&out, store, &req, transient_effect, &cnt, &err), IDEM_EEFFECT);
    cr_assert_eq(out.status, IDEM_STATUS_EFFECT_FAILED);
    cr_assert_str_eq(err.message, "ticket system refused: try later");
    cr_assert_eq(idem_status_next_step(out.status), IDEM_NEXT_RETURN_TO_CALLER);
    cr_assert_eq(tasks(), 0);
    cr_assert_eq(operations(), 0);
    cr_assert_eq(idem_store_execute(&out, store, &req, transient_effect, &cnt, &err), IDEM_EEFFECT);
    cr_assert_eq(cnt.runs, 2);
    cr_assert_eq(idem_store_execute(&out, store, &req, counting_effect, &cnt, &err), 0);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(tasks(), 1);
    idem_outcome_clear(&out);
}

/* Records and current state. */
Test(store, get_returns_the_record_with_its_receipt_and_trace_id)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_operation *op = NULL;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = task_request("acme", "op-get", "{\"subject\":\"s\"}");
    req.trace_id = "call_abc123";
    open_store("get", NULL, 1);

    cr_assert_eq(idem_store_execute(&out, store, &req, example_create_support_task, NULL, &err), 0);
    cr_assert_eq(idem_store_get(&op, store, "acme", "op-get", &err), 0, "%s", err.message);
    cr_assert_str_eq(idem_operation_id(op), "op-get");
    cr_assert_str_eq(idem_operation_tool(op), EXAMPLE_TOOL_NAME);
    cr_assert_eq(idem_operation_payload_version(op), 1);
    cr_assert_str_eq(idem_operation_state(op), "completed");
    cr_assert_str_eq(idem_operation_trace_id(op), "call_abc123");
    size_t len = 0;
    const char *r = idem_operation_receipt(op, &len);
    cr_assert_eq(len, out.receipt_len);
    cr_assert_eq(memcmp(r, out.receipt, len), 0);
    idem_fingerprint fp;
    cr_assert_eq(idem_fingerprint_compute_text(&fp, EXAMPLE_TOOL_NAME, 1, req.arguments,
                                               req.arguments_len, NULL, NULL),
                 0);
    cr_assert_eq(memcmp(idem_operation_fingerprint(op)->bytes, fp.bytes, sizeof(fp.bytes)), 0);
    cr_assert_gt(idem_operation_created_at(op), 1700000000LL * 1000000);
    cr_assert_geq(idem_operation_completed_at(op), idem_operation_created_at(op));
    int64_t week = 604800LL * 1000000;
    int64_t window = idem_operation_expires_at(op) - idem_operation_created_at(op);
    cr_assert(window >= week - 1000000 && window <= week + 1000000, "window %lld",
              (long long)window);
    idem_operation_free(op);
    idem_outcome_clear(&out);
    /* A retry's trace ID is not the key: another tool-call ID still replays. */
    req.trace_id = "call_other";
    cr_assert_eq(idem_store_execute(&out, store, &req, example_create_support_task, NULL, &err), 0);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_eq(idem_store_get(&op, store, "acme", "op-missing", &err), IDEM_ENOTFOUND);
    cr_assert_eq(idem_store_get(&op, store, "bad tenant", "op-get", &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "tenant");
    idem_outcome_clear(&out);
}

Test(store, receipt_is_what_happened_not_the_current_state)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char status[16];
    open_store("receipt", NULL, 1);

    cr_assert_eq(create_task(&out, "acme", "op-r", "{\"subject\":\"s\"}", &err), 0);
    json_t *receipt = json_loads(out.receipt, 0, NULL);
    long long task_id = json_integer_value(json_object_get(receipt, "task_id"));
    json_decref(receipt);
    cr_assert_eq(example_support_task_close(pool, "acme", task_id, &err), 0, "%s", err.message);
    cr_assert_eq(example_support_task_status(status, sizeof(status), pool, "acme", task_id, &err),
                 0);
    cr_assert_str_eq(status, "closed");
    char *first = strdup(out.receipt);
    idem_outcome_clear(&out);
    cr_assert_eq(create_task(&out, "acme", "op-r", "{\"subject\":\"s\"}", &err), 0);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_str_eq(out.receipt, first, "the replay is the original receipt");
    cr_assert_eq(tasks(), 1, "no replacement task");
    /* Another tenant cannot see the task's state either. */
    cr_assert_eq(example_support_task_status(status, sizeof(status), pool, "other", task_id, &err),
                 IDEM_ENOTFOUND);
    free(first);
    idem_outcome_clear(&out);
}

static int constant_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                           idem_error *err)
{
    ((struct counting *)ctx)->runs++;
    *response = json_pack("{s:s}", "status", "noted");
    return IDEM_EFFECT_OK;
}

Test(store, effect_that_runs_no_statement_still_commits_its_record_once)
{
    struct counting cnt = {0};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = task_request("acme", "op-const", "{\"note\":true}");
    open_store("const", NULL, 1);

    cr_assert_eq(idem_store_execute(&out, store, &req, constant_effect, &cnt, &err), 0, "%s",
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_str_eq(out.receipt, "{\"status\":\"noted\"}");
    idem_outcome_clear(&out);
    cr_assert_eq(idem_store_execute(&out, store, &req, constant_effect, &cnt, &err), 0);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_eq(cnt.runs, 1);
    cr_assert_eq(operations(), 1);
    idem_outcome_clear(&out);
}

static int two_statement_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                                idem_error *err)
{
    const char *values[2] = {idem_tx_tenant(tx), idem_tx_operation_id(tx)};
    const char *sql = "INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)"
                      " VALUES ($1, 'part', $2) RETURNING task_id";
    PGresult *a = NULL, *b = NULL;
    int rc = idem_tx_exec(&a, tx, sql, 2, values, err);
    if (rc == 0)
        rc = idem_tx_exec(&b, tx, sql, 2, values, err);
    if (rc == 0)
        *response =
            json_pack("{s:s,s:s}", "first", PQgetvalue(a, 0, 0), "second", PQgetvalue(b, 0, 0));
    PQclear(a);
    PQclear(b);
    return rc;
}

Test(store, effect_with_several_statements_commits_them_all_with_the_record)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = task_request("acme", "op-two", "{}");
    open_store("two", NULL, 1);

    cr_assert_eq(idem_store_execute(&out, store, &req, two_statement_effect, NULL, &err), 0, "%s",
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(tasks(), 2);
    cr_assert_eq(pgtest_scalar(check, "SELECT count(*) FROM idem_example.support_tasks"
                                      " WHERE operation_id = 'op-two'"),
                 2);
    idem_outcome_clear(&out);
}

static int failing_sql_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                              idem_error *err)
{
    PGresult *res = NULL;
    /* A constraint violation in the effect's own statement is the effect's failure. */
    return idem_tx_exec(&res, tx,
                        "INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)"
                        " VALUES ('acme', '', 'x')",
                        0, NULL, err);
}

Test(store, effect_statement_error_is_effect_failed_with_sqlstate_and_nothing_stored)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = task_request("acme", "op-sqlfail", "{}");
    open_store("sqlfail", NULL, 1);

    cr_assert_eq(idem_store_execute(&out, store, &req, failing_sql_effect, NULL, &err),
                 IDEM_EEFFECT);
    cr_assert_eq(out.status, IDEM_STATUS_EFFECT_FAILED);
    cr_assert_str_eq(err.sqlstate, "23514", "check_violation, got '%s' (%s)", err.sqlstate,
                     err.message);
    cr_assert(strstr(err.message, "support_tasks_subject_length") != NULL, "%s", err.message);
    cr_assert_eq(operations(), 0);
    cr_assert_eq(tasks(), 0);
    /* The pool's connection is clean for the next call. */
    cr_assert_eq(create_task(&out, "acme", "op-after", "{\"subject\":\"s\"}", &err), 0, "%s",
                 err.message);
    idem_outcome_clear(&out);
}

/* The effect commits the same key through another connection just before its first
 * statement, which then fails: the claim lost, so the call answers from the record. */
struct racer {
    const char *args;
    const char *statement;
};

static int racing_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                         idem_error *err)
{
    struct racer *r = ctx;
    idem_fingerprint fp;
    cr_assert_eq(idem_fingerprint_compute_text(&fp, EXAMPLE_TOOL_NAME, 1, r->args, strlen(r->args),
                                               NULL, NULL),
                 0);
    const char *values[3] = {idem_tx_tenant(tx), idem_tx_operation_id(tx), (const char *)fp.bytes};
    int lengths[3] = {0, 0, 32}, formats[3] = {0, 0, 1};
    PGresult *res = PQexecParams(
        check,
        "INSERT INTO idem.operations (tenant, operation_id, tool, payload_version, fingerprint,"
        " state, response, claim_token, completed_at, expires_at) VALUES ($1, $2,"
        " 'create_support_task', 1, $3, 'completed', '{\"winner\":true}', gen_random_uuid(),"
        " now(), now() + interval '1 day')",
        3, NULL, values, lengths, formats, 0);
    cr_assert_eq(PQresultStatus(res), PGRES_COMMAND_OK, "%s", PQresultErrorMessage(res));
    PQclear(res);
    res = NULL;
    int rc = idem_tx_exec(&res, tx, r->statement, 0, NULL, err);
    PQclear(res);
    if (rc != 0)
        return rc;
    *response = json_pack("{s:b}", "winner", 0);
    return IDEM_EFFECT_OK;
}

Test(store, claim_lost_to_a_concurrent_commit_answers_from_the_record_even_if_the_statement_failed)
{
    struct racer r = {"{\"subject\":\"race\"}", "SELECT 1/0"};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = task_request("acme", "op-race", r.args);
    open_store("race", NULL, 1);

    cr_assert_eq(idem_store_execute(&out, store, &req, racing_effect, &r, &err), 0, "%s (%s)",
                 err.message, idem_status_name(out.status));
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    cr_assert_str_eq(out.receipt, "{\"winner\":true}");
    cr_assert_str_empty(err.message, "no stale message on success: %s", err.message);
    idem_store_stats st;
    idem_store_stats_get(&st, store);
    cr_assert_eq(st.claim_races, 1);
    cr_assert_eq(operations(), 1);
    idem_outcome_clear(&out);
}

static int ending_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                         idem_error *err)
{
    PGresult *res = NULL;
    int *codes = ctx;
    codes[0] = idem_tx_exec(&res, tx, codes[2] ? "COMMIT" : "ROLLBACK", 0, NULL, err);
    PQclear(res);
    res = NULL;
    codes[1] = idem_tx_exec(&res, tx,
                            "INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)"
                            " VALUES ('acme', 'after', 'x')",
                            0, NULL, err);
    PQclear(res);
    *response = json_pack("{s:s}", "status", "created");
    return IDEM_EFFECT_OK; /* ignores the errors: the store must not */
}

static void check_ending_effect(const char *tag, int commit)
{
    int codes[3] = {0, 0, commit};
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = task_request("acme", "op-end", "{}");
    open_store(tag, NULL, 1);

    cr_assert_eq(idem_store_execute(&out, store, &req, ending_effect, codes, &err), IDEM_EEFFECT,
                 "%s", err.message);
    cr_assert_eq(out.status, IDEM_STATUS_EFFECT_FAILED);
    cr_assert(strstr(err.message, "ended the transaction") != NULL, "%s", err.message);
    cr_assert_eq(codes[0], IDEM_EINVAL, "the ending statement is reported to the effect");
    cr_assert_eq(codes[1], IDEM_EINVAL, "nothing runs after it");
    cr_assert_eq(tasks(), 0);
    cr_assert_eq(operations(), 0, "no record, pending or not, is left for the key");
    idem_outcome_clear(&out);
}

Test(store, effect_that_rolls_back_by_itself_is_refused_and_nothing_is_stored)
{
    check_ending_effect("endrb", 0);
}

Test(store, effect_that_commits_by_itself_is_refused_and_its_claim_is_taken_back)
{
    check_ending_effect("endc", 1);
}
