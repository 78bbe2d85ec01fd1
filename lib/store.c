#include <assert.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "clock.h"
#include "error.h"
#include "idem/store.h"
#include "idem/uuid.h"
#include "idem/validate.h"
#include "exec.h"
#include "store_internal.h"

/* The store's SQL, in one place. Binary parameters carry the fingerprint and the receipt
 * as exact bytes; results are read in binary for the same reason. */
static const idem__stmt stmt_lookup = {"idem_store_lookup",
                                       "SELECT fingerprint, state, response FROM idem.operations"
                                       " WHERE tenant = $1 AND operation_id = $2",
                                       2};

/* After a lost COMMIT reply: the same, and whose claim the row is. */
static const idem__stmt stmt_resolve = {
    "idem_store_resolve",
    "SELECT fingerprint, state, response, claim_token::text FROM idem.operations"
    " WHERE tenant = $1 AND operation_id = $2",
    2};

static const idem__stmt stmt_claim = {
    "idem_store_claim",
    "INSERT INTO idem.operations (tenant, operation_id, tool, payload_version, fingerprint,"
    " state, trace_id, claim_token, expires_at)"
    " VALUES ($1, $2, $3, $4::int4, $5, 'pending', $6, $7::uuid,"
    " now() + make_interval(secs => $8::int8))"
    " ON CONFLICT (tenant, operation_id) DO NOTHING RETURNING 1",
    8};

static const idem__stmt stmt_finish = {
    "idem_store_finish",
    "UPDATE idem.operations SET state = $3, response = $4, completed_at = now()"
    " WHERE tenant = $1 AND operation_id = $2 AND claim_token = $5::uuid"
    " AND state = 'pending'",
    5};

/* Undo a claim that an effect committed by itself (it must not; see write_attempt). */
static const idem__stmt stmt_unclaim = {
    "idem_store_unclaim",
    "DELETE FROM idem.operations WHERE tenant = $1 AND operation_id = $2"
    " AND claim_token = $3::uuid AND state = 'pending'",
    3};

/* Lock waits inside the transaction end with the call's deadline. */
static const idem__stmt stmt_lock_timeout = {"idem_store_lock_timeout",
                                             "SELECT set_config('lock_timeout', $1, true)", 1};

static const idem__stmt stmt_get = {
    "idem_store_get",
    "SELECT tool, payload_version, fingerprint, state, response, trace_id,"
    " (extract(epoch FROM created_at) * 1000000)::int8,"
    " coalesce((extract(epoch FROM completed_at) * 1000000)::int8, 0),"
    " (extract(epoch FROM expires_at) * 1000000)::int8"
    " FROM idem.operations WHERE tenant = $1 AND operation_id = $2",
    2};

struct idem_store {
    idem_pool *pool;
    idem_store_options opts;
    idem_retry_policy backoff;
    struct {
        atomic_ullong executes, created, replayed, conflicts, invalid, effect_failures;
        atomic_ullong serialization_retries, claim_races, ambiguous_commits, unavailable;
    } stats;
#ifdef IDEM_TESTING
    atomic_int fault;
    atomic_uint fault_count;
#endif
};

struct idem_operation {
    char *tenant, *operation_id, *tool, *state, *trace_id, *receipt;
    size_t receipt_len;
    int payload_version;
    idem_fingerprint fingerprint;
    int64_t created_at, completed_at, expires_at;
};

/* The claim's parameters, kept for the call (they go out inside pipelines). */
typedef struct claim_params {
    char version[16], retention[24];
    const char *values[8];
    int lengths[8];
    int formats[8];
} claim_params;

/* One idem_store_execute() call in progress. */
typedef struct call {
    idem_store *store;
    const idem_request *req;
    json_t *arguments;
    idem_fingerprint fp;
    char claim[IDEM_UUID_STRING_SIZE];
    idem_effect_fn effect;
    void *ctx;
    idem_outcome *out;
    idem_error *err;
    uint64_t deadline_ms;
    claim_params cp;
    char lock_timeout[24]; /* what is left of the deadline, for SET LOCAL lock_timeout */
    const char *lock_timeout_values[1];
} call;

struct idem_tx {
    idem_conn *conn;
    call *c;
    int begun;        /* BEGIN and the claim have been sent */
    int claim_lost;   /* the claim found the key taken: the attempt starts over */
    int ended;        /* the effect ended the transaction itself (COMMIT, ROLLBACK) */
    int setup_rc;     /* BEGIN or the claim failed (not the effect's own statement) */
    char sqlstate[6]; /* the last failure's SQLSTATE, whatever the effect returns */
};

/* What one attempt decided. */
enum step {
    STEP_DONE,    /* out->status is final; the return code is in call.rc */
    STEP_AGAIN,   /* start over now: the key changed hands under us */
    STEP_BACKOFF, /* serialization failure or deadlock: back off, then start over */
    STEP_RESOLVE, /* the COMMIT's outcome is unknown: look on a fresh connection */
};

/* PostgreSQL keeps no field longer than 1 GiB. */
#define MAX_PAYLOAD ((size_t)1 << 30)

