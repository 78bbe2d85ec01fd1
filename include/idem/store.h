/**
 * @file store.h
 * @brief The idempotent store: run a write tool's effect at most once per
 *        (tenant, operation_id), committing the effect and its operation record in one
 *        SERIALIZABLE transaction, and replay the stored receipt to every retry.
 *
 * The protocol of idem_store_execute():
 *  1. validate the request (tenant, operation_id, tool, payload_version, trace_id,
 *     arguments) and compute its fingerprint (fingerprint.h);
 *  2. unless the request says it is a first attempt (idem_request.attempt == 1), look the
 *     key up in one round trip: a completed key answers `replayed` with the stored
 *     receipt, byte for byte, `rejected` for a stored refusal, or `conflict` when the
 *     fingerprint differs;
 *  3. otherwise `BEGIN ISOLATION LEVEL SERIALIZABLE`, claim the key with
 *     `INSERT ... ON CONFLICT DO NOTHING` in the same round trip as the effect's first
 *     statement (a claim that finds a record answers as the lookup would, and the
 *     attempt is rolled back), run the effect through the transaction it is given, then
 *     store its response and `COMMIT` in one more round trip;
 *  4. serialization failures (40001) and deadlocks (40P01) roll back and start again from
 *     step 2, after an exponential backoff with full jitter, within the deadline: the effect
 *     may therefore run more than once, but only one run ever commits;
 *  5. a connection lost during COMMIT is resolved by looking the key up on a fresh
 *     connection (never by guessing): `created` if this call's claim committed, `replayed`
 *     or `conflict` if another's did, a clean new attempt if nothing did.
 *
 * Retention (sys/sweep.h): a record is kept for its tool's retention window, then the sweeper
 * turns it into a tombstone, which is kept until the end of the tool's key memory. A call
 * whose key hits a tombstone, or whose UUIDv7 operation ID is older than the tool's key
 * memory (judged on the database's clock, with ::idem_store_options.clock_skew_s of
 * allowance) while no record exists, runs no effect: it answers `expired` and records a
 * reconciliation item (sys/reconcile.h). A UUIDv7 operation ID dated further ahead than
 * clock_skew_s on the database's clock, whose key has no record, is refused the same way
 * on every path (a first attempt's claim or declared statement writes nothing for it, and
 * the lookup that follows tells it apart, one more round trip): it answers
 * `invalid` (IDEM_EINVAL, err->field "operation_id", saying how far ahead), keeps no
 * effect (a declared statement runs and is rolled back) and writes nothing, since once
 * its tombstone were purged the horizon could never catch its late retry. Both windows
 * are fixed per record when its key is claimed, so changing the configuration never
 * shortens a window already promised.
 *
 * The caller must have authorized the tenant before the call. An operation ID is not a
 * credential: the same ID in another tenant is another key, and nothing of tenant A's
 * operation is observable from tenant B.
 *
 * A receipt says what happened to the request, not the resource's current state; read
 * current state with a separate call.
 */
#ifndef IDEM_STORE_H
#define IDEM_STORE_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdint.h>

#include "common.h"
#include "fingerprint.h"
#include "identity.h"
#include "json.h"
#include "pool.h"
#include "retry.h"
#include "status.h"
#include "validate.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A store over a pool. Opaque; thread-safe: one store serves every thread. */
typedef struct idem_store idem_store;

/** One tool's retention windows (::idem_store_options.tools). */
typedef struct idem_tool_retention {
    const char *tool;          /**< the tool's name (validate.h); each at most once */
    unsigned int retention_s;  /**< how long its records are kept; 0 = the store's; else
                                    ::IDEM_WINDOW_MIN_S to ::IDEM_WINDOW_MAX_S */
    unsigned int key_memory_s; /**< how long its keys are remembered (record, then
                                    tombstone), from the claim; >= its retention; 0 = the
                                    store's; else within the same bounds */
} idem_tool_retention;

/** Store settings. Initialize with ::IDEM_STORE_OPTIONS_INIT or idem_store_options_init(),
 *  then change what you need. A library accepts every version from 1 to its own; fields a
 *  caller's older version lacks keep their defaults. */
