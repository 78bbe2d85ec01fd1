#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "exec.h"
#include "store_internal.h"

static const idem_store_options store_defaults = IDEM_STORE_OPTIONS_INIT;

/* How many bytes of idem_store_options each version has: a caller built against an older
 * header passes a shorter struct, whose missing fields keep their defaults. */
static const size_t options_size[IDEM_STORE_OPTIONS_VERSION + 1] = {
    [1] = sizeof(idem_store_options),
};

int idem_store_options_init(idem_store_options *opts, unsigned int version)
{
    if (version > IDEM_STORE_OPTIONS_VERSION)
        return IDEM_EINVAL;
    return idem__struct_init(opts, &store_defaults, options_size[version], version,
                             IDEM_STORE_OPTIONS_VERSION);
}

int idem_request_init(idem_request *req, unsigned int version)
{
    static const idem_request defaults = IDEM_REQUEST_INIT;
    static const size_t size[IDEM_REQUEST_VERSION + 1] = {
        [1] = offsetof(idem_request, attempt), [2] = sizeof(idem_request)};

    if (version > IDEM_REQUEST_VERSION)
        return IDEM_EINVAL;
    return idem__struct_init(req, &defaults, size[version], version, IDEM_REQUEST_VERSION);
}

int idem_outcome_init(idem_outcome *outcome, unsigned int version)
{
    static const idem_outcome defaults = IDEM_OUTCOME_INIT;

    return idem__struct_init(outcome, &defaults, sizeof(defaults), version, IDEM_OUTCOME_VERSION);
}

static int check_options(const idem_store_options *o, idem_error *err)
{
    if (o->retention_s == 0 || o->max_attempts == 0 || o->max_arguments_bytes == 0 ||
        o->max_response_bytes == 0)
        return idem__error_field(err, IDEM_EINVAL, "options",
                                 "retention_s, max_attempts and the size limits must be > 0");
    if (o->deadline_ms == 0)
        return idem__error_field(err, IDEM_EINVAL, "options.deadline_ms",
                                 "must be > 0: it bounds every call (default 10000)");
    if (o->max_arguments_bytes > MAX_PAYLOAD || o->max_response_bytes > MAX_PAYLOAD)
        return idem__error_field(err, IDEM_EINVAL, "options",
                                 "size limits must not exceed 1 GiB (PostgreSQL's own limit)");
    return 0;
}

int idem_store_new(idem_store **out, idem_pool *pool, const idem_store_options *opts,
                   idem_error *err)
{
    idem_store_options o = store_defaults;
    idem_store *store;
    int rc;

    if (out == NULL)
        return idem__error_field(err, IDEM_EINVAL, "out", "must not be NULL");
    if (pool == NULL)
        return idem__error_field(err, IDEM_EINVAL, "pool", "must not be NULL");
    if (opts != NULL) {
        rc = idem__check_version(err, opts->version, IDEM_STORE_OPTIONS_VERSION, "options");
        if (rc != 0)
            return rc;
        memcpy(&o, opts, options_size[opts->version]);
        o.version = IDEM_STORE_OPTIONS_VERSION;
    }
    if ((rc = check_options(&o, err)) != 0)
        return rc;
    store = calloc(1, sizeof(*store));
    if (store == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "store: out of memory");
    store->pool = pool;
    store->opts = o;
    store->backoff = (idem_retry_policy){IDEM_RETRY_POLICY_VERSION, o.max_attempts,
                                         o.backoff_base_ms, o.backoff_max_ms, o.deadline_ms};
    *out = store;
    return 0;
}

void idem_store_free(idem_store *store)
{
    free(store);
}

void idem_outcome_clear(idem_outcome *outcome)
{
    unsigned int version;

    if (outcome == NULL)
        return;
    version = outcome->version;
    free(outcome->receipt);
    *outcome = (idem_outcome)IDEM_OUTCOME_INIT;
    outcome->version = version;
}

int idem_store_stats_get(idem_store_stats *out, idem_store *store)
{
    if (out == NULL || store == NULL ||
        idem__check_version(NULL, out->version, IDEM_STORE_STATS_VERSION, "") != 0)
        return IDEM_EINVAL;
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
    LOAD(rejected);
    LOAD(misconfigured);
    LOAD(in_progress);
#undef LOAD
    return 0;
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
