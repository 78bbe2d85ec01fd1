/* idem-gateway's call layer (gw_run_call(), call.h) against the throwaway PostgreSQL, without
 * a network: each outcome a sql tool's call can end in, made for real (created, replayed,
 * conflict, invalid arguments, invalid key, expired, effect_failed, misconfigured,
 * in_progress, outcome_unknown, rejected, unavailable), what it left in the database, and
 * how both adapters answer it (http_api.h, mcp.h), as its row of the answer table
 * (answer.h) says; and a call through each adapter's own entry point (gw_call(),
 * gw_mcp_handle()) from the request to the wire. */
#include <criterion/criterion.h>
#include <idem/sys/external.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "call.h"
#include "config.h"
#include "http_api.h"
#include "mcp.h"
#include "pgtest.h"
#include "run.h"

#define DIGEST_A "00000000000000000000000000000000000000000000000000000000000000aa"
#define DIGEST_B "00000000000000000000000000000000000000000000000000000000000000bb"
/* A UUIDv7 from 2019: older than any tool's key memory here. */
#define OLD_KEY "016e0000-0000-7000-8000-000000000001"

static const char app_sql[] =
    "CREATE SCHEMA app;"
    "CREATE TABLE app.notes (id bigserial PRIMARY KEY, tenant text NOT NULL,"
    "  text text NOT NULL, operation_id text NOT NULL);"
    "CREATE TABLE app.counters (id int PRIMARY KEY, n int NOT NULL);"
    "INSERT INTO app.counters VALUES (1, 0);"
    "CREATE TABLE app.secrets (id int);"
    "GRANT USAGE ON SCHEMA app TO " PGTEST_APP ";"
    "GRANT SELECT, INSERT, UPDATE ON app.notes, app.counters TO " PGTEST_APP ";"
    "GRANT USAGE ON ALL SEQUENCES IN SCHEMA app TO " PGTEST_APP;

static const char config_fmt[] =
    "{\"http\": {\"address\": \"127.0.0.1\", \"port\": 0, \"retry_after_s\": 7},"
    " \"database\": {\"dsn\": \"%s\", \"deadline_ms\": 120000, \"acquire_timeout_ms\": 120000},"
    " \"tenants\": {\"acme\": {\"tokens\": [\"" DIGEST_A "\"]},"
    "   \"beta\": {\"tokens\": [\"" DIGEST_B "\"]}},"
    " \"tools\": {"
    "  \"create_note\": {\"retention_s\": 3600, \"key_memory_s\": 86400,"
    "   \"arguments\": {\"type\": \"object\", \"required\": [\"text\"],"
    "     \"properties\": {\"text\": {\"type\": \"string\", \"minLength\": 1}}},"
    "   \"sql\": {\"statement\": \"INSERT INTO app.notes (tenant, text, operation_id) VALUES ($1, "
    "$2, $3) RETURNING json_build_object('note_id', id, 'text', text)\","
    "     \"params\": [\"$tenant\", \"/text\", \"$operation_id\"]}},"
    "  \"bump\": {\"arguments\": {\"type\": \"object\", \"properties\": {\"by\": {\"type\": "
    "\"integer\"}}},"
    "   \"sql\": {\"statement\": \"UPDATE app.counters SET n = n + $1::int WHERE id = 1 RETURNING "
    "json_build_object('n', n)\", \"params\": [\"/by\"]}},"
    "  \"divide\": {\"arguments\": {\"type\": \"object\", \"properties\": {\"d\": {\"type\": "
    "\"integer\"}}},"
    "   \"sql\": {\"statement\": \"SELECT json_build_object('q', 10 / $1::int)\", \"params\": "
    "[\"/d\"]}},"
    "  \"read_secret\": {\"arguments\": {\"type\": \"object\"},"
    "   \"sql\": {\"statement\": \"SELECT json_build_object('n', count(*)) FROM app.secrets\"}},"
    "  \"exact\": {\"arguments\": {\"type\": \"object\"},"
    "   \"sql\": {\"statement\": \"SELECT json_build_object('big', "
    "123456789012345678901234567890::numeric, 'x', 1.50)\"}}}}";

