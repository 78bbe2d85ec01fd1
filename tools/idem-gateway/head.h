/* A connection's first request head as the client sent it, judged before libmicrohttpd
 * reads it (front.h): the request line must be METHOD SP request-target SP HTTP/D.D with
 * a method that is a token (RFC 9110 section 5.6.2) and HTTP/1.x, every header line must
 * have a colon, the framing headers must be sound (framing.h), and the head must end
 * within the limit. libmicrohttpd 0.9.75 closes a request line without a space without
 * any answer, answers some Content-Length values itself with a malformed answer, and tells
 * the gateway of its own answers only in log messages; the gateway answers all of these
 * itself, with a problem and "Connection: close", and counts them (server.c). */
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

/* How much of the head may still come. */
#define GW_HEAD_OPEN   0 /* more may come */
#define GW_HEAD_CLOSED 1 /* the client closed its side: no more will */
#define GW_HEAD_LIMIT  2 /* the limit (http.max_header_bytes) is in: no more is read */

/* Judge the @len bytes of @data a connection has sent so far; @full is one of GW_HEAD_OPEN,
 * GW_HEAD_CLOSED and GW_HEAD_LIMIT. A head not ended at the limit is refused: 414 when its
 * request line is not all in, else 431. On GW_HEAD_REFUSE, @r holds the
 * answer (the caller clears it) and @id the request's ID (its valid X-Request-Id, else a
 * new one); otherwise both are untouched. */
gw_head_verdict gw_head_judge(gw_reply *r, char id[GW_REQUEST_ID_MAX + 1], const char *data,
                              size_t len, int full);

#endif
