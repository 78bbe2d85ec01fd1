/* The OpenAPI document's parts that no configuration changes (openapi.h): the bearer
 * scheme, the headers the gateway sends, the problem document (RFC 9457), the tool list
 * and a tool's contract (contract.h) as JSON Schemas, and the endpoints that take no tool
 * (README.md in this folder: "The HTTP contract", "MCP", "Operations"). */
#include "openapi.h"

#define PROBLEM_REF      "{\"$ref\": \"#/components/schemas/Problem\"}"
#define STRING           "{\"type\": \"string\"}"
#define STRINGS          "{\"type\": \"array\", \"items\": " STRING "}"
#define SECONDS          "{\"type\": \"integer\", \"minimum\": 1}"
#define HEADER(name)     "{\"$ref\": \"#/components/headers/" name "\"}"
#define ALLOW            HEADER("Allow")
#define WWW_AUTHENTICATE HEADER("WWW-Authenticate")
/* A problem of one type: the Problem schema, its type narrowed (allOf, not members beside
 * the $ref, which tools that replace a $ref by its target would drop). */
#define PROBLEM_OF(type)                                                                           \
    "{\"allOf\": [" PROBLEM_REF                                                                    \
    ", {\"properties\": {\"type\": {\"const\": \"" GW_OPENAPI_PROBLEM(type) "\"}}}]}"
#define UNAUTHORIZED       PROBLEM_OF("unauthorized")
#define METHOD_NOT_ALLOWED PROBLEM_OF("method-not-allowed")

