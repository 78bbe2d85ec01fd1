/* The OpenAPI 3.1 document from the configuration (openapi.h): each tool's call path from
 * its schema, its contract and the answer table; the rest from openapi_components.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "answer.h"
#include "contract.h"
#include "openapi.h"
#include "upstream.h"

#define REF_HEADERS  "#/components/headers/"
#define PROBLEM_JSON "application/problem+json"

/* The answers made before a call, by the front and server.c (README.md in this folder, the
 * table after "Statuses"): the status, the problem type, what it means, a header it
 * carries (NULL: none). */
static const struct early {
    unsigned int http;
    const char *problem;
    const char *what;
    const char *header;
} early[] = {
    {401, "unauthorized", "a missing or unknown token", "WWW-Authenticate"},
    {404, "unknown-tool", "the tool is not configured (any more)", NULL},
    {405, "method-not-allowed", "a method other than POST", "Allow"},
    {415, "unsupported-media-type", "the body is not application/json", NULL},
    {413, "body-too-large", "the body is longer than max_body_bytes", NULL},
    {400, "invalid-framing", "unsound framing: Content-Length or Transfer-Encoding", "Connection"},
    {400, "invalid-request-line", "a request line that is not METHOD SP target SP HTTP/x.y",
     "Connection"},
    {501, "transfer-encoding-not-implemented", "a Transfer-Encoding other than chunked",
     "Connection"},
    {500, "internal", "the gateway ran out of memory", NULL},
};

/* The response of @responses under @code ("422", "4XX"), made empty when absent; borrowed,
 * or NULL when out of memory. */
static json_t *response(json_t *responses, const char *code)
{
    json_t *r = json_object_get(responses, code);

    if (r == NULL && json_object_set_new(responses, code,
                                         json_pack("{s:s, s:{}, s:{}}", "description", "",
                                                   "headers", "content")) == 0)
        r = json_object_get(responses, code);
    return r;
}

/* @what added to @r's description; 0 or -1. */
static int describe(json_t *r, const char *what)
{
    const char *was = json_string_value(json_object_get(r, "description"));

    return json_object_set_new(r, "description",
                               was == NULL || was[0] == '\0' ? json_string(what)
                                                             : json_sprintf("%s; %s", was, what));
}

/* The header @name (components/headers) among @r's; 0 or -1. */
static int header(json_t *r, const char *name)
{
    return json_object_set_new(json_object_get(r, "headers"), name,
                               json_pack("{s:s+}", "$ref", REF_HEADERS, name));
}

/* The enum of the problem types in @content, or NULL. */
static json_t *problem_types(json_t *content)
{
    json_t *schema = json_object_get(json_object_get(content, PROBLEM_JSON), "schema");
    json_t *narrowed = json_array_get(json_object_get(schema, "allOf"), 1);

    return json_object_get(json_object_get(json_object_get(narrowed, "properties"), "type"),
                           "enum");
}

/* The problem type @name among those @r's problem document may carry (allOf, rather than
 * members beside the $ref, which tools that replace a $ref by its target would drop); 0 or
 * -1. */
static int problem(json_t *r, const char *name)
{
    json_t *content = json_object_get(r, "content");

    if (problem_types(content) == NULL &&
        json_object_set_new(content, PROBLEM_JSON,
                            json_pack("{s:{s:[{s:s}, {s:{s:{s:[]}}}]}}", "schema", "allOf", "$ref",
                                      "#/components/schemas/Problem", "properties", "type",
                                      "enum")) != 0)
        return -1;
    return json_array_append_new(problem_types(content), json_pack("s+", GW_PROBLEM_PREFIX, name));
}

/* @media with any body (a receipt: the JSON the tool returned) in @r; 0 or -1. */
static int body(json_t *r, const char *media)
{
    json_t *content = json_object_get(r, "content");

    return json_object_get(content, media) != NULL
               ? 0
               : json_object_set_new(content, media, json_pack("{s:{}}", "schema"));
}

