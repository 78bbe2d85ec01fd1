/**
 * @file external.h
 * @brief External effects: operations whose effect happens in another service (an email, a
 *        payment, another API), which cannot join the local transaction.
 *
 * The protocol, in three steps:
 *  1. idem_external_begin(), in one committed transaction before anything is dispatched:
 *     claim the key as `pending`, make its **downstream idempotency key** (once: the same
 *     on every attempt), take a **lease** of ::idem_external_options.lease_ms and record
 *     attempt 1. The caller gets an ::idem_external_attempt that holds the lease and
 *     carries the downstream key. A key that already has a record answers as
 *     idem_store_execute() does: `replayed` (the stored receipt), `rejected`, `conflict`
 *     (changed arguments), `expired`, `outcome_unknown`; and `in_progress` while another
 *     attempt's lease is live.
 *  2. the caller dispatches, passing the downstream key to the provider (its
 *     Idempotency-Key header, request or message ID), so that a provider that honours it
 *     acts once however often it is called. A long dispatch renews its lease with
 *     idem_external_extend() (a heartbeat).
 *  3. the caller reports what happened, which ends the attempt:
 *     - idem_external_complete(): the provider did it; its reference and response are
 *       stored, the response as the receipt that every retry then replays (`created` now,
 *       `replayed` later);
 *     - idem_external_fail() ::IDEM_EXTERNAL_FINAL: the provider refused for good; stored,
 *       and replayed as `rejected`;
 *     - idem_external_fail() ::IDEM_EXTERNAL_TRANSIENT: it failed and did nothing (a 503, a
 *       refused connection); the lease is released and a later attempt may dispatch again,
 *       with the same downstream key;
 *     - idem_external_unknown(): the dispatch happened (or may have) and its result is not
 *       known (a timeout, a lost reply). The record becomes `outcome_unknown`, with its
 *       attempt history and a reconciliation item of kind "outcome_unknown"; every call on
 *       the key answers `outcome_unknown` until someone finds out what happened and
 *       resolves it (idem_external_resolve(), `idem-reconcile resolve --as`). It is never
 *       dispatched again by itself, and must not be retried under a new key.
 *
 * Leases: while one is live, every other call on the key answers `in_progress` and never
 * dispatches. Only the attempt holding it (proved by the random token in its handle) can
 * complete, fail, extend or release it. A lease that lapses (its holder crashed or hung)
 * lets the next caller resume the operation as attempt N+1 **with the same downstream
 * key**: exactly one caller takes it over, and the history records the lapsed attempt.
 * Lease expiry is judged on the database's clock. A holder whose lease was taken over is
 * refused (IDEM_ELOCKED from extend and release); what it reports is still written to its
 * own attempt's history, and a dispatch it reports as done or unknown opens a
 * reconciliation item of kind "lease_lost" (the provider may have been called twice).
 *
 * Outbox: an effect of idem_store_execute() can enqueue external work with
 * idem_tx_enqueue(), which commits with the effect or not at all; a worker claims due
 * items with idem_outbox_claim() and reports each through the same calls as above, so an
 * item has the same guarantees. A transient failure reschedules the item after an
 * exponential backoff with full jitter; once its attempts are spent it goes to
 * reconciliation (kind "outbox_exhausted").
 *
 * Every call is scoped to one tenant, which the caller has authorized.
 *
 * Deadlines: begin, every report, extend, release and the outbox claim run under the
 * store's deadline_ms (store.h), from checking out a connection to the last reply, and end
 * `unavailable` when it passes. History and resolution take your own PGconn and are out of
 * that: its own settings bound them.
 *
 * Not promised: exactly once at a provider that ignores downstream keys. After a crash
 * whose lease lapsed, such a provider may act twice; report uncertain dispatches with
 * idem_external_unknown() so that they are reconciled instead of repeated.
 */
#ifndef IDEM_EXTERNAL_H
#define IDEM_EXTERNAL_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdint.h>

