/* A tool call (POST /v1/tools/{tool}), its key and tenant already known, answered with
 * one HTTP answer per idem status (README.md in this folder, "Statuses"); and the tool
 * list (GET /v1/tools). The call itself (gw_run_call()) is shared with MCP (mcp.h). */
#ifndef IDEM_GATEWAY_CALL_H
#define IDEM_GATEWAY_CALL_H

#include <idem/idem.h>
#include <stddef.h>

#include "answer.h"
#include "config.h"
#include "reply.h"

/* What a request gives a call and learns from it, for its log line and the metrics. */
typedef struct gw_call_ctx {
    const char *trace_id; /* the request ID, stored as the operation's trace ID; NULL: none */
    const char *tool;     /* out: the tool's metrics label once the request names one */
    const char *status;   /* out: idem's status word once a call ran */
    char key[IDEM_OPERATION_ID_MAX + 1]; /* out: the operation ID ("" until one is taken) */
} gw_call_ctx;

/* One tool call's outcome, whatever the transport (HTTP here, MCP in mcp.h). */
typedef struct gw_run {
    idem_outcome out;      /* status and receipt; cleared by gw_run_clear() */
    idem_error err;        /* why, for every status but created, replayed and rejected */
    int arguments_invalid; /* status invalid for the arguments (not JSON, the schema, a value) */
    char pointer[512];     /* then: the field as a JSON Pointer into the arguments ("" the whole) */
    int out_of_memory;     /* the gateway's own failure: answered as such, whatever the status */
} gw_run;

/* Run a call of @tool as @tenant under operation ID @key with the arguments @body (@len
 * bytes of JSON text): parsed and validated against the tool's schema, then executed
 * through @store. @run is filled (what it held is ignored); its status says how it went;
 * free it with gw_run_clear(). @ctx (NULL: none) gives the trace ID and is told the tool,
 * the key and the status. Counted in the metrics (metrics.h). Never fails itself. */
void gw_run_call(gw_run *run, const gw_config *cfg, idem_store *store, const gw_tenant *tenant,
                 const gw_tool *tool, const char *key, const char *body, size_t len,
                 gw_call_ctx *ctx);

/* NULL is accepted. */
void gw_run_clear(gw_run *run);

/* @run's row of the answer table (answer.h): its status, invalid told apart into the
 * operation ID's and the arguments'. */
gw_outcome gw_run_outcome(const gw_run *run);

/* A misconfigured call's cause on standard error, for the operator: the client is told only
 * that the log says what. */
void gw_log_misconfigured(const idem_error *err);

/* The arguments of a call of @tool, @len bytes of JSON text (arguments.c): read by the
 * library's parser (I-JSON), validated against the tool's schema, and for a sql tool the
 * values its statement binds checked. 0, or -1 with @run invalid (gw_run_invalid()). */
int gw_check_arguments(gw_run *run, const gw_config *cfg, const gw_tool *tool, const char *body,
                       size_t len);

/* @run invalid for its arguments at @pointer ("" the whole), its message @fmt (NULL: the
 * library's, already in run->err). */
void gw_run_invalid(gw_run *run, const char *pointer, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* @req (initialized by the caller) for a call of @tool as @tenant under operation ID @key
 * with the arguments @body (@len bytes) and @trace_id (NULL: none); the strings are
 * borrowed. */
void gw_request(idem_request *req, const gw_tenant *tenant, const gw_tool *tool, const char *key,
                const char *body, size_t len, const char *trace_id);

/* gw_run_call(), answered over HTTP in @r: one answer per status. Never fails: a failure of
 * its own is a 500 problem. */
void gw_call(gw_reply *r, const gw_config *cfg, idem_store *store, const gw_tenant *tenant,
             const gw_tool *tool, const char *key, const char *body, size_t len, gw_call_ctx *ctx);

/* An http tool's call (http_call.c), its arguments valid against its schema: the upstream
 * call as an external effect, its outcome into @run (set up by gw_run_call()); a transient
 * answer retried until the tool's policy is spent ends unavailable. */
void gw_http_run(gw_run *run, const gw_config *cfg, const gw_tenant *tenant, const gw_tool *tool,
                 const char *key, const char *body, size_t len, const char *trace_id);

/* A stored refusal of an http tool back into the upstream's status, Content-Type and bytes
 * (http_call.c), with Idem-Upstream-Status; 0, or -1 when the receipt is not one (a refusal
 * an operator resolved, say). */
int gw_http_unwrap(gw_reply *r, const idem_outcome *out);

/* Fill @r with GET /v1/tools's document: each tool with the policy @store applies to it. */
void gw_list_tools(gw_reply *r, const gw_config *cfg, const idem_store *store);

/* A 500 problem of the gateway's own (out of memory). */
void gw_internal_error(gw_reply *r);

#endif
