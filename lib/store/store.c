/* The store (include/idem/store.h): the object every call of the contract goes through,
 * its options checked once (retention and key memory per tool, attempts, deadline,
 * limits), the request's and the outcome's initializers, and its counters. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "error.h"
#include "exec.h"
#include "idem/validate.h"
#include "store_internal.h"

static const idem_store_options store_defaults = IDEM_STORE_OPTIONS_INIT;

/* How many bytes of idem_store_options each version has: a caller built against an older
 * header passes a shorter struct, whose missing fields keep their defaults. */
static const size_t options_size[IDEM_STORE_OPTIONS_VERSION + 1] = {
    [1] = offsetof(idem_store_options, key_memory_s),
    [2] = offsetof(idem_store_options, identities),
    [3] = sizeof(idem_store_options),
};

#define MAX_CLOCK_SKEW_S 86400u

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
    static const size_t size[IDEM_REQUEST_VERSION + 1] = {[1] = offsetof(idem_request, attempt),
                                                          [2] = offsetof(idem_request, parsed),
                                                          [3] = sizeof(idem_request)};

    if (version > IDEM_REQUEST_VERSION)
        return IDEM_EINVAL;
    return idem__struct_init(req, &defaults, size[version], version, IDEM_REQUEST_VERSION);
}

int idem_outcome_init(idem_outcome *outcome, unsigned int version)
{
    static const idem_outcome defaults = IDEM_OUTCOME_INIT;

    return idem__struct_init(outcome, &defaults, sizeof(defaults), version, IDEM_OUTCOME_VERSION);
}

/* The windows of options.tools[i], defaults applied. */
static void tool_windows(const idem_store_options *o, size_t i, unsigned int *retention_s,
                         unsigned int *key_memory_s)
{
    *retention_s = o->tools[i].retention_s ? o->tools[i].retention_s : o->retention_s;
    *key_memory_s = o->tools[i].key_memory_s ? o->tools[i].key_memory_s : o->key_memory_s;
}

/* A tool's own windows (0: the store's) within the bounds. */
static int check_tool_windows(const idem_tool_retention *t, size_t i, idem_error *err)
{
    char field[IDEM_ERROR_FIELD_MAX];
    int rc = 0;

    snprintf(field, sizeof(field), "options.tools[%zu].retention_s", i);
    if (t->retention_s != 0 && (rc = idem__check_window(field, t->retention_s, err)) != 0)
        return rc;
    snprintf(field, sizeof(field), "options.tools[%zu].key_memory_s", i);
    if (t->key_memory_s != 0)
        rc = idem__check_window(field, t->key_memory_s, err);
    return rc;
}

static int check_tool(const idem_store_options *o, size_t i, idem_error *err)
{
    char field[IDEM_ERROR_FIELD_MAX];
    unsigned int retention, key_memory;
    int rc;

    snprintf(field, sizeof(field), "options.tools[%zu].tool", i);
    if (idem_validate_tool(o->tools[i].tool, err) != 0) {
        idem__error_context(err, "%s", field);
        if (err != NULL)
            snprintf(err->field, sizeof(err->field), "%s", field);
        return IDEM_EINVAL;
    }
    for (size_t j = 0; j < i; j++) {
        if (strcmp(o->tools[j].tool, o->tools[i].tool) == 0)
            return idem__error_field(err, IDEM_EINVAL, field, "'%s' appears twice (also at [%zu])",
                                     o->tools[i].tool, j);
    }
    if ((rc = check_tool_windows(&o->tools[i], i, err)) != 0)
        return rc;
    tool_windows(o, i, &retention, &key_memory);
    snprintf(field, sizeof(field), "options.tools[%zu].key_memory_s", i);
    if (key_memory < retention)
        return idem__error_field(err, IDEM_EINVAL, field,
                                 "%u s is shorter than the tool's retention (%u s): keys must be "
                                 "remembered at least as long as their records are kept",
                                 key_memory, retention);
    return 0;
}