#include "common.h"
#include "store.h"
#include "uuid.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The external-effect path over a store. Opaque; thread-safe. */
typedef struct idem_external idem_external;

/** Settings. Initialize with ::IDEM_EXTERNAL_OPTIONS_INIT or idem_external_options_init(). */
typedef struct idem_external_options {
    unsigned int version;                /**< ::IDEM_EXTERNAL_OPTIONS_VERSION */
    unsigned int lease_ms;               /**< how long an attempt holds the key without a
                                              heartbeat; 100 to 86400000; default 30000 */
    unsigned int claim_wait_ms;          /**< how long begin waits for another transaction's
                                              uncommitted claim of the same key before it
                                              answers in_progress; 1 to 60000; default 50 */
    unsigned int outbox_backoff_base_ms; /**< after an outbox item's first transient
                                              failure it waits up to this; doubling; default
                                              1000 */
    unsigned int outbox_backoff_max_ms;  /**< the longest wait; default 300000 (5 min) */
    idem_log_fn log;                     /**< optional logging hook */
    void *log_ctx;                       /**< passed to @ref log */
} idem_external_options;

#define IDEM_EXTERNAL_OPTIONS_VERSION 1
#define IDEM_EXTERNAL_OPTIONS_INIT                                                                 \
    {                                                                                              \
        IDEM_EXTERNAL_OPTIONS_VERSION, 30000, 50, 1000, 300000, NULL, NULL                         \
    }

/** Fill @p opts with the defaults of struct version @p version.
 *  @return 0, or IDEM_EINVAL (NULL, or a version this library does not know). */
IDEM_API int idem_external_options_init(idem_external_options *opts, unsigned int version);

/**
 * Create the external-effect path over @p store (its pool, retention and limits).
 * @param out   caller owns; free with idem_external_free(). Untouched on failure.
 * @param store borrowed; must outlive the result.
 * @param opts  NULL for the defaults; copied.
 * @return 0, IDEM_EINVAL (err->field names the option), IDEM_ENOMEM.
 */
IDEM_API int idem_external_new(idem_external **out, idem_store *store,
                               const idem_external_options *opts, idem_error *err);

/** NULL is accepted. */
IDEM_API void idem_external_free(idem_external *ext);

/** One attempt at an external operation, holding its lease. Opaque; used by one thread at a
 *  time. */
typedef struct idem_external_attempt idem_external_attempt;

/**
 * Step 1: claim the key and take its lease (see the file comment).
 *
 * @param out      on 0 with a lease: the attempt, caller owns (idem_external_attempt_free(),
 *                 after reporting); on 0 without one (replayed): NULL. Untouched on failure.
 * @param outcome  always filled once its version is valid. With a lease its status is
 *                 `in_progress` (this call holds the key: dispatch now); otherwise the
 *                 record's answer, as idem_store_execute() gives it, receipt included for
 *                 replayed and rejected. Clear it with idem_outcome_clear().
 * @param req      the request (store.h), borrowed for the call; its arguments are what is
 *                 fingerprinted, so every retry must send the same.
 * @return 0 (a lease, or replayed); IDEM_EBUSY (in_progress: another attempt's lease is
 *         live); IDEM_ECONFLICT; IDEM_EREJECTED; IDEM_EUNKNOWN (outcome_unknown: reconcile);
 *         IDEM_EEXPIRED; IDEM_EINVAL (err->field names the field: "operation_id" for a new
 *         key whose UUIDv7 is dated further ahead than clock_skew_s); IDEM_ESCHEMA or
 *         IDEM_EPERM (misconfigured: migration 0004 missing, a privilege missing);
 *         IDEM_EUNAVAIL, IDEM_EDB, IDEM_ENOMEM (unavailable: retry with the same key).
 */
IDEM_API int idem_external_begin(idem_external_attempt **out, idem_outcome *outcome,
                                 idem_external *ext, const idem_request *req, idem_error *err);

