/**
 * @file sys/reconcile.h
 * @brief What needs a human: list, show and resolve reconciliation items.
 *
 * The store records a reconciliation item when it refuses to execute a call and a person
 * must find out what happened instead. Today that is kind `expired`: a retry that arrived
 * after its key's retention window (it hit a tombstone, or its UUIDv7 operation ID was older
 * than the tool's key memory). The call ran no effect; whoever reconciles decides whether
 * the original action happened (the tombstone says when it was recorded) and what the
 * caller should be told. External effects add `outcome_unknown`, `outbox_exhausted` and
 * `lease_lost`; a local record left pending is `stalled_pending`
 * (::IDEM_RECONCILE_STALLED_AFTER_S), listed even before a request meets it; a durable
 * intent that needs reconciliation is `intent`. These six are every kind there is: a
 * filter or resolution naming another is refused (a typo would otherwise find nothing).
 *
 * There is one item per (tenant, operation_id, kind), in `idem.reconciliation_items`. A
 * repeated late retry raises its count, updates when it was last seen and whether its
 * fingerprint matches, and reopens it if it had been resolved.
 *
 * These functions serve idem-reconcile and an operator's own tools (an admin UI). They take
 * the caller's libpq connection, borrowed for the call, idle, and prepare nothing on it; no
 * deadline of idem's bounds them (the store's deadline_ms is for calls on its pool): the
 * connection's own settings (statement_timeout, libpq's connect_timeout) do.
 * Unlike idem_store_execute(), they are not scoped to one tenant unless asked: authorize
 * the operator before calling.
 *
 * Times are microseconds since the Unix epoch.
 */
#ifndef IDEM_SYS_RECONCILE_H
#define IDEM_SYS_RECONCILE_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "../common.h"
#include "../fingerprint.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Every kind of item idem records, as a list of string literals (for an initializer). */
#define IDEM_RECONCILE_KINDS                                                                       \
    "expired", "stalled_pending", "outcome_unknown", "lease_lost", "outbox_exhausted", "intent"

/** Longest kind name, in bytes: `[a-z0-9_]`, 1 to this. */
#define IDEM_RECONCILE_KIND_MAX 64
/** A local record (of a call's own effect, not an external one) is pending only inside the
 *  transaction that claims it. One that is still pending this many seconds after its
 *  claim, with no lease, was left so by an attempt whose transaction ended without
 *  finishing it (an earlier version's, or a statement run by hand): its effect may have
 *  committed. It is listed as an open item of kind `stalled_pending` (recorded as soon as a
 *  request for the key meets it past the store's deadline), and resolved with
 *  idem_external_resolve() (`idem-reconcile resolve --as`), never by running the effect
 *  again. */
#define IDEM_RECONCILE_STALLED_AFTER_S 60
/** Longest resolution note, in bytes (UTF-8; tabs and newlines allowed, no other control
 *  characters). */
#define IDEM_RECONCILE_NOTE_MAX 4000
/** Longest resolver name given to idem_reconcile_resolve_items(), in bytes (UTF-8, no control
 *  characters). */
#define IDEM_RECONCILE_BY_MAX 128

/** One reconciliation item. Read-only; strings are owned by the list that holds it. */
typedef struct idem_reconcile_item {
    const char *tenant;
    const char *operation_id;
    const char *kind;                            /**< "expired", ... */
    const char *tool;                            /**< the tool the latest request named */
    char fingerprint[IDEM_FINGERPRINT_HEX_SIZE]; /**< hex SHA-256 of the latest request */
    int fingerprint_matches;                     /**< 1: the latest request's fingerprint equals the
                                                      tombstone's; 0: it differs (changed arguments);
                                                      -1: unknown (the key was already forgotten) */
    long long count;                             /**< how many such requests arrived */
    int64_t first_seen;                          /**< when the first arrived */
    int64_t last_seen;                           /**< when the latest arrived */
    int64_t resolved_at;                         /**< 0 while open */
    const char *resolved_by;                     /**< NULL while open */
    const char *note; /**< the resolution note; NULL when none. Kept when a new
                           request reopens the item */
} idem_reconcile_item;

