/* The API's edges: struct versions, *_init() functions, NULL handles, and what a caller
 * learns from a misconfigured deployment or a server error. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/idem.h"
#include "pgtest.h"

static idem_pool *pool;
static idem_store *store;

static void open_on(const char *conninfo, const idem_store_options *opts)
{
    idem_pool_options popts = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;

    popts.max_size = 2;
    popts.connect_timeout_ms = 30000;
    cr_assert_eq(idem_pool_new(&pool, conninfo, &popts, &err), 0, "%s", err.message);
    cr_assert_eq(idem_store_new(&store, pool, opts, &err), 0, "%s", err.message);
}

static void close_all(void)
{
    idem_store_free(store);
    idem_pool_free(pool);
    store = NULL;
    pool = NULL;
}

TestSuite(api, .fini = close_all);

static idem_request request(const char *op)
{
    idem_request req = IDEM_REQUEST_INIT;

    req.tenant = "acme";
    req.operation_id = op;
    req.tool = "api_test_tool";
    req.arguments = "{\"n\":1}";
    req.arguments_len = strlen(req.arguments);
    return req;
}

/* Inserts a row into api_items with the argument n; a CHECK refuses n < 0. */
static int insert_item(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                       idem_error *err)
{
    char n[32];
    const char *values[1] = {n};
    PGresult *res = NULL;
    int rc;

    (void)ctx;
    snprintf(n, sizeof(n), "%lld", (long long)json_number_value(json_object_get(arguments, "n")));
    rc = idem_tx_exec(&res, tx, "INSERT INTO api_items (n) VALUES ($1::int)", 1, values, err);
    if (rc != 0)
        return rc;
    PQclear(res);
    *response = json_pack("{s:s}", "status", "inserted");
    return IDEM_EFFECT_OK;
}

/* Refuses with a message of the effect author's, through the exported idem_error_set(). */
static int refuse_transiently(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                              idem_error *err)
{
    (void)response, (void)tx, (void)arguments, (void)ctx;
    return idem_error_set(err, IDEM_EEFFECT, "quota service says no (%d)", 429);
}

Test(api, every_options_struct_has_an_init_function_that_refuses_unknown_versions)
{
    idem_store_options so;
    idem_pool_options po;
    idem_migrate_options mo;
    idem_retry_policy rp;
    idem_retry_budget_options bo;
    idem_json_options jo;
    idem_request rq;
    idem_outcome oc;

    cr_assert_eq(idem_store_options_init(&so, IDEM_STORE_OPTIONS_VERSION), 0);
    cr_assert_eq(so.version, IDEM_STORE_OPTIONS_VERSION);
    cr_assert_eq(so.deadline_ms, 10000);
    cr_assert_eq(idem_pool_options_init(&po, IDEM_POOL_OPTIONS_VERSION), 0);
    cr_assert_eq(po.max_size, 10);
    cr_assert_eq(idem_migrate_options_init(&mo, IDEM_MIGRATE_OPTIONS_VERSION), 0);
    cr_assert_eq(mo.lock_timeout_ms, 60000);
    cr_assert_eq(idem_retry_policy_init(&rp, IDEM_RETRY_POLICY_VERSION), 0);
    cr_assert_eq(idem_retry_budget_options_init(&bo, IDEM_RETRY_BUDGET_OPTIONS_VERSION), 0);
    cr_assert_eq(idem_json_options_init(&jo, IDEM_JSON_OPTIONS_VERSION), 0);
    cr_assert_eq(idem_request_init(&rq, IDEM_REQUEST_VERSION), 0);
    cr_assert_eq(rq.payload_version, 1);
    cr_assert_eq(idem_outcome_init(&oc, IDEM_OUTCOME_VERSION), 0);
    cr_assert_null(oc.receipt);

    cr_assert_eq(idem_store_options_init(&so, 0), IDEM_EINVAL);
    cr_assert_eq(idem_store_options_init(&so, IDEM_STORE_OPTIONS_VERSION + 1), IDEM_EINVAL);
    cr_assert_eq(idem_pool_options_init(&po, 99), IDEM_EINVAL);
    cr_assert_eq(idem_migrate_options_init(NULL, 1), IDEM_EINVAL);
    cr_assert_eq(idem_outcome_init(&oc, 0), IDEM_EINVAL);
}