/**
 * Step 3: the provider did it. Stores @p response as the receipt (RFC 8785 canonical JSON,
 * as idem_store_execute() stores an effect's) and @p provider_ref, ends the attempt.
 *
 * @param outcome       `created` with the receipt. If this attempt no longer held the lease
 *                      (it lapsed and another attempt took the key over), the record's
 *                      answer instead (replayed, in_progress, outcome_unknown...), and a
 *                      reconciliation item of kind "lease_lost" is opened.
 * @param provider_ref  the provider's reference (message or payment ID), or NULL; up to 256
 *                      bytes of printable ASCII.
 * @param response      borrowed; what the tool returns to its caller.
 * @return 0 (created, or replayed after a lost lease); otherwise the code of the status.
 *         IDEM_EUNAVAIL when the report could not be made or confirmed: the attempt is not
 *         ended, report again with the same handle.
 */
IDEM_API int idem_external_complete(idem_outcome *outcome, idem_external_attempt *attempt,
                                    const char *provider_ref, const json_t *response,
                                    idem_error *err);

/** How an attempt failed. */
typedef enum idem_external_failure {
    IDEM_EXTERNAL_FINAL = 0,    /**< the provider refused for good: stored, replayed as
                                     rejected */
    IDEM_EXTERNAL_TRANSIENT = 1 /**< nothing was done and a later attempt may try again */
} idem_external_failure;

/**
 * Step 3: the dispatch failed. Final: @p response (required) is stored as the receipt of
 * the refusal; `rejected` now and on every retry. Transient: the lease is released and the
 * attempt recorded with @p error; `effect_failed` (IDEM_EEFFECT), and a later begin (or the
 * outbox, after its backoff) dispatches again with the same downstream key.
 *
 * @param response  final: borrowed, required; transient: ignored (may be NULL).
 * @param error     what went wrong, for the attempt history; NULL or up to 1000 bytes.
 * @return IDEM_EREJECTED or IDEM_EEFFECT; with a lost lease the record's answer (see
 *         idem_external_complete()); IDEM_EINVAL; IDEM_EUNAVAIL (report again).
 */
IDEM_API int idem_external_fail(idem_outcome *outcome, idem_external_attempt *attempt,
                                idem_external_failure how, const json_t *response,
                                const char *error, idem_error *err);

/**
 * Step 3: the dispatch happened, or may have, and its result is not known. The record
 * becomes `outcome_unknown` and a reconciliation item of kind "outcome_unknown" is opened
 * in the same transaction; every later call answers outcome_unknown until it is resolved.
 *
 * @param provider_ref  a reference, if the provider gave one before the reply was lost; or
 *                      NULL.
 * @param error         what happened (timeout, connection reset); NULL or up to 1000 bytes.
 * @return IDEM_EUNKNOWN; with a lost lease the record's answer; IDEM_EINVAL; IDEM_EUNAVAIL.
 */
IDEM_API int idem_external_unknown(idem_outcome *outcome, idem_external_attempt *attempt,
                                   const char *provider_ref, const char *error, idem_error *err);

/**
 * Renew the lease for another ::idem_external_options.lease_ms from now (database clock).
 * Works while the attempt still holds the key, even after its lease lapsed if no one took
 * the key over meanwhile.
 * @return 0; IDEM_ELOCKED (the key was taken over, or the attempt already reported: do not
 *         dispatch); IDEM_EINVAL; IDEM_EUNAVAIL.
 */
IDEM_API int idem_external_extend(idem_external_attempt *attempt, idem_error *err);

/**
 * Give the lease back without dispatching (shutting down, say), which ends the attempt; a
 * later attempt may dispatch. An outbox item is due again at once (after the backoff).
 * @return 0; IDEM_ELOCKED (not held any more); IDEM_EINVAL; IDEM_EUNAVAIL.
 */
IDEM_API int idem_external_release(idem_external_attempt *attempt, idem_error *err);

/** NULL is accepted. An attempt freed without a report keeps the key until its lease lapses,
 *  after which the next caller resumes it. */
