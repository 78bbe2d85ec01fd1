/* The HTTP API as an OpenAPI 3.1 document (README.md in this folder, "The contract,
 * machine-readable"), generated from the configuration and served at GET
 * /v1/openapi.json: a path per tool (POST /v1/tools/{name}) with the tool's argument
 * schema as its request body, the Idempotency-Key header as its contract requires it
 * (contract.h), and one response per HTTP status of the answer table (answer.h) and of the
 * answers before a call, each problem type named; then the paths without a tool (the list,
 * this document, /mcp, /healthz, /readyz, /metrics). */
#ifndef IDEM_GATEWAY_OPENAPI_H
#define IDEM_GATEWAY_OPENAPI_H

#include <jansson.h>

#include "config.h"
#include "reply.h"

#define GW_OPENAPI_VERSION "3.1.0"
#define GW_OPENAPI_PATH    "/v1/openapi.json"

/* A problem type's URI, as a string literal. */
#define GW_OPENAPI_PROBLEM(name) GW_PROBLEM_PREFIX name

/* The document for @cfg (borrowed). A new reference (caller owns, json_decref()), or NULL
 * when out of memory. */
json_t *gw_openapi(const gw_config *cfg);

/* Its parts that no configuration changes (openapi_components.c): the document's
 * "components" and the paths without a tool. New references, or NULL when out of memory. */
json_t *gw_openapi_components(void);
json_t *gw_openapi_fixed_paths(void);

#endif
