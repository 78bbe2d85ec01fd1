/*
 * The create mode: a new key through idem, against what the same guarantees cost without
 * it, in one run.
 *
 * idem callback   idem_store_execute() with the example effect, marked a first attempt
 * idem declared   idem_store_execute_declared() with the same INSERT declared as SQL
 * hand-written    the article's transaction (seed: "Remember the result in the same
 *                 transaction"), as a user writes it in libpq on their own lean tables: the
 *                 article's operations table (public.bench_article_ops: tenant, operation ID,
 *                 digest, response, the key its primary key, nothing else; bench.h) beside
 *                 the task table, one prepared statement per round trip, retried on
 *                 40001/40P01:
 *                   BEGIN ISOLATION LEVEL SERIALIZABLE
 *                   SELECT digest, response FROM public.bench_article_ops
 *                     WHERE tenant = $1 AND operation_id = $2         (no row: a new key)
 *                   INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)
 *                     VALUES ($1, $2, $3) RETURNING task_id
 *                   INSERT INTO public.bench_article_ops VALUES ($1, $2, $3, $4)
 *                                                    ($4: the response, built by the client)
 *                   COMMIT
 * floor           the least any correct design does: the effect and its finished record
 *                 (key, digest, the receipt with the task's ID) on the same lean table, in
 *                 one pipelined SERIALIZABLE transaction, one round trip (libpq's pipeline
 *                 mode), every statement prepared once per connection, BEGIN and COMMIT
 *                 too; the record's INSERT takes the task's ID from the effect's in the
 *                 same statement, since the receipt needs it and the round trip is one:
 *                   BEGIN ISOLATION LEVEL SERIALIZABLE
 *                   WITH task AS (INSERT INTO idem_example.support_tasks (tenant, subject,
 *                     operation_id) VALUES ($1, $2, $3) RETURNING task_id)
 *                     INSERT INTO public.bench_article_ops SELECT $1, $3, $4,
 *                     '{"status":"created","task_id":' || task_id || '}' FROM task
 *                     RETURNING response
 *                   COMMIT
 * floor, idem's record  the floor with its record a row of idem.operations (floor_idem_op
 *                 below), for information
 * bare INSERT     the effect alone, in autocommit (no idempotency at all)
 *
 * The sides without idem parse the arguments and fingerprint them as idem does: any
 * correct design needs the fingerprint to tell a retry from a changed intent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "support_tasks.h"

typedef struct create_ctx {
    idem_pool *pool;
    idem_store *store;
    idem_declared *declared;
} create_ctx;

#define TENANT "bench-create"

static const char task_sql[] =
    "INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)"
    " VALUES ($1, $2, $3) RETURNING task_id";

/* The user's own statements, prepared once per connection (names unique to the bench). */
typedef struct own_stmt {
    const char *name, *sql;
    int nparams;
} own_stmt;

static const own_stmt hand_lookup = {
    "bench_hand_lookup",
    "SELECT digest, response FROM public.bench_article_ops WHERE tenant = $1 AND operation_id = $2",
    2};
static const own_stmt hand_task = {"bench_hand_task", task_sql, 3};
static const own_stmt hand_record = {
    "bench_hand_record", "INSERT INTO public.bench_article_ops VALUES ($1, $2, $3, $4)", 4};
static const own_stmt floor_op = {
    "bench_floor_op",
    "WITH task AS (INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)"
    " VALUES ($1, $2, $3) RETURNING task_id)"
    " INSERT INTO public.bench_article_ops SELECT $1, $3, $4,"
    " '{\"status\":\"created\",\"task_id\":' || task_id || '}' FROM task RETURNING response",
    4};

/* The floor's transaction control, prepared once per connection like its statement: sent
 * as SQL text in the pipeline (an unnamed statement each), BEGIN and COMMIT would cost the
 * server a parse each, some 47,000 instructions a transaction that the least work does
 * not do (idem prepares its own, exec.h). */
static const own_stmt floor_begin = {"bench_floor_begin", "BEGIN ISOLATION LEVEL SERIALIZABLE", 0};
static const own_stmt floor_commit = {"bench_floor_commit", "COMMIT", 0};

/* The floor again, with the record idem keeps (a row of idem.operations: its windows, its
 * claim token, its CHECK constraint and the expires_at index the sweeper reads): how
 * much of the distance to the floor is the record, how much the rest. For information;
 * no target. */
static const own_stmt floor_idem_op = {
    "bench_floor_idem_op",
    "WITH task AS (INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)"
    " VALUES ($1, $2, $3) RETURNING task_id)"
    " INSERT INTO idem.operations (tenant, operation_id, tool, payload_version, fingerprint,"
    " state, response, claim_token, expires_at, completed_at, forget_at)"
    " SELECT $1, $3, 'bench', 1, decode($4, 'hex'), 'completed',"
    " convert_to('{\"status\":\"created\",\"task_id\":' || task_id || '}', 'UTF8'),"
    " gen_random_uuid(), now() + interval '1 day', now(), now() + interval '2 days' FROM task"
    " RETURNING 1",
    4};

