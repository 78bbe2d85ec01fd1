/* Durable intents: recovery. A worker that (re)starts claims unfinished intents, oldest
 * first, each leased to it, and executes them with their stored operation IDs. */
#include "idem/validate.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "intent_internal.h"
#include "store_internal.h"

#define MAX_LEASE_S 86400u
#define MAX_TAKEN   1000u

static const idem_intent_recover_options recover_defaults = IDEM_INTENT_RECOVER_OPTIONS_INIT;

int idem_intent_recover_options_init(idem_intent_recover_options *opts, unsigned int version)
{
    return idem__struct_init(opts, &recover_defaults, sizeof(recover_defaults), version,
                             IDEM_INTENT_RECOVER_OPTIONS_VERSION);
}

static int check_options(const idem_intent_recover_options *o, idem_error *err)
{
    int rc = idem__check_version(err, o->version, IDEM_INTENT_RECOVER_OPTIONS_VERSION, "options");

    if (rc != 0)
        return rc;
    if (o->lease_s == 0 || o->lease_s > MAX_LEASE_S)
        return idem__error_field(err, IDEM_EINVAL, "options.lease_s", "must be 1 to %u, got %u",
                                 MAX_LEASE_S, o->lease_s);
    if (o->max == 0 || o->max > MAX_TAKEN)
        return idem__error_field(err, IDEM_EINVAL, "options.max", "must be 1 to %u, got %u",
                                 MAX_TAKEN, o->max);
    return 0;
}

/* Append every row of @res to @list (its items sized for them) as an intent holding the
 * lease @token. */
static int append_rows(idem_intent_list *list, const PGresult *res, const char *token,
                       idem_error *err)
{
    for (int i = 0; i < PQntuples(res); i++) {
        idem_intent *t = idem__intent_new_from_row(res, i);

        if (t == NULL || (t->lease_owner = strdup(token)) == NULL) {
            idem_intent_free(t);
            return idem__error_set(err, IDEM_ENOMEM, "intents: out of memory");
        }
        list->items[list->n++] = t;
    }
    return 0;
}

/* A new empty list with room for @room intents. */
static idem_intent_list *list_new(size_t room)
{
    idem_intent_list *list = calloc(1, sizeof(*list));

    if (list != NULL && room > 0 && (list->items = calloc(room, sizeof(*list->items))) == NULL) {
        free(list);
        list = NULL;
    }
    return list;
}

/* Oldest approval first, as the single statement orders them. */
static int by_age(const void *a, const void *b)
{
    const idem_intent *x = *(idem_intent *const *)a, *y = *(idem_intent *const *)b;
    int c;

    if (x->approved_at != y->approved_at)
        return x->approved_at < y->approved_at ? -1 : 1;
    c = strcmp(x->tenant, y->tenant);
    return c != 0 ? c : strcmp(x->operation_id, y->operation_id);
}

/* Whether row @row of @due names a tenant that an earlier row named; *count is how many rows
 * name it. */
static int seen_before(const PGresult *due, int row, unsigned int *count)
{
    const char *tenant = PQgetvalue(due, row, 0);

    *count = 0;
    for (int i = 0; i < PQntuples(due); i++) {
        if (strcmp(PQgetvalue(due, i, 0), tenant) != 0)
            continue;
        if (i < row)
            return 1;
        (*count)++;
    }
    return 0;
}

/* Claim as many of @tenant's oldest intents as @count, into @list. */
static int claim_tenant(idem_intent_list *list, idem_store *store, uint64_t deadline_ms,
                        const char *tenant, unsigned int count, const char *const *values,
                        idem_error *err)
{
    char how_many[16];
    const char *v[4] = {tenant, values[1], values[2], how_many};
    PGresult *res = NULL;
    int rc;

    snprintf(how_many, sizeof(how_many), "%u", count);
    rc = idem__intent_run1(&res, store, deadline_ms, tenant, &idem__intent_stmt_recover_tenant, v,
                           err);
    if (rc == 0)
        rc = append_rows(list, res, values[1], err);
    PQclear(res);
    return rc;
}

/* Recovery across tenants where Citus refuses row locks in a statement over several shards:
 * one read lists the tenants of the oldest intents due, then each tenant's are claimed on
 * its shard (@values as for the single statement). Intents claimed before a failure keep
 * their lease until it lapses. */
