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
 * Outbox: work enqueued by an effect and dispatched by a worker (outbox.h) goes through
 * the same reports. History and resolution, on your own connection, are administration
 * (sys/external.h).
 *
 * Every call is scoped to one tenant, which the caller has authorized.
 *
 * Deadlines: begin, every report, extend, release and the outbox claim run under the
 * store's deadline_ms (store.h), from checking out a connection to the last reply, and end
 * `unavailable` when it passes.
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

#ifdef __cplusplus
}
#endif

#ifndef IDEM_NO_DEPRECATED
/* Until 0.1 this header held the outbox and the administration calls too. */
#include "outbox.h"
#include "sys/external.h"
#endif

#endif