/* Make sure @s is prepared on @pg: PREPARE, and "already exists" is fine. */
static int ensure_prepared(PGconn *pg, const own_stmt *s)
{
    PGresult *res = PQprepare(pg, s->name, s->sql, s->nparams, NULL);
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    int rc = PQresultStatus(res) == PGRES_COMMAND_OK || (state && !strcmp(state, "42P05"));

    PQclear(res);
    return rc ? 0 : -1;
}

static int is_retryable(PGresult *res)
{
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

    return state != NULL && (!strcmp(state, "40001") || !strcmp(state, "40P01"));
}

/* Whether @res failed because the statement is not prepared on this connection yet. */
static int unprepared(const PGresult *res)
{
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

    return state != NULL && strcmp(state, "26000") == 0;
}

/* Prepare every statement of the sides without idem on @pg. */
static int prepare_own(PGconn *pg)
{
    return ensure_prepared(pg, &hand_lookup) || ensure_prepared(pg, &hand_task) ||
                   ensure_prepared(pg, &hand_record) || ensure_prepared(pg, &floor_op) ||
                   ensure_prepared(pg, &floor_idem_op) || ensure_prepared(pg, &floor_begin) ||
                   ensure_prepared(pg, &floor_commit)
               ? -1
               : 0;
}

static PGresult *run_own(PGconn *pg, const own_stmt *s, const char *const *values)
{
    return PQexecPrepared(pg, s->name, s->nparams, values, NULL, NULL, 0);
}

/* 0 for success, 1 to try again (serialization failure, or just prepared), -1 else. */
static int outcome(PGconn *pg, PGresult *res, ExecStatusType expected)
{
    if (PQresultStatus(res) == expected)
        return 0;
    if (is_retryable(res))
        return 1;
    if (unprepared(res)) {
        PQclear(PQexec(pg, "ROLLBACK"));
        return prepare_own(pg) == 0 ? 1 : -1;
    }
    return -1;
}

/* ---- idem ---------------------------------------------------------------------------- */

static int check_created(bench_worker *w, int rc, idem_outcome *out, const idem_error *err)
{
    if (rc == 0 && out->status != IDEM_STATUS_CREATED)
        rc = bench_fail(w, "%s: expected created", idem_status_name(out->status));
    else if (rc != 0)
        rc = bench_fail(w, "%s: %s", idem_status_name(out->status), err->message);
    idem_outcome_clear(out);
    return rc;
}

static idem_request first_attempt(const char *op)
{
    idem_request req = IDEM_REQUEST_INIT;

    req.tenant = TENANT;
    req.operation_id = op;
    req.tool = EXAMPLE_TOOL_NAME;
    req.payload_version = EXAMPLE_TOOL_VERSION;
    req.arguments = BENCH_CREATE_ARGUMENTS;
    req.arguments_len = strlen(BENCH_CREATE_ARGUMENTS);
    req.attempt = 1;
    return req;
}

/* One new key through idem, with the callback effect or the declared one. */
static int idem_create(bench_worker *w, int declared)
{
    const create_ctx *c = w->side->ctx;
    char op[IDEM_UUID_STRING_SIZE];
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req;
    int rc;

    if (idem_uuid_v7(op, &err) != 0)
        return bench_fail(w, "uuid: %s", err.message);
    req = first_attempt(op);
    if (declared)
        rc = idem_store_execute_declared(&out, c->store, &req, c->declared, &err);
    else
        rc = idem_store_execute(&out, c->store, &req, example_create_support_task, NULL, &err);
    return check_created(w, rc, &out, &err);
}

static int idem_callback(bench_worker *w)
{
    return idem_create(w, 0);
}

static int idem_declared_side(bench_worker *w)
{
    return idem_create(w, 1);
}

/* ---- without idem -------------------------------------------------------------------- */

/* What any correct design has per call: the subject from the arguments, a fresh
 * operation ID, and the request's fingerprint (to tell a retry from a changed intent). */
typedef struct own_call {
    char op[IDEM_UUID_STRING_SIZE];
    char subject[128];
    char fingerprint[IDEM_FINGERPRINT_HEX_SIZE];
} own_call;