/* Outcome @o's row of the answer table in @responses: its status, its problem type or the
 * receipt, its headers; 0 or -1. */
static int outcome(json_t *responses, gw_outcome o)
{
    const gw_answer *a = gw_answer_of(o);
    char code[16], what[160];
    json_t *r;

    snprintf(code, sizeof(code), "%u", a->http);
    snprintf(what, sizeof(what), "%s: %s", a->name, a->next);
    if ((r = response(responses, code)) == NULL || describe(r, what) != 0 ||
        header(r, "Idem-Status") != 0 || header(r, "Idem-Operation-Id") != 0 ||
        (a->retry_after && header(r, "Retry-After") != 0) ||
        (a->replayed && header(r, "Idempotent-Replayed") != 0))
        return -1;
    return a->problem != NULL ? problem(r, a->problem) : body(r, "application/json");
}

/* An answer made before the call in @responses; 0 or -1. */
static int early_answer(json_t *responses, const struct early *e)
{
    char code[16], what[160];
    json_t *r;

    snprintf(code, sizeof(code), "%u", e->http);
    snprintf(what, sizeof(what), "%s: %s", e->problem, e->what);
    if ((r = response(responses, code)) == NULL || describe(r, what) != 0 ||
        (e->header != NULL && header(r, e->header) != 0))
        return -1;
    return problem(r, e->problem);
}

/* The response that carries an http tool's stored refusal with upstream status @s: the
 * status's own when the gateway answers it too, else its range's ("4XX"); borrowed, made
 * on first use, or NULL when out of memory. */
static json_t *refusal_response(json_t *responses, unsigned int s)
{
    char code[16];
    json_t *r;

    snprintf(code, sizeof(code), "%u", s);
    if (json_object_get(responses, code) == NULL)
        snprintf(code, sizeof(code), "%uXX", s / 100);
    if ((r = response(responses, code)) == NULL ||
        json_object_get(r, "x-idem-upstream-statuses") != NULL)
        return r;
    if (describe(r, "rejected: the upstream's final answer, stored: its status, Content-Type "
                    "and bytes, on every retry; report it") != 0 ||
        header(r, "Idem-Status") != 0 || header(r, "Idempotent-Replayed") != 0 ||
        header(r, "Idem-Upstream-Status") != 0 || body(r, "*/*") != 0 ||
        json_object_set_new(r, "x-idem-upstream-statuses", json_array()) != 0)
        return NULL;
    return r;
}

/* An http tool's stored refusals: each upstream status its classes call final (the
 * defaults and its "statuses"), listed in x-idem-upstream-statuses; 0 or -1. */
static int upstream_refusals(json_t *responses, const struct gw_http *h)
{
    for (unsigned int s = GW_STATUS_MIN; s <= GW_STATUS_MAX; s++) {
        json_t *r;

        if (h->classes[s] != GW_CLASS_FINAL)
            continue;
        if ((r = refusal_response(responses, s)) == NULL ||
            json_array_append_new(json_object_get(r, "x-idem-upstream-statuses"),
                                  json_integer(s)) != 0)
            return -1;
    }
    return 0;
}