typedef struct idem_store_options {
    unsigned int version;         /**< ::IDEM_STORE_OPTIONS_VERSION */
    unsigned int retention_s;     /**< how long a record is kept (its expires_at), unless
                                       its tool has its own; ::IDEM_WINDOW_MIN_S (1 s) to
                                       ::IDEM_WINDOW_MAX_S (3650 days); default 604800
                                       (7 days) */
    unsigned int deadline_ms;     /**< the longest one call may spend, counted from its
                                       start: checking out a connection (the wait for a free
                                       one, opening one), attempts, backoffs, lock waits and
                                       statements (each transaction sets lock_timeout and
                                       statement_timeout to what is left of it, less a
                                       margin) and every wait for the server's reply, after
                                       which the
                                       connection is dropped (a statement sent at the last
                                       moment still gets 100 ms) and the call ends
                                       unavailable. It bounds every call on the store's pool:
                                       the store's, the external path's and its outbox's
                                       (external.h), and intents' (intent.h); > 0; default
                                       10000 */
    unsigned int max_attempts;    /**< transaction attempts per call; default 20 */
    unsigned int backoff_base_ms; /**< first serialization backoff ceiling; default 2 */
    unsigned int backoff_max_ms;  /**< backoff cap; default 100 */
    size_t max_arguments_bytes;   /**< longest arguments JSON; default 1 MiB */
    size_t max_response_bytes;    /**< longest canonical response; default 1 MiB */
    idem_log_fn log;              /**< optional logging hook */
    void *log_ctx;                /**< passed to @ref log */
    /* version 2 */
    unsigned int key_memory_s;        /**< how long a key is remembered from its claim (its
                                           forget_at), unless its tool has its own: the record,
                                           then its tombstone; >= retention_s, at most
                                           ::IDEM_WINDOW_MAX_S; default 2592000 (30 days) */
    unsigned int clock_skew_s;        /**< allowance between the clocks that made UUIDv7 operation
                                           IDs and the database's, behind (the horizon) and
                                           ahead (an ID dated further ahead is invalid); at
                                           most 86400; default 300. idem-sweep's --clock-skew
                                           must be the same */
    const idem_tool_retention *tools; /**< per-tool windows, copied by idem_store_new();
                                           NULL when ntools is 0 */
    size_t ntools;                    /**< entries in @ref tools */
    /* version 3 */
    const idem_tool_identity *const *identities; /**< per-tool identity policies
                                                      (identity.h), copied by
                                                      idem_store_new(); a tool not listed
                                                      has ::IDEM_IDENTITY_ALL. NULL when
                                                      nidentities is 0 */
    size_t nidentities;                          /**< entries in @ref identities */
} idem_store_options;

#define IDEM_STORE_OPTIONS_VERSION 3
#define IDEM_STORE_OPTIONS_INIT                                                                    \
    {                                                                                              \
        IDEM_STORE_OPTIONS_VERSION, 604800, 10000, 20, 2, 100, (size_t)1 << 20, (size_t)1 << 20,   \
            NULL, NULL, 2592000, 300, NULL, 0, NULL, 0                                             \
    }

/**
 * Fill @p opts with the defaults of struct version @p version (for bindings that cannot
 * use ::IDEM_STORE_OPTIONS_INIT).
 * @return 0, or IDEM_EINVAL (NULL, or a version this library does not know).
 */
IDEM_API int idem_store_options_init(idem_store_options *opts, unsigned int version);

/**
 * Create a store.
 * @param out   caller owns; free with idem_store_free(). Untouched on failure.
 * @param pool  borrowed; must outlive the store.
 * @param opts  NULL for the defaults; borrowed for the call (the tool table is copied).
 * @return 0, IDEM_EINVAL (err->field names the option: a window outside
 *         ::IDEM_WINDOW_MIN_S..::IDEM_WINDOW_MAX_S, a key memory shorter than its
 *         retention, a bad or repeated tool name; for an identity policy
 *         "options.identities[i].fields[j]" and the pointer refused, and why:
 *         identity.h), IDEM_ENOMEM.
 */
IDEM_API int idem_store_new(idem_store **out, idem_pool *pool, const idem_store_options *opts,
                            idem_error *err);

/** NULL is accepted. */
IDEM_API void idem_store_free(idem_store *store);

