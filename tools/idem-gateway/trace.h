/* W3C Trace Context (https://www.w3.org/TR/trace-context/) for one request: the caller's
 * traceparent (an HTTP header, or an MCP message's _meta["traceparent"]) read and checked,
 * or a new trace when none came or it was invalid (invalid is ignored, as the
 * specification says, never an error); the gateway's own span in it, written in the
 * request's log line (reqlog.h) and sent as the parent of an http tool's upstream request
 * (upstream.h). The gateway records no spans itself: no OpenTelemetry library is linked
 * (README.md in this folder, "Trace context"). */
#ifndef IDEM_GATEWAY_TRACE_H
#define IDEM_GATEWAY_TRACE_H

#include <stddef.h>

/* version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 characters. */
#define GW_TRACEPARENT_LEN 55
/* The longest tracestate kept (the specification's 32 members of up to 256 bytes are cut
 * to 512 bytes by propagators; a longer one is dropped here). */
#define GW_TRACESTATE_MAX 512

typedef struct gw_trace {
    char trace_id[33];  /* 32 lowercase hex digits, not all zero */
    char parent_id[17]; /* the caller's span; "" when the gateway started the trace */
    char span_id[17];   /* the gateway's own span: new for each request or message */
    char flags[3];      /* the caller's trace-flags as sent; "00" for a new trace */
    char tracestate[GW_TRACESTATE_MAX + 1]; /* the caller's, when valid; "" none */
} gw_trace;

/* Read @traceparent (NULL: absent) into @out's trace_id, parent_id and flags: 0, or -1
 * when it is not a valid traceparent (then @out is untouched). Version 00 is read exactly
 * (55 characters); a later version (not ff) by its first four fields, as the
 * specification asks of a version it does not know. */
int gw_trace_parse(gw_trace *out, const char *traceparent);

/* Whether @tracestate (NULL: absent) is one to pass on: at most GW_TRACESTATE_MAX bytes of
 * printable ASCII, each non-empty comma-separated member a key=value pair. 1 or 0. */
int gw_tracestate_ok(const char *tracestate);

/* @t for a request that sent @traceparent and @tracestate (each NULL when absent): the
 * caller's trace when @traceparent is valid (and its tracestate when that is valid too),
 * else a new trace with a random trace-id; a new span ID of the gateway's either way. */
void gw_trace_begin(gw_trace *t, const char *traceparent, const char *tracestate);

/* @n (at most 64) bytes of the CSPRNG into @out, from this thread's batch: 0, or -1 when
 * the generator failed. */
int gw_random_bytes(unsigned char *out, size_t n);

/* The traceparent that @t's span sends onward: "00-<trace-id>-<span-id>-<flags>", into @out
 * of GW_TRACEPARENT_LEN + 1 bytes. Returns @out. */
const char *gw_trace_header(char out[GW_TRACEPARENT_LEN + 1], const gw_trace *t);

#endif
