/* The console's pages that read or change the database, each on a connection of its own
 * (console_db.c), through the library's reconciliation calls (sys/reconcile.h,
 * sys/external.h): the list, a key's page, and resolving a key. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reconcile_text.h"
#include "console_form.h"
#include "console_int.h"

#define LIST_LIMIT 500

unsigned int gw_console_status(int rc)
{
    switch (rc) {
    case IDEM_EINVAL:
        return 400;
    case IDEM_ENOTFOUND:
        return 404;
    case IDEM_ECONFLICT:
    case IDEM_EBUSY:
        return 409;
    case IDEM_EUNAVAIL:
    case IDEM_ETIMEDOUT:
        return 503;
    default:
        return 500;
    }
}

static const char *query(const gw_console_req *q, const char *name)
{
    const char *v = MHD_lookup_connection_value(q->c, MHD_GET_ARGUMENT_KIND, name);

    return v != NULL ? v : "";
}

/* The filters into @filter; 0, or -1 with @why. */
static int read_filters(idem_reconcile_filter *filter, const gw_console_filters *f, char *why,
                        size_t size)
{
    filter->limit = LIST_LIMIT;
    filter->tenant = f->tenant[0] != '\0' ? f->tenant : NULL;
    filter->kind = f->kind[0] != '\0' ? f->kind : NULL;
    if (f->age[0] != '\0' && rt_parse_age(&filter->since, f->age) != 0) {
        snprintf(why, size, "Seen within (age): not an age such as 90m, 24h or 7d.");
        return -1;
    }
    if (strcmp(f->state, "open") == 0)
        filter->state = IDEM_RECONCILE_OPEN;
    else if (strcmp(f->state, "resolved") == 0)
        filter->state = IDEM_RECONCILE_RESOLVED;
    else if (strcmp(f->state, "any") == 0)
        filter->state = IDEM_RECONCILE_ANY;
    else {
        snprintf(why, size, "State: must be open, resolved or any.");
        return -1;
    }
    return 0;
}

/* The items the filters name, into @out; the HTTP status, with @why when not 200. */
static unsigned int read_items(idem_reconcile_items **out, const gw_console_req *q,
                               const gw_console_filters *f, char *why, size_t size)
{
    idem_reconcile_filter filter = IDEM_RECONCILE_FILTER_INIT;
    idem_error err = IDEM_ERROR_INIT;
    unsigned int status = 200;
    PGconn *conn = NULL;
    int rc;

    if (read_filters(&filter, f, why, size) != 0)
        return 400;
    if ((conn = gw_console_connect(q->cc, &status, why, size)) == NULL)
        return status;
    if ((rc = idem_reconcile_list(out, conn, &filter, &err)) != 0) {
        snprintf(why, size, "%s", err.message[0] != '\0' ? err.message : idem_strerror(rc));
        status = gw_console_status(rc);
    }
    PQfinish(conn);
    return status;
}

void gw_console_list(gw_reply *r, const gw_console_req *q)
{
    gw_console_filters f = {query(q, "tenant"), query(q, "kind"), query(q, "age"),
                            query(q, "state")};
    gw_console_view v = gw_console_view_of(q);
    idem_reconcile_items *items = NULL;
    gw_html h = GW_HTML_INIT;
    char why[1024];
    unsigned int status;

    if (f.state[0] == '\0')
        f.state = "open";
    status = read_items(&items, q, &f, why, sizeof(why));
    v.error = status == 200 ? NULL : why;
    gw_page_list(&h, &v, &f, items);
    idem_reconcile_items_free(items);
    gw_console_html(r, status, &h);
}

/* The key's page with @v's notice or error, answered @status (when the key is read). */
static void item_page(gw_reply *r, gw_console_view *v, unsigned int status, PGconn *conn,
                      const char *tenant, const char *operation_id)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_reconcile_key *key = NULL;
    idem_external_history *history = NULL;
    gw_html h = GW_HTML_INIT;
    int rc = idem_reconcile_show(&key, conn, tenant, operation_id, &err);

    if (rc != 0) {
        v->error = err.message[0] != '\0' ? err.message : idem_strerror(rc);
        status = gw_console_status(rc);
    } else if (idem_external_history_get(&history, conn, tenant, operation_id, &err) != 0)
        history = NULL; /* not an external operation */
    gw_page_item(&h, v, tenant, operation_id, key, history);
    idem_external_history_free(history);
    idem_reconcile_key_free(key);
    gw_console_html(r, status, &h);
}