static int prepare_call(bench_worker *w, own_call *call)
{
    json_t *args = json_loads(BENCH_CREATE_ARGUMENTS, 0, NULL);
    const char *s = json_string_value(json_object_get(args, "subject"));
    idem_error err = IDEM_ERROR_INIT;
    idem_fingerprint fp;
    int rc = s != NULL && idem_uuid_v7(call->op, &err) == 0 &&
                     idem_fingerprint_compute(&fp, EXAMPLE_TOOL_NAME, EXAMPLE_TOOL_VERSION, args,
                                              &err) == 0
                 ? 0
                 : bench_fail(w, "arguments, uuid or fingerprint: %s", err.message);

    if (rc == 0) {
        snprintf(call->subject, sizeof(call->subject), "%s", s);
        idem_fingerprint_hex(call->fingerprint, &fp);
    }
    json_decref(args);
    return rc;
}

static int simple(PGconn *pg, const char *sql)
{
    PGresult *res = PQexec(pg, sql);
    int rc = PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : is_retryable(res) ? 1 : -1;

    PQclear(res);
    return rc;
}

/* The article's receipt, built on the client as its json.dumps() does. */
static void article_receipt(char *out, size_t size, const char *task_id)
{
    snprintf(out, size, "{\"status\":\"created\",\"task_id\":%s}", task_id);
}

/* One statement of the hand-written transaction; its result into *out (or cleared).
 * 0, 1 retry, -1 failure. */
static int hand_step(PGconn *pg, const own_stmt *s, const char *const *values,
                     ExecStatusType expected, PGresult **out)
{
    PGresult *res = run_own(pg, s, values);
    int rc = outcome(pg, res, expected);

    if (rc == 0 && out != NULL)
        *out = res;
    else
        PQclear(res);
    return rc;
}

/* One try of the article's transaction: 0 done, 1 retry, -1 failure. */
static int hand_try(PGconn *pg, const own_call *call)
{
    const char *op = call->op;
    const char *key[2] = {TENANT, op}, *task[3] = {TENANT, call->subject, op};
    char receipt[96];
    const char *record[4] = {TENANT, op, call->fingerprint, receipt};
    PGresult *res = NULL;
    int rc = simple(pg, "BEGIN ISOLATION LEVEL SERIALIZABLE");

    if (rc == 0 && (rc = hand_step(pg, &hand_lookup, key, PGRES_TUPLES_OK, &res)) == 0) {
        if (PQntuples(res) != 0)
            rc = -1; /* every key is new here: a row would be a replay */
        PQclear(res);
    }
    if (rc == 0 && (rc = hand_step(pg, &hand_task, task, PGRES_TUPLES_OK, &res)) == 0) {
        article_receipt(receipt, sizeof(receipt), PQgetvalue(res, 0, 0));
        PQclear(res);
    }
    if (rc == 0)
        rc = hand_step(pg, &hand_record, record, PGRES_COMMAND_OK, NULL);
    if (rc == 0)
        rc = simple(pg, "COMMIT");
    if (rc != 0)
        simple(pg, "ROLLBACK");
    return rc;
}

static int with_connection(bench_worker *w, int (*body)(PGconn *, const own_call *))
{
    const create_ctx *c = w->side->ctx;
    own_call call;
    idem_error err = IDEM_ERROR_INIT;
    idem_conn *conn = NULL;
    int rc;

    if (prepare_call(w, &call) != 0)
        return -1;
    if (idem_pool_acquire(&conn, c->pool, &err) != 0)
        return bench_fail(w, "acquire: %s", err.message);
    do
        rc = body(idem_conn_pg(conn), &call);
    while (rc == 1);
    if (rc != 0)
        rc = bench_fail(w, "%s", PQerrorMessage(idem_conn_pg(conn)));
    idem_pool_release(conn);
    return rc;
}

static int hand_written(bench_worker *w)
{
    return with_connection(w, hand_try);
}

/* The floor: one pipeline, one round trip, the record written by @op. 0 done, 1 retry,
 * -1 failure. */
static int floor_with(PGconn *pg, const own_call *call, const own_stmt *op)
{
    const char *values[4] = {TENANT, call->subject, call->op, call->fingerprint};
    int rc = 0, missing = 0;

    if (PQenterPipelineMode(pg) != 1)
        return -1;
    PQsendQueryPrepared(pg, floor_begin.name, 0, NULL, NULL, NULL, 0);
    PQsendQueryPrepared(pg, op->name, op->nparams, values, NULL, NULL, 0);
    PQsendQueryPrepared(pg, floor_commit.name, 0, NULL, NULL, NULL, 0);
    PQpipelineSync(pg);
    for (int i = 0; i < 3; i++) {
        PGresult *res = PQgetResult(pg);
        ExecStatusType st = PQresultStatus(res);

        if (rc == 0 && st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
            rc = is_retryable(res) || unprepared(res) ? 1 : -1;
            missing = unprepared(res);
        }
        PQclear(res);
        while ((res = PQgetResult(pg)) != NULL)
            PQclear(res);
    }
    PQclear(PQgetResult(pg)); /* the Sync */
    PQexitPipelineMode(pg);
    if (rc != 0)
        simple(pg, "ROLLBACK");
    if (missing && prepare_own(pg) != 0)
        return -1;
    return rc;
}

