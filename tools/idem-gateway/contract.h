/* A tool's contract, machine-readable (README.md in this folder, "The contract,
 * machine-readable"): how long its receipts are kept and its keys remembered, what a
 * retry meets after each window, where the tenant and the operation ID are taken from on
 * each transport, whether a key is required, and which arguments make up the request's
 * identity. Built from the configuration alone, by one function, for both adapters: GET
 * /v1/tools lists it as each tool's "contract" (http_api.c), MCP's tools/list as each
 * tool's _meta[GW_CONTRACT_META] (mcp_call.c); the OpenAPI document (openapi.c) takes the
 * key's requirement from it. */
#ifndef IDEM_GATEWAY_CONTRACT_H
#define IDEM_GATEWAY_CONTRACT_H

#include <jansson.h>

#include "config.h"

/* The member "version" of the object; members are added only with a new version. */
#define GW_CONTRACT_VERSION 1

/* The _meta key of a tool in tools/list, beside the gateway's "idem/operation_id". */
#define GW_CONTRACT_META "dev.idem/contract"

/* The header that carries the key over the HTTP API. */
#define GW_KEY_HEADER "Idempotency-Key"

/* The values of "key"."requirement". Every tool of this gateway requires one: the gateway
 * never makes a key up (an MCP host may ask it to allocate one, which runs nothing). */
#define GW_KEY_REQUIRED "required"

/* @tool's contract under @cfg:
 *
 *     {"version": 1,
 *      "retention": {"seconds": 604800, "within": "replayed", "after": "expired"},
 *      "key_memory": {"seconds": 2592000, "clock_skew_s": 300,
 *                     "after": {"uuidv7": "expired", "other": "new"}},
 *      "key": {"requirement": "required", "max_bytes": 128,
 *              "http": [{"header": "Idempotency-Key"}],
 *              "mcp": [{"meta": "idem/operation_id"}, {"argument": "operation_id"}],
 *              "allocation": {"mcp": {"meta": "idem/allocate_operation_id"}}},
 *      "tenant": {"from_arguments": false,
 *                 "http": {"header": "Authorization", "scheme": "Bearer"},
 *                 "mcp": {"header": "Authorization", "scheme": "Bearer"},
 *                 "mcp_stdio": {"config": "mcp.stdio_tenant"}},
 *      "identity": {"mode": "except", "fields": ["/requested_at"]}}
 *
 * key.mcp lists {"argument": ...} only for a tool with an operation_id_argument; identity
 * is {"mode": "all"} without a policy. Both borrowed; a new reference (caller owns,
 * json_decref()), or NULL when out of memory. */
json_t *gw_contract(const gw_config *cfg, const gw_tool *tool);

/* A tool's _meta in MCP's tools/list: {GW_CONTRACT_META: gw_contract()}. A new reference,
 * or NULL when out of memory. */
json_t *gw_contract_meta(const gw_config *cfg, const gw_tool *tool);

#endif