void gw_console_item(gw_reply *r, const gw_console_req *q)
{
    const char *tenant = query(q, "tenant"), *operation_id = query(q, "operation_id");
    gw_console_view v = gw_console_view_of(q);
    unsigned int status = 200;
    char why[1024];
    PGconn *conn;

    if (tenant[0] == '\0' || operation_id[0] == '\0') {
        gw_console_fail(r, q, 400, "Operation", "The page needs tenant and operation_id.");
        return;
    }
    if ((conn = gw_console_connect(q->cc, &status, why, sizeof(why))) == NULL) {
        gw_console_fail(r, q, status, "Operation", why);
        return;
    }
    item_page(r, &v, 200, conn, tenant, operation_id);
    PQfinish(conn);
}

/* The form's outcome: -1 for none (resolve the items only), else IDEM_RESOLVE_*; -2 for
 * one the console does not know. */
static int outcome(const char *as)
{
    static const char *const names[] = {"completed", "failed", "abandoned"};

    if (as == NULL || as[0] == '\0')
        return -1;
    for (int i = 0; i < 3; i++) {
        if (strcmp(as, names[i]) == 0)
            return i;
    }
    return -2;
}

/* Resolve with the library: the number resolved into @n (items only), or the error. */
static int resolve(unsigned int *n, PGconn *conn, const char *tenant, const char *operation_id,
                   int as, const char *reference, const char *note, const char *by, idem_error *err)
{
    idem_reconcile_resolution items = IDEM_RECONCILE_RESOLUTION_INIT;
    idem_resolution external = IDEM_RESOLUTION_INIT;

    if (as < 0) {
        items.note = note;
        items.by = by;
        return idem_reconcile_resolve_items(n, conn, tenant, operation_id, &items, err);
    }
    external.as = (idem_resolution_kind)as;
    external.provider_ref = reference != NULL && reference[0] != '\0' ? reference : NULL;
    external.note = note;
    external.by = by;
    *n = 0;
    return idem_external_resolve(conn, tenant, operation_id, &external, err);
}

/* The form's fields, checked; 0 or -1 with @why. */
static int check_form(const char *tenant, const char *operation_id, const char *note, int as,
                      char *why, size_t size)
{
    if (tenant == NULL || operation_id == NULL)
        snprintf(why, size, "The form needs tenant and operation_id.");
    else if (note == NULL || note[strspn(note, " \t\r\n")] == '\0')
        snprintf(why, size, "Note: required: say what was found or done.");
    else if (as == -2)
        snprintf(why, size, "Outcome: must be completed, failed or abandoned, or none.");
    else
        return 0;
    return -1;
}

static void resolve_key(gw_reply *r, const gw_console_req *q, PGconn *conn, const char *tenant,
                        const char *operation_id, const char *note, const char *as,
                        const char *reference)
{
    gw_console_view v = gw_console_view_of(q);
    idem_error err = IDEM_ERROR_INIT;
    char notice[128];
    unsigned int n = 0, status = 200;
    int rc =
        resolve(&n, conn, tenant, operation_id, outcome(as), reference, note, q->op->name, &err);

    if (rc != 0) {
        v.error = err.message[0] != '\0' ? err.message : idem_strerror(rc);
        status = gw_console_status(rc) == 404 ? 409 : gw_console_status(rc);
    } else if (outcome(as) >= 0)
        snprintf(notice, sizeof(notice), "Resolved the operation as %s.", as);
    else
        snprintf(notice, sizeof(notice), "Resolved %u item%s.", n, n == 1 ? "" : "s");
    v.notice = rc == 0 ? notice : NULL;
    item_page(r, &v, status, conn, tenant, operation_id);
}

void gw_console_resolve(gw_reply *r, const gw_console_req *q, const char *body, size_t len)
{
    char *tenant = gw_form_value(body, len, "tenant");
    char *operation_id = gw_form_value(body, len, "operation_id");
    char *note = gw_form_value(body, len, "note"), *as = gw_form_value(body, len, "as");
    char *reference = gw_form_value(body, len, "reference");
    unsigned int status = 200;
    char why[1024];
    PGconn *conn = NULL;

    if (check_form(tenant, operation_id, note, outcome(as), why, sizeof(why)) != 0)
        gw_console_fail(r, q, 400, "Not resolved", why);
    else if ((conn = gw_console_connect(q->cc, &status, why, sizeof(why))) == NULL)
        gw_console_fail(r, q, status, "Not resolved", why);
    else
        resolve_key(r, q, conn, tenant, operation_id, note, as, reference);
    PQfinish(conn);
    free(tenant);
    free(operation_id);
    free(note);
    free(as);
    free(reference);
}
