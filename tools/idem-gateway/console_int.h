/* What the console's files share: one request as console.c decoded it, and the answers
 * console_actions.c builds from the database. */
#ifndef IDEM_GATEWAY_CONSOLE_INT_H
#define IDEM_GATEWAY_CONSOLE_INT_H

#include <libpq-fe.h>
#include <microhttpd.h>
#include <stddef.h>

#include "console_config.h"
#include "console_html.h"
#include "console_pages.h"
#include "console_session.h"
#include "reply.h"

typedef struct gw_console_req {
    const gw_console_config *cc; /* borrowed from the request's configuration */
    struct MHD_Connection *c;
    const char *sub;                 /* the path after the prefix: "", "item", "resolve", ... */
    const char *session;             /* the session cookie's value, or NULL; borrowed */
    const gw_tenant *op;             /* the signed-in operator, or NULL */
    char csrf[GW_CONSOLE_CSRF_SIZE]; /* the session's CSRF token ("" without one) */
} gw_console_req;

/* The view of @q's operator, for a page. */
gw_console_view gw_console_view_of(const gw_console_req *q);

/* Answer @status with @body (@len bytes of @type) and the console's headers. */
void gw_console_answer(gw_reply *r, unsigned int status, const char *type, const char *body,
                       size_t len);

/* Answer @status with @h's page (freed here) and the console's headers. */
void gw_console_html(gw_reply *r, unsigned int status, gw_html *h);

/* A page saying @title and @error (status @status). */
void gw_console_fail(gw_reply *r, const gw_console_req *q, unsigned int status, const char *title,
                     const char *error);

/* The HTTP status for a library error @rc. */
unsigned int gw_console_status(int rc);

/* A connection as the console's role (console.dsn), checked to hold idem_operator's rights
 * and no more. NULL with @why (of @size bytes) and *@status (503 or 500) on failure. Caller
 * owns; PQfinish(). */
PGconn *gw_console_connect(const gw_console_config *cc, unsigned int *status, char *why,
                           size_t size);

/* The pages that read or change the database (console_actions.c). */
void gw_console_list(gw_reply *r, const gw_console_req *q);
void gw_console_item(gw_reply *r, const gw_console_req *q);
void gw_console_resolve(gw_reply *r, const gw_console_req *q, const char *body, size_t len);

#endif
