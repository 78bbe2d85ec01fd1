/* A call from start to end (idem_store_execute(), idem_store_execute_declared()): the
 * request checked, then attempts within the call's deadline and attempt cap (a retry looks
 * its key up first, a first attempt claims at once), the backoff after a serialization
 * failure, the lookup that resolves a lost COMMIT reply, and the call's status. */
#include "core/clock.h"
#include "log.h"
#include "idem/uuid.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "exec.h"
#include "store_internal.h"

/* Sleep before the next attempt; 0 if the deadline or the attempt cap forbids it. */
static int backoff(call *c)
{
    unsigned int delay = idem_retry_backoff_ms(&c->store->backoff, c->out->attempts);

    if (c->out->attempts >= c->store->opts.max_attempts || idem__now_ms() + delay > c->deadline_ms)
        return 0;
    COUNT(c->store, serialization_retries);
    idem__log(c->store->opts.log, c->store->opts.log_ctx, IDEM_LOG_DEBUG,
              "serialization failure on %s/%s; retry in %u ms", c->req->tenant,
              c->req->operation_id, delay);
    idem__sleep_ms(delay);
    return 1;
}

/* After a lost COMMIT reply, on a fresh connection: did this call's claim commit? */
static enum step resolve(call *c, idem_conn **conn, int *out_rc)
{
    int rc;

    COUNT(c->store, ambiguous_commits);
    idem__log(c->store->opts.log, c->store->opts.log_ctx, IDEM_LOG_WARNING,
              "COMMIT reply lost for %s/%s; looking the key up", c->req->tenant,
              c->req->operation_id);
    idem_pool_release(*conn);
    *conn = NULL;
    rc = idem__pool_checkout(conn, c->store->pool, c->deadline_ms, c->err);
    if (rc == 0)
        rc = idem__store_lookup(c, *conn, &idem__store_stmt_resolve, out_rc);
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

    rc = idem__pool_checkout(&conn, c->store->pool, c->deadline_ms, c->err);
    while (rc == 0 && step != STEP_DONE) {
        /* A connection that failed is never used again within the call. */
        if (idem__conn_failed(conn)) {
            idem_pool_release(conn);
            conn = NULL;
            if ((rc = idem__pool_checkout(&conn, c->store->pool, c->deadline_ms, c->err)) != 0)
                break;
        }
        /* A retry looks the key up first (a replay then costs one round trip, of a lookup
         * without the clock, which only a key without a record needs); a first attempt
         * claims at once, and the claim answers if the key has a record. Once this call has
         * tried to write, a row may be its own: ask whose it is. */
        if (c->lookup_first) {
            found = idem__store_lookup(
                c, conn, c->claim[0] != '\0' ? &idem__store_stmt_resolve : &idem__store_stmt_replay,
                &rc);
            if (found < 0) {
                rc = found;
                break;
            }
            if (found == 1)
                break;
        }
        c->lookup_first = 1;
        /* Hashed during the lookup, unless it failed before a reply. */
        if ((rc = idem__store_fingerprint(c)) != 0)
            break;
        /* The claim and its token are made only when a write is about to happen: replays
         * never need them. */
        if (c->claim[0] == '\0') {
            if ((rc = idem_uuid_v7(c->claim, c->err)) != 0)
                break;
            idem__store_claim_params_init(c);
        }
        if (c->out->attempts >= c->store->opts.max_attempts || idem__now_ms() >= c->deadline_ms) {
            rc = spent(c);
            break;
        }
        /* A retry that found no record: now its effect needs the arguments parsed. */
        if ((rc = idem__store_arguments(c)) != 0)
            break;
        c->out->attempts++;
        step = c->attempt(c, conn, &rc);
        if (step == STEP_RESOLVE)
            step = resolve(c, &conn, &rc);
        if (step == STEP_BACKOFF && !backoff(c))
            rc = spent(c);
    }
    idem_pool_release(conn);
    return rc;
}