/** Version of the document idem_store_tool_policy() returns (its member "version"). */
#define IDEM_TOOL_POLICY_VERSION 1

/**
 * A tool's published policy, as this store applies it, for applications that publish
 * their tools (the gateway's `GET /v1/tools` is one): a JSON object
 *
 *     {"version": 1, "tool": "create_note", "retention_s": 604800,
 *      "key_memory_s": 2592000, "stored_failures": ["rejected"],
 *      "unstored_failures": ["invalid", "conflict", "in_progress", "effect_failed",
 *                            "unavailable", "misconfigured"],
 *      "identity": {"mode": "except", "fields": ["/requested_at"]}}
 *
 * retention_s and key_memory_s: the tool's windows (its own, or the store's);
 * stored_failures: the statuses a retry replays from the record (a final refusal:
 * rejected); unstored_failures: those after which nothing is stored, so that a retry with
 * the same key runs again; identity: the mode ("all", "only", "except": identity.h) and,
 * unless "all", its fields in the order a conflict compares them. Members are added only
 * with a new version; a tool the store has no settings for gets the store's.
 *
 * @param out  a new reference; caller owns (json_decref()). Untouched on failure.
 * @return 0, IDEM_EINVAL (a NULL argument; field "tool": not a tool name), IDEM_ENOMEM.
 */
IDEM_API int idem_store_tool_policy(json_t **out, const idem_store *store, const char *tool,
                                    idem_error *err);

/** One request: the key, what is called, and with which arguments. Initialize with
 *  ::IDEM_REQUEST_INIT or idem_request_init(). The strings are borrowed for the call. */
typedef struct idem_request {
    unsigned int version;     /**< ::IDEM_REQUEST_VERSION */
    const char *tenant;       /**< authorized by the caller; see validate.h */
    const char *operation_id; /**< allocated once per approved action; see uuid.h */
    const char *tool;         /**< the write tool's name */
    int payload_version;      /**< version of the tool's argument schema, >= 1 */
    const char *arguments;    /**< the arguments as JSON text (any JSON value) */
    size_t arguments_len;     /**< its length in bytes */
    const char *trace_id;     /**< optional provider tool-call ID, for tracing only;
                                   never part of the key */
    /* version 2 */
    unsigned int attempt; /**< which transport attempt this is, as the caller counts them
                               (the retry helper's count): 1, a first attempt: the store
                               claims the key at once, in the round trip of the effect's
                               first statement (two round trips for a new key), and the
                               claim answers if the key has a record after all (the
                               effect's first statement then ran for nothing and is rolled
                               back); 2 and up, a retry: the store looks the key up first,
                               so that a replay costs one round trip; 0 (the default, and
                               version 1 requests), unknown: as a retry. Every value is
                               correct for every key; it only chooses the cheaper path. */
    /* version 3 */
    const idem_arguments *parsed; /**< optional (NULL): the arguments as the caller already
                                       parsed them with idem_arguments_parse(), from the same
                                       bytes as `arguments`; the store then takes their tree
                                       instead of parsing the text again. Made from other
                                       bytes: the call is refused, IDEM_EINVAL, field
                                       "parsed", with nothing written. Owned by the caller;
                                       only read during the call. */
} idem_request;

#define IDEM_REQUEST_VERSION 3
#define IDEM_REQUEST_INIT                                                                          \
    {                                                                                              \
        IDEM_REQUEST_VERSION, NULL, NULL, NULL, 1, NULL, 0, NULL, 0, NULL                          \
    }

/** Fill @p req with an empty request of struct version @p version (payload_version 1).
 *  @return 0, or IDEM_EINVAL (NULL, or an unknown version). */
IDEM_API int idem_request_init(idem_request *req, unsigned int version);

/** The transaction an effect runs in. Opaque; valid only during the effect call. */
typedef struct idem_tx idem_tx;

