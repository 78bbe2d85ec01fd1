/* The configuration's tenants (names and token digests) and tools (schema, windows, SQL). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse.h"
#include "core/text.h"
#include "config_http.h"
#include "config_read.h"
#include "schema.h"

/* The fastest budget: a million tokens a second. */
#define RATE_MAX 60000000ULL

static const char *const tenant_members[] = {"tokens", "budget", NULL};
static const char *const budget_members[] = {"calls", "new_operations", NULL};
static const char *const rate_members[] = {"per_minute", "burst", NULL};
static const char *const tool_members[] = {
    "payload_version", "retention_s", "key_memory_s",          "arguments",   "sql",      "http",
    "title",           "description", "operation_id_argument", "destructive", "identity", NULL};
static const char *const sql_members[] = {"statement", "params", NULL};

/* 64 lower-case hex digits into @out. */
static int parse_digest(unsigned char out[GW_DIGEST_SIZE], const json_t *v)
{
    const char *s = json_string_value(v);

    if (s == NULL || json_string_length(v) != 2 * GW_DIGEST_SIZE)
        return -1;
    return idem__hex_decode(out, GW_DIGEST_SIZE, s);
}

/* Whether @d is already a digest of a tenant before @upto (or of @t's before @j). */
static int digest_taken(const gw_config *cfg, const unsigned char *d, size_t upto,
                        const gw_tenant *t, size_t j)
{
    for (size_t i = 0; i < upto; i++) {
        for (size_t k = 0; k < cfg->tenants[i].ndigests; k++) {
            if (memcmp(cfg->tenants[i].digests[k], d, GW_DIGEST_SIZE) == 0)
                return 1;
        }
    }
    for (size_t k = 0; k < j; k++) {
        if (memcmp(t->digests[k], d, GW_DIGEST_SIZE) == 0)
            return 1;
    }
    return 0;
}

static int read_tokens(cfg_reader *r, gw_config *cfg, gw_tenant *t, const json_t *tokens)
{
    size_t j, mark;
    const json_t *v;

    if (!json_is_array(tokens) || json_array_size(tokens) == 0)
        return cfg_refuse(r, "tokens", "must be a non-empty array of token digests");
    t->digests = calloc(json_array_size(tokens), GW_DIGEST_SIZE);
    if (t->digests == NULL)
        return cfg_refuse(r, "tokens", "out of memory");
    mark = gw_pointer_push(&r->at, "tokens");
    json_array_foreach(tokens, j, v)
    {
        gw_pointer_push_index(&r->at, j);
        if (parse_digest(t->digests[j], v) != 0)
            return cfg_refuse(r, NULL,
                              "must be a token's SHA-256 digest, 64 lower-case hex "
                              "digits (idem-gateway hash-token prints one)");
        if (digest_taken(cfg, t->digests[j], cfg->ntenants - 1, t, j))
            return cfg_refuse(r, NULL,
                              "the same token digest is listed twice: a token belongs "
                              "to one tenant, once");
        t->ndigests++;
        gw_pointer_pop(&r->at, mark);
        gw_pointer_push(&r->at, "tokens");
    }
    gw_pointer_pop(&r->at, mark);
    return 0;
}

/* One bucket's rate: per_minute required, burst its per_minute by default (a minute's
 * worth at once). */
static int read_rate(cfg_reader *r, gw_rate *rate, const char *member, const json_t *obj)
{
    unsigned long long per_minute = 0, burst = 0;
    size_t mark;
    int rc;

    if (obj == NULL)
        return 0;
    mark = gw_pointer_push(&r->at, member);
    if ((rc = cfg_object(r, obj, rate_members)) != 0 ||
        (rc = cfg_uint(r, obj, "per_minute", 1, RATE_MAX, &per_minute)) != 0)
        return rc;
    if (json_object_get(obj, "per_minute") == NULL)
        return cfg_refuse(r, "per_minute", "is required: the tokens that come back each minute");
    burst = per_minute;
    if ((rc = cfg_uint(r, obj, "burst", 1, RATE_MAX, &burst)) != 0)
        return rc;
    gw_pointer_pop(&r->at, mark);
    rate->per_minute = (unsigned int)per_minute;
    rate->burst = (unsigned int)burst;
    return 0;
}

