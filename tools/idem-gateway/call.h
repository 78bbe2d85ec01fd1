/* A tool call (POST /v1/tools/{tool}), its key and tenant already known, answered with
 * one HTTP answer per idem status (README.md in this folder, "Statuses"); and the tool
 * list (GET /v1/tools). */
#ifndef IDEM_GATEWAY_CALL_H
#define IDEM_GATEWAY_CALL_H

#include <idem/idem.h>
#include <stddef.h>

#include "config.h"
#include "reply.h"

/* Validate @body (@len bytes: the arguments) against the tool's schema, execute the tool
 * through @store and fill @r. Never fails: a failure of its own is a 500 problem. */
void gw_call(gw_reply *r, const gw_config *cfg, idem_store *store, const gw_tenant *tenant,
             const gw_tool *tool, const char *key, const char *body, size_t len);

/* An http tool's call (http_call.c), its arguments valid: the upstream call as an
 * external effect. */
void gw_http_call(gw_reply *r, const gw_config *cfg, const gw_tenant *tenant, const gw_tool *tool,
                  const char *key, const char *body, size_t len);

/* The problem answering @status (any but created, replayed and rejected). */
void gw_call_failure(gw_reply *r, const gw_config *cfg, const gw_tenant *tenant, const char *key,
                     idem_status status, const idem_error *err);

/* Fill @r with GET /v1/tools's document. */
void gw_list_tools(gw_reply *r, const gw_config *cfg);

/* A 500 problem of the gateway's own (out of memory). */
void gw_internal_error(gw_reply *r);

#endif