static char *conninfo;
static PGconn *check;
static gw_config *cfg;
static idem_pool *pool;
static idem_store *store;
static gw_runtime rt; /* the store alone: the tools here are sql tools */
#define DIR_TEMPLATE "/tmp/idem-gateway-run.XXXXXX"

/* The scratch folder (from DIR_TEMPLATE, in each test's process). */
static char dir[sizeof(DIR_TEMPLATE)];
static char path[sizeof(dir) + 32];

static void write_config(void)
{
    char *dsn = pgtest_as(conninfo, PGTEST_APP);
    FILE *f;

    snprintf(path, sizeof(path), "%s/gateway.json", dir);
    cr_assert_not_null(f = fopen(path, "w"));
    fprintf(f, config_fmt, dsn);
    cr_assert_eq(fclose(f), 0);
    free(dsn);
}

static void setup(void)
{
    idem_error err = IDEM_ERROR_INIT;
    char why[1024];

    conninfo = pgtest_new_migrated_database("gateway_run");
    check = pgtest_connect(conninfo);
    PQclear(pgtest_exec(check, app_sql));
    memcpy(dir, DIR_TEMPLATE, sizeof(dir));
    cr_assert_not_null(mkdtemp(dir));
    write_config();
    cr_assert_eq(gw_config_load(&cfg, path, why, sizeof(why)), 0, "%s", why);
    cr_assert_eq(idem_pool_new(&pool, cfg->dsn, &cfg->pool, &err), 0, "%s", err.message);
    cr_assert_eq(idem_store_new(&store, pool, &cfg->store, &err), 0, "%s", err.message);
    rt.cfg = cfg;
    rt.store = store;
}

static void teardown(void)
{
    idem_store_free(store);
    idem_pool_free(pool);
    gw_config_free(cfg);
    PQfinish(check);
    free(conninfo);
    unlink(path);
    rmdir(dir);
}

TestSuite(gateway_run, .init = setup, .fini = teardown, .timeout = 240);

static const gw_tenant *tenant(const char *name)
{
    for (size_t i = 0; i < cfg->ntenants; i++) {
        if (strcmp(cfg->tenants[i].name, name) == 0)
            return &cfg->tenants[i];
    }
    cr_assert_fail("no tenant %s", name);
    return NULL;
}

static const gw_tool *tool(const char *name)
{
    const gw_tool *t = gw_config_tool(cfg, name, strlen(name));

    cr_assert_not_null(t, "no tool %s", name);
    return t;
}

/* A call of @name as @who under @key with @args, through the call layer; its outcome in
 * @run (the caller clears it). */
static gw_outcome call_as(gw_run *run, const char *who, const char *name, const char *key,
                          const char *args)
{
    gw_call_ctx ctx = {.trace_id = "trace-1"};

    gw_run_call(run, cfg, &rt, tenant(who), tool(name), key, args, strlen(args), &ctx);
    cr_assert_str_eq(ctx.tool, name);
    cr_assert_str_eq(ctx.status, idem_status_name(run->out.status));
    return gw_run_outcome(run);
}

static gw_outcome call(gw_run *run, const char *name, const char *key, const char *args)
{
    return call_as(run, "acme", name, key, args);
}

static const char *header(const gw_reply *r, const char *name)
{
    for (size_t i = 0; i < r->nheaders; i++) {
        if (strcmp(r->headers[i].name, name) == 0)
            return r->headers[i].value;
    }
    return NULL;
}

/* @run ended in @o, and both adapters answer it as the row of @o says: the HTTP status,
 * Idem-Status, Retry-After and Idempotent-Replayed, the problem's type or the receipt as
 * the body; MCP's status, isError, retry_after and replayed. */
