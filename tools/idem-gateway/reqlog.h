/* One log line per request on standard error, plain or JSON (README.md in this folder,
 * "Logs"), and the request ID: X-Request-Id when the client sends a valid one, else a new
 * UUIDv7. A line never carries a body, a token or a secret: only the fields below, each
 * checked or made by the gateway. */
#ifndef IDEM_GATEWAY_REQLOG_H
#define IDEM_GATEWAY_REQLOG_H

#include <stddef.h>

/* The longest X-Request-Id taken (the library stores trace IDs of up to 256 bytes). */
#define GW_REQUEST_ID_MAX 128

/* @header (NULL when absent) when it is 1 to GW_REQUEST_ID_MAX characters of printable
 * ASCII without space, else a new UUIDv7, into @out. */
void gw_request_id(char out[GW_REQUEST_ID_MAX + 1], const char *header);

typedef struct gw_log_entry {
    const char *id;     /* the request ID */
    const char *route;  /* call, mcp, list, healthz, readyz, metrics, other */
    const char *tenant; /* NULL: not authenticated */
    const char *tool;   /* the metrics' tool label */
    const char *key;    /* NULL: none valid */
    unsigned int code;  /* the HTTP status sent */
    const char *status; /* idem's status word of a call, or NULL */
    double seconds;
    const char *trace_id; /* W3C trace-id (trace.h): the caller's or a new one */
    const char *span_id;  /* the gateway's span in it */
} gw_log_entry;

/* Write @e as one line: "idem-gateway: request id=... route=... trace=... span=..." or,
 * with @json, one JSON object {"time", "msg": "request", ..., "trace_id", "span_id"}. */
void gw_log_request(const gw_log_entry *e, int json);

#endif
