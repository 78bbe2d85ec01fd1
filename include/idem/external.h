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
 *       the key answers `outcome_unknown` until the provider is asked (a resolver, see
 *       "Resolvers" below) or someone finds out what happened and resolves it
 *       (idem_external_resolve(), `idem-reconcile resolve --as`). It is never dispatched
 *       again by itself, and must not be retried under a new key.
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
 * A record that is outcome_unknown, when its tool has a resolver (see "Resolvers"), is asked
 * about within this call's deadline first: done answers replayed with the provider's result,
 * failed rejected, not done gives this call the lease (attempt N+1, the same downstream
 * key), and unknown answers outcome_unknown with the resolver's reason.
 *
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

/*
 * Resolvers: asking the provider what became of an unknown outcome.
 *
 * Most providers that take an idempotency key can be asked about it. An application
 * registers a resolver per tool (idem_external_set_resolver()): a callback of its own that
 * asks the provider about a downstream key and answers one of
 *  - done (idem_external_answer_done()): the provider did it; its result becomes the stored
 *    receipt, the record completed, and every call replays it;
 *  - failed (idem_external_answer_failed()): it refused for good; stored, and every call is
 *    rejected with it;
 *  - not done (idem_external_answer_not_done()): it has no record of the key, so it is safe
 *    to dispatch again with the same downstream key: the record is pending again, without a
 *    lease, and the next attempt (a retry's idem_external_begin(), or the outbox) dispatches
 *    it, once, with the same key;
 *  - still unknown (idem_external_answer_unknown(), with the reason): nothing changes.
 *
 * It runs when idem_external_begin() meets an `outcome_unknown` record of its tool, within
 * that call's deadline, and when an application's worker calls idem_external_probe(); only
 * the process that registered it can run it. Every answer is recorded in the operation's
 * history (idem_external_history_probe_at(), sys/external.h): who asked, when, how long it
 * took, what the provider said. The provider may be asked several times at once (a retry
 * and a worker, say): the record changes once, by the first definite answer recorded, and
 * its reconciliation item of kind "outcome_unknown" is resolved once, naming the resolver.
 *
 * A resolver runs in a thread of its own, which the library waits for at most its time
 * limit (idem_external_resolver.timeout_ms, and never more than half of what is left of the
 * calling call's deadline: the other half records the answer). One that has not answered
 * by then is not stopped: its answer is discarded when it comes, the outcome stays unknown
 * ("no answer within N ms"), and its @c ctx must stay valid until it returns. A resolver
 * that returns non-zero, answers nothing, or answers what cannot be stored leaves the
 * outcome unknown, the reason recorded.
 */

/** What a provider said about a downstream key. */
typedef enum idem_external_verdict {
    IDEM_PROBE_UNKNOWN = 0, /**< no usable answer: the outcome stays unknown */
    IDEM_PROBE_DONE = 1,    /**< the provider did it: completed, its result the receipt */
    IDEM_PROBE_FAILED = 2,  /**< it refused for good: failed, replayed as rejected */
    IDEM_PROBE_NOT_DONE = 3 /**< it has no record of the key: dispatched again, with the
                                 same downstream key */
} idem_external_verdict;

/** What a resolver is asked. Filled by the library; borrowed for the callback's run.
 *  Later versions add members at the end. */
typedef struct idem_external_question {
    unsigned int version;       /**< ::IDEM_EXTERNAL_QUESTION_VERSION */
    const char *tenant;         /**< the operation's key */
    const char *operation_id;   /**< the operation's key */
    const char *tool;           /**< the tool the resolver was registered for */
    int payload_version;        /**< the version of the tool's arguments */
    const char *downstream_key; /**< the key every attempt passed to the provider */
    const char *provider_ref;   /**< a reference an attempt reported, or NULL */
    unsigned int timeout_ms;    /**< how long the library waits for the answer: give up (or
                                     answer unknown) before it */
} idem_external_question;

#define IDEM_EXTERNAL_QUESTION_VERSION 1

/** Where a resolver puts its answer. Opaque; valid during the callback only. */
typedef struct idem_external_answer idem_external_answer;

/**
 * A resolver: ask the provider about @p question->downstream_key and answer through one of
 * the idem_external_answer_*() calls, once.
 * @param answer   where the answer goes; borrowed for the call.
 * @param question borrowed for the call.
 * @param ctx      idem_external_resolver.ctx.
 * @return 0; any other value means the resolver itself failed: the outcome stays unknown,
 *         whatever it answered.
 */
