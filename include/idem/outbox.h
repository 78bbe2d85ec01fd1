/**
 * @file outbox.h
 * @brief The outbox: external work enqueued by an effect, committed with it, and
 *        dispatched by a worker.
 *
 * An effect of idem_store_execute() enqueues external work with idem_tx_enqueue(), which
 * commits with the effect or not at all; a worker claims due items with idem_outbox_claim()
 * and reports each through the calls of external.h (idem_external_complete(),
 * idem_external_fail(), idem_external_unknown()), so an item has the same guarantees as an
 * attempt from idem_external_begin(). A transient failure reschedules the item after an
 * exponential backoff with full jitter; once its attempts are spent it goes to
 * reconciliation (kind "outbox_exhausted").
 *
 * The claim runs under the store's deadline_ms (store.h), from checking out a connection
 * to the last reply, and ends `unavailable` when it passes.
 */
#ifndef IDEM_OUTBOX_H
#define IDEM_OUTBOX_H

#include <jansson.h>
#include <stddef.h>

#include "common.h"
#include "external.h"
#include "store.h"
#include "uuid.h"

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif

#endif
