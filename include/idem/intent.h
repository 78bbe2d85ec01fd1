/**
 * @file intent.h
 * @brief Durable intents: an approved action stored with the operation ID that every
 *        attempt reuses, so that a worker that restarts resumes it under the same key.
 *
 * Keeping the operation ID only in a worker's memory loses it when the worker restarts,
 * and the next attempt would run under a new key: a second effect. An intent keeps it in
 * the database, next to the approved action:
 *
 *  1. idem_intent_approve(), when the agent runtime approves an action: records the
 *     tenant, tool, payload version, arguments, who approved it and when, and a new UUIDv7
 *     operation ID, in state `approved`. Approving is idempotent on the caller's approval
 *     reference (a conversation's message ID, say): approving the same action twice gives
 *     one intent and one operation ID; the same reference with another tool or other
 *     arguments is refused (IDEM_ECONFLICT).
 *  2. idem_intent_execute() (a local effect, store.h) or idem_intent_execute_external()
 *     (external.h): runs the operation with the **stored** operation ID and arguments (the
 *     caller cannot pass others), under the caller's retry policy (retry.h), and moves the
 *     intent from the result: `attempted` while an attempt runs, then `done` (created,
 *     replayed, rejected), `needs_reconciliation` (expired, outcome_unknown, conflict: a
 *     reconciliation item of kind "intent" is opened, listed by `idem-reconcile list`), or
 *     it stays `attempted` after a retryable failure (in_progress, unavailable,
 *     effect_failed, misconfigured), for recovery to pick up.
 *  3. idem_intent_recover(), in a worker that (re)starts: claims the tenant's (or every
 *     tenant's) intents that are `approved` or `attempted` and not held by a live lease,
 *     oldest first, and leases them to the caller, so that two recovering workers never
 *     take the same one. Executing a recovered intent re-runs it with the same operation
 *     ID: if the first attempt had committed, the store answers `replayed` with the stored
 *     receipt and nothing runs twice.
 *
 * Cancelling (idem_intent_cancel()) succeeds only before any effect began, and races
 * safely with execution: a local effect marks the intent in its own transaction, and an
 * external dispatch only happens after its attempt marked the intent, so either the
 * cancel comes first and no effect ever runs, or the effect does and the cancel is
 * refused.
 *
 * Leases: while an intent is executed or has been recovered, it is held by one worker
 * (a token, and a time on the database's clock). Another execute or recovery of it answers
 * `in_progress` (IDEM_EBUSY) until the lease is released (at the end of the execution) or
 * lapses (its worker died). A lease that lapses while its worker still runs lets a second
 * worker execute the same operation ID: the store still runs the effect at most once, so a
 * lease only spares work. Choose the lease longer than one execution (the store's
 * deadline_ms times the retry policy's attempts, plus backoffs).
 *
 * Deadlines: approve, get, cancel and recover each run under the store's deadline_ms
 * (store.h), from checking out a connection to the last reply, and end IDEM_EUNAVAIL when
 * it passes. An execution is a sequence of such calls, each under its own deadline_ms:
 * the start, the operation's own call (idem_store_execute() or idem_external_begin() and
 * the dispatch's report), the mark before a dispatch, and the record of the result; the
 * retry policy's backoffs come between attempts.
 *
 * Every call is scoped to one tenant, which the caller has authorized, except recovery
 * across all tenants (tenant NULL): row-level security (migration 0007) shows an
 * application's role (idem_app) no row without a tenant, so that call finds nothing for
 * it. A worker that recovers every tenant connects as a role in both idem_app (to execute)
 * and idem_operator (to see and lease every tenant's intents); an application worker
 * recovers the tenants it serves, one call each.
 *
 * Not kept: the sweeper removes operation records after their key memory, not intents;
 * executing an intent whose operation was forgotten answers expired.
 */
#ifndef IDEM_INTENT_H
#define IDEM_INTENT_H

#include <jansson.h>
#include <stdint.h>

#include "common.h"
#include "external.h"
#include "retry.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Longest approval reference, in bytes (printable ASCII, no space). */
#define IDEM_INTENT_REF_MAX 256
/** Longest approver or canceller name, in bytes (UTF-8, no control characters). */
#define IDEM_INTENT_BY_MAX 128

/** Where an intent stands. */
typedef enum idem_intent_state {
    IDEM_INTENT_APPROVED = 0,             /**< recorded, not attempted yet */
    IDEM_INTENT_ATTEMPTED = 1,            /**< an attempt started and did not finish it */
    IDEM_INTENT_DONE = 2,                 /**< created, replayed or rejected */
    IDEM_INTENT_NEEDS_RECONCILIATION = 3, /**< expired, outcome_unknown or conflict */
    IDEM_INTENT_CANCELLED = 4             /**< withdrawn before any effect; never executed */
} idem_intent_state;