#define COUNT(store, name) atomic_fetch_add_explicit(&(store)->stats.name, 1, memory_order_relaxed)

static void store_log(const idem_store *store, int level, const char *fmt, ...) IDEM_PRINTF(3, 4);

static void store_log(const idem_store *store, int level, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    if (store->opts.log == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    store->opts.log(store->opts.log_ctx, level, msg);
}

int idem_store_new(idem_store **out, idem_pool *pool, const idem_store_options *opts,
                   idem_error *err)
{
    static const idem_store_options defaults = IDEM_STORE_OPTIONS_INIT;
    idem_store *store;

    if (out == NULL)
        return idem__error_field(err, IDEM_EINVAL, "out", "must not be NULL");
    if (pool == NULL)
        return idem__error_field(err, IDEM_EINVAL, "pool", "must not be NULL");
    if (opts == NULL)
        opts = &defaults;
    if (opts->version != IDEM_STORE_OPTIONS_VERSION)
        return idem__error_field(err, IDEM_EINVAL, "options.version", "must be %d",
                                 IDEM_STORE_OPTIONS_VERSION);
    if (opts->retention_s == 0 || opts->max_attempts == 0 || opts->max_arguments_bytes == 0 ||
        opts->max_response_bytes == 0)
        return idem__error_field(err, IDEM_EINVAL, "options",
                                 "retention_s, max_attempts and the size limits must be > 0");
    if (opts->max_arguments_bytes > MAX_PAYLOAD || opts->max_response_bytes > MAX_PAYLOAD)
        return idem__error_field(err, IDEM_EINVAL, "options",
                                 "size limits must not exceed 1 GiB (PostgreSQL's own limit)");
    store = calloc(1, sizeof(*store));
    if (store == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "store: out of memory");
    store->pool = pool;
    store->opts = *opts;
    store->backoff =
        (idem_retry_policy){IDEM_RETRY_POLICY_VERSION, opts->max_attempts, opts->backoff_base_ms,
                            opts->backoff_max_ms, opts->deadline_ms};
    *out = store;
    return 0;
}

void idem_store_free(idem_store *store)
{
    free(store);
}

void idem_outcome_clear(idem_outcome *outcome)
{
    if (outcome == NULL)
        return;
    free(outcome->receipt);
    *outcome = (idem_outcome)IDEM_OUTCOME_INIT;
}

void idem_store_stats_get(idem_store_stats *out, idem_store *store)
{
#define LOAD(name) out->name = atomic_load_explicit(&store->stats.name, memory_order_relaxed)
    LOAD(executes);
    LOAD(created);
    LOAD(replayed);
    LOAD(conflicts);
    LOAD(invalid);
    LOAD(effect_failures);
    LOAD(serialization_retries);
    LOAD(claim_races);
    LOAD(ambiguous_commits);
    LOAD(unavailable);
#undef LOAD
}

#ifdef IDEM_TESTING
void idem__store_inject_fault(idem_store *store, enum idem__fault fault, unsigned int count)
{
    atomic_store(&store->fault_count, count);
    atomic_store(&store->fault, (int)fault);
}

static enum idem__fault take_fault(idem_store *store)
{
    unsigned int left = atomic_load(&store->fault_count);

    while (left > 0) {
        if (atomic_compare_exchange_weak(&store->fault_count, &left, left - 1))
            return (enum idem__fault)atomic_load(&store->fault);
    }
    return IDEM__FAULT_NONE;
}
#endif

/* ---- request validation ------------------------------------------------------------ */

/* Turn a lower layer's EINVAL into one that names @field, keeping its message. */
static int blame_field(idem_error *err, int rc, const char *field)
{
    if (err == NULL || rc != IDEM_EINVAL)
        return rc;
    if (strcmp(err->field, field) != 0 && strncmp(err->message, field, strlen(field)) != 0)
        idem__error_context(err, "%s", field);
    snprintf(err->field, sizeof(err->field), "%s", field);
    return rc;
}

static int validate_request(call *c)
{
    const idem_request *req = c->req;
    json_t *args = NULL;
    idem_json_options jopts = IDEM_JSON_OPTIONS_INIT;
    int rc;

    if (req == NULL)
        return idem__error_field(c->err, IDEM_EINVAL, "request", "must not be NULL");
    if (req->version != IDEM_REQUEST_VERSION)
        return idem__error_field(c->err, IDEM_EINVAL, "request.version", "must be %d",
                                 IDEM_REQUEST_VERSION);
    if ((rc = idem_validate_tenant(req->tenant, c->err)) != 0 ||
        (rc = idem_validate_operation_id(req->operation_id, c->err)) != 0 ||
        (rc = idem_validate_tool(req->tool, c->err)) != 0 ||
        (rc = idem_validate_payload_version(req->payload_version, c->err)) != 0 ||
        (rc = idem_validate_trace_id(req->trace_id, c->err)) != 0)
        return rc;
    if (c->effect == NULL)
        return idem__error_field(c->err, IDEM_EINVAL, "effect", "must not be NULL");
    if (req->arguments == NULL)
        return idem__error_field(c->err, IDEM_EINVAL, "arguments", "must not be NULL");
    if (req->arguments_len > c->store->opts.max_arguments_bytes)
        return idem__error_field(c->err, IDEM_EINVAL, "arguments",
                                 "%zu bytes exceed the limit of %zu", req->arguments_len,
                                 c->store->opts.max_arguments_bytes);
    jopts.max_bytes = c->store->opts.max_arguments_bytes;
    rc = idem_json_parse(&args, req->arguments, req->arguments_len, &jopts, c->err);
    if (rc != 0)
        return blame_field(c->err, rc, "arguments");
    rc = idem_fingerprint_compute(&c->fp, req->tool, req->payload_version, args, c->err);
    if (rc != 0) {
        json_decref(args);
        return blame_field(c->err, rc, "arguments");
    }
    c->arguments = args;
    return 0;
}

/* ---- answers from an existing record ------------------------------------------------ */

static int set_receipt(idem_outcome *out, const char *bytes, size_t len, idem_error *err)
{
    char *copy = malloc(len + 1);

    if (copy == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "receipt: out of memory");
    memcpy(copy, bytes, len);
    copy[len] = '\0';
    out->receipt = copy;
    out->receipt_len = len;
    return 0;
}

/* Decide from a looked-up row (binary: fingerprint, state, response, and after a lost
 * COMMIT reply the claim token as text). @mine: the row was claimed by this call. */
static int answer_from_row(call *c, const PGresult *res, int *mine)
{
    const char *state = PQgetvalue(res, 0, 1);
    int same = PQgetlength(res, 0, 0) == IDEM_FINGERPRINT_SIZE &&
               memcmp(PQgetvalue(res, 0, 0), c->fp.bytes, IDEM_FINGERPRINT_SIZE) == 0;

    *mine = PQnfields(res) == 4 && strcmp(PQgetvalue(res, 0, 3), c->claim) == 0;
    if (!same) {
        c->out->status = IDEM_STATUS_CONFLICT;
        COUNT(c->store, conflicts);
        return idem__error_field(c->err, IDEM_ECONFLICT, "arguments",
                                 "operation ID %s was already used with different arguments",
                                 c->req->operation_id);
    }
    if (strcmp(state, "pending") == 0) {
        c->out->status = IDEM_STATUS_IN_PROGRESS;
        return idem__error_set(c->err, IDEM_EBUSY,
                               "operation %s is in progress in another attempt; retry later "
                               "with the same key",
                               c->req->operation_id);
    }
    if (set_receipt(c->out, PQgetvalue(res, 0, 2), (size_t)PQgetlength(res, 0, 2), c->err) != 0) {
        c->out->status = IDEM_STATUS_UNAVAILABLE;
        return IDEM_ENOMEM;
    }
    c->out->failed = strcmp(state, "failed") == 0;
    c->out->status = *mine ? IDEM_STATUS_CREATED : IDEM_STATUS_REPLAYED;
    if (*mine)
        COUNT(c->store, created);
    else
        COUNT(c->store, replayed);
    return 0;
}

/* Look the key up with @stmt (stmt_lookup or stmt_resolve). Returns 1 when a row decided
 * the call (c->out set, *rc its code), 0 when the key is free, or a negative code on a
 * database failure. */
static int lookup(call *c, idem_conn *conn, const idem__stmt *stmt, int *rc)
{
    const char *values[2] = {c->req->tenant, c->req->operation_id};
    PGresult *res = NULL;
    int mine, found;

    int erc = idem__conn_exec_prepared(&res, conn, stmt, values, NULL, NULL, 1, c->err);
    if (erc != 0)
        return erc;
    found = PQntuples(res) == 1;
    if (found)
        *rc = answer_from_row(c, res, &mine);
    PQclear(res);
    return found;
}

/* ---- the write transaction ---------------------------------------------------------- */

/* The write path costs two round trips after the lookup: BEGIN, the claim and the
 * effect's first statement travel in one pipeline; the finishing UPDATE and COMMIT in
 * another. */
#define BEGIN_SQL "BEGIN ISOLATION LEVEL SERIALIZABLE"

static void claim_params_init(call *c)
{
    claim_params *p = &c->cp;

    snprintf(p->version, sizeof(p->version), "%d", c->req->payload_version);
    snprintf(p->retention, sizeof(p->retention), "%u", c->store->opts.retention_s);
    p->values[0] = c->req->tenant;
    p->values[1] = c->req->operation_id;
    p->values[2] = c->req->tool;
    p->values[3] = p->version;
    p->values[4] = (const char *)c->fp.bytes;
    p->values[5] = c->req->trace_id;
    p->values[6] = c->claim;
    p->values[7] = p->retention;
    memset(p->lengths, 0, sizeof(p->lengths));
    memset(p->formats, 0, sizeof(p->formats));
    p->lengths[4] = IDEM_FINGERPRINT_SIZE;
    p->formats[4] = 1;
}

static idem__pipe_cmd cmd_sql(const char *sql)
{
    return (idem__pipe_cmd){NULL, sql, 0, NULL, NULL, NULL, 0, NULL};
}

static idem__pipe_cmd cmd_claim(const call *c)
{
    return (idem__pipe_cmd){&stmt_claim,   NULL,          0, c->cp.values,
                            c->cp.lengths, c->cp.formats, 0, NULL};
}

/* The commands that open an attempt: BEGIN, the lock timeout, the claim (the last, at
 * BEGIN_CLAIM). Returns how many it wrote. */
#define BEGIN_CMDS  3
#define BEGIN_CLAIM 2
static size_t begin_cmds(call *c, idem__pipe_cmd *cmds)
{
    uint64_t now = idem__now_ms();

    snprintf(c->lock_timeout, sizeof(c->lock_timeout), "%llu",
             (unsigned long long)(c->deadline_ms > now ? c->deadline_ms - now : 1));
    c->lock_timeout_values[0] = c->lock_timeout;
    cmds[0] = cmd_sql(BEGIN_SQL);
    cmds[1] =
        (idem__pipe_cmd){&stmt_lock_timeout, NULL, 0, c->lock_timeout_values, NULL, NULL, 0, NULL};
    cmds[2] = cmd_claim(c);
    return BEGIN_CMDS;
}

static void pipe_clear(idem__pipe_cmd *cmds, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        PQclear(cmds[i].result);
        cmds[i].result = NULL;
    }
}