static int by_code(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* @responses with X-Request-Id in each, its members in the order of their codes; steals
 * @responses. A new reference, or NULL when out of memory. */
static json_t *in_order(json_t *responses)
{
    const char *codes[GW_STATUS_MAX + 1];
    size_t n = 0;
    const char *code;
    json_t *r, *sorted = json_object();

    json_object_foreach(responses, code, r)
    {
        if (n < sizeof(codes) / sizeof(codes[0]))
            codes[n++] = code;
    }
    qsort(codes, n, sizeof(codes[0]), by_code);
    for (size_t i = 0; sorted != NULL && i < n; i++) {
        r = json_object_get(responses, codes[i]);
        if (header(r, "X-Request-Id") != 0 || json_object_set(sorted, codes[i], r) != 0) {
            json_decref(sorted);
            sorted = NULL;
        }
    }
    json_decref(responses);
    return sorted;
}

/* Every answer a call of @t may get, by HTTP status. A new reference, or NULL. */
static json_t *call_responses(const gw_tool *t)
{
    json_t *responses = json_object();
    int rc = responses != NULL ? 0 : -1;

    for (int o = 0; rc == 0 && o < GW_OUTCOME_COUNT; o++) {
        /* Allocation is MCP's alone; an http tool's refusal has the upstream's status. */
        if (gw_answer_of(o)->http != 0 && (o != GW_OUTCOME_REJECTED || t->http == NULL))
            rc = outcome(responses, o);
    }
    for (size_t i = 0; rc == 0 && i < sizeof(early) / sizeof(early[0]); i++)
        rc = early_answer(responses, &early[i]);
    if (rc == 0 && t->http != NULL)
        rc = upstream_refusals(responses, t->http);
    if (rc != 0) {
        json_decref(responses);
        return NULL;
    }
    return in_order(responses);
}

/* The Idempotency-Key parameter, required as @contract says. */
static json_t *key_parameter(const json_t *contract)
{
    const char *requirement =
        json_string_value(json_object_get(json_object_get(contract, "key"), "requirement"));

    return json_pack(
        "{s:s, s:s, s:b, s:s, s:{s:s, s:i}}", "name", GW_KEY_HEADER, "in", "header", "required",
        requirement != NULL && strcmp(requirement, GW_KEY_REQUIRED) == 0, "description",
        "The operation ID, allocated once per approved action and sent on every attempt: a "
        "structured-field string (\"...\") or a bare value of token characters; unquoted, 1 to "
        "128 bytes of printable ASCII without space. A UUIDv7 is told expired after the key "
        "memory too.",
        "schema", "type", "string", "minLength", 1);
}

/* POST /v1/tools/{name}: its path item. A new reference, or NULL when out of memory. */
static json_t *tool_path(const gw_config *cfg, const gw_tool *t)
{
    json_t *contract = gw_contract(cfg, t);
    json_t *op =
        json_pack("{s:s+, s:s, s:s*, s:[o], s:{s:b, s:{s:{s:O}}}, s:o, s:O}", "operationId",
                  "call_", t->name, "summary", t->title != NULL ? t->title : t->name, "description",
                  t->description, "parameters", key_parameter(contract), "requestBody", "required",
                  1, "content", "application/json", "schema", t->schema, "responses",
                  call_responses(t), "x-idem-contract", contract);

    json_decref(contract);
    return op != NULL ? json_pack("{s:o}", "post", op) : NULL;
}

/* The tools' paths, then the others. */
static json_t *paths(const gw_config *cfg)
{
    json_t *doc = json_object();
    char path[96];

    for (size_t i = 0; doc != NULL && i < cfg->ntools; i++) {
        snprintf(path, sizeof(path), "/v1/tools/%s", cfg->tools[i].name);
        if (json_object_set_new(doc, path, tool_path(cfg, &cfg->tools[i])) != 0) {
            json_decref(doc);
            doc = NULL;
        }
    }
    if (doc != NULL && json_object_update_new(doc, gw_openapi_fixed_paths()) != 0) {
        json_decref(doc);
        doc = NULL;
    }
    return doc;
}

json_t *gw_openapi(const gw_config *cfg)
{
    return json_pack(
        "{s:s, s:{s:s, s:s, s:s}, s:[{s:[]}], s:o, s:o}", "openapi", GW_OPENAPI_VERSION, "info",
        "title", "idem-gateway", "version", idem_version(), "description",
        "Retry-safe tool calls: each tool's effect runs at most once per (the token's tenant, "
        "Idempotency-Key); a retry gets the first answer. Generated from the gateway's "
        "configuration; each tool's x-idem-contract is its contract (GET /v1/tools, MCP "
        "tools/list _meta[\"" GW_CONTRACT_META "\"]). Any other path answers 404 not-found.",
        "security", "bearer", "paths", paths(cfg), "components", gw_openapi_components());
}
