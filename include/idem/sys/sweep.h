/**
 * @file sys/sweep.h
 * @brief The retention sweeper: turns records past their retention window into compact
 *        tombstones, and deletes tombstones past their key memory.
 *
 * Every record carries its own deadlines, fixed when its key was claimed from the tool's
 * windows (store.h, ::idem_tool_retention): `expires_at`, the end of retention, and
 * `forget_at`, the end of key memory. idem_sweep_run() works in two passes, each in
 * bounded batches, one short transaction per batch, driven by the index on
 * `idem.operations (expires_at)`:
 *
 *  1. expire: a completed or failed record whose `expires_at` has passed becomes a
 *     tombstone: state `expired`, receipt and trace ID dropped, `expired_at` set, and
 *     `expires_at` moved to `forget_at`. The key, tool, fingerprint and timestamps stay, so
 *     a late retry is recognised and answered `expired` instead of running again.
 *  2. purge: a tombstone whose `expires_at` (its forget_at) has passed by twice the clock
 *     skew allowance is deleted. From then on a retry is recognised only by the time in its
 *     UUIDv7 operation ID (the store's horizon check, judged on the database's clock with the
 *     same allowance); the extra margin makes sure that check catches every key purged.
 *
 * A pending record is never touched, nor an outcome_unknown one (an external dispatch waiting
 * for reconciliation), nor any row an effect wrote. Rows are taken with
 * `FOR UPDATE SKIP LOCKED`: the sweeper never waits for a live call, and a call waits for
 * the sweeper at most one batch (a claim of a key the current batch is tombstoning).
 * A run stops when both passes find nothing due, or at ::idem_sweep_options.max_runtime_ms
 * or max_batches; the next run continues with what is left.
 *
 * idem_sweep_run() takes the caller's own connection: no deadline of idem's bounds it (the
 * store's deadline_ms is for calls on its pool); max_runtime_ms, lock_timeout_ms and the
 * connection's own settings do.
 *
 * Only one sweeper works at a time: idem_sweep_run() takes the session-level advisory lock
 * ::IDEM_SWEEP_LOCK_KEY with `pg_try_advisory_lock` for the whole run (released before it
 * returns, or by the server when the session ends), and returns IDEM_ELOCKED at once,
 * having done nothing, when another session holds it. Being session-level, it needs a
 * direct connection or a pooler in session mode, not one in transaction mode.
 */
#ifndef IDEM_SYS_SWEEP_H
#define IDEM_SYS_SWEEP_H

#include <libpq-fe.h>
#include <stdint.h>

#include "../common.h"
#include "../validate.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The advisory lock held while a sweep runs: `pg_try_advisory_lock(IDEM_SWEEP_LOCK_KEY)`
 *  ("idemswep" in ASCII). */
#define IDEM_SWEEP_LOCK_KEY 0x6964656d73776570LL

/** Sweep settings. Initialize with ::IDEM_SWEEP_OPTIONS_INIT or idem_sweep_options_init(),
 *  then change what you need. */
typedef struct idem_sweep_options {
    unsigned int version;         /**< ::IDEM_SWEEP_OPTIONS_VERSION */
    unsigned int batch_size;      /**< rows per transaction, 1 to 1000000; default 5000 */
    unsigned int max_runtime_ms;  /**< start no batch after this long; 0 = until nothing is
                                       due; default 0 */
    unsigned int max_batches;     /**< stop after this many batches; 0 = no limit; default 0 */
    unsigned int key_memory_s;    /**< key memory of records claimed before migration 0003
                                       (no forget_at): their tombstone is kept this long after
                                       expires_at; ::IDEM_WINDOW_MIN_S to ::IDEM_WINDOW_MAX_S;
                                       default 2592000 (30 days) */
    unsigned int clock_skew_s;    /**< the store's clock skew allowance (it must be the same);
                                       tombstones are purged twice this after forget_at;
                                       at most 86400; default 300 */
    unsigned int lock_timeout_ms; /**< longest wait for a table lock (a migration holding
                                       one) per batch; 1 to 3600000; default 5000 */
    int dry_run;                  /**< 1: count what is due now, change nothing */
    idem_log_fn log;              /**< optional: narrates each batch (IDEM_LOG_INFO) */
    void *log_ctx;                /**< passed to @ref log */
} idem_sweep_options;