/* The document's "components", member by member: components[group][name] = text. */
static const struct part {
    const char *group, *name, *text;
} parts[] = {
    {"securitySchemes", "bearer",
     "{\"type\": \"http\", \"scheme\": \"bearer\", \"description\": \"A tenant's token; the "
     "gateway keeps its SHA-256 digest. The token names the tenant, which never comes from "
     "the body.\"}"},
    {"headers", "Retry-After",
     "{\"description\": \"Seconds to wait before a retry with the same key\", \"schema\": "
     "{\"type\": \"integer\", \"minimum\": 0}}"},
    {"headers", "Idem-Status",
     "{\"description\": \"idem's status of the call\", \"schema\": " STRING "}"},
    {"headers", "Idem-Operation-Id",
     "{\"description\": \"The key, unquoted\", \"schema\": " STRING "}"},
    {"headers", "Idempotent-Replayed",
     "{\"description\": \"true: the stored answer, nothing ran again\", \"schema\": {\"const\": "
     "\"true\"}}"},
    {"headers", "Idem-Upstream-Status",
     "{\"description\": \"An http tool's stored refusal: the upstream's status\", \"schema\": "
     "{\"type\": \"integer\"}}"},
    {"headers", "X-Request-Id",
     "{\"description\": \"The request's ID, the client's or one the gateway made\", "
     "\"schema\": " STRING "}"},
    {"headers", "WWW-Authenticate",
     "{\"schema\": {\"const\": \"Bearer realm=\\\"idem-gateway\\\"\"}}"},
    {"headers", "Allow",
     "{\"description\": \"The methods the path takes\", \"schema\": " STRING "}"},
    {"headers", "Connection", "{\"schema\": {\"const\": \"close\"}}"},
    {"schemas", "Problem",
     "{\"type\": \"object\", \"required\": [\"type\", \"title\", \"status\", \"detail\"],"
     " \"properties\": {\"type\": " STRING ", \"title\": " STRING ","
     " \"status\": {\"type\": \"integer\"}, \"detail\": " STRING ","
     " \"pointer\": {\"description\": \"invalid-arguments: the field, a JSON Pointer\","
     "  \"type\": \"string\"},"
     " \"changed\": {\"description\": \"conflict: arguments, tool, payload_version or an"
     " identity field's JSON Pointer\", \"type\": \"string\"},"
     " \"field\": " STRING ", \"sqlstate\": " STRING ","
     " \"reconciliation\": {\"type\": \"object\", \"properties\": {\"kind\": " STRING ","
     "  \"tenant\": " STRING ", \"operation_id\": " STRING ", \"show\": " STRING "}}}}"},
    {"schemas", "Contract",
     "{\"type\": \"object\", \"required\": [\"version\", \"retention\", \"key_memory\", \"key\","
     " \"tenant\", \"identity\"], \"properties\": {"
     " \"version\": {\"type\": \"integer\", \"minimum\": 1},"
     " \"retention\": {\"type\": \"object\", \"required\": [\"seconds\", \"within\", \"after\"],"
     "  \"properties\": {\"seconds\": " SECONDS ", \"within\": {\"const\": \"replayed\"},"
     "   \"after\": {\"const\": \"expired\"}}},"
     " \"key_memory\": {\"type\": \"object\", \"required\": [\"seconds\", \"clock_skew_s\","
     "  \"after\"], \"properties\": {\"seconds\": " SECONDS ","
     "   \"clock_skew_s\": {\"type\": \"integer\", \"minimum\": 0},"
     "   \"after\": {\"type\": \"object\", \"required\": [\"uuidv7\", \"other\"], \"properties\":"
     "    {\"uuidv7\": {\"const\": \"expired\"}, \"other\": {\"const\": \"new\"}}}}},"
     " \"key\": {\"$ref\": \"#/components/schemas/ContractKey\"},"
     " \"tenant\": {\"type\": \"object\", \"required\": [\"from_arguments\"], \"properties\":"
     "  {\"from_arguments\": {\"const\": false}}},"
     " \"identity\": {\"$ref\": \"#/components/schemas/Identity\"}}}"},
    {"schemas", "ContractKey",
     "{\"type\": \"object\", \"required\": [\"requirement\", \"max_bytes\", \"http\", \"mcp\","
     " \"allocation\"], \"properties\": {"
     " \"requirement\": {\"enum\": [\"required\", \"optional\", \"allocated\"]},"
     " \"max_bytes\": {\"type\": \"integer\"},"
     " \"http\": {\"type\": \"array\", \"items\": {\"type\": \"object\"}},"
     " \"mcp\": {\"type\": \"array\", \"items\": {\"type\": \"object\"}},"
     " \"allocation\": {\"type\": \"object\"}}}"},
    {"schemas", "Identity",
     "{\"type\": \"object\", \"required\": [\"mode\"], \"properties\": {"
     " \"mode\": {\"enum\": [\"all\", \"only\", \"except\"]}, \"fields\": " STRINGS "}}"},
    {"schemas", "Tool",
     "{\"type\": \"object\", \"required\": [\"name\", \"payload_version\", \"arguments\","
     " \"retention_s\", \"key_memory_s\", \"key_required\", \"identity\", \"contract\"],"
     " \"properties\": {\"name\": " STRING ","
     " \"payload_version\": {\"type\": \"integer\", \"minimum\": 1},"
     " \"arguments\": {\"description\": \"The tool's argument schema\"},"
     " \"retention_s\": " SECONDS ", \"key_memory_s\": " SECONDS ","
     " \"key_required\": {\"type\": \"boolean\"}, \"stored_failures\": " STRINGS ","
     " \"unstored_failures\": " STRINGS ","
     " \"identity\": {\"$ref\": \"#/components/schemas/Identity\"},"
     " \"contract\": {\"$ref\": \"#/components/schemas/Contract\"}}}"},
    {"schemas", "ToolList",
     "{\"type\": \"object\", \"required\": [\"tools\"], \"properties\": {\"tools\": {\"type\":"
     " \"array\", \"items\": {\"$ref\": \"#/components/schemas/Tool\"}}}}"},
    {"schemas", "JsonRpcMessage",
     "{\"type\": \"object\", \"required\": [\"jsonrpc\"], \"properties\": {\"jsonrpc\":"
     " {\"const\": \"2.0\"}}}"},
    /* The answers several paths share. */
    {"responses", "Unauthorized",
     "{\"description\": \"A missing or unknown token (the same bytes either way)\","
     " \"headers\": {\"WWW-Authenticate\": " WWW_AUTHENTICATE "},"
     " \"content\": {\"application/problem+json\": {\"schema\": " UNAUTHORIZED "}}}"},
    {"responses", "MethodNotAllowed",
     "{\"description\": \"Another method\", \"headers\": {\"Allow\": " ALLOW "},"
     " \"content\": {\"application/problem+json\": {\"schema\": " METHOD_NOT_ALLOWED "}}}"},
    {"responses", "JsonRpcRefusal",
     "{\"description\": \"Refused before the message (an Origin not allowed 403, an unsupported"
     " MCP-Protocol-Version or a message refused whole 400, too large 413, not JSON 415): a"
     " JSON-RPC error with a null id\", \"content\": {\"application/json\": {\"schema\":"
     " {\"$ref\": \"#/components/schemas/JsonRpcMessage\"}}}}"},
};