/** A list of items. Opaque. */
typedef struct idem_reconcile_items idem_reconcile_items;

/** Which items, by resolution. */
typedef enum idem_reconcile_state {
    IDEM_RECONCILE_ANY = 0,     /**< open and resolved */
    IDEM_RECONCILE_OPEN = 1,    /**< not resolved */
    IDEM_RECONCILE_RESOLVED = 2 /**< resolved */
} idem_reconcile_state;

/** What idem_reconcile_list() returns. Initialize with ::IDEM_RECONCILE_FILTER_INIT or
 *  idem_reconcile_filter_init(), then set what you need. */
typedef struct idem_reconcile_filter {
    unsigned int version;       /**< ::IDEM_RECONCILE_FILTER_VERSION */
    const char *tenant;         /**< NULL: every tenant */
    const char *operation_id;   /**< NULL: every operation ID */
    const char *kind;           /**< NULL: every kind; else one of the six
                                     kinds above (another is refused: IDEM_EINVAL,
                                     filter.kind) */
    idem_reconcile_state state; /**< default ::IDEM_RECONCILE_ANY */
    int64_t since;              /**< items last seen at or after this; 0: any time */
    unsigned int limit;         /**< most items returned, newest first; 0 = no limit;
                                     default 1000 */
} idem_reconcile_filter;

#define IDEM_RECONCILE_FILTER_VERSION 1
#define IDEM_RECONCILE_FILTER_INIT                                                                 \
    {                                                                                              \
        IDEM_RECONCILE_FILTER_VERSION, NULL, NULL, NULL, IDEM_RECONCILE_ANY, 0, 1000               \
    }

/** Fill @p filter with the defaults of struct version @p version (every item, up to the
 *  default limit). @return 0, or IDEM_EINVAL (NULL, or an unknown version). */
IDEM_API int idem_reconcile_filter_init(idem_reconcile_filter *filter, unsigned int version);

/**
 * The items that match @p filter, most recently seen first.
 * @param out     caller owns; free with idem_reconcile_items_free(). Untouched on failure.
 * @param conn    borrowed; idle.
 * @param filter  NULL for every item (up to the default limit).
 * @return 0 (possibly an empty list); IDEM_EINVAL (err->field names the filter field);
 *         IDEM_ESCHEMA (migration 0003 missing); IDEM_EPERM; IDEM_EUNAVAIL; IDEM_EDB;
 *         IDEM_ENOMEM.
 */
IDEM_API int idem_reconcile_list(idem_reconcile_items **out, PGconn *conn,
                                 const idem_reconcile_filter *filter, idem_error *err);

/** Number of items in @p items (0 for NULL). */
IDEM_API size_t idem_reconcile_items_count(const idem_reconcile_items *items);
/** The @p i-th item; borrowed until the list is freed. NULL when out of range. */
IDEM_API const idem_reconcile_item *idem_reconcile_items_at(const idem_reconcile_items *items,
                                                            size_t i);
/** NULL is accepted. */
IDEM_API void idem_reconcile_items_free(idem_reconcile_items *items);

/** A key's record or tombstone, as idem_reconcile_show() found it. Read-only; owned by the
 *  ::idem_reconcile_key that holds it. */
typedef struct idem_reconcile_record {
    const char *tenant;
    const char *operation_id;
    const char *state; /**< "pending", "completed", "failed", or "expired" (a tombstone) */
    const char *tool;
    int payload_version;
    char fingerprint[IDEM_FINGERPRINT_HEX_SIZE]; /**< hex SHA-256 */
    const char *receipt;  /**< the stored receipt, NUL-terminated; NULL while pending and in a
                               tombstone */
    size_t receipt_len;   /**< its length in bytes */
    const char *trace_id; /**< NULL when none (always NULL in a tombstone) */
    int64_t created_at;   /**< when the key was claimed */
    int64_t completed_at; /**< when the receipt was stored; 0 while pending */
    int64_t expires_at;   /**< a record: end of retention; a tombstone: its forget_at */
    int64_t forget_at;    /**< end of key memory; 0 for keys claimed before migration 0003 */
    int64_t expired_at;   /**< when the record became a tombstone; 0 for a record */
} idem_reconcile_record;