IDEM_API void idem_external_attempt_free(idem_external_attempt *attempt);

/** Accessors; strings are borrowed until idem_external_attempt_free() (or, for an outbox
 *  item, idem_outbox_batch_free()). A NULL @p attempt gives NULL or 0. */
IDEM_API const char *idem_external_attempt_tenant(const idem_external_attempt *attempt);
IDEM_API const char *idem_external_attempt_operation_id(const idem_external_attempt *attempt);
/** The downstream idempotency key to pass to the provider: the same on every attempt. */
IDEM_API const char *idem_external_attempt_downstream_key(const idem_external_attempt *attempt);
/** 1 for the first attempt, N+1 after N. */
IDEM_API int idem_external_attempt_number(const idem_external_attempt *attempt);
/** When the lease ends, in microseconds since the Unix epoch, on the database's clock. */
IDEM_API int64_t idem_external_attempt_lease_expires_at(const idem_external_attempt *attempt);
IDEM_API const char *idem_external_attempt_tool(const idem_external_attempt *attempt);
IDEM_API int idem_external_attempt_payload_version(const idem_external_attempt *attempt);
/** An outbox item's arguments as canonical JSON text; NULL for an attempt from begin (the
 *  caller has them). */
IDEM_API const char *idem_external_attempt_arguments(const idem_external_attempt *attempt);

/* ---- outbox --------------------------------------------------------------------------- */

/** Settings of one enqueued item. Initialize with ::IDEM_ENQUEUE_OPTIONS_INIT or
 *  idem_enqueue_options_init(). */
typedef struct idem_enqueue_options {
    unsigned int version;      /**< ::IDEM_ENQUEUE_OPTIONS_VERSION */
    unsigned int max_attempts; /**< attempts before the item goes to reconciliation;
                                    1 to 1000; default 8 */
} idem_enqueue_options;

#define IDEM_ENQUEUE_OPTIONS_VERSION 1
#define IDEM_ENQUEUE_OPTIONS_INIT                                                                  \
    {                                                                                              \
        IDEM_ENQUEUE_OPTIONS_VERSION, 8                                                            \
    }

/** Fill @p opts with the defaults of struct version @p version.
 *  @return 0, or IDEM_EINVAL (NULL, or an unknown version). */
IDEM_API int idem_enqueue_options_init(idem_enqueue_options *opts, unsigned int version);

/**
 * From inside an effect: enqueue a call of the external tool @p tool, committed with the
 * effect (or rolled back with it). The item is an operation of its own in the effect's
 * tenant, with a new UUIDv7 operation ID and its own downstream key, pending until a worker
 * dispatches it (idem_outbox_claim()). Like every statement of an effect it may run again
 * after a serialization failure; only the run that commits counts.
 *
 * @param out        may be NULL; else receives the item's operation ID (for the effect's
 *                   response, say).
 * @param arguments  borrowed; any JSON value (I-JSON, as a request's arguments).
 * @param opts       NULL for the defaults.
 * @return 0; IDEM_EINVAL (err->field names tool, payload_version, arguments or the option);
 *         otherwise what idem_tx_exec() returns (return it from the effect).
 */
IDEM_API int idem_tx_enqueue(char out[IDEM_UUID_STRING_SIZE], idem_tx *tx, const char *tool,
                             int payload_version, const json_t *arguments,
                             const idem_enqueue_options *opts, idem_error *err);

/** Items claimed by one idem_outbox_claim(). Opaque. */
typedef struct idem_outbox_batch idem_outbox_batch;

