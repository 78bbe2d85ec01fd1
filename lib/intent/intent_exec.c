/* Durable intents: executing one through the store or the external-effect path, under the
 * caller's retry policy, moving the intent from the result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "error.h"
#include "external_internal.h"
#include "intent_internal.h"
#include "log.h"
#include "store_internal.h"

#define MAX_LEASE_S 86400u

static const idem_intent_exec_options exec_defaults = IDEM_INTENT_EXEC_OPTIONS_INIT;

int idem_intent_exec_options_init(idem_intent_exec_options *opts, unsigned int version)
{
    return idem__struct_init(opts, &exec_defaults, sizeof(exec_defaults), version,
                             IDEM_INTENT_EXEC_OPTIONS_VERSION);
}

/* One execution in progress. */
typedef struct run {
    idem_store *store;
    idem_intent *intent;
    const idem_intent_exec_options *opts;
    idem_outcome *out;
    idem_error *err;
    char token[IDEM_UUID_STRING_SIZE]; /* the lease: the recovered one, or this call's */
    char lease_s[16], attempt[16];
    int inherit;      /* a recovered intent keeps the recovery's lease end (lease_s unused) */
    idem_request req; /* the stored request; its strings are the intent's */
    int cancelled;    /* the intent was cancelled before its effect */
    /* the local path */
    idem_effect_fn effect;
    void *ctx;
    /* the external path */
    idem_external *ext;
    idem_intent_dispatch_fn dispatch;
} run;

/* The intent as the start statement returned it: the stored request, attempt N. */
static int started(run *r, const PGresult *res)
{
    int rc = idem__intent_from_row(r->intent, res, 0, r->err);

    if (rc != 0)
        return rc;
    snprintf(r->attempt, sizeof(r->attempt), "%d", r->intent->attempts);
    r->req = (idem_request)IDEM_REQUEST_INIT;
    r->req.tenant = r->intent->tenant;
    r->req.operation_id = r->intent->operation_id;
    r->req.tool = r->intent->tool;
    r->req.payload_version = r->intent->payload_version;
    r->req.arguments = r->intent->arguments;
    r->req.arguments_len = strlen(r->intent->arguments);
    r->req.attempt = (unsigned int)r->intent->attempts;
    return 0;
}

/* The start changed nothing: cancelled, held by another worker, or gone. */
static int not_started(run *r)
{
    idem_intent *now = NULL;
    int rc = idem_intent_get(&now, r->store, r->intent->tenant, r->intent->operation_id, r->err);

    if (rc == 0 && now->state == IDEM_INTENT_CANCELLED) {
        r->out->status = IDEM_STATUS_CONFLICT;
        rc = idem__error_field(r->err, IDEM_ECONFLICT, "intent",
                               "intent %s was cancelled; it is never executed", now->operation_id);
    } else if (rc == 0) {
        r->out->status = IDEM_STATUS_IN_PROGRESS;
        rc = idem__error_set(r->err, IDEM_EBUSY,
                             "intent %s is held by another worker until its lease lapses; retry "
                             "later",
                             now->operation_id);
    } else {
        r->out->status = idem_status_from_error(rc);
    }
    idem_intent_free(now);
    return rc;
}

/* Count the attempt and take (or keep) the lease. */
static int start(run *r)
{
    const char *values[4] = {r->intent->tenant, r->intent->operation_id, r->token,
                             r->inherit ? NULL : r->lease_s};
    PGresult *res = NULL;
    int rc = idem__intent_run1(&res, r->store, idem__store_deadline(r->store), r->intent->tenant,
                               &idem__intent_stmt_start, values, r->err);

    if (rc != 0) {
        r->out->status = idem_status_from_error(rc);
        return rc;
    }
    rc = PQntuples(res) == 1 ? started(r, res) : not_started(r);
    PQclear(res);
    return rc;
}

/* Where the intent goes after its operation answered @status. */
static const char *next_state(idem_status status)
{
    switch (status) {
    case IDEM_STATUS_CREATED:
    case IDEM_STATUS_REPLAYED:
    case IDEM_STATUS_REJECTED:
        return "done";
    case IDEM_STATUS_EXPIRED:
    case IDEM_STATUS_OUTCOME_UNKNOWN:
    case IDEM_STATUS_CONFLICT:
        return "needs_reconciliation";
    default:
        return "attempted";
    }
}

/* Record the result and give the lease back, then read the intent back. A failure here
 * changes nothing for the caller: the intent stays attempted and a later execution
 * replays it. */