/* The finishing UPDATE's parameters. */
typedef struct finish_params {
    const char *values[5];
    int lengths[5];
    int formats[5];
} finish_params;

static idem__pipe_cmd cmd_finish(finish_params *p, const call *c, const char *receipt, size_t len,
                                 int failed)
{
    p->values[0] = c->req->tenant;
    p->values[1] = c->req->operation_id;
    p->values[2] = failed ? "failed" : "completed";
    p->values[3] = receipt;
    p->values[4] = c->claim;
    memset(p->lengths, 0, sizeof(p->lengths));
    memset(p->formats, 0, sizeof(p->formats));
    p->lengths[3] = (int)len;
    p->formats[3] = 1;
    return (idem__pipe_cmd){&stmt_finish, NULL, 0, p->values, p->lengths, p->formats, 0, NULL};
}

static void rollback(idem_conn *conn)
{
    PGresult *res = NULL;

    if (idem__conn_exec(&res, conn, "ROLLBACK", NULL) == 0)
        PQclear(res);
}

/* A failed statement inside the transaction: back off on 40001/40P01, else finish. */
static enum step tx_failure(call *c, idem_conn *conn, int rc, int *out_rc)
{
    rollback(conn);
    if (idem__sqlstate_is_retryable(c->err->sqlstate))
        return STEP_BACKOFF;
    *out_rc = rc;
    return STEP_DONE;
}

