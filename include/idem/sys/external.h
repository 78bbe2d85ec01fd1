/**
 * @file sys/external.h
 * @brief Administration of external operations on your own connection: an operation's
 *        state and attempt history, and the resolution of one whose outcome is unknown.
 *
 * For idem-reconcile and an operator's own tools. These calls take the caller's libpq
 * connection, borrowed for the call, idle, and prepare nothing on it; no deadline of idem's
 * bounds them (the store's deadline_ms is for calls on its pool): the connection's own
 * settings (statement_timeout) do. The protocol they administer is in external.h.
 */
#ifndef IDEM_SYS_EXTERNAL_H
#define IDEM_SYS_EXTERNAL_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "../common.h"

#ifdef __cplusplus
extern "C" {
#endif

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

/** One question a resolver asked the provider (external.h, "Resolvers"), as recorded.
 *  Read-only; owned by the ::idem_external_history that holds it. */
typedef struct idem_external_probe_record {
    int64_t answered_at;      /**< when the answer was recorded (microseconds since the epoch,
                                   the database's clock) */
    int took_ms;              /**< how long the resolver took, or was waited for */
    const char *asked_by;     /**< "retry" (idem_external_begin()) or "probe"
                                   (idem_external_probe()) */
    const char *resolver;     /**< the resolver's name */
    const char *answer;       /**< "done", "failed", "not_done", "unknown" */
    const char *provider_ref; /**< NULL when none */
    const char *result;       /**< done, failed: the provider's result (canonical JSON); else
                                   NULL */
    const char *reason;       /**< why unknown, or what the resolver said; NULL when none */
    int changed;              /**< 1 for the answer that changed the record */
} idem_external_probe_record;

/** Number of recorded questions to the provider (0 on a schema before migration 0011). */
IDEM_API size_t idem_external_history_probe_count(const idem_external_history *h);
/** The @p i-th question, oldest first; borrowed until the history is freed; NULL when out of
 *  range. */
IDEM_API const idem_external_probe_record *
idem_external_history_probe_at(const idem_external_history *h, size_t i);

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