static int check_retention(const idem_store_options *o, idem_error *err)
{
    int rc;

    if ((rc = idem__check_window("options.retention_s", o->retention_s, err)) != 0 ||
        (rc = idem__check_window("options.key_memory_s", o->key_memory_s, err)) != 0)
        return rc;
    if (o->key_memory_s < o->retention_s)
        return idem__error_field(err, IDEM_EINVAL, "options.key_memory_s",
                                 "%u s is shorter than retention_s (%u s): keys must be "
                                 "remembered at least as long as their records are kept",
                                 o->key_memory_s, o->retention_s);
    if (o->clock_skew_s > MAX_CLOCK_SKEW_S)
        return idem__error_field(err, IDEM_EINVAL, "options.clock_skew_s",
                                 "must be at most %u, got %u", MAX_CLOCK_SKEW_S, o->clock_skew_s);
    if (o->ntools > 0 && o->tools == NULL)
        return idem__error_field(err, IDEM_EINVAL, "options.tools", "is NULL but ntools is %zu",
                                 o->ntools);
    for (size_t i = 0; i < o->ntools; i++) {
        if ((rc = check_tool(o, i, err)) != 0)
            return rc;
    }
    return 0;
}

static int check_options(const idem_store_options *o, idem_error *err)
{
    const char *zero = o->max_attempts == 0          ? "options.max_attempts"
                       : o->max_arguments_bytes == 0 ? "options.max_arguments_bytes"
                       : o->max_response_bytes == 0  ? "options.max_response_bytes"
                                                     : NULL;

    if (zero != NULL)
        return idem__error_field(err, IDEM_EINVAL, zero, "must be > 0");
    if (o->deadline_ms == 0)
        return idem__error_field(err, IDEM_EINVAL, "options.deadline_ms",
                                 "must be > 0: it bounds every call (default 10000)");
    if (o->max_arguments_bytes > MAX_PAYLOAD || o->max_response_bytes > MAX_PAYLOAD)
        return idem__error_field(err, IDEM_EINVAL,
                                 o->max_arguments_bytes > MAX_PAYLOAD
                                     ? "options.max_arguments_bytes"
                                     : "options.max_response_bytes",
                                 "must not exceed 1 GiB (PostgreSQL's own limit)");
    return check_retention(o, err);
}

static int by_tool(const void *a, const void *b)
{
    return strcmp(((const tool_window *)a)->tool, ((const tool_window *)b)->tool);
}

static int identity_by_tool(const void *a, const void *b)
{
    return strcmp(((const idem__identity *)a)->tool, ((const idem__identity *)b)->tool);
}

/* Whether identities[i]'s tool appears before it. */
static int identity_repeated(const idem_store_options *o, size_t i, idem_error *err)
{
    char field[IDEM_ERROR_FIELD_MAX];

    for (size_t j = 0; j < i; j++) {
        if (strcmp(o->identities[j]->tool, o->identities[i]->tool) == 0) {
            snprintf(field, sizeof(field), "options.identities[%zu].tool", i);
            return idem__error_field(err, IDEM_EINVAL, field, "'%s' appears twice (also at [%zu])",
                                     o->identities[i]->tool, j);
        }
    }
    return 0;
}

/* The store's own copy of the identity policies, checked, sorted; mode all is the
 * default and needs no entry. */
static int copy_identities(idem_store *store, const idem_store_options *o, idem_error *err)
{
    idem__identity id;
    int rc;

    if (o->nidentities > 0 && o->identities == NULL)
        return idem__error_field(err, IDEM_EINVAL, "options.identities",
                                 "is NULL but nidentities is %zu", o->nidentities);
    if (o->nidentities > 0 &&
        (store->identities = calloc(o->nidentities, sizeof(*store->identities))) == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "store: out of memory");
    for (size_t i = 0; i < o->nidentities; i++) {
        char at[IDEM_ERROR_FIELD_MAX];

        snprintf(at, sizeof(at), "options.identities[%zu]", i);
        if ((rc = idem__identity_copy(&id, o->identities[i], at, err)) != 0 ||
            (rc = identity_repeated(o, i, err)) != 0) {
            idem__identity_clear(&id);
            return rc;
        }
        if (id.mode == IDEM_IDENTITY_ALL)
            idem__identity_clear(&id);
        else
            store->identities[store->nidentities++] = id;
    }
    if (store->nidentities > 1)
        qsort(store->identities, store->nidentities, sizeof(*store->identities), identity_by_tool);
    return 0;
}

