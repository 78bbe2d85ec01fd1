/* A connection's first request head as the client sent it, judged before libmicrohttpd
 * reads it (front.h): the request line must be METHOD SP request-target SP HTTP/D.D with
 * a method that is a token (RFC 9110 section 5.6.2), and the framing headers must be
 * sound (framing.h). libmicrohttpd 0.9.75 closes a request line without a space without
 * any answer, and answers some Content-Length values itself with a malformed answer; the
 * gateway answers both itself, with a problem and "Connection: close". */
#ifndef IDEM_GATEWAY_HEAD_H
#define IDEM_GATEWAY_HEAD_H

#include <stddef.h>

#include "reply.h"
#include "reqlog.h"

typedef enum gw_head_verdict {
    GW_HEAD_MORE,   /* the head is not all in: read more */
    GW_HEAD_PASS,   /* nothing to say: libmicrohttpd takes the connection */
    GW_HEAD_REFUSE, /* the reply is set: send it and close */
    GW_HEAD_CLOSE   /* not HTTP at all (a TLS handshake): close without an answer */
} gw_head_verdict;

/* Judge the @len bytes of @data a connection has sent so far. @full: no more will come
 * (@max bytes are in, or the client closed its side). On GW_HEAD_REFUSE, @r holds the
 * answer (the caller clears it) and @id the request's ID (its valid X-Request-Id, else a
 * new one); otherwise both are untouched. */
gw_head_verdict gw_head_judge(gw_reply *r, char id[GW_REQUEST_ID_MAX + 1], const char *data,
                              size_t len, int full);

#endif