/* The endpoints without a tool; {"/path": path item}. A 401 or 405 here is a Problem. */
static const char fixed_paths[] =
    "{\"/v1/tools\": {\"get\": {\"operationId\": \"list_tools\", \"summary\": \"The tools, each"
    " with its argument schema, windows, identity and contract\", \"responses\": {"
    "  \"200\": {\"description\": \"The tools\", \"content\": {\"application/json\":"
    "   {\"schema\": {\"$ref\": \"#/components/schemas/ToolList\"}}}},"
    "  \"401\": {\"$ref\": \"#/components/responses/Unauthorized\"},"
    "  \"405\": {\"$ref\": \"#/components/responses/MethodNotAllowed\"}}}},"
    " \"/v1/openapi.json\": {\"get\": {\"operationId\": \"openapi\", \"summary\": \"This"
    " document, generated from the configuration\", \"responses\": {"
    "  \"200\": {\"description\": \"The OpenAPI document\", \"content\": {\"application/json\":"
    "   {\"schema\": {\"type\": \"object\"}}}},"
    "  \"401\": {\"$ref\": \"#/components/responses/Unauthorized\"},"
    "  \"405\": {\"$ref\": \"#/components/responses/MethodNotAllowed\"}}}},"
    " \"/mcp\": {\"post\": {\"operationId\": \"mcp\", \"summary\": \"MCP, Streamable HTTP,"
    " stateless: one JSON-RPC message; the operation ID is _meta[\\\"dev.idem/operation_id\\\"] or"
    " the tool's operation ID argument, never Idempotency-Key\", \"parameters\": ["
    "   {\"name\": \"MCP-Protocol-Version\", \"in\": \"header\", \"schema\": " STRING "},"
    "   {\"name\": \"Origin\", \"in\": \"header\", \"description\": \"Checked against"
    " mcp.allowed_origins when sent\", \"schema\": " STRING "}],"
    "  \"requestBody\": {\"required\": true, \"content\": {\"application/json\": {\"schema\":"
    "   {\"$ref\": \"#/components/schemas/JsonRpcMessage\"}}}},"
    "  \"responses\": {"
    "   \"200\": {\"description\": \"The JSON-RPC response\", \"content\": {\"application/json\":"
    "    {\"schema\": {\"$ref\": \"#/components/schemas/JsonRpcMessage\"}}}},"
    "   \"202\": {\"description\": \"A notification or a response: nothing to answer\"},"
    "   \"400\": {\"$ref\": \"#/components/responses/JsonRpcRefusal\"},"
    "   \"401\": {\"$ref\": \"#/components/responses/Unauthorized\"},"
    "   \"403\": {\"$ref\": \"#/components/responses/JsonRpcRefusal\"},"
    "   \"405\": {\"description\": \"GET, DELETE: no stream, no session\", \"headers\": {\"Allow\":"
    "    " ALLOW "}, \"content\": {\"application/json\": {\"schema\":"
    "    {\"$ref\": \"#/components/schemas/JsonRpcMessage\"}}}},"
    "   \"413\": {\"$ref\": \"#/components/responses/JsonRpcRefusal\"},"
    "   \"415\": {\"$ref\": \"#/components/responses/JsonRpcRefusal\"}}}},"
    " \"/healthz\": {\"get\": {\"operationId\": \"healthz\", \"summary\": \"Liveness\","
    "  \"security\": [], \"responses\": {\"200\": {\"description\": \"ok\","
    "   \"content\": {\"text/plain\": {\"schema\": {\"const\": \"ok\"}}}}}}},"
    " \"/readyz\": {\"get\": {\"operationId\": \"readyz\", \"summary\": \"Readiness:"
    " the pool answers and the schema is idem's\", \"security\": [], \"responses\": {"
    "  \"200\": {\"description\": \"ready\","
    "   \"content\": {\"text/plain\": {\"schema\": {\"const\": \"ready\"}}}},"
    "  \"503\": {\"description\": \"not ready, or stopping\","
    "   \"content\": {\"text/plain\": {\"schema\": " STRING "},"
    "    \"application/problem+json\": {\"schema\": " PROBLEM_REF "}}}}}},"
    " \"/metrics\": {\"get\": {\"operationId\": \"metrics\", \"summary\": \"Prometheus"
    " text format 0.0.4\", \"security\": [], \"responses\": {\"200\": {\"description\":"
    " \"The metrics\","
    "  \"content\": {\"text/plain; version=0.0.4\": {\"schema\": " STRING "}}}}}}}";

/* @text parsed; a new reference, or NULL (out of memory: the text is the gateway's own). */
static json_t *parsed(const char *text)
{
    return json_loads(text, JSON_REJECT_DUPLICATES, NULL);
}

json_t *gw_openapi_components(void)
{
    json_t *doc = json_object();

    for (size_t i = 0; doc != NULL && i < sizeof(parts) / sizeof(parts[0]); i++) {
        json_t *group = json_object_get(doc, parts[i].group);

        if (group == NULL && json_object_set_new(doc, parts[i].group, json_object()) == 0)
            group = json_object_get(doc, parts[i].group);
        /* json_object_set_new() takes the reference, also when it fails (a NULL value). */
        if (group == NULL ||
            json_object_set_new(group, parts[i].name, parsed(parts[i].text)) != 0) {
            json_decref(doc);
            doc = NULL;
        }
    }
    return doc;
}

json_t *gw_openapi_fixed_paths(void)
{
    return parsed(fixed_paths);
}