/* Run the effect and serialize its response. Returns 0 with *receipt set, or a negative
 * code; the effect's SQLSTATE (if any) is left in tx->sqlstate. */
static int run_effect(call *c, idem_tx *tx, char **receipt, size_t *len, int *failed)
{
    json_t *response = NULL;
    int rc = c->effect(&response, tx, c->arguments, c->ctx, c->err);

    if (rc < 0) {
        json_decref(response);
        if (c->err->message[0] == '\0')
            idem__error_set(c->err, rc, "effect failed: %s", idem_strerror(rc));
        snprintf(c->err->sqlstate, sizeof(c->err->sqlstate), "%s", tx->sqlstate);
        return rc;
    }
    if (response == NULL || (rc != IDEM_EFFECT_OK && rc != IDEM_EFFECT_FINAL_FAILURE)) {
        json_decref(response);
        return idem__error_set(c->err, IDEM_EEFFECT, "effect returned %d without a response", rc);
    }
    *failed = rc == IDEM_EFFECT_FINAL_FAILURE;
    rc = idem_jcs_serialize(receipt, len, response, c->err);
    json_decref(response);
    if (rc != 0)
        return idem__error_context(c->err, "effect response"), IDEM_EEFFECT;
    if (*len > c->store->opts.max_response_bytes) {
        free(*receipt);
        *receipt = NULL;
        return idem__error_set(c->err, IDEM_EEFFECT,
                               "effect response: %zu bytes exceed the limit of %zu", *len,
                               c->store->opts.max_response_bytes);
    }
    return 0;
}

/* An effect that sent COMMIT itself committed the pending claim with its rows: take the
 * claim back, so that the key is not left pending for ever. */
static void unclaim(call *c, idem_conn *conn)
{
    const char *values[3] = {c->req->tenant, c->req->operation_id, c->claim};
    PGresult *res = NULL;

    if (idem__conn_exec_prepared(&res, conn, &stmt_unclaim, values, NULL, NULL, 0, NULL) == 0)
        PQclear(res);
}