static int read_budget(cfg_reader *r, gw_tenant *t, const json_t *budget)
{
    size_t mark;
    int rc;

    if (budget == NULL)
        return 0;
    mark = gw_pointer_push(&r->at, "budget");
    if ((rc = cfg_object(r, budget, budget_members)) != 0 ||
        (rc = read_rate(r, &t->calls, "calls", json_object_get(budget, "calls"))) != 0 ||
        (rc = read_rate(r, &t->new_operations, "new_operations",
                        json_object_get(budget, "new_operations"))) != 0)
        return rc;
    gw_pointer_pop(&r->at, mark);
    return 0;
}

static int read_tenant(cfg_reader *r, gw_config *cfg, const char *name, const json_t *tenant)
{
    gw_tenant *t = &cfg->tenants[cfg->ntenants++]; /* freed with the config from now on */
    idem_error err = IDEM_ERROR_INIT;
    int rc;

    t->name = name;
    if (idem_validate_tenant(name, &err) != 0)
        return cfg_refuse(r, NULL, "not a tenant name: %s", err.message);
    if ((rc = cfg_object(r, tenant, tenant_members)) != 0 ||
        (rc = read_tokens(r, cfg, t, json_object_get(tenant, "tokens"))) != 0 ||
        (rc = read_budget(r, t, json_object_get(tenant, "budget"))) != 0)
        return rc;
    return 0;
}

int cfg_tenants(cfg_reader *r, gw_config *cfg, const json_t *tenants)
{
    size_t mark;
    const char *name;
    const json_t *tenant;
    int rc;

    if (!json_is_object(tenants) || json_object_size(tenants) == 0)
        return cfg_refuse(r, "tenants", "must be an object with at least one tenant");
    cfg->tenants = calloc(json_object_size(tenants), sizeof(gw_tenant));
    if (cfg->tenants == NULL)
        return cfg_refuse(r, "tenants", "out of memory");
    mark = gw_pointer_push(&r->at, "tenants");
    json_object_foreach((json_t *)tenants, name, tenant)
    {
        size_t at = gw_pointer_push(&r->at, name);

        if ((rc = read_tenant(r, cfg, name, tenant)) != 0)
            return rc;
        gw_pointer_pop(&r->at, at);
    }
    gw_pointer_pop(&r->at, mark);
    return 0;
}

/* A tool's windows; the store's defaults (store.h) for those it does not set, and a key
 * memory at least its retention. */
static int read_windows(cfg_reader *r, const gw_config *cfg, gw_tool *t, const json_t *tool)
{
    unsigned long long retention = cfg->store.retention_s, key_memory = 0;
    int rc;

    if ((rc = cfg_uint(r, tool, "retention_s", IDEM_WINDOW_MIN_S, IDEM_WINDOW_MAX_S, &retention)) !=
            0 ||
        (rc = cfg_uint(r, tool, "key_memory_s", IDEM_WINDOW_MIN_S, IDEM_WINDOW_MAX_S,
                       &key_memory)) != 0)
        return rc;
    if (key_memory == 0)
        key_memory = retention > cfg->store.key_memory_s ? retention : cfg->store.key_memory_s;
    if (key_memory < retention)
        return cfg_refuse(r, "key_memory_s",
                          "%llu is shorter than retention_s (%llu): a key is remembered at "
                          "least as long as its record is kept",
                          key_memory, retention);
    t->retention_s = (unsigned int)retention;
    t->key_memory_s = (unsigned int)key_memory;
    return 0;
}

static int read_schema(cfg_reader *r, gw_tool *t, const json_t *schema)
{
    char why[512];
    size_t mark;
    const json_t *type;

    if (schema == NULL)
        return cfg_refuse(r, "arguments", "is required: the tool's argument schema");
    mark = gw_pointer_push(&r->at, "arguments");
    if (gw_schema_check(schema, &r->at, why, sizeof(why)) != 0)
        return cfg_refuse(r, NULL, "%s", why);
    type = json_object_get(schema, "type");
    if (!json_is_string(type) || strcmp(json_string_value(type), "object") != 0)
        return cfg_refuse(r, "type", "must be \"object\": a tool's arguments are a JSON object");
    gw_pointer_pop(&r->at, mark);
    t->schema = schema;
    return 0;
}

static int read_params(cfg_reader *r, gw_tool *t, const json_t *params)
{
    size_t i;
    const json_t *p;

    if (params == NULL)
        return 0;
    if (!json_is_array(params))
        return cfg_refuse(r, "params", "must be an array of parameter names");
    t->params = calloc(json_array_size(params) + 1, sizeof(char *));
    if (t->params == NULL)
        return cfg_refuse(r, "params", "out of memory");
    json_array_foreach(params, i, p)
    {
        if (!json_is_string(p) || strlen(json_string_value(p)) != json_string_length(p)) {
            gw_pointer_push(&r->at, "params");
            return cfg_refuse(r, NULL,
                              "$%zu must be a string: a JSON Pointer into the "
                              "arguments, a member's name, $tenant or $operation_id",
                              i + 1);
        }
        t->params[i] = json_string_value(p);
    }
    t->nparams = json_array_size(params);
    return 0;
}