static void finish(run *r, int rc)
{
    const char *state = next_state(r->out->status);
    const char *error = strcmp(state, "attempted") == 0 && rc != 0 ? r->err->message : NULL;
    const char *values[7] = {r->intent->tenant,
                             r->intent->operation_id,
                             r->token,
                             state,
                             idem_status_name(r->out->status),
                             r->attempt,
                             error};
    const char *key[2] = {r->intent->tenant, r->intent->operation_id};
    idem__pipe_cmd cmds[2] = {
        {&idem__intent_stmt_finish, NULL, 0, values, NULL, NULL, 0, NULL},
        {&idem__intent_stmt_get, NULL, 0, key, NULL, NULL, 0, NULL},
    };
    idem_error quiet = IDEM_ERROR_INIT;
    PGresult *res = NULL;

    if (idem__intent_run(&res, r->store, idem__store_deadline(r->store), r->intent->tenant, cmds, 2,
                         &quiet) == 0 &&
        PQntuples(res) == 1)
        idem__intent_from_row(r->intent, res, 0, &quiet);
    else
        idem__log(r->store->opts.log, r->store->opts.log_ctx, IDEM_LOG_WARNING,
                  "intent %s/%s: its result (%s) could not be recorded: %s", values[0], values[1],
                  values[4], quiet.message);
    PQclear(res);
}

/* The local effect, behind a mark of the intent in the effect's own transaction: a
 * cancelled intent's effect never runs, and the mark commits with the effect. */
static int guarded_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                          idem_error *err)
{
    run *r = ctx;
    const char *values[3] = {r->intent->tenant, r->intent->operation_id, r->attempt};
    PGresult *res = NULL;
    int rc = idem_tx_exec(&res, tx, idem__intent_stmt_mark.sql, 3, values, err), rows;

    if (rc != 0)
        return rc;
    rows = PQntuples(res);
    PQclear(res);
    if (rows == 0) {
        r->cancelled = 1;
        return idem__error_set(err, IDEM_EEFFECT, "intent %s was cancelled", r->req.operation_id);
    }
    return r->effect(response, tx, arguments, r->ctx, err);
}

/* Mark the intent before an external dispatch (its own statement). *ok 0: cancelled. */
static int mark(run *r, int *ok)
{
    const char *values[3] = {r->intent->tenant, r->intent->operation_id, r->attempt};
    PGresult *res = NULL;
    int rc = idem__intent_run1(&res, r->store, idem__store_deadline(r->store), r->intent->tenant,
                               &idem__intent_stmt_mark, values, r->err);

    *ok = rc == 0 && PQntuples(res) == 1;
    PQclear(res);
    return rc;
}

/* One external attempt: begin; with a lease, mark, then dispatch. */
static int attempt_external(run *r)
{
    idem_external_attempt *a = NULL;
    json_t *args = NULL;
    int rc = idem_external_begin(&a, r->out, r->ext, &r->req, r->err), ok = 0;

    if (rc != 0 || a == NULL)
        return rc;
    if ((rc = mark(r, &ok)) == 0 && !ok) {
        r->cancelled = 1;
        idem_external_release(a, NULL);
    } else if (rc == 0 &&
               (args = json_loads(r->intent->arguments, JSON_DECODE_ANY, NULL)) == NULL) {
        rc = idem__error_set(r->err, IDEM_ENOMEM, "intent: arguments could not be loaded");
        idem_external_release(a, NULL);
    } else if (rc == 0) {
        idem_error_clear(r->err);
        rc = r->dispatch(r->out, a, args, r->ctx, r->err);
    } else {
        idem_external_release(a, NULL);
    }
    if (rc != 0 && r->out->status == IDEM_STATUS_IN_PROGRESS)
        r->out->status = idem_status_from_error(rc);
    json_decref(args);
    idem_external_attempt_free(a);
    return rc;
}

static int attempt(run *r)
{
    idem_outcome_clear(r->out);
    if (r->ext != NULL)
        return attempt_external(r);
    return idem_store_execute(r->out, r->store, &r->req, guarded_effect, r, r->err);
}

static int cancelled(run *r)
{
    idem_outcome_clear(r->out);
    r->out->status = IDEM_STATUS_CONFLICT;
    return idem__error_field(r->err, IDEM_ECONFLICT, "intent",
                             "intent %s was cancelled before its effect; it is never executed",
                             r->req.operation_id);
}