Test(api, every_stats_struct_has_an_init_function_that_refuses_unknown_versions)
{
    idem_pool_stats ps;
    idem_store_stats ss;

    memset(&ps, 0xff, sizeof(ps));
    cr_assert_eq(idem_pool_stats_init(&ps, IDEM_POOL_STATS_VERSION), 0);
    cr_assert_eq(ps.version, IDEM_POOL_STATS_VERSION);
    cr_assert(ps.size == 0 && ps.acquires == 0 && ps.rolled_back == 0);
    cr_assert_eq(idem_pool_stats_get(&ps, NULL), 0, "an initialized struct is accepted");

    memset(&ss, 0xff, sizeof(ss));
    cr_assert_eq(idem_store_stats_init(&ss, IDEM_STORE_STATS_VERSION), 0);
    cr_assert_eq(ss.version, IDEM_STORE_STATS_VERSION);
    cr_assert(ss.executes == 0 && ss.in_progress == 0 && ss.expired == 0);
    /* Version 1 ends before `expired`: its bytes are not the library's to write. */
    memset(&ss, 0xff, sizeof(ss));
    cr_assert_eq(idem_store_stats_init(&ss, 1), 0);
    cr_assert_eq(ss.version, 1);
    cr_assert(ss.executes == 0 && ss.in_progress == 0);
    cr_assert_eq(ss.expired, ~0ULL);

    cr_assert_eq(idem_pool_stats_init(&ps, 0), IDEM_EINVAL);
    cr_assert_eq(idem_pool_stats_init(&ps, IDEM_POOL_STATS_VERSION + 1), IDEM_EINVAL);
    cr_assert_eq(idem_pool_stats_init(NULL, 1), IDEM_EINVAL);
    cr_assert_eq(idem_store_stats_init(&ss, 0), IDEM_EINVAL);
    cr_assert_eq(idem_store_stats_init(&ss, IDEM_STORE_STATS_VERSION + 1), IDEM_EINVAL);
    cr_assert_eq(idem_store_stats_init(NULL, 1), IDEM_EINVAL);
}