/**
 * Run one parameterized statement in the effect's transaction (text parameters, text
 * results). Never COMMIT or ROLLBACK here: the store does. A statement that would end the
 * store's transaction (COMMIT, END, ABORT, ROLLBACK other than ROLLBACK TO a savepoint,
 * PREPARE TRANSACTION), start one (BEGIN, START TRANSACTION), change it (SET TRANSACTION)
 * or change the pooled session for every later call (SET without LOCAL, RESET, DISCARD,
 * DEALLOCATE, LISTEN, UNLISTEN, LOAD) is refused before it is sent (IDEM_EINVAL, field
 * "sql"), and the call then ends effect_failed with nothing stored; SET LOCAL, SET
 * CONSTRAINTS and savepoints are fine. A session's setting made otherwise
 * (set_config(..., false) in a query) is not recognised: do not. The first call travels in one
 * round trip with the store's BEGIN and its claim of the key. The pooled connection keeps
 * the statement prepared (by a name that carries a hash of @sql) from the second time it
 * runs it, so that the same SQL is parsed and planned once per connection, not on every
 * call (at most 32 texts per connection; SQL run once is never kept); behind a
 * transaction-mode pooler (::IDEM_POOLER_TRANSACTION) it goes unnamed instead. It is
 * prepared where it
 * runs, inside the transaction: one that cannot be prepared fails like one that cannot
 * run, and aborts the transaction. A kept statement whose table has changed its columns
 * since (PostgreSQL: "cached plan must not change result type") makes the call start
 * over once, the statement sent afresh; the pool's connections then prepare it anew.
 * @param out  on success the result; caller PQclear()s it. Untouched on failure.
 * @return 0, IDEM_EDB (err has the SQLSTATE, and the message names the statement whole
 *         before the server's words: up to 252 bytes of it, then "...", so that the
 *         server's words and the store's context keep their room in the message; the
 *         transaction is now aborted: return the code from the effect), IDEM_EUNAVAIL
 *         (connection lost), IDEM_EBUSY (another call recorded the key first: this
 *         attempt is void and the store answers from that record), IDEM_EINVAL (bad
 *         arguments, or the statement ended the transaction: the call then ends
 *         effect_failed and nothing is stored).
 */
IDEM_API int idem_tx_exec(PGresult **out, idem_tx *tx, const char *sql, int nparams,
                          const char *const *values, idem_error *err);

/** The request's tenant and operation ID, borrowed for the effect's duration, so that the
 *  effect can scope and label its rows. */
IDEM_API const char *idem_tx_tenant(const idem_tx *tx);
IDEM_API const char *idem_tx_operation_id(const idem_tx *tx);

/** Effect results (non-negative); a negative IDEM_E* code is a transient failure. */
enum idem_effect_result {
    IDEM_EFFECT_OK = 0,           /**< *response is the receipt; stored as completed */
    IDEM_EFFECT_FINAL_FAILURE = 1 /**< *response describes a final refusal: stored, and this
                                       call and every retry end `rejected` with it as the
                                       receipt. What the effect wrote commits with it (an
                                       audit row of the refusal, say); write nothing if
                                       nothing should remain */
};

/**
 * A write tool's effect. It runs inside the store's transaction and touches only the
 * database, through @p tx, so that it is safe to run again after a rollback. Nothing it
 * does ever commits for a key that already has a record. After a lookup (a retry) it is
 * not called for such a key at all; on a first attempt (idem_request.attempt == 1) the
 * key is claimed together with its first statement, so it may start for a key that turns
 * out to have a record: idem_tx_exec() then returns IDEM_EBUSY, which it returns.
 *
 * @param response   set to a new reference (the store steals it) when returning
 *                   IDEM_EFFECT_OK or IDEM_EFFECT_FINAL_FAILURE.
 * @param arguments  the parsed arguments, borrowed.
 * @param err        where to explain a negative return.
 * @return IDEM_EFFECT_OK, IDEM_EFFECT_FINAL_FAILURE, or a negative IDEM_E* code: the
 *         transaction is rolled back and nothing is stored. After a serialization failure
 *         or deadlock the store runs the effect again; after a lost connection, a lock
 *         or statement timeout (55P03, 57014: the server was busy), or when the store's
 *         own BEGIN or claim failed, the call ends unavailable; otherwise it ends
 *         effect_failed. A statement of the effect's that failed in one of these
 *         ways, or was refused (idem_tx_exec()), decides, whatever the effect returns;
 *         an effect that returns IDEM_EFFECT_OK after any other failure of its statements
 *         (one it did not recover from with ROLLBACK TO SAVEPOINT) ends effect_failed,
 *         with that statement's error. Except: a statement refused for want of a
 *         privilege (42501, "permission denied for table notes") ends the call
 *         misconfigured (IDEM_EPERM), not effect_failed, with the GRANT naming the
 *         object and the role in front of the statement's error and in err.hint; a
 *         refusal by row-level security (42501 too, "new row violates row-level security
 *         policy") is the effect's own and stays effect_failed. Told by the server's
 *         words in English: a refusal in another language stays effect_failed.
 */