static int floor_try(PGconn *pg, const own_call *call)
{
    return floor_with(pg, call, &floor_op);
}

static int floor_idem_try(PGconn *pg, const own_call *call)
{
    return floor_with(pg, call, &floor_idem_op);
}

static int floor_side(bench_worker *w)
{
    return with_connection(w, floor_try);
}

static int floor_idem_side(bench_worker *w)
{
    return with_connection(w, floor_idem_try);
}

/* The effect alone in autocommit, and the response built as the tool would. */
static int bare_try(PGconn *pg, const own_call *call)
{
    const char *task[3] = {TENANT, call->subject, call->op};
    PGresult *res = run_own(pg, &hand_task, task);
    int rc = outcome(pg, res, PGRES_TUPLES_OK);
    json_t *response = NULL;
    char *text = NULL;

    if (rc == 0) {
        response = json_pack("{s:s, s:I}", "status", "created", "task_id",
                             (json_int_t)strtoll(PQgetvalue(res, 0, 0), NULL, 10));
        text = json_dumps(response, JSON_COMPACT);
        rc = text != NULL ? 0 : -1;
    }
    free(text);
    json_decref(response);
    PQclear(res);
    return rc;
}

static int bare_insert(bench_worker *w)
{
    return with_connection(w, bare_try);
}

/* ---- the measurement ----------------------------------------------------------------- */

static int open_ctx(create_ctx *c, const char *conninfo, int threads, int pool_cap)
{
    static const char *const params[] = {"$tenant", "subject", "$operation_id"};
    idem_error err = IDEM_ERROR_INIT;

    if (bench_pool_open(&c->pool, conninfo, threads, pool_cap) != 0)
        return -1;
    if (idem_store_new(&c->store, c->pool, NULL, &err) != 0)
        return bench_error("store", err.message);
    if (idem_declared_new(&c->declared,
                          "INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)"
                          " VALUES ($1, $2, $3)"
                          " RETURNING json_build_object('status', 'created', 'task_id', task_id)",
                          params, 3, &err) != 0)
        return bench_error("declared effect", err.message);
    return 0;
}

static void close_ctx(create_ctx *c)
{
    idem_declared_free(c->declared);
    idem_store_free(c->store);
    idem_pool_free(c->pool);
    *c = (create_ctx){NULL, NULL, NULL};
}

static int create_at(bench_results *res, const bench_config *cfg, const char *conninfo, int threads)
{
    create_ctx c = {NULL, NULL, NULL};
    const bench_side sides[6] = {{"idem callback", idem_callback, &c},
                                 {"idem declared SQL", idem_declared_side, &c},
                                 {"hand-written", hand_written, &c},
                                 {"floor", floor_side, &c},
                                 {"bare INSERT (autocommit)", bare_insert, &c},
                                 {"floor, idem's record", floor_idem_side, &c}};
    bench_plan plan = {sides, 6, threads, cfg->duration_s * 2, cfg->round_s, cfg->round_s};
    bench_measure *m = bench_results_add(
        res, "create", threads,
        "new keys, first attempts; hand-written = the article's BEGIN SERIALIZABLE; SELECT;"
        " INSERT task; INSERT record; COMMIT, one per round trip, on its 4-column table;"
        " floor = effect + finished record in one pipelined transaction (one round trip);"
        " bare = the INSERT alone in autocommit; floor, idem's record = the floor writing a"
        " row of idem.operations");
    int rc;

    if (m == NULL || open_ctx(&c, conninfo, threads, cfg->pool_cap) != 0) {
        close_ctx(&c);
        return -1;
    }
    bench_say("create, %d thread%s", threads, threads == 1 ? "" : "s");
    rc = bench_run(m, &plan);
    close_ctx(&c);
    bench_ratio_throughput(m, 0, 2, "idem callback / hand-written", 1.0);
    bench_ratio_throughput(m, 0, 3, "idem callback / floor", 0);
    bench_ratio_throughput(m, 1, 3, "idem declared SQL / floor", 0.8);
    bench_ratio_throughput(m, 0, 4, "idem callback / bare INSERT (autocommit)", 0);
    bench_ratio_throughput(m, 0, 5, "idem callback / floor, idem's record", 0);
    bench_ratio_throughput(m, 1, 5, "idem declared SQL / floor, idem's record", 0);
    bench_ratio_throughput(m, 5, 3, "floor, idem's record / floor", 0);
    return rc;
}

int bench_mode_create(bench_results *res, const bench_config *cfg, const char *conninfo)
{
    for (int i = 0; i < cfg->nthreads; i++) {
        if (create_at(res, cfg, conninfo, cfg->threads[i]) != 0)
            return -1;
    }
    return 0;
}
