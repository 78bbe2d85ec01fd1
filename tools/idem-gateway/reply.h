/* An HTTP answer before it becomes libmicrohttpd's: status, body, headers. Problems are
 * RFC 9457 documents, application/problem+json, with a stable type per kind of answer
 * (README.md in this folder, "Problem types"). */
#ifndef IDEM_GATEWAY_REPLY_H
#define IDEM_GATEWAY_REPLY_H

#include <jansson.h>
#include <stddef.h>

#define GW_REPLY_HEADERS 8

typedef struct gw_header {
    const char *name; /* static */
    char value[256];  /* the console's Set-Cookie is the longest */
} gw_header;

typedef struct gw_reply {
    unsigned int status;
    const char *content_type; /* static */
    char *body;               /* owned (malloc) */
    size_t len;
    gw_header headers[GW_REPLY_HEADERS];
    size_t nheaders;
} gw_reply;

/* The prefix of every problem type: "urn:idem:problem:" then the name. */
#define GW_PROBLEM_PREFIX "urn:idem:problem:"

/* Add a header (dropped when the table is full: never more than the gateway sets). Only
 * headers[0 .. nheaders) are set; the other slots hold anything. */
void gw_reply_header(gw_reply *r, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The body: a copy of @len bytes of @body, as @content_type. Returns 0 or -1 (memory). */
int gw_reply_body(gw_reply *r, unsigned int status, const char *content_type, const char *body,
                  size_t len);

/* A problem: {"type": GW_PROBLEM_PREFIX @type, "title", "status", "detail"} and the
 * members of @extra (stolen; NULL for none). Returns 0 or -1 (memory). */
int gw_problem(gw_reply *r, unsigned int status, const char *type, const char *title,
               const char *detail, json_t *extra);

/* A 500 problem of the gateway's own (out of memory). */
void gw_internal_error(gw_reply *r);

/* Free the body and reset. */
void gw_reply_clear(gw_reply *r);

/* The first @size - 1 bytes of a client's @text into @out, each byte outside printable
 * ASCII as '?': a problem or an error is JSON, which takes only UTF-8 (and a name cut
 * short may end inside a character), and a log reader wants no control bytes. Returns
 * @out. */
const char *gw_printable(char *out, size_t size, const char *text);

#endif