typedef int (*idem_effect_fn)(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                              idem_error *err);

/** What a call produced. Caller-allocated: initialize with ::IDEM_OUTCOME_INIT or
 *  idem_outcome_init() (its version must be set before the call). */
typedef struct idem_outcome {
    unsigned int version;  /**< ::IDEM_OUTCOME_VERSION */
    idem_status status;    /**< always set by idem_store_execute() (once the struct's
                                version is valid) */
    char *receipt;         /**< created, replayed and rejected: the stored receipt's exact
                                bytes, NUL-terminated; caller owns (idem_outcome_clear());
                                else NULL */
    size_t receipt_len;    /**< its length, terminator excluded */
    unsigned int attempts; /**< transaction attempts this call made (0 for a pure replay) */
} idem_outcome;

#define IDEM_OUTCOME_VERSION 1
/** Empty initializer for ::idem_outcome. */
#define IDEM_OUTCOME_INIT                                                                          \
    {                                                                                              \
        IDEM_OUTCOME_VERSION, IDEM_STATUS_UNAVAILABLE, NULL, 0, 0                                  \
    }

/** Fill @p outcome with an empty outcome of struct version @p version.
 *  @return 0, or IDEM_EINVAL (NULL, or an unknown version). */
IDEM_API int idem_outcome_init(idem_outcome *outcome, unsigned int version);

/** Free the receipt and reset, keeping the version. NULL is accepted. */
IDEM_API void idem_outcome_clear(idem_outcome *outcome);

/**
 * Execute a request idempotently (see the protocol at the top of this file).
 *
 * @param out  always filled once its version is valid: out->status is the outcome;
 *             out->receipt is set for created, replayed and rejected. Clear it with
 *             idem_outcome_clear() (also before reuse).
 * @return 0 for created and replayed (err is then empty); otherwise the code of the status
 *         (idem_status_from_error()): IDEM_ECONFLICT (err->field "tool", "payload_version"
 *         or "arguments"; for a tool with an identity policy (identity.h), the JSON Pointer
 *         of the first identity field that differs, "/note", when the record keeps its
 *         fields' digests: not a tombstone, nor a record of an external effect or of a
 *         schema before migration 0012), IDEM_EINVAL (err->field names the
 *         field; a NULL store ends `invalid`, and so does a new key whose UUIDv7 is dated
 *         further ahead than clock_skew_s, field "operation_id"), IDEM_EBUSY,
 *         IDEM_EEFFECT (err has the effect's message), IDEM_EREJECTED (the receipt is the
 *         stored refusal), IDEM_EEXPIRED (past retention: no effect ran, no receipt; a
 *         reconciliation item of kind "expired" was recorded), IDEM_ESCHEMA or IDEM_EPERM
 *         for misconfigured (err->hint says what to fix: run `idem-migrate up`, or which
 *         GRANT), or for unavailable IDEM_EUNAVAIL, IDEM_EDB or IDEM_ENOMEM, with detail in
 *         @p err.
 */
IDEM_API int idem_store_execute(idem_outcome *out, idem_store *store, const idem_request *req,
                                idem_effect_fn effect, void *ctx, idem_error *err);