static void assert_answered(const gw_run *run, const char *name, const char *key, gw_outcome o)
{
    const gw_answer *a = gw_answer_of(o);
    gw_reply r = {0};
    json_t *body, *result, *sc;

    cr_assert_eq(gw_run_outcome(run), o, "%s, not %s: %s", gw_answer_of(gw_run_outcome(run))->name,
                 a->name, run->err.message);
    gw_http_answer(&r, cfg, tenant("acme"), tool(name), key, run);
    cr_assert_eq(r.status, a->http, "%s: HTTP %u", a->name, r.status);
    cr_assert_str_eq(header(&r, "Idem-Status"), idem_status_name(run->out.status));
    cr_assert_str_eq(header(&r, "Idem-Operation-Id"), key);
    cr_assert_eq(header(&r, "Retry-After") != NULL, a->retry_after, "%s", a->name);
    cr_assert_eq(header(&r, "Idempotent-Replayed") != NULL, a->replayed, "%s", a->name);
    cr_assert_not_null(body = json_loadb(r.body, r.len, 0, NULL), "%s: %.*s", a->name, (int)r.len,
                       r.body);
    if (a->problem != NULL)
        cr_assert_str_eq(json_string_value(json_object_get(body, "type")) +
                             strlen(GW_PROBLEM_PREFIX),
                         a->problem);
    else
        cr_assert(r.len == run->out.receipt_len || o != GW_OUTCOME_REJECTED);
    result = gw_mcp_result(run, cfg, tenant("acme"), key);
    cr_assert_not_null(result);
    sc = json_object_get(result, "structuredContent");
    cr_assert_str_eq(json_string_value(json_object_get(sc, "status")), a->status);
    cr_assert_eq(json_is_true(json_object_get(result, "isError")), a->is_error, "%s", a->name);
    cr_assert_eq(json_object_get(sc, "retry_after") != NULL, a->retry_after, "%s", a->name);
    cr_assert_eq(json_is_true(json_object_get(sc, "replayed")), a->replayed, "%s", a->name);
    json_decref(result);
    json_decref(body);
    gw_reply_clear(&r);
}

/* How many rows of @table (idem.operations, app.notes, ...) have operation ID @key, and
 * @extra (SQL, "" for none). */
static long count(const char *table, const char *key, const char *extra)
{
    char sql[512];

    snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s WHERE operation_id = '%s'%s", table, key,
             extra);
    return pgtest_scalar(check, sql);
}

static long notes(const char *key)
{
    return count("app.notes", key, "");
}

static long records(const char *key)
{
    return count("idem.operations", key, "");
}

Test(gateway_run, a_new_key_is_created_and_its_retry_replayed_byte_for_byte)
{
    gw_run first, again;

    cr_assert_eq(call(&first, "create_note", "note-1", "{\"text\": \"hello\"}"),
                 GW_OUTCOME_CREATED);
    assert_answered(&first, "create_note", "note-1", GW_OUTCOME_CREATED);
    cr_assert_eq(call(&again, "create_note", "note-1", "{ \"text\" : \"hello\" }"),
                 GW_OUTCOME_REPLAYED);
    assert_answered(&again, "create_note", "note-1", GW_OUTCOME_REPLAYED);
    cr_assert_eq(again.out.receipt_len, first.out.receipt_len);
    cr_assert_eq(memcmp(again.out.receipt, first.out.receipt, first.out.receipt_len), 0);
    cr_assert_eq(notes("note-1"), 1);
    cr_assert_eq(count("idem.operations", "note-1", " AND trace_id = 'trace-1'"), 1);
    gw_run_clear(&first);
    gw_run_clear(&again);
}

/* The way into the store follows the keys this process has seen (seen.h): a new key is
 * claimed with its effect, and its retry here is looked up first, a replay that opens no
 * transaction; a key stored by another process, never seen here, is claimed at once and
 * replays through its claim. Every way gives the same answers. */