/* The effect failed: what the call turns into. */
static enum step effect_failure(call *c, idem_conn *conn, idem_tx *tx, int rc, int *out_rc)
{
    if (tx->begun)
        rollback(conn);
    if (tx->ended)
        unclaim(c, conn);
    if (idem__sqlstate_is_retryable(tx->sqlstate))
        return STEP_BACKOFF;
    if (tx->setup_rc != 0 || rc == IDEM_EUNAVAIL || PQstatus(idem_conn_pg(conn)) != CONNECTION_OK) {
        *out_rc = tx->setup_rc != 0 ? tx->setup_rc : IDEM_EUNAVAIL;
        return STEP_DONE;
    }
    COUNT(c->store, effect_failures);
    c->out->status = IDEM_STATUS_EFFECT_FAILED;
    c->err->code = IDEM_EEFFECT;
    *out_rc = IDEM_EEFFECT;
    return STEP_DONE;
}

/* What the closing pipeline's results mean. */
static enum step after_commit(call *c, idem_conn *conn, const idem__pipe_cmd *finish, int rc,
                              int *out_rc)
{
    if (rc == 0) {
        if (strcmp(PQcmdTuples(finish->result), "1") == 0) {
            *out_rc = 0;
            return STEP_DONE;
        }
        /* The claim in this pipeline found the key taken: nothing was written. */
        COUNT(c->store, claim_races);
        return STEP_AGAIN;
    }
    if (rc == IDEM_EUNAVAIL || PQstatus(idem_conn_pg(conn)) != CONNECTION_OK) {
        idem_conn_discard(conn);
        return STEP_RESOLVE; /* COMMIT may or may not have been carried out */
    }
    return tx_failure(c, conn, rc, out_rc);
}

#ifdef IDEM_TESTING
/* The connection dies under COMMIT (test builds): before it is sent, or after. */
static void drop_connection(idem_conn *conn, int send_commit_first)
{
    PGconn *pg = idem_conn_pg(conn);

    if (send_commit_first) {
        PQsendQuery(pg, "COMMIT");
        PQflush(pg);
    }
    shutdown(PQsocket(pg), SHUT_RDWR);
}

/* COMMIT alone, with the injected failure at its boundary. */
static enum step commit_with_fault(call *c, idem_conn *conn, enum idem__fault fault, int *out_rc)
{
    PGresult *res = NULL;
    int rc;

    switch (fault) {
    case IDEM__FAULT_FAIL_BEFORE_COMMIT:
        rollback(conn);
        *out_rc = idem__error_set(c->err, IDEM_EUNAVAIL, "injected: failure before COMMIT");
        return STEP_DONE;
    case IDEM__FAULT_DROP_DURING_COMMIT:
        drop_connection(conn, 1);
        idem_conn_discard(conn);
        return STEP_RESOLVE;
    case IDEM__FAULT_DROP_BEFORE_COMMIT:
        drop_connection(conn, 0);
        break;
    default:
        break;
    }
    rc = idem__conn_exec(&res, conn, "COMMIT", c->err);
    PQclear(res);
    if (rc != 0 && (rc == IDEM_EUNAVAIL || PQstatus(idem_conn_pg(conn)) != CONNECTION_OK)) {
        idem_conn_discard(conn);
        return STEP_RESOLVE;
    }
    if (rc != 0)
        return tx_failure(c, conn, rc, out_rc);
    if (fault == IDEM__FAULT_REPLY_LOST_AFTER_COMMIT) {
        *out_rc = idem__error_set(c->err, IDEM_EUNAVAIL, "injected: reply lost after COMMIT");
        return STEP_DONE;
    }
    *out_rc = 0;
    return STEP_DONE;
}

/* The closing steps one round trip at a time, so that a failure can be put between them. */
static enum step finish_with_fault(call *c, idem_conn *conn, idem_tx *tx, const char *receipt,
                                   size_t len, int failed, enum idem__fault fault, int *out_rc)
{
    idem__pipe_cmd cmds[BEGIN_CMDS];
    finish_params fp;
    size_t failed_at;
    int rc = 0;

    if (!tx->begun) {
        begin_cmds(c, cmds);
        rc = idem__conn_pipeline(conn, cmds, BEGIN_CMDS, &failed_at, c->err);
        if (rc == 0 && PQntuples(cmds[BEGIN_CLAIM].result) == 0)
            rc = 1;
        pipe_clear(cmds, BEGIN_CMDS);
        if (rc == 1) {
            rollback(conn);
            return STEP_AGAIN;
        }
        if (rc != 0)
            return tx_failure(c, conn, rc, out_rc);
    }
    cmds[0] = cmd_finish(&fp, c, receipt, len, failed);
    rc = idem__conn_pipeline(conn, cmds, 1, &failed_at, c->err);
    pipe_clear(cmds, 1);
    if (rc != 0)
        return tx_failure(c, conn, rc, out_rc);
    return commit_with_fault(c, conn, fault, out_rc);
}
#endif

/* Store the receipt and COMMIT, in one round trip (with BEGIN and the claim in front when
 * the effect ran no statement). */