/** Everything recorded about one key. Opaque. */
typedef struct idem_reconcile_key idem_reconcile_key;

/**
 * Everything recorded about the key (@p tenant, @p operation_id): its record or tombstone,
 * and every reconciliation item of it.
 * @param out  caller owns; free with idem_reconcile_key_free(). Untouched on failure.
 * @param conn borrowed; idle.
 * @return 0; IDEM_ENOTFOUND (neither a record nor an item: the key was never used, or it
 *         was forgotten and no late retry came); IDEM_EINVAL (err->field names tenant or
 *         operation_id); IDEM_ESCHEMA; IDEM_EUNAVAIL; IDEM_EDB; IDEM_ENOMEM.
 */
IDEM_API int idem_reconcile_show(idem_reconcile_key **out, PGconn *conn, const char *tenant,
                                 const char *operation_id, idem_error *err);

/** The record or tombstone; NULL when the key has none (forgotten). Borrowed until
 *  idem_reconcile_key_free(). */
IDEM_API const idem_reconcile_record *idem_reconcile_key_record(const idem_reconcile_key *key);
/** The key's reconciliation items, newest first (possibly none). Borrowed until
 *  idem_reconcile_key_free(). */
IDEM_API const idem_reconcile_items *idem_reconcile_key_items(const idem_reconcile_key *key);
/** NULL is accepted. */
IDEM_API void idem_reconcile_key_free(idem_reconcile_key *key);

/** A resolution of reconciliation items. Initialize with ::IDEM_RECONCILE_RESOLUTION_INIT or
 *  idem_reconcile_resolution_init(). The strings are borrowed for the call. */
typedef struct idem_reconcile_resolution {
    unsigned int version; /**< ::IDEM_RECONCILE_RESOLUTION_VERSION */
    const char *kind;     /**< NULL: every open kind of the key; else only that kind (one
                               of those idem records, as for the filter) */
    const char *note;     /**< what was found or done; required (::IDEM_RECONCILE_NOTE_MAX) */
    const char *by;       /**< who resolved it; NULL: the database role (current_user) */
} idem_reconcile_resolution;

#define IDEM_RECONCILE_RESOLUTION_VERSION 1
#define IDEM_RECONCILE_RESOLUTION_INIT                                                             \
    {                                                                                              \
        IDEM_RECONCILE_RESOLUTION_VERSION, NULL, NULL, NULL                                        \
    }

/** Fill @p res with an empty resolution of struct version @p version (every kind, no note).
 *  @return 0, or IDEM_EINVAL (NULL, or an unknown version). */
IDEM_API int idem_reconcile_resolution_init(idem_reconcile_resolution *res, unsigned int version);

/**
 * Resolve the open items of one key: record the note, who, and when (the database's
 * now()). A later request of the same kind reopens an item. The same shape as
 * idem_external_resolve() (sys/external.h), which resolves an external operation itself.
 * @param out         how many items were resolved; may be NULL. Untouched on failure.
 * @param conn        borrowed; idle.
 * @param resolution  borrowed for the call.
 * @return 0; IDEM_ENOTFOUND (no open item: the message says when it is already
 *         resolved); IDEM_EINVAL (err->field names tenant, operation_id, resolution,
 *         resolution.version, resolution.kind, resolution.note or resolution.by);
 *         IDEM_ESCHEMA; IDEM_EUNAVAIL; IDEM_EDB.
 */
IDEM_API int idem_reconcile_resolve_items(unsigned int *out, PGconn *conn, const char *tenant,
                                          const char *operation_id,
                                          const idem_reconcile_resolution *resolution,
                                          idem_error *err);

#ifdef __cplusplus
}
#endif

/* idem_reconcile_resolve(), this header's call of 0.1: deprecated.h */
#define IDEM__SYS_RECONCILE_H_DONE
#include "../deprecated.h"

#endif