Test(gateway_run, the_way_into_the_store_follows_the_keys_this_process_has_seen)
{
    idem_request req = IDEM_REQUEST_INIT;
    idem_error err = IDEM_ERROR_INIT;
    gw_run first, again, other;
    const char *args = "{\"text\": \"elsewhere\"}";

    cr_assert_eq(call(&first, "create_note", "seen-1", "{\"text\": \"a\"}"), GW_OUTCOME_CREATED);
    cr_assert_eq(first.out.attempts, 1);
    cr_assert_eq(call(&again, "create_note", "seen-1", "{\"text\": \"a\"}"), GW_OUTCOME_REPLAYED);
    cr_assert_eq(again.out.attempts, 0, "a seen key's retry is looked up first");
    /* Another gateway's call: through the store itself, past this process's table. */
    memset(&other, 0, sizeof(other));
    other.out = (idem_outcome)IDEM_OUTCOME_INIT;
    gw_request(&req, tenant("acme"), tool("create_note"), "seen-2", args, strlen(args), NULL);
    cr_assert_eq(
        idem_store_execute_declared(&other.out, store, &req, tool("create_note")->effect, &err), 0,
        "%s", err.message);
    cr_assert_eq(other.out.status, IDEM_STATUS_CREATED);
    gw_run_clear(&again);
    cr_assert_eq(call(&again, "create_note", "seen-2", args), GW_OUTCOME_REPLAYED);
    cr_assert_geq(again.out.attempts, 1, "a key not seen here is claimed at once");
    cr_assert_eq(again.out.receipt_len, other.out.receipt_len);
    cr_assert_eq(memcmp(again.out.receipt, other.out.receipt, other.out.receipt_len), 0);
    cr_assert_eq(notes("seen-2"), 1);
    gw_run_clear(&first);
    gw_run_clear(&again);
    gw_run_clear(&other);
}

Test(gateway_run, changed_arguments_under_a_key_are_a_conflict_and_write_nothing)
{
    gw_run run;

    cr_assert_eq(call(&run, "create_note", "note-2", "{\"text\": \"hello\"}"), GW_OUTCOME_CREATED);
    gw_run_clear(&run);
    cr_assert_eq(call(&run, "create_note", "note-2", "{\"text\": \"changed\"}"),
                 GW_OUTCOME_CONFLICT);
    assert_answered(&run, "create_note", "note-2", GW_OUTCOME_CONFLICT);
    cr_assert_str_eq(run.err.field, "arguments");
    cr_assert_eq(notes("note-2"), 1);
    gw_run_clear(&run);
}

