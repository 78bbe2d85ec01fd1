/* A request's message framing (RFC 9112 section 6), checked from its headers before
 * anything reads its body or runs: where a body ends must be the same for the gateway and
 * for every proxy in front of it, or a request can be smuggled inside another one.
 *
 * The gateway takes a body framed by one Content-Length of 1 to 19 digits, or by one
 * Transfer-Encoding that is exactly "chunked" (letter case aside), or no body at all.
 * Everything else is answered here, and the body is not read:
 *
 *   400  Content-Length sent more than once (the same value or not), not 1 to 19 digits
 *        (a list "5, 12", a sign, a space inside, leading zeros past 19 digits);
 *        Transfer-Encoding sent more than once; Transfer-Encoding and Content-Length both
 *   501  one Transfer-Encoding other than "chunked" ("gzip", "gzip, chunked", "identity")
 *
 * libmicrohttpd reads only the first Content-Length and the first Transfer-Encoding, and
 * refuses some values itself before the gateway sees the request (README.md in this
 * folder, "Limits"). */
#ifndef IDEM_GATEWAY_FRAMING_H
#define IDEM_GATEWAY_FRAMING_H

#include <microhttpd.h>

#include "reply.h"

/* The longest Content-Length taken, in digits: every such value fits an int64. */
#define GW_CONTENT_LENGTH_DIGITS_MAX 19

/* What a request's headers say about its body's framing, gathered header by header: the
 * values are borrowed from whoever holds the headers, valid while they are. */
typedef struct gw_framing {
    unsigned int nlength, nencoding;
    const char *length[2]; /* the first two Content-Length values */
    const char *encoding;  /* the first Transfer-Encoding value */
} gw_framing;

#define GW_FRAMING_INIT                                                                            \
    {                                                                                              \
        0, 0, {NULL, NULL}, NULL                                                                   \
    }

/* Take one header line (@name, its @value; NULL is taken as ""): only the framing headers
 * count. */
void gw_framing_add(gw_framing *f, const char *name, const char *value);

/* Judge the headers gathered in @f. Returns 0 when they are sound (@r untouched), else -1
 * with @r set to the problem (400 or 501, "Connection: close"). */
int gw_framing_judge(gw_reply *r, const gw_framing *f);

/* A 400 invalid-framing problem with @detail into @r ("Connection: close"). Returns -1. */
int gw_framing_refuse(gw_reply *r, const char *detail);

/* Gather @c's headers and judge them: gw_framing_judge(). The front checks the first
 * request of a connection from its raw head (head.h); this checks every request,
 * the later ones of a kept-alive connection included. */
int gw_framing_check(gw_reply *r, struct MHD_Connection *c);

#endif