/* Whether the call looks its key up before claiming it: a retry, or a request of a version
 * without attempt (0 for a request validation refuses, whose attempt is not read). Only if
 * that lookup finds no record does the call need its arguments as a tree, for the effect:
 * until then a retry's arguments are only fingerprinted (c->defer_arguments). */
static int looks_up_first(const idem_request *req)
{
    if (req == NULL || req->version < 1 || req->version > IDEM_REQUEST_VERSION)
        return 0;
    return req->version < 2 || req->attempt != 1;
}

/* Both entry points: validate, run the attempts, turn the result into the call's status. */
static int execute(call *c)
{
    idem_outcome *out = c->out;
    idem_store *store = c->store;
    idem_error *err = c->err;
    int rc;

    COUNT(store, executes);
    c->defer_arguments = looks_up_first(c->req);
    rc = idem__store_validate(c);
    if (rc != 0) {
        idem__store_call_clear(c); /* a tree taken from the request's parsed arguments */
        out->status = idem_status_from_error(rc);
        if (rc == IDEM_EINVAL)
            COUNT(store, invalid);
        return rc;
    }
    c->deadline_ms = idem__store_deadline(store);
    c->lookup_first = looks_up_first(c->req);
    rc = run(c);
    idem__store_call_clear(c);
    if (rc == 0)
        idem_error_clear(err);
    if (rc != 0 && out->status != IDEM_STATUS_CONFLICT &&
        out->status != IDEM_STATUS_EFFECT_FAILED && out->status != IDEM_STATUS_IN_PROGRESS &&
        out->status != IDEM_STATUS_REJECTED) {
        rc = idem__error_misconfigured(err, rc);
        out->status = idem_status_from_error(rc);
        if (out->status == IDEM_STATUS_UNAVAILABLE)
            COUNT(store, unavailable);
        if (out->status == IDEM_STATUS_MISCONFIGURED)
            COUNT(store, misconfigured);
    }
    return rc;
}

/* The checks before anything else: @out's version, then the store. */
static int begin_call(call *c, idem_outcome *out, idem_store *store, idem_error *err)
{
    int rc;

    if (out == NULL)
        return idem__error_field(err, IDEM_EINVAL, "out", "must not be NULL");
    if ((rc = idem__check_version(err, out->version, IDEM_OUTCOME_VERSION, "out")) != 0)
        return rc;
    *out = (idem_outcome)IDEM_OUTCOME_INIT;
    if (store == NULL) {
        out->status = IDEM_STATUS_INVALID;
        return idem__error_field(err, IDEM_EINVAL, "store", "must not be NULL");
    }
    c->store = store;
    c->out = out;
    idem_error_clear(c->err); /* the retry logic reads SQLSTATEs: detail is always kept */
    return 0;
}

/* An entry point's call: @c has the request and the effect (callback or declared). */
static int enter(call *c, idem_outcome *out, idem_store *store, idem_error *err, int has_effect)
{
    int rc = begin_call(c, out, store, err);

    if (rc != 0)
        return rc;
    if (!has_effect) {
        COUNT(store, executes);
        COUNT(store, invalid);
        out->status = IDEM_STATUS_INVALID;
        return idem__error_field(c->err, IDEM_EINVAL, "effect", "must not be NULL");
    }
    return execute(c);
}

int idem_store_execute(idem_outcome *out, idem_store *store, const idem_request *req,
                       idem_effect_fn effect, void *ctx, idem_error *err)
{
    idem_error local = IDEM_ERROR_INIT;
    call c = {.req = req,
              .effect = effect,
              .ctx = ctx,
              .attempt = idem__store_write_attempt,
              .err = err != NULL ? err : &local};

    return enter(&c, out, store, err, effect != NULL);
}

int idem_store_execute_declared(idem_outcome *out, idem_store *store, const idem_request *req,
                                const idem_declared *effect, idem_error *err)
{
    idem_error local = IDEM_ERROR_INIT;
    call c = {.req = req,
              .declared = effect,
              .attempt = idem__store_declared_attempt,
              .err = err != NULL ? err : &local};

    return enter(&c, out, store, err, effect != NULL);
}
