/* The console's routes: its headers on every answer, the session from the cookie, sign-in
 * and sign-out, the stylesheet; the pages that read the database are console_actions.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "auth.h"
#include "console.h"
#include "console_form.h"
#include "console_int.h"

#define FORM_TYPE "application/x-www-form-urlencoded"

/* 303 to @path under the prefix, with an empty page. */
static void see_other(gw_reply *r, const gw_console_req *q, const char *path)
{
    gw_console_answer(r, 303, "text/plain; charset=utf-8", "", 0);
    if (r->status == 303)
        gw_reply_header(r, "Location", "%s%s", q->cc->path, path);
}

static int decode(gw_console_req *q, const gw_config *cfg, struct MHD_Connection *c,
                  const char *url)
{
    memset(q, 0, sizeof(*q));
    q->cc = cfg->console;
    q->c = c;
    q->sub = url + q->cc->path_len;
    q->session = MHD_lookup_connection_value(c, MHD_COOKIE_KIND, GW_CONSOLE_COOKIE);
    q->op = gw_console_session_check(q->cc, q->session, time(NULL));
    if (q->op != NULL && gw_console_csrf(q->csrf, q->session) != 0)
        return -1;
    return 0;
}

int gw_console_owns(const gw_config *cfg, const char *url)
{
    return cfg->console != NULL && strncmp(url, cfg->console->path, cfg->console->path_len) == 0;
}

static void sign_in_page(gw_reply *r, const gw_console_req *q, unsigned int status,
                         const char *error)
{
    gw_console_view v = gw_console_view_of(q);
    gw_html h = GW_HTML_INIT;

    v.error = error;
    gw_page_sign_in(&h, &v);
    gw_console_html(r, status, &h);
}

static void get(gw_reply *r, const gw_console_req *q)
{
    if (strcmp(q->sub, "console.css") == 0)
        gw_console_answer(r, 200, "text/css; charset=utf-8", gw_console_css,
                          strlen(gw_console_css));
    else if (strcmp(q->sub, "sign-in") == 0)
        sign_in_page(r, q, 200, NULL);
    else if (strcmp(q->sub, "") != 0 && strcmp(q->sub, "item") != 0)
        gw_console_fail(r, q, 404, "Not found", "The console has no such page.");
    else if (q->op == NULL)
        see_other(r, q, "sign-in");
    else if (strcmp(q->sub, "") == 0)
        gw_console_list(r, q);
    else
        gw_console_item(r, q);
}

static int is_form(const char *content_type)
{
    size_t n = strlen(FORM_TYPE);

    return content_type != NULL && strncasecmp(content_type, FORM_TYPE, n) == 0 &&
           (content_type[n] == '\0' || content_type[n] == ';');
}

/* Whether a form's Origin, when the browser sent one, is this site: its host and port are
 * the request's Host (the scheme is not compared: TLS may end at a proxy in front). A
 * sign-in form has no session and so no CSRF token; this keeps another site from signing a
 * browser in (login CSRF). */
static int same_origin(struct MHD_Connection *c)
{
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    const char *sep;

    if (origin == NULL)
        return 1;
    if (host == NULL || (sep = strstr(origin, "://")) == NULL)
        return 0;
    return strcasecmp(sep + 3, host) == 0;
}

void gw_console_begin(gw_reply *r, const gw_config *cfg, struct MHD_Connection *c, const char *url,
                      const char *method)
{
    gw_console_req q;

    if (decode(&q, cfg, c, url) != 0) {
        gw_internal_error(r);
        return;
    }
    if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)
        get(r, &q);
    else if (strcmp(method, "POST") != 0) {
        gw_console_fail(r, &q, 405, "Method not allowed", "The console takes GET and POST.");
        gw_reply_header(r, "Allow", "GET, HEAD, POST");
    } else if (strcmp(q.sub, "sign-in") != 0 && strcmp(q.sub, "sign-out") != 0 &&
               strcmp(q.sub, "resolve") != 0)
        gw_console_fail(r, &q, 404, "Not found", "The console takes no form here.");
    else if (!is_form(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type")))
        gw_console_fail(r, &q, 415, "Not a form", "Send the form as Content-Type: " FORM_TYPE ".");
    else if (!same_origin(c))
        gw_console_fail(r, &q, 403, "Refused",
                        "The form came from another site (its Origin is not this one's): "
                        "nothing was changed.");
}

/* A session for the operator whose token the form carries. */
static void sign_in(gw_reply *r, const gw_console_req *q, const char *body, size_t len)
{
    char *token = gw_form_value(body, len, "token");
    unsigned char digest[GW_DIGEST_SIZE];
    char value[GW_CONSOLE_SESSION_SIZE];
    const gw_tenant *op = NULL;
    time_t ends = time(NULL) + (time_t)q->cc->session_s;

    if (token != NULL && gw_token_digest(digest, token, strlen(token)) == 0)
        op = gw_console_operator_by_digest(q->cc, digest);
    free(token);
    if (op == NULL) {
        sign_in_page(r, q, 401, "That is not an operator's token.");
        return;
    }
    if (gw_console_session_make(value, op->name, ends) != 0) {
        gw_internal_error(r);
        return;
    }
    see_other(r, q, "");
    gw_reply_header(r, "Set-Cookie",
                    GW_CONSOLE_COOKIE "=%s; Path=%s; Max-Age=%u; HttpOnly; "
                                      "SameSite=Strict%s",
                    value, q->cc->path, q->cc->session_s, q->cc->secure_cookie ? "; Secure" : "");
}

/* The form's CSRF token is the session's: 1, else the refusal is in @r. */
static int csrf_holds(gw_reply *r, const gw_console_req *q, const char *body, size_t len)
{
    char *given = gw_form_value(body, len, "csrf");
    int ok = q->op != NULL && gw_console_csrf_ok(q->session, given);

    free(given);
    if (!ok)
        gw_console_fail(r, q, 403, "Refused",
                        q->op == NULL ? "Sign in first: nothing was changed."
                                      : "The form's CSRF token is missing or wrong: nothing "
                                        "was changed. Reload the page and send it again.");
    return ok;
}

void gw_console_post(gw_reply *r, const gw_config *cfg, struct MHD_Connection *c, const char *url,
                     const char *body, size_t len)
{
    gw_console_req q;

    if (decode(&q, cfg, c, url) != 0) {
        gw_internal_error(r);
        return;
    }
    if (strcmp(q.sub, "sign-in") == 0)
        sign_in(r, &q, body, len);
    else if (!csrf_holds(r, &q, body, len))
        return;
    else if (strcmp(q.sub, "resolve") == 0)
        gw_console_resolve(r, &q, body, len);
    else {
        see_other(r, &q, "sign-in");
        gw_reply_header(r, "Set-Cookie",
                        GW_CONSOLE_COOKIE "=; Path=%s; Max-Age=0; HttpOnly; SameSite=Strict",
                        q.cc->path);
    }
}