#define IDEM_SWEEP_OPTIONS_VERSION 1
#define IDEM_SWEEP_OPTIONS_INIT                                                                    \
    {                                                                                              \
        IDEM_SWEEP_OPTIONS_VERSION, 5000, 0, 0, 2592000, 300, 5000, 0, NULL, NULL                  \
    }

/**
 * Fill @p opts with the defaults of struct version @p version (for bindings that cannot
 * use ::IDEM_SWEEP_OPTIONS_INIT).
 * @return 0, or IDEM_EINVAL (NULL, or a version this library does not know).
 */
IDEM_API int idem_sweep_options_init(idem_sweep_options *opts, unsigned int version);

/** What a sweep did. Caller-allocated: initialize with ::IDEM_SWEEP_RESULT_INIT or
 *  idem_sweep_result_init() (or set version to ::IDEM_SWEEP_RESULT_VERSION). */
typedef struct idem_sweep_result {
    unsigned int version;            /**< ::IDEM_SWEEP_RESULT_VERSION */
    unsigned long long expired;      /**< records turned into tombstones (dry run: due now) */
    unsigned long long purged;       /**< tombstones deleted (dry run: due now) */
    unsigned int batches;            /**< batch transactions run (the last of each pass finds
                                          fewer rows than a batch, often none) */
    int complete;                    /**< 1 when both passes found nothing more due; 0 when
                                          the run stopped at its time or batch limit (or
                                          was a dry run) */
    unsigned long long late_retries; /**< late retries recorded so far: the sum of the
                                          counts of reconciliation items of kind "expired" */
    unsigned long long open_items;   /**< reconciliation items not yet resolved, any kind */
    uint64_t duration_ms;            /**< wall-clock time of the run */
} idem_sweep_result;

#define IDEM_SWEEP_RESULT_VERSION 1
#define IDEM_SWEEP_RESULT_INIT                                                                     \
    {                                                                                              \
        IDEM_SWEEP_RESULT_VERSION, 0, 0, 0, 0, 0, 0, 0                                             \
    }

/** Fill @p out with an empty result of struct version @p version.
 *  @return 0, or IDEM_EINVAL (NULL, or an unknown version). */
IDEM_API int idem_sweep_result_init(idem_sweep_result *out, unsigned int version);

/**
 * Run one sweep (see the file comment).
 *
 * @param out   its version set (::IDEM_SWEEP_RESULT_INIT); filled on success; untouched on
 *              failure (batches committed before a failure stay committed: the log hook has
 *              narrated them).
 * @param conn  borrowed; idle (no open transaction). Its lock_timeout is changed for the
 *              run and restored.
 * @param opts  NULL for the defaults.
 * @return 0; IDEM_ELOCKED (another sweep holds ::IDEM_SWEEP_LOCK_KEY: nothing was done);
 *         IDEM_EINVAL (err->field names the option, or "out.version"); IDEM_ESCHEMA (the schema
 * lacks migration 0003: run idem-migrate up); IDEM_EPERM (the role lacks a privilege on the idem
 * tables); IDEM_ETIMEDOUT (a table lock was held longer than lock_timeout_ms); IDEM_EUNAVAIL
 * (connection lost); IDEM_EDB; IDEM_ENOMEM.
 */
IDEM_API int idem_sweep_run(idem_sweep_result *out, PGconn *conn, const idem_sweep_options *opts,
                            idem_error *err);

#ifdef __cplusplus
}
#endif

#endif