/** "approved", "attempted", "done", "needs_reconciliation", "cancelled"; "unknown"
 *  outside the set. Static. */
IDEM_API const char *idem_intent_state_name(idem_intent_state state);

/** An intent as read from the database. Opaque; caller owns the ones it gets (free with
 *  idem_intent_free()), except those borrowed from an ::idem_intent_list. Used by one
 *  thread at a time: executing updates it. */
typedef struct idem_intent idem_intent;

/** What is approved. Initialize with ::IDEM_INTENT_REQUEST_INIT or
 *  idem_intent_request_init(); the strings are borrowed for the call. */
typedef struct idem_intent_request {
    unsigned int version;     /**< ::IDEM_INTENT_REQUEST_VERSION */
    const char *tenant;       /**< authorized by the caller; see validate.h */
    const char *approval_ref; /**< the approval's own reference (a message ID): approving
                                   again with it gives the same intent; 1 to
                                   ::IDEM_INTENT_REF_MAX bytes of printable ASCII */
    const char *tool;         /**< the write tool (validate.h) */
    int payload_version;      /**< version of its argument schema, >= 1 */
    const char *arguments;    /**< JSON text, as idem_request.arguments (I-JSON) */
    size_t arguments_len;     /**< its length in bytes */
    const char *approved_by;  /**< who approved it; 1 to ::IDEM_INTENT_BY_MAX bytes */
} idem_intent_request;

#define IDEM_INTENT_REQUEST_VERSION 1
#define IDEM_INTENT_REQUEST_INIT                                                                   \
    {                                                                                              \
        IDEM_INTENT_REQUEST_VERSION, NULL, NULL, NULL, 1, NULL, 0, NULL                            \
    }

/** Fill @p req with an empty request of struct version @p version (payload_version 1).
 *  @return 0, or IDEM_EINVAL (NULL, or an unknown version). */
IDEM_API int idem_intent_request_init(idem_intent_request *req, unsigned int version);

/**
 * Record an approved action, or find the one already recorded under its approval
 * reference. One statement, committed before it returns.
 * @param out  the intent (idem_intent_is_new() says whether this call made it); caller
 *             owns; free with idem_intent_free(). Untouched on failure.
 * @return 0; IDEM_ECONFLICT (err->field "approval_ref": the reference already names an
 *         intent with another tool, version or arguments; nothing is written); IDEM_EINVAL
 *         (err->field names the field; nothing is written); IDEM_ESCHEMA or IDEM_EPERM
 *         (misconfigured: migration 0006 missing, a privilege missing); IDEM_EUNAVAIL,
 *         IDEM_EDB, IDEM_ENOMEM.
 */
IDEM_API int idem_intent_approve(idem_intent **out, idem_store *store,
                                 const idem_intent_request *req, idem_error *err);

/**
 * Read one intent, scoped to its tenant.
 * @param out  caller owns; free with idem_intent_free(). Untouched on failure.
 * @return 0; IDEM_ENOTFOUND; IDEM_EINVAL; IDEM_ESCHEMA; IDEM_EUNAVAIL; IDEM_EDB.
 */
IDEM_API int idem_intent_get(idem_intent **out, idem_store *store, const char *tenant,
                             const char *operation_id, idem_error *err);

/**
 * Cancel an intent whose effect has not begun: it is never executed afterwards.
 * Cancelling a cancelled intent again succeeds.
 * @param out  the intent as it now is (caller owns; idem_intent_free()), or NULL. Untouched
 *             on failure.
 * @param by   who cancels; NULL or 1 to ::IDEM_INTENT_BY_MAX bytes.
 * @return 0; IDEM_ENOTFOUND; IDEM_ECONFLICT (err->field "intent": an effect began, or the
 *         intent is finished; execute or recover it instead); IDEM_EINVAL; IDEM_ESCHEMA;
 *         IDEM_EUNAVAIL; IDEM_EDB.
 */
IDEM_API int idem_intent_cancel(idem_intent **out, idem_store *store, const char *tenant,
                                const char *operation_id, const char *by, idem_error *err);

/** How an intent is executed. Initialize with ::IDEM_INTENT_EXEC_OPTIONS_INIT or
 *  idem_intent_exec_options_init(). */
typedef struct idem_intent_exec_options {
    unsigned int version;           /**< ::IDEM_INTENT_EXEC_OPTIONS_VERSION */
    const idem_retry_policy *retry; /**< borrowed; NULL: one attempt. Attempts that end
                                         in_progress or unavailable are retried with the
                                         same operation ID, as idem_retry_next() decides */
    idem_retry_budget *budget;      /**< borrowed; NULL: no budget */
    unsigned int lease_s;           /**< how long the execution holds the intent, 1 to
                                         86400; or 0 (the default): an intent from
                                         idem_intent_recover() keeps that recovery's lease
                                         (its end unchanged), any other takes
                                         ::IDEM_INTENT_LEASE_DEFAULT_S */
} idem_intent_exec_options;

