/* The console's answers: every one with its headers (a strict Content-Security-Policy,
 * nosniff, no-store, same-origin referrers), a page, a failure's page, and the view of the
 * signed-in operator a page is drawn for. */
#include <stdio.h>

#include "console_int.h"

#define CSP                                                                                        \
    "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; "           \
    "base-uri 'none'"

/* The headers of every console answer. */
static void console_headers(gw_reply *r)
{
    gw_reply_header(r, "Content-Security-Policy", CSP);
    gw_reply_header(r, "X-Content-Type-Options", "nosniff");
    gw_reply_header(r, "Cache-Control", "no-store");
    /* same-origin, not no-referrer: with no-referrer a browser sends its forms with Origin:
     * null, and same_origin() could not tell this site's forms from another's. */
    gw_reply_header(r, "Referrer-Policy", "same-origin");
}

void gw_console_answer(gw_reply *r, unsigned int status, const char *type, const char *body,
                       size_t len)
{
    gw_reply_clear(r);
    if (gw_reply_body(r, status, type, body, len) != 0) {
        gw_internal_error(r);
        return;
    }
    console_headers(r);
}

void gw_console_html(gw_reply *r, unsigned int status, gw_html *h)
{
    if (h->failed)
        gw_internal_error(r);
    else
        gw_console_answer(r, status, "text/html; charset=utf-8", h->buf, h->len);
    gw_html_free(h);
}

gw_console_view gw_console_view_of(const gw_console_req *q)
{
    gw_console_view v = {q->cc->path, NULL, NULL, NULL, NULL};

    if (q->op != NULL) {
        v.who = q->op->name;
        v.csrf = q->csrf;
    }
    return v;
}

void gw_console_fail(gw_reply *r, const gw_console_req *q, unsigned int status, const char *title,
                     const char *error)
{
    gw_console_view v = gw_console_view_of(q);
    gw_html h = GW_HTML_INIT;

    v.error = error;
    gw_page_message(&h, &v, title);
    gw_console_html(r, status, &h);
}