static enum step finish_and_commit(call *c, idem_conn *conn, idem_tx *tx, const char *receipt,
                                   size_t len, int failed, int *out_rc)
{
    idem__pipe_cmd cmds[BEGIN_CMDS + 2];
    finish_params fp;
    size_t n = 0, finish_at, failed_at;
    enum step step;
    int rc;

#ifdef IDEM_TESTING
    enum idem__fault fault = take_fault(c->store);
    if (fault != IDEM__FAULT_NONE)
        return finish_with_fault(c, conn, tx, receipt, len, failed, fault, out_rc);
#endif
    if (!tx->begun)
        n = begin_cmds(c, cmds);
    finish_at = n;
    cmds[n++] = cmd_finish(&fp, c, receipt, len, failed);
    cmds[n++] = cmd_sql("COMMIT");
    rc = idem__conn_pipeline(conn, cmds, n, &failed_at, c->err);
    step = after_commit(c, conn, &cmds[finish_at], rc, out_rc);
    pipe_clear(cmds, n);
    return step;
}

static enum step write_attempt(call *c, idem_conn *conn, int *out_rc)
{
    idem_tx tx = {conn, c, 0, 0, 0, 0, ""};
    char *receipt = NULL;
    size_t len = 0;
    int failed = 0, rc;
    enum step step;

    idem_error_clear(c->err); /* nothing from an earlier attempt */
    rc = run_effect(c, &tx, &receipt, &len, &failed);
    if (tx.ended && rc >= 0) {
        free(receipt);
        receipt = NULL;
        rc = idem__error_set(c->err, IDEM_EEFFECT,
                             "the effect ended the transaction itself; "
                             "COMMIT and ROLLBACK are the store's");
    }
    if (tx.claim_lost) {
        free(receipt);
        rollback(conn);
        COUNT(c->store, claim_races);
        return STEP_AGAIN;
    }
    if (rc != 0)
        return effect_failure(c, conn, &tx, rc, out_rc);
    step = finish_and_commit(c, conn, &tx, receipt, len, failed, out_rc);
    if (step == STEP_DONE && *out_rc == 0) {
        c->out->receipt = receipt;
        c->out->receipt_len = len;
        c->out->failed = failed;
        c->out->status = IDEM_STATUS_CREATED;
        COUNT(c->store, created);
        return STEP_DONE;
    }
    free(receipt);
    return step;
}

/* ---- the loop ---------------------------------------------------------------------- */

/* Sleep before the next attempt; 0 if the deadline or the attempt cap forbids it. */
static int backoff(call *c)
{
    unsigned int delay = idem_retry_backoff_ms(&c->store->backoff, c->out->attempts);

    if (c->out->attempts >= c->store->opts.max_attempts || idem__now_ms() + delay > c->deadline_ms)
        return 0;
    COUNT(c->store, serialization_retries);
    store_log(c->store, IDEM_LOG_DEBUG, "serialization failure on %s/%s; retry in %u ms",
              c->req->tenant, c->req->operation_id, delay);
    idem__sleep_ms(delay);
    return 1;
}

/* After a lost COMMIT reply, on a fresh connection: did this call's claim commit? */
static enum step resolve(call *c, idem_conn **conn, int *out_rc)
{
    int rc;

    COUNT(c->store, ambiguous_commits);
    store_log(c->store, IDEM_LOG_WARNING, "COMMIT reply lost for %s/%s; looking the key up",
              c->req->tenant, c->req->operation_id);
    idem_pool_release(*conn);
    *conn = NULL;
    rc = idem_pool_acquire(conn, c->store->pool, c->err);
    if (rc == 0)
        rc = lookup(c, *conn, &stmt_resolve, out_rc);
    if (rc < 0) {
        idem__error_context(c->err, "the outcome of COMMIT could not be looked up; retry "
                                    "with the same key");
        *out_rc = rc;
        return STEP_DONE;
    }
    return rc == 1 ? STEP_DONE : STEP_AGAIN;
}

/* The call has used up its attempts or its deadline. */
static int spent(call *c)
{
    return idem__error_set(c->err, IDEM_EUNAVAIL,
                           "retries spent: %u attempts within %u ms; retry later with the "
                           "same key",
                           c->out->attempts, c->store->opts.deadline_ms);
}

static int run(call *c)
{
    idem_conn *conn = NULL;
    int rc = 0, found;
    enum step step = STEP_AGAIN;

    rc = idem_pool_acquire(&conn, c->store->pool, c->err);
    while (rc == 0 && step != STEP_DONE) {
        /* Once this call has tried to write, a row may be its own: ask whose it is. */
        found = lookup(c, conn, c->claim[0] != '\0' ? &stmt_resolve : &stmt_lookup, &rc);
        if (found < 0) {
            rc = found;
            break;
        }
        if (found == 1)
            break;
        /* The claim and its token are made only when a write is about to happen: replays
         * never need them. */
        if (c->claim[0] == '\0') {
            if ((rc = idem_uuid_v7(c->claim, c->err)) != 0)
                break;
            claim_params_init(c);
        }
        if (c->out->attempts >= c->store->opts.max_attempts || idem__now_ms() >= c->deadline_ms) {
            rc = spent(c);
            break;
        }
        c->out->attempts++;
        step = write_attempt(c, conn, &rc);
        if (step == STEP_RESOLVE)
            step = resolve(c, &conn, &rc);
        if (step == STEP_BACKOFF && !backoff(c))
            rc = spent(c);
    }
    idem_pool_release(conn);
    return rc;
}

