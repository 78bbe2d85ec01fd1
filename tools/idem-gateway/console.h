/* The reconciliation console (README.md in this folder, "The reconciliation console"):
 * server-rendered pages under the configuration's console.path on the gateway's own
 * listener, for operators, who sign in with a token of their own. The router hands it
 * every request under that prefix: gw_console_begin() with the headers, and for a POST that
 * passed the checks before its body, gw_console_post() with the body. Every answer carries
 * a strict Content-Security-Policy, nosniff and no-store. */
#ifndef IDEM_GATEWAY_CONSOLE_H
#define IDEM_GATEWAY_CONSOLE_H

#include <microhttpd.h>
#include <stddef.h>

#include "config.h"
#include "reply.h"

/* Whether @url is the console's (@cfg has a console and @url is under its prefix): 1 or 0. */
int gw_console_owns(const gw_config *cfg, const char *url);

/* A request for the console, its headers in: a GET is answered in @r; so is a POST that is
 * refused before its body (unknown page, not a form). A POST to read leaves @r->status 0. */
void gw_console_begin(gw_reply *r, const gw_config *cfg, struct MHD_Connection *c, const char *url,
                      const char *method);

/* The body of that POST is in (@len bytes): the answer in @r. */
void gw_console_post(gw_reply *r, const gw_config *cfg, struct MHD_Connection *c, const char *url,
                     const char *body, size_t len);

#endif