typedef int (*idem_external_probe_fn)(idem_external_answer *answer,
                                      const idem_external_question *question, void *ctx);

/** The provider did it. @p result (borrowed, required) is its answer: stored as the receipt
 *  (RFC 8785 canonical JSON) that every call then replays. @p provider_ref: its reference
 *  (a message or payment ID), or NULL; up to 256 bytes of printable ASCII.
 *  @return 0; IDEM_EINVAL (err->field names it; the answer is then unusable: unknown). */
IDEM_API int idem_external_answer_done(idem_external_answer *answer, const char *provider_ref,
                                       const json_t *result, idem_error *err);

/** The provider refused for good. @p result (borrowed, required) is stored as the receipt of
 *  the refusal: every call is rejected with it. @p reason: NULL or up to 1000 bytes.
 *  @return 0; IDEM_EINVAL (the answer is then unusable: unknown). */
IDEM_API int idem_external_answer_failed(idem_external_answer *answer, const char *provider_ref,
                                         const json_t *result, const char *reason, idem_error *err);

/** The provider has no record of the key: nothing was done, and the next attempt dispatches
 *  it again with the same downstream key. @p reason: NULL or up to 1000 bytes.
 *  @return 0; IDEM_EINVAL (the answer is then unusable: unknown). */
IDEM_API int idem_external_answer_not_done(idem_external_answer *answer, const char *reason,
                                           idem_error *err);

/** The provider could not tell (or could not be asked). @p reason (required, up to 1000
 *  bytes) is recorded and reported to the caller.
 *  @return 0; IDEM_EINVAL (the answer is then unusable: unknown all the same). */
IDEM_API int idem_external_answer_unknown(idem_external_answer *answer, const char *reason,
                                          idem_error *err);

/** A tool's resolver. Initialize with ::IDEM_EXTERNAL_RESOLVER_INIT or
 *  idem_external_resolver_init(). */
typedef struct idem_external_resolver {
    unsigned int version;         /**< ::IDEM_EXTERNAL_RESOLVER_VERSION */
    idem_external_probe_fn probe; /**< required */
    void *ctx;                    /**< passed to @ref probe; must outlive the path and every
                                       run of @ref probe */
    const char *name;             /**< who asks, in the history and as the resolver of the
                                       reconciliation item; NULL: "resolver of <tool>"; up to
                                       128 bytes of UTF-8; copied */
    unsigned int timeout_ms;      /**< the longest the library waits for one answer; 1 to
                                       600000; default 2000; never more than half of what is
                                       left of the calling call's deadline */
} idem_external_resolver;

#define IDEM_EXTERNAL_RESOLVER_VERSION 1
#define IDEM_EXTERNAL_RESOLVER_INIT                                                                \
    {                                                                                              \
        IDEM_EXTERNAL_RESOLVER_VERSION, NULL, NULL, NULL, 2000                                     \
    }

/** Fill @p resolver with the defaults of struct version @p version.
 *  @return 0, or IDEM_EINVAL (NULL, or a version this library does not know). */
IDEM_API int idem_external_resolver_init(idem_external_resolver *resolver, unsigned int version);

/**
 * Register @p resolver for @p tool on @p ext, replacing the tool's earlier one. Thread-safe;
 * a probe already running keeps the resolver it started with.
 * @param resolver borrowed; copied (name included).
 * @return 0; IDEM_EINVAL (err->field names it: ext, tool, resolver, resolver.version,
 *         resolver.probe, resolver.name, resolver.timeout_ms); IDEM_ENOMEM.
 */
IDEM_API int idem_external_set_resolver(idem_external *ext, const char *tool,
                                        const idem_external_resolver *resolver, idem_error *err);

/** What idem_external_probe() found. Initialize with ::IDEM_EXTERNAL_PROBE_RESULT_INIT or
 *  idem_external_probe_result_init(). */
typedef struct idem_external_probe_result {
    unsigned int version;          /**< ::IDEM_EXTERNAL_PROBE_RESULT_VERSION */
    idem_external_verdict verdict; /**< what the resolver answered (unknown also when it
                                        failed, gave no answer in time or one that cannot be
                                        used) */
    int changed;                   /**< 1 when this call's answer changed the record; 0 when
                                        another call's had already, or it changed nothing */
} idem_external_probe_result;

