/* idem-gateway's configuration reader without a network: a complete configuration (every
 * section, a sql tool with an identity policy, an http tool with secrets, statuses, a retry
 * policy and a resolver) loads; each refusal the reader can make, made by one edit of it,
 * names its place (the file, then the JSON Pointer of the member) and the reason, and
 * leaves nothing loaded. The database is never reached. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

#define DIGEST_A "00000000000000000000000000000000000000000000000000000000000000aa"
#define DIGEST_B "00000000000000000000000000000000000000000000000000000000000000bb"
#define SECRET   "sk_test_Zq8mSECRETv41ue"

static const char base_config[] =
    "{\"http\": {\"address\": \"127.0.0.1\", \"port\": 0, \"max_body_bytes\": 4096,"
    "   \"max_connections\": 10, \"idle_timeout_s\": 5, \"max_header_bytes\": 8192,"
    "   \"request_timeout_s\": 5, \"shutdown_grace_s\": 5, \"retry_after_s\": 2},"
    " \"database\": {\"dsn\": \"dbname=never_reached\", \"pooler\": \"auto\", \"pool_size\": 2,"
    "   \"acquire_timeout_ms\": 1000, \"connect_timeout_ms\": 1000,"
    "   \"statement_timeout_ms\": 1000, \"deadline_ms\": 1000, \"clock_skew_s\": 5},"
    " \"log\": {\"format\": \"json\"},"
    " \"tenants\": {\"acme\": {\"tokens\": [\"" DIGEST_A "\"]},"
    "   \"beta\": {\"tokens\": [\"" DIGEST_B "\"]}},"
    " \"mcp\": {\"allowed_origins\": [\"https://app.example.com\"], \"stdio_tenant\": \"acme\","
    "   \"stdio_grace_s\": 5},"
    " \"tools\": {"
    "  \"note\": {\"payload_version\": 1, \"retention_s\": 3600, \"key_memory_s\": 86400,"
    "   \"title\": \"Note\", \"description\": \"Writes a note\", \"destructive\": false,"
    "   \"operation_id_argument\": \"op\","
    "   \"arguments\": {\"type\": \"object\", \"required\": [\"page\"],"
    "     \"properties\": {\"page\": {\"type\": \"string\"}, \"at\": {\"type\": \"string\"},"
    "       \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}}},"
    "   \"identity\": {\"except\": [\"/at\"]},"
    "   \"sql\": {\"statement\": \"SELECT json_build_object('p', $1::text, 't', $2::text)\","
    "     \"params\": [\"/page\", \"$tenant\"]}},"
    "  \"mail\": {\"arguments\": {\"type\": \"object\", \"properties\": {\"to\": {\"type\": "
    "\"string\"}}},"
    "   \"http\": {\"method\": \"POST\", \"url\": \"https://mail.example.com/v1/{/to}\","
    "     \"headers\": {\"Authorization\": {\"env\": \"IDEM_TEST_MAIL_TOKEN\", \"prefix\": "
    "\"Bearer "
    "\"},"
    "       \"Accept\": \"application/json\"},"
    "     \"body\": {\"to\": {\"$arg\": \"/to\"}, \"from\": \"noreply@example.com\"},"
    "     \"timeout_ms\": 1000, \"lease_ms\": 3000, \"key_header\": \"Idempotency-Key\","
    "     \"reference\": \"/id\", \"statuses\": {\"409\": \"final\"},"
    "     \"retry\": {\"max_attempts\": 2, \"base_delay_ms\": 10, \"max_delay_ms\": 20,"
    "       \"deadline_ms\": 1000},"
    "     \"resolver\": {\"url\": \"https://mail.example.com/v1/status/{key}\","
    "       \"done_status\": [200], \"not_done_status\": [404], \"failed_status\": [410],"
    "       \"done_when\": {\"pointer\": \"/state\", \"equals\": \"sent\"},"
    "       \"receipt\": \"/message\", \"timeout_ms\": 1000}}}}}";

#define DIR_TEMPLATE "/tmp/idem-gateway-config.XXXXXX"

/* The scratch folder (from DIR_TEMPLATE, in each test's process). */
static char dir[sizeof(DIR_TEMPLATE)];
static char path[sizeof(dir) + 32];