/** The lease an execution takes when its options set none and the intent is not a
 *  recovered one (::idem_intent_exec_options.lease_s 0), in seconds. */
#define IDEM_INTENT_LEASE_DEFAULT_S 60

#define IDEM_INTENT_EXEC_OPTIONS_VERSION 1
#define IDEM_INTENT_EXEC_OPTIONS_INIT                                                              \
    {                                                                                              \
        IDEM_INTENT_EXEC_OPTIONS_VERSION, NULL, NULL, 0                                            \
    }

/** Fill @p opts with the defaults of struct version @p version.
 *  @return 0, or IDEM_EINVAL (NULL, or an unknown version). */
IDEM_API int idem_intent_exec_options_init(idem_intent_exec_options *opts, unsigned int version);

/**
 * Execute an intent through the store (store.h): idem_store_execute() with the intent's
 * stored tenant, operation ID, tool, version and arguments, and idem_request.attempt set to
 * the intent's attempt count (so a resumed intent looks its key up first). Each attempt
 * first marks the intent `attempted` and takes its lease (its own statement); the effect
 * marks the intent in its own transaction before it runs (so the mark, naming the attempt,
 * commits with the effect); the result moves the intent (see the file comment) and
 * releases the lease.
 *
 * @param out     always filled once its version is valid, as idem_store_execute() fills it.
 * @param intent  from approve, get or recover; borrowed; updated to the intent's state
 *                after the call (when it could be read back), which ends the borrow of
 *                its strings. One from idem_intent_recover() executes under that
 *                recovery's lease (its token, and its end unless @p opts sets a lease_s,
 *                which then runs from each attempt's start); any other takes a lease of
 *                its own, and answers in_progress while another worker holds one.
 * @param effect  the tool's effect, as for idem_store_execute(); @p ctx is passed to it.
 * @param opts    NULL for the defaults (one attempt).
 * @return as idem_store_execute() (0 for created and replayed); and IDEM_ECONFLICT with
 *         err->field "intent" and status conflict for a cancelled intent (nothing runs);
 *         IDEM_EBUSY (in_progress) while another worker holds its lease; IDEM_ENOTFOUND.
 *         When the effect committed but the intent could not be updated afterwards (the
 *         database went away), the call still answers from the store; the intent stays
 *         `attempted` and a later execute or recovery replays it.
 */
IDEM_API int idem_intent_execute(idem_outcome *out, idem_store *store, idem_intent *intent,
                                 idem_effect_fn effect, void *ctx,
                                 const idem_intent_exec_options *opts, idem_error *err);

/**
 * An external dispatch, run by idem_intent_execute_external() while its attempt holds
 * the operation's lease: call the provider with the attempt's downstream key and report
 * what happened with exactly one of idem_external_complete(), idem_external_fail() or
 * idem_external_unknown() on @p out, returning that call's code. It must not free
 * @p attempt.
 * @param arguments  the intent's stored arguments, borrowed for the call.
 */
typedef int (*idem_intent_dispatch_fn)(idem_outcome *out, idem_external_attempt *attempt,
                                       const json_t *arguments, void *ctx, idem_error *err);

/**
 * Execute an intent through the external-effect path (external.h): idem_external_begin()
 * with the intent's stored request; when it gives a lease, the intent is marked (the
 * effect began: it can no longer be cancelled) and @p dispatch runs. A key that already
 * has a record answers without dispatching (replayed, rejected, outcome_unknown...). The
 * intent moves as with idem_intent_execute().
 * @return as idem_external_begin() and the report @p dispatch made; IDEM_ECONFLICT (field
 *         "intent") for a cancelled intent: nothing is dispatched, and a lease just taken
 *         is released.
 */
IDEM_API int idem_intent_execute_external(idem_outcome *out, idem_external *ext,
                                          idem_intent *intent, idem_intent_dispatch_fn dispatch,
                                          void *ctx, const idem_intent_exec_options *opts,
                                          idem_error *err);

/** Which unfinished intents to recover. Initialize with ::IDEM_INTENT_RECOVER_OPTIONS_INIT
 *  or idem_intent_recover_options_init(). */
typedef struct idem_intent_recover_options {
    unsigned int version; /**< ::IDEM_INTENT_RECOVER_OPTIONS_VERSION */
    unsigned int lease_s; /**< how long the recovered intents are held for the caller; 1 to
                               86400; default 60 */
    unsigned int max;     /**< most intents taken; 1 to 1000; default 10 */
} idem_intent_recover_options;