/**
 * Claim up to @p limit due items of @p tenant (optionally of one @p tool), oldest due first,
 * in one statement: rows other workers hold are skipped (`FOR UPDATE SKIP LOCKED`), and each
 * item claimed gets a lease, as from idem_external_begin(), and its next attempt recorded.
 * Dispatch each with its downstream key and report it through idem_external_complete(),
 * idem_external_fail() or idem_external_unknown(). An item whose attempts are spent is not
 * returned: it moves to reconciliation (kind "outbox_exhausted"). An item whose worker
 * crashed is due again when its lease lapses.
 *
 * @param out    caller owns (possibly empty); free with idem_outbox_batch_free(). Untouched
 *               on failure.
 * @param tool   NULL for every tool.
 * @param limit  1 to 1000.
 * @return 0; IDEM_EINVAL (err->field names it); IDEM_ESCHEMA, IDEM_EPERM; IDEM_EUNAVAIL,
 *         IDEM_EDB, IDEM_ENOMEM.
 */
IDEM_API int idem_outbox_claim(idem_outbox_batch **out, idem_external *ext, const char *tenant,
                               const char *tool, unsigned int limit, idem_error *err);

/** Items in @p batch (0 for NULL). */
IDEM_API size_t idem_outbox_batch_count(const idem_outbox_batch *batch);
/** The @p i-th item's attempt; borrowed until idem_outbox_batch_free() (do not free it
 *  alone). NULL when out of range. */
IDEM_API idem_external_attempt *idem_outbox_batch_at(const idem_outbox_batch *batch, size_t i);
/** NULL is accepted. */
IDEM_API void idem_outbox_batch_free(idem_outbox_batch *batch);

/* ---- history and reconciliation --------------------------------------------------------- */

/** One attempt as recorded. Read-only; owned by the ::idem_external_history that holds it. */
typedef struct idem_external_attempt_record {
    int number;               /**< 1, 2, ... */
    int64_t started_at;       /**< when it took the lease (microseconds since the epoch) */
    int64_t ended_at;         /**< when it reported or lapsed; 0 while it runs */
    const char *outcome;      /**< "completed", "failed", "retry", "released", "unknown",
                                   "lease_expired"; NULL while it runs */
    const char *provider_ref; /**< NULL when none */
    const char *error;        /**< NULL when none */
} idem_external_attempt_record;

/** What is recorded about one external operation. Opaque. */
typedef struct idem_external_history idem_external_history;

/**
 * Read an external operation's state and attempt history, scoped to its tenant.
 * @param out   caller owns; free with idem_external_history_free(). Untouched on failure.
 * @param conn  borrowed; idle. Nothing is prepared on it. Your own connection: no deadline
 *              of idem's bounds the call (its own settings, statement_timeout, do).
 * @return 0; IDEM_ENOTFOUND (no record of the key, or a local operation); IDEM_EINVAL;
 *         IDEM_ESCHEMA; IDEM_EUNAVAIL; IDEM_EDB; IDEM_ENOMEM.
 */
IDEM_API int idem_external_history_get(idem_external_history **out, PGconn *conn,
                                       const char *tenant, const char *operation_id,
                                       idem_error *err);
/** The record's state ("pending", "completed", "failed", "outcome_unknown", "expired"). */
IDEM_API const char *idem_external_history_state(const idem_external_history *h);
IDEM_API const char *idem_external_history_downstream_key(const idem_external_history *h);
/** The provider's reference, or NULL. */
IDEM_API const char *idem_external_history_provider_ref(const idem_external_history *h);
/** When the current lease ends (microseconds since the epoch); 0 when none is held. */
IDEM_API int64_t idem_external_history_lease_expires_at(const idem_external_history *h);
/** 1 when a lease is live now (database clock). */
IDEM_API int idem_external_history_lease_live(const idem_external_history *h);
/** The outbox item's state ("queued", "exhausted", ...), or NULL when not an outbox item. */
IDEM_API const char *idem_external_history_outbox_state(const idem_external_history *h);
/** When a queued outbox item is next due; 0 otherwise. */
IDEM_API int64_t idem_external_history_next_attempt_at(const idem_external_history *h);
/** Number of recorded attempts. */
IDEM_API size_t idem_external_history_count(const idem_external_history *h);
/** The @p i-th attempt, oldest first; borrowed until the history is freed; NULL when out of
 *  range. */
