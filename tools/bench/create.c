/*
 * The create mode: a new key through idem, against what the same guarantees cost without
 * it, in one run.
 *
 * idem callback   idem_store_execute() with the example effect, marked a first attempt
 * idem declared   idem_store_execute_declared() with the same INSERT declared as SQL
 * hand-written    what a user writes in libpq on their own lean table (public.bench_hand_ops:
 *                 8 columns, the key its primary key, no other index; bench.h) beside the
 *                 task table, one prepared statement per round trip, retried on 40001/40P01:
 *                   BEGIN ISOLATION LEVEL SERIALIZABLE
 *                   INSERT INTO public.bench_hand_ops (tenant, operation_id, fingerprint, state)
 *                     VALUES ($1, $2, decode($3, 'hex'), 'pending')
 *                     ON CONFLICT DO NOTHING RETURNING 1              (one row: a new key)
 *                   INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)
 *                     VALUES ($1, $2, $3) RETURNING task_id
 *                   UPDATE public.bench_hand_ops SET state = 'completed', response = $3,
 *                     completed_at = now() WHERE tenant = $1 AND operation_id = $2
 *                   COMMIT
 * floor           the least any correct design does: the effect and a finished record (key,
 *                 fingerprint, receipt) on the same lean table, in one pipelined SERIALIZABLE
 *                 transaction, one round trip:
 *                   BEGIN ISOLATION LEVEL SERIALIZABLE
 *                   INSERT INTO public.bench_hand_ops (tenant, operation_id, fingerprint, state,
 *                     response, completed_at) VALUES ($1, $2, decode($3, 'hex'), 'completed',
 *                     '{"status":"created"}', now()) ON CONFLICT DO NOTHING
 *                   INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)
 *                     VALUES ($1, $2, $3) RETURNING task_id
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

static const own_stmt hand_claim = {
    "bench_hand_claim",
    "INSERT INTO public.bench_hand_ops (tenant, operation_id, fingerprint, state)"
    " VALUES ($1, $2, decode($3, 'hex'), 'pending') ON CONFLICT DO NOTHING RETURNING 1",
    3};
static const own_stmt hand_task = {"bench_hand_task", task_sql, 3};
static const own_stmt hand_finish = {
    "bench_hand_finish",
    "UPDATE public.bench_hand_ops SET state = 'completed', response = $3, completed_at = now()"
    " WHERE tenant = $1 AND operation_id = $2",
    3};
static const own_stmt floor_op = {
    "bench_floor_op",
    "INSERT INTO public.bench_hand_ops (tenant, operation_id, fingerprint, state, response,"
    " completed_at) VALUES ($1, $2, decode($3, 'hex'), 'completed', '{\"status\":\"created\"}',"
    " now()) ON CONFLICT DO NOTHING",
    3};

/* The floor again, with the record idem keeps (a row of idem.operations: its windows, its
 * claim token, its CHECK constraint and the expires_at index the sweeper reads): how
 * much of the distance to the floor is the record, how much the rest. For information;
 * no target. */
static const own_stmt floor_idem_op = {
    "bench_floor_idem_op",
    "INSERT INTO idem.operations (tenant, operation_id, tool, payload_version, fingerprint,"
    " state, response, claim_token, expires_at, completed_at, forget_at)"
    " VALUES ($1, $2, 'bench', 1, decode($3, 'hex'), 'completed',"
    " convert_to('{\"status\":\"created\"}', 'UTF8'), gen_random_uuid(),"
    " now() + interval '1 day', now(), now() + interval '2 days')"
    " ON CONFLICT DO NOTHING",
    3};

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
    return ensure_prepared(pg, &hand_claim) || ensure_prepared(pg, &hand_task) ||
                   ensure_prepared(pg, &hand_finish) || ensure_prepared(pg, &floor_op) ||
                   ensure_prepared(pg, &floor_idem_op)
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

/* One try of the hand-written transaction: 0 done, 1 retry, -1 failure. */
static int hand_try(PGconn *pg, const own_call *call)
{
    const char *op = call->op;
    const char *key[3] = {TENANT, op, call->fingerprint}, *task[3] = {TENANT, call->subject, op};
    char receipt[96];
    const char *finish[3] = {TENANT, op, receipt};
    PGresult *res = NULL;
    int rc = simple(pg, "BEGIN ISOLATION LEVEL SERIALIZABLE");

    if (rc == 0) {
        res = run_own(pg, &hand_claim, key);
        rc = outcome(pg, res, PGRES_TUPLES_OK);
        if (rc == 0 && PQntuples(res) != 1)
            rc = -1; /* the key was new: the claim returns its row */
        PQclear(res);
    }
    if (rc == 0) {
        res = run_own(pg, &hand_task, task);
        rc = outcome(pg, res, PGRES_TUPLES_OK);
        if (rc == 0)
            snprintf(receipt, sizeof(receipt), "{\"status\":\"created\",\"task_id\":%s}",
                     PQgetvalue(res, 0, 0));
        PQclear(res);
    }
    if (rc == 0) {
        res = run_own(pg, &hand_finish, finish);
        rc = outcome(pg, res, PGRES_COMMAND_OK);
        PQclear(res);
    }
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
    const char *key[3] = {TENANT, call->op, call->fingerprint};
    const char *task[3] = {TENANT, call->subject, call->op};
    int rc = 0;

    int missing = 0;

    if (PQenterPipelineMode(pg) != 1)
        return -1;
    PQsendQueryParams(pg, "BEGIN ISOLATION LEVEL SERIALIZABLE", 0, NULL, NULL, NULL, NULL, 0);
    PQsendQueryPrepared(pg, op->name, 3, key, NULL, NULL, 0);
    PQsendQueryPrepared(pg, hand_task.name, 3, task, NULL, NULL, 0);
    PQsendQueryParams(pg, "COMMIT", 0, NULL, NULL, NULL, NULL, 0);
    PQpipelineSync(pg);
    for (int i = 0; i < 4; i++) {
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
        "new keys, first attempts; hand-written = BEGIN SERIALIZABLE; claim; INSERT; UPDATE;"
        " COMMIT one per round trip; floor = effect + finished record in one pipelined"
        " transaction; bare = the INSERT alone in autocommit; floor, idem's record = the floor"
        " writing a row of idem.operations");
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