Test(api, a_struct_of_an_unknown_version_is_refused_naming_its_field)
{
    idem_store_options so = IDEM_STORE_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_store *s = NULL;

    so.version = 99;
    cr_assert_eq(idem_store_new(&s, (idem_pool *)&so, &so, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "options.version");
    cr_assert(strstr(err.message, "accepts 1 to") != NULL, "%s", err.message);
    cr_assert_null(s);
}

Test(api, deadline_of_zero_is_invalid_at_creation_not_at_every_call)
{
    idem_store_options so = IDEM_STORE_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_store *s = NULL;

    so.deadline_ms = 0;
    cr_assert_eq(idem_store_new(&s, (idem_pool *)&so, &so, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "options.deadline_ms");
    cr_assert_null(s);
}

/* Each option out of range is named, not "options" as a whole. */
Test(api, an_option_out_of_range_is_named_by_its_member)
{
    static const char *const fields[] = {"options.retention_s", "options.max_attempts",
                                         "options.max_arguments_bytes",
                                         "options.max_response_bytes"};
    idem_error err = IDEM_ERROR_INIT;
    idem_store *s = NULL;

    for (int i = 0; i < 6; i++) {
        idem_store_options so = IDEM_STORE_OPTIONS_INIT;

        if (i == 0)
            so.retention_s = 0;
        else if (i == 1)
            so.max_attempts = 0;
        else if (i == 2)
            so.max_arguments_bytes = 0;
        else if (i == 3)
            so.max_response_bytes = 0;
        else if (i == 4)
            so.max_arguments_bytes = ((size_t)1 << 30) + 1;
        else
            so.max_response_bytes = ((size_t)1 << 30) + 1;
        cr_assert_eq(idem_store_new(&s, (idem_pool *)&so, &so, &err), IDEM_EINVAL);
        cr_assert_str_eq(err.field, fields[i < 4 ? i : i - 2], "case %d: %s", i, err.message);
        cr_assert_null(s);
    }
}

Test(api, null_handles_are_invalid_never_a_crash)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_request req = request("op-null");
    idem_error err = IDEM_ERROR_INIT;
    idem_store_stats ss = IDEM_STORE_STATS_INIT;
    idem_pool_stats ps = IDEM_POOL_STATS_INIT;
    size_t len = 99;

    cr_assert_eq(idem_store_execute(&out, NULL, &req, insert_item, NULL, &err), IDEM_EINVAL);
    cr_assert_eq(out.status, IDEM_STATUS_INVALID, "a NULL store is the caller's mistake");
    cr_assert_str_eq(err.field, "store");
    cr_assert_eq(idem_store_stats_get(&ss, NULL), IDEM_EINVAL);
    cr_assert_eq(idem_store_stats_get(NULL, NULL), IDEM_EINVAL);
    cr_assert_eq(idem_pool_stats_get(NULL, NULL), IDEM_EINVAL);
    cr_assert_eq(idem_pool_stats_get(&ps, NULL), 0);
    cr_assert_eq(ps.size, 0);
    cr_assert_null(idem_operation_tenant(NULL));
    cr_assert_null(idem_operation_receipt(NULL, &len));
    cr_assert_eq(len, 0);
    cr_assert_eq(idem_operation_created_at(NULL), 0);
    cr_assert_null(idem_operation_fingerprint(NULL));
    cr_assert_eq(idem_uuid_v7(NULL, &err), IDEM_EINVAL);
    cr_assert_eq(idem_error_set(NULL, IDEM_EEFFECT, "x"), IDEM_EEFFECT);
}

Test(api, an_outcome_without_a_version_is_refused)
{
    idem_outcome out;
    idem_request req = request("op-noversion");
    idem_error err = IDEM_ERROR_INIT;

    memset(&out, 0, sizeof(out));
    cr_assert_eq(idem_store_execute(&out, (idem_store *)&out, &req, insert_item, NULL, &err),
                 IDEM_EINVAL);
    cr_assert_str_eq(err.field, "out.version");
}

Test(api, a_database_without_the_schema_is_misconfigured_and_says_to_migrate)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_request req = request("op-noschema");
    idem_error err = IDEM_ERROR_INIT;
    idem_store_stats st = IDEM_STORE_STATS_INIT;

    char *conninfo = pgtest_new_database("api_noschema");
    open_on(conninfo, NULL);
    int rc = idem_store_execute(&out, store, &req, insert_item, NULL, &err);
    cr_assert_eq(rc, IDEM_ESCHEMA, "%s: %s", idem_err_name(rc), err.message);
    cr_assert_eq(out.status, IDEM_STATUS_MISCONFIGURED);
    cr_assert_eq(idem_status_next_step(out.status), IDEM_NEXT_RETURN_TO_CALLER,
                 "a permanent error is never classified retry");
    cr_assert_str_eq(err.sqlstate, "42P01");
    cr_assert(strstr(err.message, "idem-migrate up") != NULL, "%s", err.message);
    cr_assert(strstr(err.message, "idem.operations") != NULL, "the server's words are kept: %s",
              err.message);
    cr_assert(strstr(err.hint, "idem-migrate up") != NULL, "%s", err.hint);
    cr_assert_eq(idem_store_stats_get(&st, store), 0);
    cr_assert_eq(st.misconfigured, 1);
    cr_assert_eq(st.unavailable, 0);
    free(conninfo);
}

