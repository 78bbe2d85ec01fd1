/* The console's pages as HTML (console_html.h): sign-in, the list of items with its
 * filters, one key's page with its resolve form, and a message. Each is a whole document
 * that loads only the console's stylesheet and runs no script. */
#ifndef IDEM_GATEWAY_CONSOLE_PAGES_H
#define IDEM_GATEWAY_CONSOLE_PAGES_H

#include <idem/idem.h>
#include <idem/sys/external.h>
#include <idem/sys/reconcile.h>

#include "console_html.h"

/* Who is looking, for the page's header and forms. Borrowed. */
typedef struct gw_console_view {
    const char *prefix; /* the console's path prefix, "/console/" */
    const char *who;    /* the operator signed in; NULL: nobody */
    const char *csrf;   /* the session's CSRF token; NULL without a session */
    const char *notice; /* a success to say, or NULL */
    const char *error;  /* a failure to say, or NULL */
} gw_console_view;

/* The list's filters as the operator gave them (each "" when not given). */
typedef struct gw_console_filters {
    const char *tenant;
    const char *kind;
    const char *age;
    const char *state; /* "open", "resolved" or "any" */
} gw_console_filters;

void gw_page_sign_in(gw_html *h, const gw_console_view *v);

/* @items: NULL when they could not be read (v->error says why). */
void gw_page_list(gw_html *h, const gw_console_view *v, const gw_console_filters *f,
                  const idem_reconcile_items *items);

/* The key (@tenant, @operation_id): @key NULL when it could not be read (v->error says
 * why); @history NULL when the key is no external operation. */
void gw_page_item(gw_html *h, const gw_console_view *v, const char *tenant,
                  const char *operation_id, const idem_reconcile_key *key,
                  const idem_external_history *history);

/* A page that only says @title and v->error or v->notice. */
void gw_page_message(gw_html *h, const gw_console_view *v, const char *title);

#endif