/**
 * A declared effect: a write tool whose effect is one SQL statement, with parameters taken
 * from the arguments, that returns its receipt as JSON. For example
 *
 *     INSERT INTO app.notes (tenant, text) VALUES ($1, $2)
 *     RETURNING json_build_object('note_id', note_id)
 *
 * with parameters {"$tenant", "text"}. No C callback: the whole call — the claim of the
 * key, the statement, the record with the statement's JSON as receipt, COMMIT — travels
 * in one round trip, in one SERIALIZABLE transaction. The statement runs inside a larger
 * statement of the store's (as a WITH query), so it must be one data-modifying statement
 * (INSERT, UPDATE, DELETE, each with RETURNING) or a SELECT, returning exactly one row
 * whose first column is JSON (json, jsonb, or text holding JSON); the record keeps that
 * column's text, and the call answers its canonical form (RFC 8785 whitespace and member
 * order, every number's digits as written) to the first caller and to every retry, byte
 * for byte (a record written before migration 0013 answers its stored text, as its first
 * caller got it). A statement that fails, returns no
 * row, several rows, SQL NULL, non-JSON, or a receipt longer than the store's
 * max_response_bytes ends the call `effect_failed`, with nothing stored. A trailing ';' and
 * comments after the statement are fine; a second statement is refused.
 * Opaque; thread-safe once made; it may serve any number of stores.
 */
typedef struct idem_declared idem_declared;

/**
 * Declare an effect.
 * @param out     caller owns; free with idem_declared_free() after the last call using it.
 * @param sql     the statement, with parameters $1..$nparams; copied.
 * @param params  what $1..$nparams are, in order: the name of a member of the arguments
 *                object (its value as text: a string's characters, a number's shortest
 *                form, true/false, an object or array as canonical JSON; a missing member
 *                or JSON null is SQL NULL); a JSON Pointer (RFC 6901), any parameter
 *                starting with '/', to a value anywhere in the arguments ("/order/id",
 *                "/items/0/sku"; "~1" stands for '/' and "~0" for '~' in a member's
 *                name), bound the same way, SQL NULL when it names nothing (a missing
 *                member, an index past the end or not an index, "-"); or "$tenant" /
 *                "$operation_id" for the key's parts (other names starting with '$' are
 *                refused). Copied. NULL when nparams is 0.
 * @return 0, IDEM_EINVAL (err->field: "sql", "params": also a '~' in a pointer not
 *         followed by '0' or '1'), IDEM_ENOMEM. A statement that
 *         could never run inside the store's (COMMIT, ROLLBACK, SET, VACUUM, CREATE ...:
 *         anything but SELECT, VALUES, TABLE, or INSERT, UPDATE, DELETE, MERGE with
 *         RETURNING, after WITH queries or not; an INSERT, UPDATE or DELETE without
 *         RETURNING) is refused here, field "sql", saying why, instead of failing every call.
 */
IDEM_API int idem_declared_new(idem_declared **out, const char *sql, const char *const *params,
                               size_t nparams, idem_error *err);

/** NULL is accepted. */
IDEM_API void idem_declared_free(idem_declared *declared);

/**
 * Execute a request whose effect is declared SQL: as idem_store_execute(), with the
 * same statuses, in one round trip for a new key marked as a first attempt
 * (idem_request.attempt == 1; otherwise a lookup comes first, and a replay costs that one
 * round trip). The arguments must be a JSON object.
 */
IDEM_API int idem_store_execute_declared(idem_outcome *out, idem_store *store,
                                         const idem_request *req, const idem_declared *effect,
                                         idem_error *err);

/** An operation record, as read by idem_store_get(). Opaque. */
typedef struct idem_operation idem_operation;

/**
 * Read the record of one key, scoped to its tenant: another tenant's record with the
 * same operation ID is never visible.
 * @param out  caller owns; free with idem_operation_free(). Untouched on failure.
 * @return 0, IDEM_ENOTFOUND, IDEM_EINVAL, IDEM_EUNAVAIL, IDEM_EDB.
 */
IDEM_API int idem_store_get(idem_operation **out, idem_store *store, const char *tenant,
                            const char *operation_id, idem_error *err);

/** Where a record stands. */
typedef enum idem_state {
    IDEM_STATE_PENDING = 0,   /**< claimed; the effect's outcome is not recorded yet */
    IDEM_STATE_COMPLETED = 1, /**< the effect committed; the receipt is stored */
    IDEM_STATE_FAILED = 2,    /**< the effect's final refusal is stored (calls: rejected) */
    IDEM_STATE_EXPIRED = 3,   /**< a tombstone: past retention, the receipt dropped */
    /** an external dispatch whose result is not known: reconcile it (external.h) */
    IDEM_STATE_OUTCOME_UNKNOWN = 4,
} idem_state;

/** "pending", "completed", "failed", "expired", "outcome_unknown"; "unknown" outside the
 *  set. Static. */