/* The library's message without the field's name in front, which the pointer names. */
static const char *without_field(const idem_error *err)
{
    size_t n = strlen(err->field);

    if (n > 0 && strncmp(err->message, err->field, n) == 0 &&
        strncmp(err->message + n, ": ", 2) == 0)
        return err->message + n + 2;
    return err->message;
}

/* The SQL declaration, checked by the library as it will run it. */
static int read_sql(cfg_reader *r, gw_tool *t, const json_t *sql)
{
    idem_error err = IDEM_ERROR_INIT;
    size_t mark;
    int rc;

    if (sql == NULL)
        return cfg_refuse(r, "sql", "is required: the tool's effect (or http: a call upstream)");
    mark = gw_pointer_push(&r->at, "sql");
    if ((rc = cfg_object(r, sql, sql_members)) != 0 ||
        (rc = cfg_string(r, sql, "statement", 1, &t->sql)) != 0 ||
        (rc = read_params(r, t, json_object_get(sql, "params"))) != 0)
        return rc;
    if (idem_declared_new(&t->effect, t->sql, t->params, t->nparams, &err) != 0)
        return cfg_refuse(r, strcmp(err.field, "params") == 0 ? "params" : "statement", "%s",
                          without_field(&err));
    gw_pointer_pop(&r->at, mark);
    return 0;
}

/* Where @pointer leads in the argument schema: each token a property an object schema
 * declares. NULL when it leads somewhere, else (static) why not. */
static const char *schema_refuses(const json_t *schema, const char *pointer, char *token)
{
    const char *p = pointer;

    while (*p == '/') {
        const json_t *type = json_object_get(schema, "type");
        const json_t *properties = json_object_get(schema, "properties");

        if (json_is_string(type) && strcmp(json_string_value(type), "array") == 0)
            return "goes into an array, which is a field only as a whole";
        p = idem__json_pointer_token(p + 1, token);
        if ((schema = json_object_get(properties, token)) == NULL)
            return "names no property that the tool's arguments schema declares";
    }
    return NULL;
}

/* Each field against the schema: a property it declares, not the operation ID argument
 * (which is never part of the arguments the store sees). */
static int check_identity_fields(cfg_reader *r, const gw_tool *t)
{
    char *token = NULL;
    const char *why = NULL;
    size_t j;

    for (j = 0; why == NULL && j < t->identity.nfields; j++) {
        const char *f = t->identity_fields[j];

        char *grown = realloc(token, strlen(f) + 1);

        if (grown == NULL) {
            free(token);
            return cfg_refuse(r, NULL, "out of memory");
        }
        token = grown;
        idem__json_pointer_token(f + 1, token); /* the library checked: f starts with '/' */
        if (t->operation_id_argument != NULL && strcmp(token, t->operation_id_argument) == 0)
            why = "is the operation ID argument, which is always left out of the identity";
        else
            why = schema_refuses(t->schema, f, token);
    }
    free(token);
    if (why == NULL)
        return 0;
    gw_pointer_push_index(&r->at, j - 1);
    return cfg_refuse(r, NULL, "\"%s\" %s", t->identity_fields[j - 1], why);
}

/* "identity": {"only": [pointers]} or {"except": [pointers]}; absent: all arguments. The
 * library checks the pointers as the store will (idem_tool_identity_check()), then each
 * against the schema. */