IDEM_API const idem_external_attempt_record *
idem_external_history_at(const idem_external_history *h, size_t i);
/** NULL is accepted. */
IDEM_API void idem_external_history_free(idem_external_history *h);

/** What reconciliation found out. */
typedef enum idem_resolution_kind {
    IDEM_RESOLVE_COMPLETED = 0, /**< the provider did it: later calls replay the receipt */
    IDEM_RESOLVE_FAILED = 1,    /**< it did not happen and will not: later calls are
                                     rejected with the receipt */
    IDEM_RESOLVE_ABANDONED = 2  /**< no one will find out: closed for good; later calls are
                                     rejected, never dispatched again */
} idem_resolution_kind;

/** A resolution. Initialize with ::IDEM_RESOLUTION_INIT or idem_resolution_init(). The
 *  strings are borrowed for the call. */
typedef struct idem_resolution {
    unsigned int version;     /**< ::IDEM_RESOLUTION_VERSION */
    idem_resolution_kind as;  /**< default ::IDEM_RESOLVE_COMPLETED */
    const char *provider_ref; /**< the provider's reference found, or NULL */
    const char *receipt;      /**< JSON that later calls get as the receipt (stored as
                                   canonical JSON); NULL: {"resolution": ..., "note": ...,
                                   "provider_ref": ...} */
    size_t receipt_len;       /**< its length in bytes */
    const char *note;         /**< what was found or done; required (reconcile.h limits) */
    const char *by;           /**< who resolved it; NULL: the database role */
} idem_resolution;

#define IDEM_RESOLUTION_VERSION 1
#define IDEM_RESOLUTION_INIT                                                                       \
    {                                                                                              \
        IDEM_RESOLUTION_VERSION, IDEM_RESOLVE_COMPLETED, NULL, NULL, 0, NULL, NULL                 \
    }

/** Fill @p res with an empty resolution of struct version @p version.
 *  @return 0, or IDEM_EINVAL (NULL, or an unknown version). */
IDEM_API int idem_resolution_init(idem_resolution *res, unsigned int version);

/**
 * Resolve an external operation that is `outcome_unknown`, or pending with no live lease
 * (an exhausted outbox item, an abandoned attempt), in one transaction: its record becomes
 * completed (with the receipt) or failed (completed: later calls replay the receipt;
 * failed and abandoned: later calls are rejected with it), its outbox item follows, and its
 * open reconciliation items of kinds outcome_unknown, outbox_exhausted and lease_lost are
 * resolved with the note.
 *
 * A local record left pending (kind `stalled_pending`, ::IDEM_RECONCILE_STALLED_AFTER_S in
 * reconcile.h) is resolved the same way: its effect may have committed, and nothing runs it
 * again; completed replays the receipt, failed and abandoned reject later calls with it.
 * Its resolution is kept as a resolved item of that kind, recorded or not before.
 *
 * @param conn  borrowed; idle. Nothing is prepared on it. Your own connection: no deadline
 *              of idem's bounds the call (its own settings, statement_timeout, do).
 * @return 0; IDEM_EBUSY (a live lease: an attempt is running; or a local record pending for
 *         less than ::IDEM_RECONCILE_STALLED_AFTER_S); IDEM_ENOTFOUND (no operation under
 *         the key, or a local one that is not pending); IDEM_ECONFLICT (it has already ended: the
 * message says how); IDEM_EINVAL (err->field names it: tenant, operation_id, resolution.as,
 *         resolution.receipt, resolution.provider_ref, resolution.note, resolution.by);
 *         IDEM_ESCHEMA; IDEM_EUNAVAIL; IDEM_EDB; IDEM_ENOMEM.
 */
IDEM_API int idem_external_resolve(PGconn *conn, const char *tenant, const char *operation_id,
                                   const idem_resolution *resolution, idem_error *err);

#ifdef __cplusplus
}
#endif

#endif