IDEM_API const char *idem_state_name(idem_state state);

/** NULL is accepted. */
IDEM_API void idem_operation_free(idem_operation *op);
/** Accessors; strings are borrowed until idem_operation_free(). A NULL @p op gives NULL,
 *  0 or IDEM_STATE_PENDING. */
IDEM_API const char *idem_operation_tenant(const idem_operation *op);
IDEM_API const char *idem_operation_id(const idem_operation *op);
IDEM_API const char *idem_operation_tool(const idem_operation *op);
IDEM_API int idem_operation_payload_version(const idem_operation *op);
IDEM_API idem_state idem_operation_state(const idem_operation *op);
IDEM_API const idem_fingerprint *idem_operation_fingerprint(const idem_operation *op);
/** The stored receipt (NULL while pending); @p len may be NULL. */
IDEM_API const char *idem_operation_receipt(const idem_operation *op, size_t *len);
/** The provider tool-call ID of the first attempt, or NULL. */
IDEM_API const char *idem_operation_trace_id(const idem_operation *op);
/** Times in microseconds since the Unix epoch; completed_at is 0 while pending. For a
 *  record, expires_at is the end of its retention; for a tombstone (IDEM_STATE_EXPIRED),
 *  the end of its key memory. */
IDEM_API int64_t idem_operation_created_at(const idem_operation *op);
IDEM_API int64_t idem_operation_completed_at(const idem_operation *op);
IDEM_API int64_t idem_operation_expires_at(const idem_operation *op);
/** When the key stops being remembered (its tool's key memory from the claim); 0 for keys
 *  claimed before schema version 3. */
IDEM_API int64_t idem_operation_forget_at(const idem_operation *op);
/** When the record became a tombstone; 0 for a record. */
IDEM_API int64_t idem_operation_expired_at(const idem_operation *op);

/** Counters of a store since creation. Caller-allocated: initialize with
 *  ::IDEM_STORE_STATS_INIT (or set version to ::IDEM_STORE_STATS_VERSION). */
typedef struct idem_store_stats {
    unsigned int version;                     /**< ::IDEM_STORE_STATS_VERSION */
    unsigned long long executes;              /**< idem_store_execute() calls */
    unsigned long long created;               /**< calls that committed an effect */
    unsigned long long replayed;              /**< calls answered from a stored receipt */
    unsigned long long conflicts;             /**< calls refused for changed arguments */
    unsigned long long invalid;               /**< calls refused for bad input */
    unsigned long long effect_failures;       /**< transient effect failures (nothing stored) */
    unsigned long long serialization_retries; /**< transactions retried on 40001/40P01 */
    unsigned long long claim_races;           /**< claims lost to a concurrent commit */
    unsigned long long ambiguous_commits;     /**< COMMITs whose reply was lost, resolved */
    unsigned long long unavailable;           /**< calls that ended unavailable */
    unsigned long long rejected;              /**< calls answered with a stored refusal */
    unsigned long long misconfigured;         /**< calls that ended misconfigured: alert */
    unsigned long long in_progress;           /**< calls answered in_progress (another live
                                                   attempt held the key) */
    /* version 2 */
    unsigned long long expired; /**< calls refused as past retention (reconciliation items) */
} idem_store_stats;

#define IDEM_STORE_STATS_VERSION 2
#define IDEM_STORE_STATS_INIT                                                                      \
    {                                                                                              \
        IDEM_STORE_STATS_VERSION, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0                         \
    }

/** Fill @p stats with zero counters of struct version @p version (for bindings that cannot
 *  use ::IDEM_STORE_STATS_INIT). @return 0, or IDEM_EINVAL (NULL, or an unknown version). */
IDEM_API int idem_store_stats_init(idem_store_stats *stats, unsigned int version);

/** Fill @p out (its version set) with the store's counters now.
 *  @return 0, or IDEM_EINVAL (NULL, or an unknown version; @p out untouched). */
IDEM_API int idem_store_stats_get(idem_store_stats *out, idem_store *store);

#ifdef __cplusplus
}
#endif

/* The sweeper's header, which this header included until 0.1: deprecated.h */
#define IDEM__STORE_H_DONE
#include "deprecated.h"

#endif