Test(gateway_run, arguments_the_schema_refuses_are_invalid_at_their_place_and_store_nothing)
{
    static const struct {
        const char *args, *pointer;
    } cases[] = {
        {"{\"text\": 5}", "/text"},
        {"{\"text\": \"\"}", "/text"},
        {"{}", "/text"},
        {"{\"text\": ", ""},
        {"[1]", ""},
        {"{\"text\": \"a\\u0000b\"}", "/text"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gw_run run;
        char key[32];

        snprintf(key, sizeof(key), "bad-%zu", i);
        cr_assert_eq(call(&run, "create_note", key, cases[i].args), GW_OUTCOME_INVALID_ARGUMENTS,
                     "%s", cases[i].args);
        assert_answered(&run, "create_note", key, GW_OUTCOME_INVALID_ARGUMENTS);
        cr_assert_str_eq(run.pointer, cases[i].pointer, "%s", cases[i].args);
        cr_assert_eq(records(key), 0);
        gw_run_clear(&run);
    }
}

Test(gateway_run, a_malformed_operation_id_is_invalid_and_names_the_key)
{
    char key[IDEM_OPERATION_ID_MAX + 2];
    gw_run run;

    memset(key, 'k', sizeof(key) - 1);
    key[sizeof(key) - 1] = '\0';
    cr_assert_eq(call(&run, "create_note", key, "{\"text\": \"x\"}"), GW_OUTCOME_INVALID_KEY);
    cr_assert_str_eq(run.err.field, "operation_id");
    cr_assert_eq(pgtest_scalar(check, "SELECT count(*) FROM idem.operations"), 0);
    gw_run_clear(&run);
}

Test(gateway_run, a_key_older_than_its_memory_is_expired_and_never_runs)
{
    gw_run run;

    cr_assert_eq(call(&run, "create_note", OLD_KEY, "{\"text\": \"late\"}"), GW_OUTCOME_EXPIRED);
    assert_answered(&run, "create_note", OLD_KEY, GW_OUTCOME_EXPIRED);
    cr_assert_eq(notes(OLD_KEY), 0);
    cr_assert_eq(count("idem.reconciliation_items", OLD_KEY, " AND kind = 'expired'"), 1);
    gw_run_clear(&run);
}

Test(gateway_run, a_failing_statement_is_effect_failed_with_its_sqlstate_and_stores_nothing)
{
    gw_run run;

    cr_assert_eq(call(&run, "divide", "div-1", "{\"d\": 0}"), GW_OUTCOME_EFFECT_FAILED);
    assert_answered(&run, "divide", "div-1", GW_OUTCOME_EFFECT_FAILED);
    cr_assert_str_eq(run.err.sqlstate, "22012");
    cr_assert_eq(records("div-1"), 0);
    gw_run_clear(&run);
    cr_assert_eq(call(&run, "divide", "div-1", "{\"d\": 5}"), GW_OUTCOME_CREATED);
    gw_run_clear(&run);
}

Test(gateway_run, a_missing_privilege_is_misconfigured)
{
    gw_run run;

    cr_assert_eq(call(&run, "read_secret", "secret-1", "{}"), GW_OUTCOME_MISCONFIGURED);
    assert_answered(&run, "read_secret", "secret-1", GW_OUTCOME_MISCONFIGURED);
    cr_assert_not_null(strstr(run.err.message, pgtest_server_says("permission denied")), "%s",
                       run.err.message);
    cr_assert_eq(records("secret-1"), 0);
    gw_run_clear(&run);
}

/* A pending record of bump under @key for @args, as an attempt under way leaves it. */
static void pending(const char *key, const char *args)
{
    idem_fingerprint fp;
    idem_error err = IDEM_ERROR_INIT;
    char hex[IDEM_FINGERPRINT_HEX_SIZE], sql[1024];

    cr_assert_eq(idem_fingerprint_compute_text(&fp, "bump", 1, args, strlen(args), NULL, &err), 0,
                 "%s", err.message);
    idem_fingerprint_hex(hex, &fp);
    snprintf(sql, sizeof(sql),
             "INSERT INTO idem.operations (tenant, operation_id, tool, payload_version, "
             "fingerprint, state, claim_token, expires_at, forget_at) VALUES ('acme', '%s', "
             "'bump', 1, decode('%s', 'hex'), 'pending', gen_random_uuid(), now() + interval '1 "
             "hour', now() + interval '1 day')",
             key, hex);
    PQclear(pgtest_exec(check, sql));
}

Test(gateway_run, a_held_key_is_in_progress_then_outcome_unknown_then_rejected_as_settled)
{
    idem_resolution res = IDEM_RESOLUTION_INIT;
    idem_error err = IDEM_ERROR_INIT;
    static const char refusal[] = "{\"refused\":\"the counter was frozen\"}";
    gw_run run, again;

    pending("held-1", "{\"by\": 1}");
    cr_assert_eq(call(&run, "bump", "held-1", "{\"by\": 1}"), GW_OUTCOME_IN_PROGRESS);
    assert_answered(&run, "bump", "held-1", GW_OUTCOME_IN_PROGRESS);
    gw_run_clear(&run);

    PQclear(pgtest_exec(check, "UPDATE idem.operations SET created_at = now() - interval '1 day' "
                               "WHERE operation_id = 'held-1'"));
    cr_assert_eq(call(&run, "bump", "held-1", "{\"by\": 1}"), GW_OUTCOME_OUTCOME_UNKNOWN);
    assert_answered(&run, "bump", "held-1", GW_OUTCOME_OUTCOME_UNKNOWN);
    gw_run_clear(&run);

    res.as = IDEM_RESOLVE_FAILED;
    res.receipt = refusal;
    res.receipt_len = strlen(refusal);
    res.note = "checked by the test";
    cr_assert_eq(idem_external_resolve(check, "acme", "held-1", &res, &err), 0, "%s", err.message);
    cr_assert_eq(call(&run, "bump", "held-1", "{\"by\": 1}"), GW_OUTCOME_REJECTED);
    assert_answered(&run, "bump", "held-1", GW_OUTCOME_REJECTED);
    cr_assert_eq(call(&again, "bump", "held-1", "{\"by\": 1}"), GW_OUTCOME_REJECTED);
    cr_assert_eq(again.out.receipt_len, run.out.receipt_len);
    cr_assert_eq(memcmp(again.out.receipt, run.out.receipt, run.out.receipt_len), 0);
    cr_assert_eq(pgtest_scalar(check, "SELECT n FROM app.counters WHERE id = 1"), 0);
    gw_run_clear(&run);
    gw_run_clear(&again);
}

Test(gateway_run, a_call_that_outlives_its_deadline_is_unavailable_and_stores_nothing)
{
    idem_store_options opts = cfg->store;
    idem_error err = IDEM_ERROR_INIT;
    idem_store *short_store = NULL;
    gw_runtime short_rt = {.cfg = NULL};
    gw_run run;

    opts.deadline_ms = 300;
    cr_assert_eq(idem_store_new(&short_store, pool, &opts, &err), 0, "%s", err.message);
    short_rt.cfg = cfg;
    short_rt.store = short_store;
    PQclear(pgtest_exec(check, "BEGIN; SELECT * FROM app.counters WHERE id = 1 FOR UPDATE"));
    gw_run_call(&run, cfg, &short_rt, tenant("acme"), tool("bump"), "slow-1", "{\"by\": 1}", 9,
                NULL);
    PQclear(pgtest_exec(check, "ROLLBACK"));
    assert_answered(&run, "bump", "slow-1", GW_OUTCOME_UNAVAILABLE);
    cr_assert_eq(records("slow-1"), 0);
    gw_run_clear(&run);
    idem_store_free(short_store);
}

Test(gateway_run, one_key_under_two_tenants_is_two_operations)
{
    gw_run a, b;

    cr_assert_eq(call_as(&a, "acme", "create_note", "shared-1", "{\"text\": \"same\"}"),
                 GW_OUTCOME_CREATED);
    cr_assert_eq(call_as(&b, "beta", "create_note", "shared-1", "{\"text\": \"same\"}"),
                 GW_OUTCOME_CREATED);
    cr_assert_eq(records("shared-1"), 2);
    cr_assert_eq(notes("shared-1"), 2);
    gw_run_clear(&a);
    gw_run_clear(&b);
}

Test(gateway_run, an_http_request_is_answered_from_the_call_it_makes)
{
    static const char args[] = "{\"text\": \"over http\"}";
    gw_call_ctx ctx = {.trace_id = NULL};
    gw_reply r = {0};
    char *body;

    gw_call(&r, cfg, &rt, tenant("acme"), tool("create_note"), "http-1", args, strlen(args), &ctx);
    cr_assert_eq(r.status, 201);
    cr_assert_str_eq(header(&r, "Idem-Status"), "created");
    cr_assert_str_eq(ctx.key, "http-1");
    cr_assert_str_eq(ctx.status, "created");
    cr_assert_str_eq(r.content_type, "application/json");
    cr_assert_not_null(body = strndup(r.body, r.len));
    cr_assert_not_null(strstr(body, "\"text\":\"over http\""), "%s", body);
    free(body);
    gw_reply_clear(&r);
    gw_call(&r, cfg, &rt, tenant("acme"), tool("create_note"), "http-1", args, strlen(args), &ctx);
    cr_assert_eq(r.status, 201);
    cr_assert_str_eq(header(&r, "Idempotent-Replayed"), "true");
    cr_assert_eq(notes("http-1"), 1);
    gw_reply_clear(&r);
}

/* A tools/call of create_note over MCP under @key: the result's structuredContent. */
static json_t *mcp_call(const char *key)
{
    char msg[512], *out = NULL;
    gw_mcp m = {.cfg = cfg, .rt = &rt};
    int refused = -1;
    json_t *reply, *sc;

    snprintf(msg, sizeof(msg),
             "{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": \"tools/call\", \"params\": {\"name\": "
             "\"create_note\", \"arguments\": {\"text\": \"over mcp\"}, \"_meta\": "
             "{\"" GW_MCP_META_OPERATION_ID "\": \"%s\"}}}",
             key);
    cr_assert_eq(gw_mcp_handle(&out, &refused, &m, tenant("acme"), msg, strlen(msg)), 0);
    cr_assert_eq(refused, 0);
    cr_assert_not_null(reply = json_loads(out, 0, NULL), "%s", out);
    cr_assert_eq(json_integer_value(json_object_get(reply, "id")), 3);
    sc = json_incref(json_object_get(json_object_get(reply, "result"), "structuredContent"));
    cr_assert_not_null(sc, "%s", out);
    free(out);
    json_decref(reply);
    return sc;
}

/* A receipt's numbers reach an MCP client as the tool wrote them, in structuredContent as
 * over HTTP: an integer beyond 64 bits (which a parser refuses) and a fraction's last zero
 * (which it drops), on the first call and on its replay. */
Test(gateway_run, an_mcp_result_carries_the_receipt_as_written)
{
    static const char receipt[] = "{\"big\":123456789012345678901234567890,\"x\":1.50}";
    gw_mcp m = {.cfg = cfg, .rt = &rt};
    gw_call_ctx ctx = {0};
    gw_reply r = {0};

    for (int i = 0; i < 2; i++) {
        static const char msg[] =
            "{\"jsonrpc\": \"2.0\", \"id\": 4, \"method\": \"tools/call\", \"params\": {\"name\": "
            "\"exact\", \"arguments\": {}, \"_meta\": {\"" GW_MCP_META_OPERATION_ID "\": "
            "\"mcp-exact-1\"}}}";
        char *out = NULL;
        int refused = -1;

        cr_assert_eq(gw_mcp_handle(&out, &refused, &m, tenant("acme"), msg, strlen(msg)), 0);
        cr_assert_not_null(out);
        cr_assert_not_null(strstr(out, "\"receipt\":{\"big\":123456789012345678901234567890,"
                                       "\"x\":1.50}"),
                           "%s", out);
        cr_assert_not_null(
            strstr(out, i == 0 ? "\"status\":\"created\"" : "\"status\":\"replayed\""), "%s", out);
        free(out);
    }
    gw_call(&r, cfg, &rt, tenant("acme"), tool("exact"), "mcp-exact-1", "{}", 2, &ctx);
    cr_assert_eq(r.status, 201);
    cr_assert_eq(r.len, strlen(receipt));
    cr_assert_eq(memcmp(r.body, receipt, r.len), 0, "%.*s", (int)r.len, r.body);
    gw_reply_clear(&r);
}

Test(gateway_run, an_mcp_tools_call_is_answered_from_the_call_it_makes)
{
    json_t *first = mcp_call("mcp-1"), *again = mcp_call("mcp-1");

    cr_assert_str_eq(json_string_value(json_object_get(first, "status")), "created");
    cr_assert_str_eq(json_string_value(json_object_get(again, "status")), "replayed");
    cr_assert_str_eq(json_string_value(json_object_get(first, "operation_id")), "mcp-1");
    cr_assert(json_equal(json_object_get(first, "receipt"), json_object_get(again, "receipt")));
    cr_assert_eq(notes("mcp-1"), 1);
    json_decref(first);
    json_decref(again);
}