int idem_store_execute(idem_outcome *out, idem_store *store, const idem_request *req,
                       idem_effect_fn effect, void *ctx, idem_error *err)
{
    idem_error local = IDEM_ERROR_INIT;
    call c = {.store = store,
              .req = req,
              .effect = effect,
              .ctx = ctx,
              .out = out,
              .err = err != NULL ? err : &local};
    int rc;

    if (out == NULL || store == NULL)
        return idem__error_field(err, IDEM_EINVAL, out == NULL ? "out" : "store",
                                 "must not be NULL");
    *out = (idem_outcome)IDEM_OUTCOME_INIT;
    err = c.err; /* the retry logic reads SQLSTATEs, so detail is always recorded */
    idem_error_clear(err);
    COUNT(store, executes);
    rc = validate_request(&c);
    if (rc != 0) {
        out->status = idem_status_from_error(rc);
        if (rc == IDEM_EINVAL)
            COUNT(store, invalid);
        return rc;
    }
    c.deadline_ms = idem__now_ms() + store->opts.deadline_ms;
    rc = run(&c);
    json_decref(c.arguments);
    if (rc == 0)
        idem_error_clear(err);
    if (rc != 0 && out->status != IDEM_STATUS_CONFLICT &&
        out->status != IDEM_STATUS_EFFECT_FAILED && out->status != IDEM_STATUS_IN_PROGRESS) {
        out->status = idem_status_from_error(rc);
        if (out->status == IDEM_STATUS_UNAVAILABLE)
            COUNT(store, unavailable);
    }
    return rc;
}

/* ---- reading a record --------------------------------------------------------------- */