Test(api, a_role_without_privileges_is_misconfigured_and_says_what_to_grant)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_request req = request("op-noperm");
    idem_error err = IDEM_ERROR_INIT;
    char role_conninfo[1024];

    char *conninfo = pgtest_new_migrated_database("api_noperm");
    PGconn *admin = pgtest_connect(conninfo);
    PQclear(pgtest_exec(admin, "DO $$ BEGIN CREATE ROLE idem_api_noperm LOGIN;"
                               " EXCEPTION WHEN duplicate_object THEN NULL; END $$"));
    PQclear(pgtest_exec(admin, "GRANT USAGE ON SCHEMA idem TO idem_api_noperm"));
    snprintf(role_conninfo, sizeof(role_conninfo), "%s user=idem_api_noperm", conninfo);
    open_on(role_conninfo, NULL);
    int rc = idem_store_execute(&out, store, &req, insert_item, NULL, &err);
    cr_assert_eq(rc, IDEM_EPERM, "%s: %s", idem_err_name(rc), err.message);
    cr_assert_eq(out.status, IDEM_STATUS_MISCONFIGURED);
    cr_assert_str_eq(err.sqlstate, "42501");
    cr_assert(strstr(err.message, "GRANT") != NULL || strstr(err.message, "grant") != NULL, "%s",
              err.message);
    cr_assert(strstr(err.message, pgtest_server_says("permission denied")) != NULL, "%s",
              err.message);
    PQfinish(admin);
    free(conninfo);
}

Test(api, an_effect_statement_error_keeps_detail_and_constraint)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_request req = request("op-check");
    idem_error err = IDEM_ERROR_INIT;

    char *conninfo = pgtest_new_migrated_database("api_detail");
    PGconn *admin = pgtest_connect(conninfo);
    PQclear(pgtest_exec(admin, "CREATE TABLE api_items (n int CONSTRAINT api_items_n_positive"
                               " CHECK (n >= 0))"));
    open_on(conninfo, NULL);
    req.arguments = "{\"n\":-5}";
    req.arguments_len = strlen(req.arguments);
    int rc = idem_store_execute(&out, store, &req, insert_item, NULL, &err);
    cr_assert_eq(rc, IDEM_EEFFECT, "%s: %s", idem_err_name(rc), err.message);
    cr_assert_eq(out.status, IDEM_STATUS_EFFECT_FAILED);
    cr_assert_str_eq(err.sqlstate, "23514");
    cr_assert_str_eq(err.constraint, "api_items_n_positive");
    cr_assert(err.detail[0] != '\0' &&
                  strstr(err.detail, pgtest_server_says("Failing row contains")) != NULL,
              "%s", err.detail);
    cr_assert_eq(pgtest_scalar(admin, "SELECT count(*) FROM idem.operations"), 0, "nothing stored");
    PQfinish(admin);
    free(conninfo);
}

Test(api, an_effect_reports_its_own_failure_through_idem_error_set)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_request req = request("op-quota");
    idem_error err = IDEM_ERROR_INIT;

    char *conninfo = pgtest_new_migrated_database("api_errset");
    open_on(conninfo, NULL);
    int rc = idem_store_execute(&out, store, &req, refuse_transiently, NULL, &err);
    cr_assert_eq(rc, IDEM_EEFFECT);
    cr_assert_eq(out.status, IDEM_STATUS_EFFECT_FAILED);
    cr_assert(strstr(err.message, "quota service says no (429)") != NULL, "%s", err.message);
    free(conninfo);
}

/* insert_item(), telling *ctx which tree it was given. */
static int insert_item_seen(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                            idem_error *err)
{
    *(const json_t **)ctx = arguments;
    return insert_item(response, tx, arguments, NULL, err);
}

/* Arguments parsed once by the caller (idem_arguments_parse(), idem_request version 3): the
 * effect gets that very tree, the record's fingerprint is the text's (a retry that sends
 * only the text replays it), and arguments parsed from other bytes are refused before
 * anything is written. A version 2 request never reads the member; a parse that allowed
 * deeper nesting than the store's is parsed again by the store. */