static int recover_by_tenant(idem_intent_list **out, idem_store *store, uint64_t deadline_ms,
                             const char *const *values, idem_error *err)
{
    const char *max[1] = {values[3]};
    PGresult *due = NULL;
    idem_intent_list *list = NULL;
    unsigned int count;
    int rc =
        idem__intent_run1(&due, store, deadline_ms, NULL, &idem__intent_stmt_recover_due, max, err);

    if (rc == 0 && (list = list_new((size_t)PQntuples(due))) == NULL)
        rc = idem__error_set(err, IDEM_ENOMEM, "intents: out of memory");
    for (int i = 0; rc == 0 && i < PQntuples(due); i++)
        if (!seen_before(due, i, &count) &&
            (rc = idem__store_deadline_passed(store, deadline_ms, err)) == 0)
            rc = claim_tenant(list, store, deadline_ms, PQgetvalue(due, i, 0), count, values, err);
    PQclear(due);
    if (rc != 0) {
        idem_intent_list_free(list);
        return rc;
    }
    if (list->n > 1)
        qsort(list->items, list->n, sizeof(*list->items), by_age);
    *out = list;
    return 0;
}

/* Whether @store's database has the citus extension (a pooled connection knows). */
static int on_citus(int *out, idem_store *store, uint64_t deadline_ms, idem_error *err)
{
    idem_conn *conn = NULL;
    int rc = idem__pool_checkout(&conn, store->pool, deadline_ms, err);

    if (rc == 0)
        *out = idem__conn_citus(conn);
    idem_pool_release(conn);
    return idem__error_misconfigured(err, rc);
}

/* One statement claims them, on one server or on the tenant's shard. */
static int recover_at_once(idem_intent_list **out, idem_store *store, uint64_t deadline_ms,
                           const char *tenant, const char *const *values, idem_error *err)
{
    PGresult *res = NULL;
    idem_intent_list *list = NULL;
    int rc = idem__intent_run1(&res, store, deadline_ms, tenant,
                               tenant != NULL ? &idem__intent_stmt_recover_tenant
                                              : &idem__intent_stmt_recover,
                               values, err);

    if (rc == 0 && (list = list_new((size_t)PQntuples(res))) == NULL)
        rc = idem__error_set(err, IDEM_ENOMEM, "intents: out of memory");
    if (rc == 0)
        rc = append_rows(list, res, values[1], err);
    PQclear(res);
    if (rc != 0)
        idem_intent_list_free(list);
    else
        *out = list;
    return rc;
}

int idem_intent_recover(idem_intent_list **out, idem_store *store, const char *tenant,
                        const idem_intent_recover_options *opts, idem_error *err)
{
    char token[IDEM_UUID_STRING_SIZE], lease[16], max[16];
    const char *values[4] = {tenant, token, lease, max};
    uint64_t deadline_ms;
    int rc, citus = 0;

    if (out == NULL || store == NULL)
        return idem__error_field(err, IDEM_EINVAL, out == NULL ? "out" : "store",
                                 "must not be NULL");
    if (opts == NULL)
        opts = &recover_defaults;
    if ((rc = check_options(opts, err)) != 0 ||
        (tenant != NULL && (rc = idem_validate_tenant(tenant, err)) != 0) ||
        (rc = idem_uuid_v7(token, err)) != 0)
        return rc;
    snprintf(lease, sizeof(lease), "%u", opts->lease_s);
    snprintf(max, sizeof(max), "%u", opts->max);
    deadline_ms = idem__store_deadline(store);
    if (tenant == NULL && (rc = on_citus(&citus, store, deadline_ms, err)) != 0)
        return rc;
    return citus ? recover_by_tenant(out, store, deadline_ms, values, err)
                 : recover_at_once(out, store, deadline_ms, tenant, values, err);
}

size_t idem_intent_list_count(const idem_intent_list *list)
{
    return list != NULL ? list->n : 0;
}

idem_intent *idem_intent_list_at(idem_intent_list *list, size_t i)
{
    return list != NULL && i < list->n ? list->items[i] : NULL;
}

void idem_intent_list_free(idem_intent_list *list)
{
    if (list == NULL)
        return;
    for (size_t i = 0; i < list->n; i++)
        idem_intent_free(list->items[i]);
    free(list->items);
    free(list);
}
