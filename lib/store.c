#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "exec.h"
#include "store_internal.h"

int idem_store_new(idem_store **out, idem_pool *pool, const idem_store_options *opts,
                   idem_error *err)
{
    static const idem_store_options defaults = IDEM_STORE_OPTIONS_INIT;
    idem_store *store;

    if (out == NULL)
        return idem__error_field(err, IDEM_EINVAL, "out", "must not be NULL");
    if (pool == NULL)
        return idem__error_field(err, IDEM_EINVAL, "pool", "must not be NULL");
    if (opts == NULL)
        opts = &defaults;
    if (opts->version != IDEM_STORE_OPTIONS_VERSION)
        return idem__error_field(err, IDEM_EINVAL, "options.version", "must be %d",
                                 IDEM_STORE_OPTIONS_VERSION);
    if (opts->retention_s == 0 || opts->max_attempts == 0 || opts->max_arguments_bytes == 0 ||
        opts->max_response_bytes == 0)
        return idem__error_field(err, IDEM_EINVAL, "options",
                                 "retention_s, max_attempts and the size limits must be > 0");
    if (opts->max_arguments_bytes > MAX_PAYLOAD || opts->max_response_bytes > MAX_PAYLOAD)
        return idem__error_field(err, IDEM_EINVAL, "options",
                                 "size limits must not exceed 1 GiB (PostgreSQL's own limit)");
    store = calloc(1, sizeof(*store));
    if (store == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "store: out of memory");
    store->pool = pool;
    store->opts = *opts;
    store->backoff =
        (idem_retry_policy){IDEM_RETRY_POLICY_VERSION, opts->max_attempts, opts->backoff_base_ms,
                            opts->backoff_max_ms, opts->deadline_ms};
    *out = store;
    return 0;
}

void idem_store_free(idem_store *store)
{
    free(store);
}

void idem_outcome_clear(idem_outcome *outcome)
{
    if (outcome == NULL)
        return;
    free(outcome->receipt);
    *outcome = (idem_outcome)IDEM_OUTCOME_INIT;
}

void idem_store_stats_get(idem_store_stats *out, idem_store *store)
{
#define LOAD(name) out->name = atomic_load_explicit(&store->stats.name, memory_order_relaxed)
    LOAD(executes);
    LOAD(created);
    LOAD(replayed);
    LOAD(conflicts);
    LOAD(invalid);
    LOAD(effect_failures);
    LOAD(serialization_retries);
    LOAD(claim_races);
    LOAD(ambiguous_commits);
    LOAD(unavailable);
#undef LOAD
}

#ifdef IDEM_TESTING
/* The store's faults at the COMMIT boundary, as fault points of the execution layer: the
 * production path meets them. */
void idem__store_inject_fault(idem_store *store, enum idem__fault fault, unsigned int count)
{
    (void)store;
    switch (fault) {
    case IDEM__FAULT_REPLY_LOST_AFTER_COMMIT: /* and the lookup that would resolve it fails */
        idem__fault_inject("COMMIT", IDEM__FAULT_LOSE_REPLY, count);
        idem__fault_inject("idem_store_resolve", IDEM__FAULT_DROP_BEFORE_SEND, count);
        break;
    case IDEM__FAULT_FAIL_BEFORE_COMMIT: /* nothing committed, and nothing can be looked up */
        idem__fault_inject("COMMIT", IDEM__FAULT_DROP_BEFORE_SEND, count);
        idem__fault_inject("idem_store_resolve", IDEM__FAULT_DROP_BEFORE_SEND, count);
        break;
    case IDEM__FAULT_DROP_BEFORE_COMMIT:
        idem__fault_inject("COMMIT", IDEM__FAULT_DROP_BEFORE_SEND, count);
        break;
    case IDEM__FAULT_DROP_DURING_COMMIT:
        idem__fault_inject("COMMIT", IDEM__FAULT_DROP_AFTER_SEND, count);
        break;
    case IDEM__FAULT_NONE:
        idem__fault_reset();
        break;
    }
}
#endif