Test(api, arguments_parsed_once_are_the_tree_the_effect_gets_and_other_bytes_are_refused)
{
    char *conninfo = pgtest_new_migrated_database("api_parsed");
    PGconn *admin = pgtest_connect(conninfo);
    idem_json_options deep = IDEM_JSON_OPTIONS_INIT;
    idem_arguments *parsed = NULL, *other = NULL, *deeper = NULL, *untouched = NULL;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = request("op-parsed");
    const json_t *seen = NULL;

    PQclear(pgtest_exec(admin, "CREATE TABLE api_items (n int)"));
    open_on(conninfo, NULL);
    req.arguments = "{\"n\":7}";
    req.arguments_len = strlen(req.arguments);
    cr_assert_eq(idem_arguments_parse(&parsed, req.arguments, req.arguments_len, NULL, &err), 0,
                 "%s", err.message);
    cr_assert_eq(json_integer_value(json_object_get(idem_arguments_json(parsed), "n")), 0,
                 "numbers are read as doubles");
    cr_assert_eq(json_real_value(json_object_get(idem_arguments_json(parsed), "n")), 7.0);
    req.parsed = parsed;
    req.attempt = 1;
    cr_assert_eq(idem_store_execute(&out, store, &req, insert_item_seen, &seen, &err), 0, "%s",
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert_eq(seen, idem_arguments_json(parsed), "the caller's tree, not a second parse");
    idem_outcome_clear(&out);

    req.parsed = NULL; /* a retry with the text alone: the same fingerprint */
    req.attempt = 2;
    cr_assert_eq(idem_store_execute(&out, store, &req, insert_item, NULL, &err), 0, "%s",
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_REPLAYED);
    idem_outcome_clear(&out);

    req = request("op-other");
    cr_assert_eq(idem_arguments_parse(&other, "{\"n\": 7}", 8, NULL, &err), 0, "%s", err.message);
    req.parsed = other;
    cr_assert_eq(idem_store_execute(&out, store, &req, insert_item, NULL, &err), IDEM_EINVAL);
    cr_assert_eq(out.status, IDEM_STATUS_INVALID);
    cr_assert_str_eq(err.field, "parsed");
    cr_assert_not_null(strstr(err.message, "other bytes"), "%s", err.message);
    cr_assert_eq(pgtest_scalar(admin, "SELECT count(*) FROM idem.operations"), 1);
    cr_assert_eq(pgtest_scalar(admin, "SELECT count(*) FROM api_items"), 1);
    idem_outcome_clear(&out);

    req.version = 2; /* the member is not read */
    req.attempt = 1;
    cr_assert_eq(idem_store_execute(&out, store, &req, insert_item, NULL, &err), 0, "%s",
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    idem_outcome_clear(&out);

    req = request("op-deeper");
    deep.max_depth = 1000;
    cr_assert_eq(idem_arguments_parse(&deeper, req.arguments, req.arguments_len, &deep, &err), 0);
    req.parsed = deeper;
    seen = NULL;
    cr_assert_eq(idem_store_execute(&out, store, &req, insert_item_seen, &seen, &err), 0, "%s",
                 err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    cr_assert(seen != NULL && seen != idem_arguments_json(deeper), "parsed by the store's rules");
    idem_outcome_clear(&out);

    cr_assert_eq(idem_arguments_parse(NULL, "{}", 2, NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "out");
    cr_assert_eq(idem_arguments_parse(&untouched, NULL, 2, NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "text");
    cr_assert_null(untouched);
    cr_assert_eq(idem_arguments_parse(&untouched, "{\"n\":1e400}", 11, NULL, &err), IDEM_EINVAL);
    cr_assert_null(untouched);
    cr_assert_eq(idem_arguments_parse(&untouched, "{\"n\":1,\"n\":2}", 13, NULL, &err),
                 IDEM_EINVAL);
    cr_assert_null(untouched);
    cr_assert_null(idem_arguments_json(NULL));
    idem_arguments_free(NULL);
    idem_arguments_free(parsed);
    idem_arguments_free(other);
    idem_arguments_free(deeper);
    PQfinish(admin);
    free(conninfo);
}