static int64_t read_int8(const PGresult *res, int col)
{
    const unsigned char *p = (const unsigned char *)PQgetvalue(res, 0, col);
    uint64_t v = 0;

    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

static char *dup_value(const PGresult *res, int col, size_t *len)
{
    size_t n = (size_t)PQgetlength(res, 0, col);
    char *s;

    if (PQgetisnull(res, 0, col))
        return NULL;
    s = malloc(n + 1);
    if (s != NULL) {
        memcpy(s, PQgetvalue(res, 0, col), n);
        s[n] = '\0';
    }
    if (len != NULL)
        *len = n;
    return s;
}

static idem_operation *operation_from_row(const PGresult *res, const char *tenant,
                                          const char *operation_id)
{
    idem_operation *op = calloc(1, sizeof(*op));
    const unsigned char *v;

    if (op == NULL)
        return NULL;
    op->tenant = strdup(tenant);
    op->operation_id = strdup(operation_id);
    op->tool = dup_value(res, 0, NULL);
    v = (const unsigned char *)PQgetvalue(res, 0, 1);
    op->payload_version =
        (int)((uint32_t)v[0] << 24 | (uint32_t)v[1] << 16 | (uint32_t)v[2] << 8 | v[3]);
    memcpy(op->fingerprint.bytes, PQgetvalue(res, 0, 2), IDEM_FINGERPRINT_SIZE);
    op->state = dup_value(res, 0 + 3, NULL);
    op->receipt = dup_value(res, 4, &op->receipt_len);
    op->trace_id = dup_value(res, 5, NULL);
    op->created_at = read_int8(res, 6);
    op->completed_at = read_int8(res, 7);
    op->expires_at = read_int8(res, 8);
    if (op->tenant == NULL || op->operation_id == NULL || op->tool == NULL || op->state == NULL ||
        (op->receipt == NULL && !PQgetisnull(res, 0, 4)) ||
        (op->trace_id == NULL && !PQgetisnull(res, 0, 5))) {
        idem_operation_free(op);
        return NULL;
    }
    return op;
}

int idem_store_get(idem_operation **out, idem_store *store, const char *tenant,
                   const char *operation_id, idem_error *err)
{
    const char *values[2] = {tenant, operation_id};
    idem_conn *conn = NULL;
    PGresult *res = NULL;
    idem_operation *op;
    int rc;

    if (out == NULL || store == NULL)
        return idem__error_field(err, IDEM_EINVAL, out == NULL ? "out" : "store",
                                 "must not be NULL");
    if ((rc = idem_validate_tenant(tenant, err)) != 0 ||
        (rc = idem_validate_operation_id(operation_id, err)) != 0)
        return rc;
    rc = idem_pool_acquire(&conn, store->pool, err);
    if (rc == 0)
        rc = idem__conn_exec_prepared(&res, conn, &stmt_get, values, NULL, NULL, 1, err);
    idem_pool_release(conn);
    if (rc != 0)
        return rc;
    if (PQntuples(res) != 1) {
        PQclear(res);
        return idem__error_set(err, IDEM_ENOTFOUND, "no operation %s in tenant %s", operation_id,
                               tenant);
    }
    op = operation_from_row(res, tenant, operation_id);
    PQclear(res);
    if (op == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "operation: out of memory");
    *out = op;
    return 0;
}

void idem_operation_free(idem_operation *op)
{
    if (op == NULL)
        return;
    free(op->tenant);
    free(op->operation_id);
    free(op->tool);
    free(op->state);
    free(op->trace_id);
    free(op->receipt);
    free(op);
}

const char *idem_operation_tenant(const idem_operation *op)
{
    return op->tenant;
}

const char *idem_operation_id(const idem_operation *op)
{
    return op->operation_id;
}

const char *idem_operation_tool(const idem_operation *op)
{
    return op->tool;
}

int idem_operation_payload_version(const idem_operation *op)
{
    return op->payload_version;
}

const char *idem_operation_state(const idem_operation *op)
{
    return op->state;
}

const idem_fingerprint *idem_operation_fingerprint(const idem_operation *op)
{
    return &op->fingerprint;
}

const char *idem_operation_receipt(const idem_operation *op, size_t *len)
{
    if (len != NULL)
        *len = op->receipt_len;
    return op->receipt;
}

const char *idem_operation_trace_id(const idem_operation *op)
{
    return op->trace_id;
}

int64_t idem_operation_created_at(const idem_operation *op)
{
    return op->created_at;
}

int64_t idem_operation_completed_at(const idem_operation *op)
{
    return op->completed_at;
}

int64_t idem_operation_expires_at(const idem_operation *op)
{
    return op->expires_at;
}

/* ---- the effect's transaction ------------------------------------------------------- */

/* COMMIT, ROLLBACK and the like belong to the store: a statement that ended the
 * transaction ends the effect's use of it. */
static int check_still_open(idem_tx *tx, idem_error *err)
{
    if (PQtransactionStatus(idem_conn_pg(tx->conn)) == PQTRANS_INTRANS)
        return 0;
    tx->ended = 1;
    return idem__error_set(err, IDEM_EINVAL,
                           "the effect's statement ended the transaction; "
                           "COMMIT and ROLLBACK are the store's");
}

/* The effect's first statement travels with BEGIN and the claim: one round trip. */
static int tx_first_exec(PGresult **out, idem_tx *tx, const char *sql, int nparams,
                         const char *const *values, idem_error *err)
{
    idem__pipe_cmd cmds[BEGIN_CMDS + 1];
    idem_error local = IDEM_ERROR_INIT;
    size_t n = begin_cmds(tx->c, cmds), failed_at;
    int rc;

    cmds[n++] = (idem__pipe_cmd){NULL, sql, nparams, values, NULL, NULL, 0, NULL};
    rc = idem__conn_pipeline(tx->conn, cmds, n, &failed_at, &local);
    tx->begun = 1;
    /* A claim that inserted nothing means the key is taken, whatever came after it. */
    if (cmds[BEGIN_CLAIM].result != NULL && PQntuples(cmds[BEGIN_CLAIM].result) == 0) {
        tx->claim_lost = 1;
        rc = idem__error_set(&local, IDEM_EBUSY,
                             "the key was claimed concurrently; the attempt starts over");
    } else if (rc == 0) {
        *out = cmds[n - 1].result;
        cmds[n - 1].result = NULL;
        if ((rc = check_still_open(tx, &local)) != 0) {
            PQclear(*out);
            *out = NULL;
        }
    } else {
        snprintf(tx->sqlstate, sizeof(tx->sqlstate), "%s", local.sqlstate);
        if (failed_at <= BEGIN_CLAIM)
            tx->setup_rc = rc;
    }
    pipe_clear(cmds, n);
    if (rc != 0 && err != NULL)
        *err = local;
    return rc;
}

int idem_tx_exec(PGresult **out, idem_tx *tx, const char *sql, int nparams,
                 const char *const *values, idem_error *err)
{
    PGconn *pg;
    PGresult *res;
    ExecStatusType st;
    const char *state;
    int rc;

    if (out == NULL || tx == NULL || sql == NULL || nparams < 0 || (nparams > 0 && !values))
        return idem__error_field(err, IDEM_EINVAL, "tx_exec",
                                 "out, tx, sql and values must be given");
    if (tx->claim_lost)
        return idem__error_set(err, IDEM_EBUSY,
                               "the key was claimed concurrently; the attempt starts over");
    if (tx->ended)
        return idem__error_set(err, IDEM_EINVAL, "the effect already ended the transaction");
    if (!tx->begun)
        return tx_first_exec(out, tx, sql, nparams, values, err);
    pg = idem_conn_pg(tx->conn);
    res = PQexecParams(pg, sql, nparams, NULL, values, NULL, NULL, 0);
    st = PQresultStatus(res);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
        if ((rc = check_still_open(tx, err)) != 0) {
            PQclear(res);
            return rc;
        }
        *out = res;
        return 0;
    }
    state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    snprintf(tx->sqlstate, sizeof(tx->sqlstate), "%s", state != NULL ? state : "");
    rc = idem__error_pg(err, pg, res, "effect statement");
    if (rc == IDEM_EUNAVAIL)
        idem_conn_discard(tx->conn);
    PQclear(res);
    return rc;
}

const char *idem_tx_tenant(const idem_tx *tx)
{
    return tx->c->req->tenant;
}

const char *idem_tx_operation_id(const idem_tx *tx)
{
    return tx->c->req->operation_id;
}