/* Attempts under the retry policy, then the result recorded. */
static int execute(run *r)
{
    idem_retry_state st;
    unsigned int delay = 0;
    int rc;

    idem_retry_state_init(&st);
    for (;;) {
        if ((rc = start(r)) != 0)
            return rc;
        rc = attempt(r);
        if (r->cancelled)
            return cancelled(r);
        if (r->opts->retry == NULL ||
            !idem_retry_next(&delay, &st, r->opts->retry, r->opts->budget, r->out->status))
            break;
        idem__sleep_ms(delay);
    }
    finish(r, rc);
    return rc;
}

static int check(run *r, idem_intent *intent, const idem_intent_exec_options *opts)
{
    int rc;

    if (opts == NULL)
        opts = &exec_defaults;
    r->opts = opts;
    if ((rc = idem__check_version(r->err, opts->version, IDEM_INTENT_EXEC_OPTIONS_VERSION,
                                  "options")) != 0)
        return rc;
    if (opts->lease_s > MAX_LEASE_S)
        return idem__error_field(r->err, IDEM_EINVAL, "options.lease_s",
                                 "must be 1 to %u, or 0, got %u", MAX_LEASE_S, opts->lease_s);
    if (intent == NULL)
        return idem__error_field(r->err, IDEM_EINVAL, "intent", "must not be NULL");
    if ((rc = idem__intent_check_key(intent->tenant, intent->operation_id, r->err)) != 0)
        return rc;
    snprintf(r->lease_s, sizeof(r->lease_s), "%u",
             opts->lease_s != 0 ? opts->lease_s : IDEM_INTENT_LEASE_DEFAULT_S);
    if (intent->lease_owner != NULL && strlen(intent->lease_owner) < sizeof(r->token)) {
        memcpy(r->token, intent->lease_owner, strlen(intent->lease_owner) + 1);
        r->inherit = opts->lease_s == 0; /* the recovery's lease holds */
        return 0;
    }
    return idem_uuid_v7(r->token, r->err);
}

/* Shared by both paths: the outcome reset, the checks, the execution. */
static int execute_checked(run *r, idem_outcome *out, idem_intent *intent,
                           const idem_intent_exec_options *opts)
{
    int rc;

    if (out == NULL)
        return idem__error_field(r->err, IDEM_EINVAL, "outcome", "must not be NULL");
    if ((rc = idem__check_version(r->err, out->version, IDEM_OUTCOME_VERSION, "outcome")) != 0)
        return rc;
    *out = (idem_outcome)IDEM_OUTCOME_INIT;
    out->status = IDEM_STATUS_INVALID;
    r->out = out;
    r->intent = intent;
    if ((rc = check(r, intent, opts)) != 0)
        return rc;
    out->status = IDEM_STATUS_UNAVAILABLE;
    return execute(r);
}

int idem_intent_execute(idem_outcome *out, idem_store *store, idem_intent *intent,
                        idem_effect_fn effect, void *ctx, const idem_intent_exec_options *opts,
                        idem_error *err)
{
    idem_error local = IDEM_ERROR_INIT;
    run r = {.store = store, .effect = effect, .ctx = ctx, .err = err != NULL ? err : &local};

    idem_error_clear(r.err);
    if (store == NULL || effect == NULL) {
        if (out != NULL && out->version >= 1 && out->version <= IDEM_OUTCOME_VERSION)
            out->status = IDEM_STATUS_INVALID;
        return idem__error_field(r.err, IDEM_EINVAL, store == NULL ? "store" : "effect",
                                 "must not be NULL");
    }
    return execute_checked(&r, out, intent, opts);
}

int idem_intent_execute_external(idem_outcome *out, idem_external *ext, idem_intent *intent,
                                 idem_intent_dispatch_fn dispatch, void *ctx,
                                 const idem_intent_exec_options *opts, idem_error *err)
{
    idem_error local = IDEM_ERROR_INIT;
    run r = {.ext = ext, .dispatch = dispatch, .ctx = ctx, .err = err != NULL ? err : &local};

    idem_error_clear(r.err);
    if (ext == NULL || dispatch == NULL) {
        if (out != NULL && out->version >= 1 && out->version <= IDEM_OUTCOME_VERSION)
            out->status = IDEM_STATUS_INVALID;
        return idem__error_field(r.err, IDEM_EINVAL, ext == NULL ? "ext" : "dispatch",
                                 "must not be NULL");
    }
    r.store = ext->store;
    return execute_checked(&r, out, intent, opts);
}
