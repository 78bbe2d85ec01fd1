/* Durable intents: recovery. A worker that (re)starts claims unfinished intents, oldest
 * first, each leased to it, and executes them with their stored operation IDs. */
#include "idem/validate.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "intent_internal.h"

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
        return idem__error_field(err, 0, "options.lease_s", "must be 1 to %u, got %u", MAX_LEASE_S,
                                 o->lease_s);
    if (o->max == 0 || o->max > MAX_TAKEN)
        return idem__error_field(err, 0, "options.max", "must be 1 to %u, got %u", MAX_TAKEN,
                                 o->max);
    return 0;
}

/* Every row of @res as an intent of the new list *out, holding the lease @token. */
static int make_list(idem_intent_list **out, const PGresult *res, const char *token,
                     idem_error *err)
{
    idem_intent_list *list = calloc(1, sizeof(*list));
    int n = PQntuples(res);

    if (list == NULL || (n > 0 && (list->items = calloc((size_t)n, sizeof(*list->items))) == NULL))
        goto nomem;
    for (int i = 0; i < n; i++, list->n++)
        if ((list->items[i] = idem__intent_new_from_row(res, i)) == NULL ||
            (list->items[i]->lease_owner = strdup(token)) == NULL)
            goto nomem;
    *out = list;
    return 0;
nomem:
    if (list != NULL && list->items != NULL)
        list->n = (size_t)n; /* every slot, set or NULL */
    idem_intent_list_free(list);
    return idem__error_set(err, IDEM_ENOMEM, "intents: out of memory");
}

int idem_intent_recover(idem_intent_list **out, idem_store *store, const char *tenant,
                        const idem_intent_recover_options *opts, idem_error *err)
{
    char token[IDEM_UUID_STRING_SIZE], lease[16], max[16];
    const char *values[4] = {tenant, token, lease, max};
    PGresult *res = NULL;
    int rc;

    if (out == NULL || store == NULL)
        return idem__error_field(err, 0, out == NULL ? "out" : "store", "must not be NULL");
    if (opts == NULL)
        opts = &recover_defaults;
    if ((rc = check_options(opts, err)) != 0 ||
        (tenant != NULL && (rc = idem_validate_tenant(tenant, err)) != 0) ||
        (rc = idem_uuid_v7(token, err)) != 0)
        return rc;
    snprintf(lease, sizeof(lease), "%u", opts->lease_s);
    snprintf(max, sizeof(max), "%u", opts->max);
    rc = idem__intent_run1(&res, store, tenant,
                           tenant != NULL ? &idem__intent_stmt_recover_tenant
                                          : &idem__intent_stmt_recover,
                           values, err);
    if (rc == 0)
        rc = make_list(out, res, token, err);
    PQclear(res);
    return rc;
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