#define IDEM_EXTERNAL_PROBE_RESULT_VERSION 1
#define IDEM_EXTERNAL_PROBE_RESULT_INIT                                                            \
    {                                                                                              \
        IDEM_EXTERNAL_PROBE_RESULT_VERSION, IDEM_PROBE_UNKNOWN, 0                                  \
    }

/** Fill @p result with an empty result of struct version @p version.
 *  @return 0, or IDEM_EINVAL (NULL, or an unknown version). */
IDEM_API int idem_external_probe_result_init(idem_external_probe_result *result,
                                             unsigned int version);

/**
 * Ask the provider, through the resolver registered for the operation's tool, what became of
 * an `outcome_unknown` operation, record the answer, and settle the record by it (see
 * "Resolvers" above), under the store's deadline_ms. For an application's worker: only its
 * process holds its resolvers.
 *
 * @param out  filled once its version is valid: the verdict, and whether this call changed
 *             the record.
 * @return 0 (a definite answer: the record is completed, failed or pending again, by this
 *         call or, out->changed 0, by another); IDEM_EUNKNOWN (the outcome stays unknown:
 *         err->message says why); IDEM_ECONFLICT (the record is not outcome_unknown: nothing
 *         asked; the message says its state); IDEM_ENOTFOUND (no external operation under the
 *         key, or no resolver registered for its tool); IDEM_EINVAL (err->field names it);
 *         IDEM_ESCHEMA (migration 0011 missing), IDEM_EPERM; IDEM_EUNAVAIL, IDEM_EDB,
 *         IDEM_ENOMEM (the answer may not be recorded: probe again).
 */
IDEM_API int idem_external_probe(idem_external_probe_result *out, idem_external *ext,
                                 const char *tenant, const char *operation_id, idem_error *err);

/** What idem_external_probe_open() did. Initialize with ::IDEM_EXTERNAL_PROBE_SUMMARY_INIT
 *  or idem_external_probe_summary_init(). */
typedef struct idem_external_probe_summary {
    unsigned int version; /**< ::IDEM_EXTERNAL_PROBE_SUMMARY_VERSION */
    unsigned int asked;   /**< operations whose provider was asked */
    unsigned int settled; /**< of those, settled by a definite answer (this call's or,
                               meanwhile, another's) */
    unsigned int unknown; /**< of those, still unknown */
} idem_external_probe_summary;

#define IDEM_EXTERNAL_PROBE_SUMMARY_VERSION 1
#define IDEM_EXTERNAL_PROBE_SUMMARY_INIT                                                           \
    {                                                                                              \
        IDEM_EXTERNAL_PROBE_SUMMARY_VERSION, 0, 0, 0                                               \
    }

/** Fill @p summary with an empty summary of struct version @p version.
 *  @return 0, or IDEM_EINVAL (NULL, or an unknown version). */
IDEM_API int idem_external_probe_summary_init(idem_external_probe_summary *summary,
                                              unsigned int version);

/**
 * idem_external_probe() for up to @p limit of @p tenant's open `outcome_unknown` operations
 * whose tools have a resolver on @p ext: those asked least recently first (never asked
 * before all), one after the other, each under the store's deadline_ms of its own. For a
 * worker's periodic run; each call asks the provider again about what is still unknown, so
 * space the runs out.
 *
 * @param out   filled once its version is valid, as far as the call got.
 * @param limit 1 to 1000.
 * @return 0 (every operation listed was asked about; those still unknown are counted, not
 *         errors); IDEM_EINVAL (err->field names it); otherwise the code of the listing, or
 *         of the question it stopped at (IDEM_EUNAVAIL, IDEM_EDB, IDEM_ESCHEMA, IDEM_EPERM,
 *         IDEM_ENOMEM).
 */
IDEM_API int idem_external_probe_open(idem_external_probe_summary *out, idem_external *ext,
                                      const char *tenant, unsigned int limit, idem_error *err);

#ifdef __cplusplus
}
#endif

/* The outbox and the administration calls this header held until 0.1: deprecated.h */
#define IDEM__EXTERNAL_H_DONE
#include "deprecated.h"

#endif