static void setup(void)
{
    memcpy(dir, DIR_TEMPLATE, sizeof(dir));
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/gateway.json", dir);
    cr_assert_eq(setenv("IDEM_TEST_MAIL_TOKEN", SECRET, 1), 0);
    cr_assert_eq(setenv("IDEM_TEST_BROKEN_TOKEN", SECRET "\r\nX-Injected: 1", 1), 0);
    cr_assert_eq(unsetenv("IDEM_TEST_UNSET_TOKEN"), 0);
}

static void teardown(void)
{
    unlink(path);
    rmdir(dir);
}

static void write_text(const char *text)
{
    FILE *f = fopen(path, "w");

    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

/* The next reference token of @p (after its '/') into @out (of @size bytes), unescaped;
 * returns where the following one starts. */
static const char *next_token(const char *p, char *out, size_t size)
{
    size_t n = 0;

    for (p++; *p != '\0' && *p != '/'; p++) {
        char c = *p;

        if (c == '~') {
            c = p[1] == '1' ? '/' : '~';
            p++;
        }
        cr_assert_lt(n + 1, size);
        out[n++] = c;
    }
    out[n] = '\0';
    return p;
}

/* @doc with the value at @pointer set to @value (JSON text), or removed when @value is
 * NULL; the pointer's parent must exist. "" replaces the whole document. */
static json_t *edit(json_t *doc, const char *pointer, const char *value)
{
    json_t *parent = NULL, *at = doc, *v = NULL;
    char token[256];
    const char *p = pointer;

    if (value != NULL)
        cr_assert_not_null(v = json_loads(value, JSON_DECODE_ANY, NULL), "%s", value);
    if (*p == '\0') {
        json_decref(doc);
        return v;
    }
    while (*p != '\0') {
        p = next_token(p, token, sizeof(token));
        parent = at;
        at = json_is_array(parent) ? json_array_get(parent, strtoul(token, NULL, 10))
                                   : json_object_get(parent, token);
        if (*p != '\0')
            cr_assert_not_null(at, "%s: nothing at %s", pointer, token);
    }
    if (json_is_array(parent) && v != NULL)
        cr_assert_eq(json_array_set_new(parent, strtoul(token, NULL, 10), v), 0, "%s", pointer);
    else if (json_is_array(parent))
        cr_assert_eq(json_array_remove(parent, strtoul(token, NULL, 10)), 0, "%s", pointer);
    else if (v != NULL)
        cr_assert_eq(json_object_set_new(parent, token, v), 0, "%s", pointer);
    else
        cr_assert_eq(json_object_del(parent, token), 0, "%s: nothing to remove", pointer);
    return doc;
}

/* One refusal: the base configuration with up to two edits (pointer, JSON value or NULL to
 * remove), and what the refusal must say after the file's name. */
struct refusal {
    const char *at;
    const char *value;
    const char *at2;
    const char *value2;
    const char *says;
};

#define SET(at, value, says)                                                                       \
    {                                                                                              \
        at, value, NULL, NULL, says                                                                \
    }
#define DEL(at, says)                                                                              \
    {                                                                                              \
        at, NULL, NULL, NULL, says                                                                 \
    }
#define SET2(at, value, at2, value2, says)                                                         \
    {                                                                                              \
        at, value, at2, value2, says                                                               \
    }
#define T "/tools/note"
#define H "/tools/mail/http"
#define R H "/resolver"

/* Each refusal of the reader (config*.c), by its place. */
static const struct refusal refusals[] = {
    /* The document and its top level. */
    SET("", "[]", "(the document): must be an object"),
    SET("/surprise", "1", "/surprise: unknown member"),
    /* http */
    SET("/http", "5", "/http: must be an object"),
    SET("/http/surprise", "1", "/http/surprise: unknown member"),
    SET("/http/address", "5", "/http/address: must be a string (without NUL)"),
    SET("/http/port", "70000", "/http/port: must be a whole number from 0 to 65535"),
    SET("/http/port", "-1", "/http/port: must be a whole number from 0 to 65535"),
    SET("/http/port", "80.5", "/http/port: must be a whole number from 0 to 65535"),
    SET("/http/max_body_bytes", "0", "/http/max_body_bytes: must be a whole number from 1 to "),
    SET("/http/max_connections", "0", "/http/max_connections: must be a whole number from 1 to "),
    SET("/http/idle_timeout_s", "3601",
        "/http/idle_timeout_s: must be a whole number from 1 to 3600"),
    SET("/http/max_header_bytes", "10",
        "/http/max_header_bytes: must be a whole number from 1024 to "),
    SET("/http/request_timeout_s", "0",
        "/http/request_timeout_s: must be a whole number from 1 to "),
    SET("/http/shutdown_grace_s", "\"30\"",
        "/http/shutdown_grace_s: must be a whole number from 0 to "),
    SET("/http/retry_after_s", "0", "/http/retry_after_s: must be a whole number from 1 to 3600"),
    /* database */
    DEL("/database", "/database: is required"),
    SET("/database", "[]", "/database: must be an object"),
    SET("/database/surprise", "1", "/database/surprise: unknown member"),
    DEL("/database/dsn", "/database/dsn: is required"),
    SET("/database/dsn", "5", "/database/dsn: must be a string"),
    SET("/database/pooler", "\"session\"",
        "/database/pooler: must be \"none\", \"transaction\" or \"auto\""),
    SET("/database/pool_size", "0", "/database/pool_size: must be a whole number from 1 to 1000"),
    SET("/database/acquire_timeout_ms", "0",
        "/database/acquire_timeout_ms: must be a whole number from 1 to 3600000"),
    SET("/database/connect_timeout_ms", "3600001",
        "/database/connect_timeout_ms: must be a whole number from 0 to 3600000"),
    SET("/database/statement_timeout_ms", "-1",
        "/database/statement_timeout_ms: must be a whole number from 0 to 3600000"),
    SET("/database/deadline_ms", "0",
        "/database/deadline_ms: must be a whole number from 1 to 3600000"),
    SET("/database/clock_skew_s", "86401",
        "/database/clock_skew_s: must be a whole number from 0 to 86400"),
    /* tenants */
    DEL("/tenants", "/tenants: must be an object with at least one tenant"),
    SET("/tenants", "{}", "/tenants: must be an object with at least one tenant"),
    SET("/tenants/a b", "{\"tokens\": [\"" DIGEST_B "\"]}", "/tenants/a b: not a tenant name"),
    SET("/tenants/acme", "5", "/tenants/acme: must be an object"),
    SET("/tenants/acme/surprise", "1", "/tenants/acme/surprise: unknown member"),
    SET("/tenants/acme/tokens", "[]",
        "/tenants/acme/tokens: must be a non-empty array of token digests"),
    SET("/tenants/acme/tokens", "\"" DIGEST_A "\"",
        "/tenants/acme/tokens: must be a non-empty array"),
    SET("/tenants/acme/tokens/0", "\"short\"",
        "/tenants/acme/tokens/0: must be a token's SHA-256 digest, 64 lower-case hex digits"),
    SET("/tenants/acme/tokens/0",
        "\""
        "00000000000000000000000000000000000000000000000000000000000000AA"
        "\"",
        "/tenants/acme/tokens/0: must be a token's SHA-256 digest"),
    SET("/tenants/beta/tokens/0", "\"" DIGEST_A "\"",
        "/tenants/beta/tokens/0: the same token digest is listed twice"),
    SET("/tenants/acme/tokens", "[\"" DIGEST_A "\", \"" DIGEST_A "\"]",
        "/tenants/acme/tokens/1: the same token digest is listed twice"),
    /* tools */
    DEL("/tools", "/tools: must be an object with at least one tool"),
    SET("/tools", "{}", "/tools: must be an object with at least one tool"),
    SET("/tools/Bump", "{}", "/tools/Bump: not a tool name"),
    SET(T, "5", T ": must be an object"),
    SET(T "/surprise", "1", T "/surprise: unknown member"),
    SET(T "/payload_version", "0",
        T "/payload_version: must be a whole number from 1 to 2147483647"),
    SET(T "/retention_s", "315360001",
        T "/retention_s: must be a whole number from 1 to 315360000"),
    SET(T "/key_memory_s", "0", T "/key_memory_s: must be a whole number from 1 to 315360000"),
    SET(T "/key_memory_s", "60", T "/key_memory_s: 60 is shorter than retention_s (3600)"),
    DEL(T "/arguments", T "/arguments: is required: the tool's argument schema"),
    SET(T "/arguments/format", "\"x\"", T "/arguments/format: unknown keyword \"format\""),
    SET(T "/arguments/properties/page/type", "\"strung\"",
        T "/arguments/properties/page/type: must be a type name"),
    SET(T "/arguments/required", "[\"page\", \"page\"]",
        T "/arguments/required: lists \"page\" twice"),
    SET(T "/arguments/type", "\"array\"", T "/arguments/type: must be \"object\""),
    SET(T "/title", "5", T "/title: must be a string"),
    SET(T "/description", "[]", T "/description: must be a string"),
    SET(T "/destructive", "\"yes\"", T "/destructive: must be true or false"),
    SET(T "/operation_id_argument", "5", T "/operation_id_argument: must be a string"),
    SET(T "/operation_id_argument", "\"\"", T "/operation_id_argument: must not be empty"),
    SET(T "/operation_id_argument", "\"page\"",
        T "/operation_id_argument: \"page\" is one of the schema's properties"),
    /* identity policies: the shape, then the library's check, then the schema */
    SET(T "/identity", "{\"some\": [\"/page\"]}",
        T "/identity: must be {\"only\": [JSON Pointers]} or {\"except\": [JSON Pointers]}"),
    SET(T "/identity", "{\"only\": \"/page\"}", T "/identity: must be {\"only\": "),
    SET(T "/identity", "{\"only\": [\"/page\"], \"except\": [\"/at\"]}",
        T "/identity: must be {\"only\": "),
    SET(T "/identity", "{\"only\": [\"/page\", 5]}",
        T "/identity/only/1: must be a JSON Pointer into the arguments"),
    SET(T "/identity", "{\"only\": [\"/page\", \"page\"]}",
        T "/identity/only/1: \"page\" is refused: a JSON Pointer starts with '/'"),
    SET(T "/identity", "{\"except\": [\"/tags/0\"]}",
        T "/identity/except/0: \"/tags/0\" is refused: goes into an array"),
    SET(T "/identity", "{\"except\": [\"/tags/x\"]}",
        T "/identity/except/0: \"/tags/x\" goes into an array"),
    SET(T "/identity", "{\"only\": [\"/page\", \"/pgae\"]}",
        T "/identity/only/1: \"/pgae\" names no property"),
    SET(T "/identity", "{\"only\": [\"/page\", \"/page\"]}",
        T "/identity/only: \"/page\" and \"/page\": the same field twice"),
    SET(T "/identity", "{\"except\": [\"/op\"]}",
        T "/identity/except/0: \"/op\" is the operation ID argument"),
    /* a sql tool's declaration */
    SET(T "/http", "{\"url\": \"https://example.com/x\"}",
        T "/http: a tool is either sql or http, not both"),
    DEL(T "/sql", T "/sql: is required: the tool's effect (or http: a call upstream)"),
    SET(T "/sql", "5", T "/sql: must be an object"),
    SET(T "/sql/surprise", "1", T "/sql/surprise: unknown member"),
    DEL(T "/sql/statement", T "/sql/statement: is required"),
    SET(T "/sql/params", "{}", T "/sql/params: must be an array of parameter names"),
    SET(T "/sql/params", "[\"/page\", 5]", T "/sql/params: $2 must be a string"),
    SET(T "/sql/statement", "\"UPDATE x SET y = $1\"",
        T "/sql/statement: a declared statement must return its receipt"),
    SET(T "/sql/params", "[\"/page~2\", \"$tenant\"]",
        T "/sql/params: parameter $1 is \"/page~2\", not a JSON Pointer"),
    SET(T "/sql/params", "[\"/page\"]", T "/sql/statement: "),
    /* an http tool's declaration */
    SET(H, "5", H ": must be an object"),
    SET(H "/verify_tls", "false", H "/verify_tls: unknown member"),
    SET(H "/method", "\"TRACE\"",
        H "/method: must be \"GET\", \"POST\", \"PUT\", \"PATCH\" or \"DELETE\""),
    SET(H "/method", "5", H "/method: must be a string"),
    DEL(H "/url", H "/url: is required"),
    SET(H "/url", "\"ftp://example.com/x\"", H "/url: must start with https:// or http://"),
    SET(H "/url", "\"http://{/to}/x\"",
        H "/url: needs a host, without {placeholders} before the path"),
    SET(H "/url", "\"http://example.com/{to}\"", H "/url: a placeholder is {/json/pointer}"),
    SET(H "/method", "\"GET\"", H "/body: GET sends no body"),
    SET(H "/body/to", "{\"$arg\": \"to\"}", H "/body/to: {\"$arg\": POINTER}"),
    SET(H "/ca_file", "\"/nonexistent/ca.pem\"", H "/ca_file: cannot read /nonexistent/ca.pem"),
    SET(H "/reference", "\"id\"", H "/reference: must be a JSON Pointer into the answer"),
    SET(H "/key_header", "\"a b\"", H "/key_header: not a header name"),
    SET(H "/timeout_ms", "0", H "/timeout_ms: must be a whole number from 1 to 600000"),
    SET(H "/timeout_ms", "600001", H "/timeout_ms: must be a whole number from 1 to 600000"),
    SET(H "/lease_ms", "1500",
        H "/lease_ms: 1500 is too short: a lease lasts at least timeout_ms (1000) + 1000"),
    SET(H "/headers", "[]", H "/headers: must be an object of header names and values"),
    SET(H "/headers/a b", "\"x\"", H "/headers/a b: not a header name"),
    SET(H "/headers/Content-Type", "\"text/plain\"",
        H "/headers/Content-Type: the gateway sets this header itself"),
    SET(H "/headers/idempotency-key", "\"x\"",
        H "/headers/idempotency-key: the gateway sets this header itself"),
    SET(H "/headers/X-A", "\"a\\r\\nX-B: b\"",
        H "/headers/X-A: must be a string without line breaks"),
    SET(H "/headers/X-A", "5",
        H "/headers/X-A: must be a string without line breaks, or {\"env\": NAME}"),
    SET(H "/headers/Authorization/surprise", "1",
        H "/headers/Authorization/surprise: unknown member"),
    DEL(H "/headers/Authorization/env", H "/headers/Authorization/env: is required"),
    SET(H "/headers/Authorization/env", "\"1TOKEN\"",
        H "/headers/Authorization/env: \"1TOKEN\" is not an environment variable's name"),
    SET(H "/headers/Authorization/prefix", "\"Bearer\\n\"",
        H "/headers/Authorization/prefix: must not hold a line break or control character"),
    SET(H "/headers/Authorization/env", "\"IDEM_TEST_UNSET_TOKEN\"",
        H "/headers/Authorization/env: the environment variable IDEM_TEST_UNSET_TOKEN is not set"),
    SET(H "/headers/Authorization/env", "\"IDEM_TEST_BROKEN_TOKEN\"",
        H "/headers/Authorization/env: the environment variable IDEM_TEST_BROKEN_TOKEN holds a "
          "line break"),
    SET(H "/statuses", "[409]", H "/statuses: must be an object: {\"STATUS\": CLASS}"),
    SET(H "/statuses", "{\"700\": \"final\"}",
        H "/statuses/700: not an HTTP status from 200 to 599"),
    SET(H "/statuses", "{\"199\": \"final\"}",
        H "/statuses/199: not an HTTP status from 200 to 599"),
    SET(H "/statuses", "{\"40x\": \"final\"}",
        H "/statuses/40x: not an HTTP status from 200 to 599"),
    SET(H "/statuses", "{\"404\": \"retry\"}",
        H "/statuses/404: must be \"success\", \"final\", \"transient\" or \"unknown\""),
    SET(H "/retry", "5", H "/retry: must be an object"),
    SET(H "/retry/surprise", "1", H "/retry/surprise: unknown member"),
    SET(H "/retry/max_attempts", "21",
        H "/retry/max_attempts: must be a whole number from 1 to 20"),
    SET(H "/retry/base_delay_ms", "0",
        H "/retry/base_delay_ms: must be a whole number from 1 to 3600000"),
    SET(H "/retry/max_delay_ms", "0",
        H "/retry/max_delay_ms: must be a whole number from 1 to 3600000"),
    SET(H "/retry/deadline_ms", "3600001",
        H "/retry/deadline_ms: must be a whole number from 1 to 3600000"),
    /* an http tool's resolver */
    SET(R, "5", R ": must be an object"),
    SET(R "/surprise", "1", R "/surprise: unknown member"),
    DEL(R "/url", R "/url: is required"),
    SET(R "/url", "\"ftp://example.com/{key}\"", R "/url: must start with https:// or http://"),
    SET(R "/url", "\"https://{key}/x\"", R "/url: needs a host, without {key} before the path"),
    SET(R "/url", "\"https://example.com/a b/{key}\"", R "/url: contains white space"),
    SET(R "/url", "\"https://example.com/{/to}/{key}\"", R "/url: its only placeholder is {key}"),
    SET(R "/url", "\"https://example.com/status\"", R "/url: must hold {key}"),
    SET(R "/done_status", "200",
        R "/done_status: must be an array of HTTP statuses, such as [404]"),
    SET(R "/done_status", "[200, 700]", R "/done_status/1: not an HTTP status from 100 to 599"),
    SET(R "/failed_status", "[404]", R "/failed_status/0: 404 is already in not_done_status"),
    SET(R "/done_status", "[200, 200]", R "/done_status/1: 200 is already in done_status"),
    SET2(R "/done_status", "[404]", R "/not_done_status", NULL,
         R "/not_done_status: is needed: its default [404] is also in done_status"),
    SET2(R "/not_done_status", "[200]", R "/done_status", NULL,
         R "/done_status: is needed: its default [200] is also in not_done_status"),
    SET(R "/receipt", "\"message\"",
        R "/receipt: must be a JSON Pointer into the answer, such as \"/message\""),
    SET(R "/done_when", "5", R "/done_when: must be an object"),
    SET(R "/done_when/surprise", "1", R "/done_when/surprise: unknown member"),
    DEL(R "/done_when/pointer", R "/done_when/pointer: is required"),
    SET(R "/done_when/pointer", "\"state\"",
        R "/done_when/pointer: must be a JSON Pointer into the answer"),
    DEL(R "/done_when/equals", R "/done_when/equals: is required: the value that means done"),
    SET(R "/timeout_ms", "0", R "/timeout_ms: must be a whole number from 1 to 600000"),
    /* mcp */
    SET("/mcp", "5", "/mcp: must be an object"),
    SET("/mcp/surprise", "1", "/mcp/surprise: unknown member"),
    SET("/mcp/allowed_origins", "\"https://app.example.com\"",
        "/mcp/allowed_origins: must be an array of origins"),
    SET("/mcp/allowed_origins", "[\"https://a.example.com\", \"\"]",
        "/mcp/allowed_origins/1: must be an origin as browsers send it"),
    SET("/mcp/allowed_origins/0", "5", "/mcp/allowed_origins/0: must be an origin"),
    SET("/mcp/stdio_tenant", "\"nobody\"",
        "/mcp/stdio_tenant: \"nobody\" is not one of the tenants"),
    SET("/mcp/stdio_tenant", "5", "/mcp/stdio_tenant: must be a string"),
    SET("/mcp/stdio_grace_s", "3601", "/mcp/stdio_grace_s: must be a whole number from 0 to 3600"),
    /* log */
    SET("/log", "5", "/log: must be an object"),
    SET("/log/level", "\"debug\"", "/log/level: unknown member"),
    SET("/log/format", "\"xml\"", "/log/format: must be \"plain\" or \"json\""),
};

#define NREFUSALS (sizeof(refusals) / sizeof(refusals[0]))

static void free_params(struct criterion_test_params *params)
{
    cr_free(params->params);
}

/* Each test's process sees its parameter in Criterion's shared memory: the row's index
 * (the table itself is the same in every process). */
ParameterizedTestParameters(config, every_refusal_names_its_place_and_reason)
{
    size_t *rows = cr_malloc(NREFUSALS * sizeof(*rows));

    for (size_t i = 0; i < NREFUSALS; i++)
        rows[i] = i;
    return cr_make_param_array(size_t, rows, NREFUSALS, free_params);
}

/* The refusal's whole text: the file's name, then "POINTER: reason". */
ParameterizedTest(size_t *row, config, every_refusal_names_its_place_and_reason, .init = setup,
                  .fini = teardown)
{
    const struct refusal *c = &refusals[*row];
    json_t *doc = json_loads(base_config, 0, NULL);
    gw_config *cfg = NULL;
    char why[1024], *text, want[1024];

    cr_assert_not_null(doc);
    doc = edit(doc, c->at, c->value);
    if (c->at2 != NULL)
        doc = edit(doc, c->at2, c->value2);
    cr_assert_not_null(text = json_dumps(doc, JSON_ENCODE_ANY));
    write_text(text);
    snprintf(want, sizeof(want), "%s: %s", path, c->says);
    cr_assert_eq(gw_config_load(&cfg, path, why, sizeof(why)), GW_EXIT_DATAERR, "accepted: %s",
                 text);
    cr_assert_null(cfg);
    cr_assert_eq(strncmp(why, want, strlen(want)), 0, "said <%s>, not <%s...>", why, want);
    cr_assert_null(strstr(why, SECRET), "a secret in <%s>", why);
    free(text);
    json_decref(doc);
}

TestSuite(config, .init = setup, .fini = teardown);

Test(config, the_complete_configuration_loads_with_every_member_read)
{
    gw_config *cfg = NULL;
    char why[1024];
    const gw_tool *note, *mail;

    write_text(base_config);
    cr_assert_eq(gw_config_load(&cfg, path, why, sizeof(why)), 0, "%s", why);
    cr_assert_eq(cfg->ntenants, 2);
    cr_assert_eq(cfg->ntools, 2);
    cr_assert_eq(cfg->port, 0);
    cr_assert_eq(cfg->max_body_bytes, 4096);
    cr_assert_eq(cfg->max_header_bytes, 8192);
    cr_assert_eq(cfg->retry_after_s, 2);
    cr_assert_eq(cfg->log_json, 1);
    cr_assert_eq(cfg->pool.max_size, 2);
    cr_assert_eq(cfg->store.deadline_ms, 1000);
    cr_assert_eq(cfg->store.clock_skew_s, 5);
    cr_assert_str_eq(cfg->stdio_tenant->name, "acme");
    cr_assert_eq(cfg->stdio_grace_s, 5);
    cr_assert_not_null(note = gw_config_tool(cfg, "note", 4));
    cr_assert_not_null(mail = gw_config_tool(cfg, "mail", 4));
    cr_assert_null(gw_config_tool(cfg, "not", 3));
    cr_assert_eq(note->retention_s, 3600);
    cr_assert_eq(note->key_memory_s, 86400);
    cr_assert_eq(note->destructive, 0);
    cr_assert_str_eq(note->operation_id_argument, "op");
    cr_assert_eq(note->identity.mode, IDEM_IDENTITY_EXCEPT);
    cr_assert_eq(note->nparams, 2);
    cr_assert_not_null(note->effect);
    cr_assert_null(note->http);
    cr_assert_null(mail->effect);
    cr_assert_not_null(mail->http);
    cr_assert_eq(mail->destructive, 1);
    gw_config_free(cfg);
}

Test(config, a_file_that_is_not_json_is_refused_at_its_line_and_column)
{
    gw_config *cfg = NULL;
    char why[1024], want[1024];

    write_text("{\"tools\":\n  {\"a\": }");
    cr_assert_eq(gw_config_load(&cfg, path, why, sizeof(why)), GW_EXIT_DATAERR);
    cr_assert_null(cfg);
    snprintf(want, sizeof(want), "%s: line 2, column 9: not valid JSON: ", path);
    cr_assert_eq(strncmp(why, want, strlen(want)), 0, "said <%s>, not <%s...>", why, want);
}

/* A string holding NUL never reaches a member's reader: the file is not the JSON accepted. */
Test(config, a_nul_in_a_string_is_refused_where_it_is_written)
{
    gw_config *cfg = NULL;
    char why[1024], want[1024];

    write_text("{\"http\": {\"address\": \"a\\u0000b\"}}");
    cr_assert_eq(gw_config_load(&cfg, path, why, sizeof(why)), GW_EXIT_DATAERR);
    cr_assert_null(cfg);
    snprintf(want, sizeof(want), "%s: line 1, column ", path);
    cr_assert_eq(strncmp(why, want, strlen(want)), 0, "said <%s>", why);
    cr_assert_not_null(strstr(why, "\\u0000 is not allowed"), "said <%s>", why);
}

Test(config, a_member_given_twice_is_refused_as_not_json)
{
    gw_config *cfg = NULL;
    char why[1024], want[1024];

    write_text("{\"tools\": {},\n \"tools\": {}}");
    cr_assert_eq(gw_config_load(&cfg, path, why, sizeof(why)), GW_EXIT_DATAERR);
    snprintf(want, sizeof(want), "%s: line 2, column ", path);
    cr_assert_eq(strncmp(why, want, strlen(want)), 0, "said <%s>", why);
    cr_assert_not_null(strstr(why, "not valid JSON: duplicate object key"), "said <%s>", why);
}

Test(config, a_file_that_cannot_be_read_is_its_own_exit_status)
{
    gw_config *cfg = NULL;
    char why[1024], none[sizeof(dir) + 32], want[1024];

    snprintf(none, sizeof(none), "%s/none.json", dir);
    snprintf(want, sizeof(want), "%s: cannot read: No such file or directory", none);
    cr_assert_eq(gw_config_load(&cfg, none, why, sizeof(why)), GW_EXIT_NOINPUT);
    cr_assert_null(cfg);
    cr_assert_str_eq(why, want);
}
