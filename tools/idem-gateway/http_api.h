/* The HTTP API's answers (http_api.c): a tool call (POST /v1/tools/{tool}) answered with
 * one HTTP answer per outcome, as the answer table says (README.md in this folder,
 * "Statuses"), the tool list (GET /v1/tools) and the OpenAPI document (GET
 * /v1/openapi.json). */
#ifndef IDEM_GATEWAY_HTTP_API_H
#define IDEM_GATEWAY_HTTP_API_H

#include <idem/idem.h>
#include <stddef.h>

#include "config.h"
#include "reply.h"
#include "run.h"
#include "runtime.h"

/* gw_run_call(), answered over HTTP in @r: one answer per status. Never fails: a failure of
 * its own is a 500 problem. */
void gw_call(gw_reply *r, const gw_config *cfg, const gw_runtime *rt, const gw_tenant *tenant,
             const gw_tool *tool, const char *key, const char *body, size_t len, gw_call_ctx *ctx);

/* @run, the outcome of a call of @tool under @key, as the HTTP API answers it in @r: the
 * status, problem and headers of its row of the answer table, with Idem-Operation-Id and
 * Idem-Status. */
void gw_http_answer(gw_reply *r, const gw_config *cfg, const gw_tenant *tenant, const gw_tool *tool,
                    const char *key, const gw_run *run);

/* Fill @r with GET /v1/tools's document: each tool with the policy @store applies to it. */
void gw_list_tools(gw_reply *r, const gw_config *cfg, const idem_store *store);

/* Fill @r with GET /v1/openapi.json's document, generated from @cfg (openapi.h). */
void gw_list_openapi(gw_reply *r, const gw_config *cfg);

#endif