const idem__identity *idem__store_identity(const idem_store *store, const char *tool)
{
    idem__identity key = {(char *)tool, IDEM_IDENTITY_ALL, NULL, 0, NULL};

    if (store->nidentities == 0)
        return NULL;
    return bsearch(&key, store->identities, store->nidentities, sizeof(*store->identities),
                   identity_by_tool);
}

/* The store's own copy of the tool table, sorted. */
static int copy_tools(idem_store *store, const idem_store_options *o, idem_error *err)
{
    if (o->ntools == 0)
        return 0;
    store->tools = calloc(o->ntools, sizeof(*store->tools));
    if (store->tools == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "store: out of memory");
    for (size_t i = 0; i < o->ntools; i++) {
        store->tools[i].tool = strdup(o->tools[i].tool);
        if (store->tools[i].tool == NULL)
            return idem__error_set(err, IDEM_ENOMEM, "store: out of memory");
        tool_windows(o, i, &store->tools[i].retention_s, &store->tools[i].key_memory_s);
        store->ntools = i + 1;
    }
    qsort(store->tools, store->ntools, sizeof(*store->tools), by_tool);
    return 0;
}

void idem__store_windows(const idem_store *store, const char *tool, unsigned int *retention_s,
                         unsigned int *key_memory_s)
{
    tool_window key = {(char *)tool, 0, 0};
    const tool_window *w = store->ntools > 0 ? bsearch(&key, store->tools, store->ntools,
                                                       sizeof(*store->tools), by_tool)
                                             : NULL;

    *retention_s = w != NULL ? w->retention_s : store->opts.retention_s;
    *key_memory_s = w != NULL ? w->key_memory_s : store->opts.key_memory_s;
}

uint64_t idem__store_deadline(const idem_store *store)
{
    return idem__now_ms() + store->opts.deadline_ms;
}

int idem__store_deadline_passed(const idem_store *store, uint64_t deadline_ms, idem_error *err)
{
    if (idem__now_ms() < deadline_ms)
        return 0;
    return idem__error_set(err, IDEM_EUNAVAIL,
                           "the call's deadline passed (deadline_ms %u); retry later with the "
                           "same key",
                           store->opts.deadline_ms);
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
    if ((rc = copy_tools(store, &o, err)) != 0 || (rc = copy_identities(store, &o, err)) != 0) {
        idem_store_free(store);
        return rc;
    }
    o.tools = NULL; /* the caller's tables are borrowed for this call only */
    o.ntools = 0;
    o.identities = NULL;
    o.nidentities = 0;
    store->pool = pool;
    store->opts = o;
    store->backoff = (idem_retry_policy){IDEM_RETRY_POLICY_VERSION, o.max_attempts,
                                         o.backoff_base_ms, o.backoff_max_ms, o.deadline_ms};
    *out = store;
    return 0;
}

void idem_store_free(idem_store *store)
{
    if (store == NULL)
        return;
    for (size_t i = 0; i < store->ntools; i++)
        free(store->tools[i].tool);
    free(store->tools);
    for (size_t i = 0; i < store->nidentities; i++)
        idem__identity_clear(&store->identities[i]);
    free(store->identities);
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

int idem_store_stats_init(idem_store_stats *stats, unsigned int version)
{
    static const idem_store_stats zero = IDEM_STORE_STATS_INIT;
    static const size_t size[IDEM_STORE_STATS_VERSION + 1] = {
        [1] = offsetof(idem_store_stats, expired), [2] = sizeof(idem_store_stats)};

    if (version > IDEM_STORE_STATS_VERSION)
        return IDEM_EINVAL;
    return idem__struct_init(stats, &zero, size[version], version, IDEM_STORE_STATS_VERSION);
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
    if (out->version >= 2)
        LOAD(expired);
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