static int read_identity(cfg_reader *r, gw_tool *t, const json_t *identity)
{
    idem_error err = IDEM_ERROR_INIT;
    const char *mode = json_object_iter_key(json_object_iter((json_t *)identity));
    const json_t *fields = json_object_iter_value(json_object_iter((json_t *)identity));
    size_t mark, j;
    const json_t *f;

    t->identity = (idem_tool_identity)IDEM_TOOL_IDENTITY_INIT;
    t->identity.tool = t->name;
    if (identity == NULL)
        return 0;
    if (!json_is_object(identity) || json_object_size(identity) != 1 ||
        (strcmp(mode, "only") != 0 && strcmp(mode, "except") != 0) || !json_is_array(fields))
        return cfg_refuse(r, "identity",
                          "must be {\"only\": [JSON Pointers]} or {\"except\": [JSON Pointers]}");
    t->identity.mode = strcmp(mode, "only") == 0 ? IDEM_IDENTITY_ONLY : IDEM_IDENTITY_EXCEPT;
    mark = gw_pointer_push(&r->at, "identity");
    gw_pointer_push(&r->at, mode);
    if ((t->identity_fields = calloc(json_array_size(fields) + 1, sizeof(char *))) == NULL)
        return cfg_refuse(r, NULL, "out of memory");
    json_array_foreach(fields, j, f)
    {
        t->identity_fields[j] = json_string_value(f);
        if (t->identity_fields[j] == NULL ||
            strlen(t->identity_fields[j]) != json_string_length(f)) {
            gw_pointer_push_index(&r->at, j);
            return cfg_refuse(r, NULL, "must be a JSON Pointer into the arguments: \"/note\"");
        }
    }
    t->identity.fields = t->identity_fields;
    t->identity.nfields = json_array_size(fields);
    if (idem_tool_identity_check(&t->identity, &err) != 0) {
        if (strncmp(err.field, "fields[", 7) == 0)
            gw_pointer_push_index(&r->at, strtoul(err.field + 7, NULL, 10));
        return cfg_refuse(r, NULL, "%s", without_field(&err));
    }
    if (check_identity_fields(r, t) != 0)
        return GW_EXIT_DATAERR;
    gw_pointer_pop(&r->at, mark);
    return 0;
}

static int read_tool(cfg_reader *r, gw_config *cfg, const char *name, const json_t *tool)
{
    gw_tool *t = &cfg->tools[cfg->ntools++];
    unsigned long long version = 1;
    idem_error err = IDEM_ERROR_INIT;
    int rc;

    t->name = name;
    if (idem_validate_tool(name, &err) != 0)
        return cfg_refuse(r, NULL, "not a tool name: %s", err.message);
    if ((rc = cfg_object(r, tool, tool_members)) != 0 ||
        (rc = cfg_uint(r, tool, "payload_version", 1, 2147483647, &version)) != 0 ||
        (rc = read_windows(r, cfg, t, tool)) != 0 ||
        (rc = read_schema(r, t, json_object_get(tool, "arguments"))) != 0 ||
        (rc = cfg_tool_mcp(r, t, tool)) != 0 ||
        (rc = read_identity(r, t, json_object_get(tool, "identity"))) != 0)
        return rc;
    t->payload_version = (int)version;
    if (json_object_get(tool, "http") != NULL && json_object_get(tool, "sql") != NULL)
        return cfg_refuse(r, "http", "a tool is either sql or http, not both");
    if (json_object_get(tool, "http") != NULL)
        return cfg_http(r, &t->http, json_object_get(tool, "http"));
    return read_sql(r, t, json_object_get(tool, "sql"));
}

int cfg_tools(cfg_reader *r, gw_config *cfg, const json_t *tools)
{
    size_t mark, n = json_object_size(tools);
    const char *name;
    const json_t *tool;
    int rc;

    if (!json_is_object(tools) || n == 0)
        return cfg_refuse(r, "tools", "must be an object with at least one tool");
    cfg->tools = calloc(n, sizeof(gw_tool));
    cfg->windows = calloc(n, sizeof(idem_tool_retention));
    cfg->identities = calloc(n, sizeof(idem_tool_identity *));
    if (cfg->tools == NULL || cfg->windows == NULL || cfg->identities == NULL)
        return cfg_refuse(r, "tools", "out of memory");
    mark = gw_pointer_push(&r->at, "tools");
    json_object_foreach((json_t *)tools, name, tool)
    {
        size_t at = gw_pointer_push(&r->at, name);

        if ((rc = read_tool(r, cfg, name, tool)) != 0)
            return rc;
        cfg->windows[cfg->ntools - 1] =
            (idem_tool_retention){name, cfg->tools[cfg->ntools - 1].retention_s,
                                  cfg->tools[cfg->ntools - 1].key_memory_s};
        if (cfg->tools[cfg->ntools - 1].identity.mode != IDEM_IDENTITY_ALL)
            cfg->identities[cfg->store.nidentities++] = &cfg->tools[cfg->ntools - 1].identity;
        gw_pointer_pop(&r->at, at);
    }
    gw_pointer_pop(&r->at, mark);
    cfg->store.tools = cfg->windows;
    cfg->store.ntools = cfg->ntools;
    cfg->store.identities = cfg->store.nidentities > 0 ? cfg->identities : NULL;
    return 0;
}