#define IDEM_INTENT_RECOVER_OPTIONS_VERSION 1
#define IDEM_INTENT_RECOVER_OPTIONS_INIT                                                           \
    {                                                                                              \
        IDEM_INTENT_RECOVER_OPTIONS_VERSION, 60, 10                                                \
    }

/** Fill @p opts with the defaults of struct version @p version.
 *  @return 0, or IDEM_EINVAL (NULL, or an unknown version). */
IDEM_API int idem_intent_recover_options_init(idem_intent_recover_options *opts,
                                              unsigned int version);

/** A list of intents. Opaque. */
typedef struct idem_intent_list idem_intent_list;

/**
 * Claim unfinished intents (`approved` or `attempted`, no live lease), oldest approval
 * first, and lease them to the caller in one statement (`FOR UPDATE SKIP LOCKED`): two
 * workers recovering at once get disjoint lists. On a database with the citus extension,
 * recovery across tenants (@p tenant NULL) first reads which tenants the oldest intents
 * belong to, without locking them (Citus refuses row locks across shards), then claims each
 * tenant's on its shard the same way; if a later tenant's claim fails, the intents already
 * claimed stay leased until their lease lapses. Execute each with idem_intent_execute()
 * or idem_intent_execute_external() (the lease is the list's, and executing keeps it); an
 * intent not executed is free again when its lease lapses.
 * @param out     caller owns; free with idem_intent_list_free(). Possibly empty. Untouched
 *                on failure.
 * @param tenant  the tenant; NULL for every tenant (operator work: see the file comment).
 * @param opts    NULL for the defaults.
 * @return 0; IDEM_EINVAL (err->field names the field); IDEM_ESCHEMA; IDEM_EPERM;
 *         IDEM_EUNAVAIL; IDEM_EDB; IDEM_ENOMEM.
 */
IDEM_API int idem_intent_recover(idem_intent_list **out, idem_store *store, const char *tenant,
                                 const idem_intent_recover_options *opts, idem_error *err);

/** Number of intents in @p list (0 for NULL). */
IDEM_API size_t idem_intent_list_count(const idem_intent_list *list);
/** The @p i-th intent, borrowed until idem_intent_list_free(); NULL when out of range. */
IDEM_API idem_intent *idem_intent_list_at(idem_intent_list *list, size_t i);
/** NULL is accepted. */
IDEM_API void idem_intent_list_free(idem_intent_list *list);

/** NULL is accepted. */
IDEM_API void idem_intent_free(idem_intent *intent);

/** Accessors; strings are borrowed until the intent is freed or executed again. A NULL
 *  @p intent gives NULL, 0 or IDEM_INTENT_APPROVED. */
IDEM_API const char *idem_intent_tenant(const idem_intent *intent);
/** The operation ID every attempt uses (made at approval). */
IDEM_API const char *idem_intent_operation_id(const idem_intent *intent);
IDEM_API const char *idem_intent_approval_ref(const idem_intent *intent);
IDEM_API const char *idem_intent_tool(const idem_intent *intent);
IDEM_API int idem_intent_payload_version(const idem_intent *intent);
/** The approved arguments as RFC 8785 canonical JSON. */
IDEM_API const char *idem_intent_arguments(const idem_intent *intent);
IDEM_API const char *idem_intent_approved_by(const idem_intent *intent);
/** Microseconds since the Unix epoch, database clock. */
IDEM_API int64_t idem_intent_approved_at(const idem_intent *intent);
/** Where the intent stands now (it changes as it is executed). */
IDEM_API idem_intent_state idem_intent_current_state(const idem_intent *intent);
/** 1 when idem_intent_approve() made it in this call; 0 otherwise. */
IDEM_API int idem_intent_is_new(const idem_intent *intent);
/** Attempts started so far, over every worker. */
IDEM_API int idem_intent_attempts(const idem_intent *intent);
/** The attempt that produced the result (see the file comment); 0 while unfinished. */
IDEM_API int idem_intent_result_attempt(const idem_intent *intent);
/** The status that finished the intent, or the last attempt's ("created", "unavailable",
 *  ...; idem_status_name()); NULL before any attempt ended. */
IDEM_API const char *idem_intent_result_status(const idem_intent *intent);
/** The last attempt's error when it did not finish the intent; NULL otherwise. */
IDEM_API const char *idem_intent_last_error(const idem_intent *intent);
/** When the current lease lapses (microseconds, database clock); 0 when none is held. */
IDEM_API int64_t idem_intent_lease_until(const idem_intent *intent);

#ifdef __cplusplus
}
#endif

/* idem_intent_state_get(), this header's name of 0.1: deprecated.h */
#define IDEM__INTENT_H_DONE
#include "deprecated.h"

#endif
