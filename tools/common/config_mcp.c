/* What the configuration tells MCP hosts (mcp.h): each tool's title, description,
 * destructiveness and operation ID argument, and the gateway's "mcp" member (allowed
 * origins, the stdio tenant, the stdio grace period). */
#include <stdio.h>
#include <string.h>

#include "config_read.h"

#define GRACE_MAX_S 3600

static const char *const mcp_members[] = {"allowed_origins", "stdio_tenant", "stdio_grace_s", NULL};

/* The schema MCP lists: the tool's, with the operation ID argument as a required string. */
static json_t *input_schema(const gw_tool *t)
{
    json_t *schema = json_deep_copy(t->schema), *props, *required;

    if (schema == NULL || t->operation_id_argument == NULL)
        return schema;
    props = json_object_get(schema, "properties");
    if (props == NULL && json_object_set_new(schema, "properties", props = json_object()) != 0)
        goto fail;
    required = json_object_get(schema, "required");
    if (required == NULL && json_object_set_new(schema, "required", required = json_array()) != 0)
        goto fail;
    if (json_object_set_new(props, t->operation_id_argument,
                            json_pack("{s:s, s:i, s:i, s:s}", "type", "string", "minLength", 1,
                                      "maxLength", IDEM_OPERATION_ID_MAX, "description",
                                      "The operation ID: generate a new UUID for each new "
                                      "action and send the same one here on every retry of that "
                                      "action; never a new one for a retry")) != 0 ||
        json_array_append_new(required, json_string(t->operation_id_argument)) != 0)
        goto fail;
    return schema;
fail:
    json_decref(schema);
    return NULL;
}

static int read_boolean(cfg_reader *r, const json_t *tool, const char *key, int *out)
{
    const json_t *v = json_object_get(tool, key);

    if (v == NULL)
        return 0;
    if (!json_is_boolean(v))
        return cfg_refuse(r, key, "must be true or false");
    *out = json_is_true(v);
    return 0;
}

static int read_operation_id_argument(cfg_reader *r, gw_tool *t, const json_t *tool)
{
    const char *arg = NULL;
    int rc = cfg_string(r, tool, "operation_id_argument", 0, &arg);

    if (rc != 0 || arg == NULL)
        return rc;
    if (arg[0] == '\0')
        return cfg_refuse(r, "operation_id_argument", "must not be empty");
    if (json_object_get(json_object_get(t->schema, "properties"), arg) != NULL)
        return cfg_refuse(r, "operation_id_argument",
                          "\"%s\" is one of the schema's properties: the operation ID argument is "
                          "removed before validation, so the schema must not declare it",
                          arg);
    t->operation_id_argument = arg;
    return 0;
}

int cfg_tool_mcp(cfg_reader *r, gw_tool *t, const json_t *tool)
{
    int rc;

    t->destructive = 1;
    if ((rc = cfg_string(r, tool, "title", 0, &t->title)) != 0 ||
        (rc = cfg_string(r, tool, "description", 0, &t->description)) != 0 ||
        (rc = read_boolean(r, tool, "destructive", &t->destructive)) != 0 ||
        (rc = read_operation_id_argument(r, t, tool)) != 0)
        return rc;
    if ((t->input_schema = input_schema(t)) == NULL)
        return cfg_refuse(r, "arguments", "out of memory");
    return 0;
}

static int read_origins(cfg_reader *r, gw_config *cfg, const json_t *origins)
{
    size_t i;
    const json_t *v;

    if (origins == NULL)
        return 0;
    if (!json_is_array(origins))
        return cfg_refuse(r, "allowed_origins", "must be an array of origins");
    json_array_foreach(origins, i, v)
    {
        if (!json_is_string(v) || json_string_length(v) == 0) {
            gw_pointer_push(&r->at, "allowed_origins");
            gw_pointer_push_index(&r->at, i);
            return cfg_refuse(r, NULL,
                              "must be an origin as browsers send it: "
                              "\"https://app.example.com\"");
        }
    }
    cfg->mcp_origins = origins;
    return 0;
}

static int read_stdio_tenant(cfg_reader *r, gw_config *cfg, const json_t *mcp)
{
    const char *name = NULL;
    int rc = cfg_string(r, mcp, "stdio_tenant", 0, &name);

    if (rc != 0 || name == NULL)
        return rc;
    for (size_t i = 0; i < cfg->ntenants; i++) {
        if (strcmp(cfg->tenants[i].name, name) == 0) {
            cfg->stdio_tenant = &cfg->tenants[i];
            return 0;
        }
    }
    return cfg_refuse(r, "stdio_tenant", "\"%s\" is not one of the tenants", name);
}

int cfg_mcp(cfg_reader *r, gw_config *cfg, const json_t *mcp)
{
    unsigned long long grace = cfg->stdio_grace_s;
    size_t mark;
    int rc;

    if (mcp == NULL)
        return 0;
    mark = gw_pointer_push(&r->at, "mcp");
    if ((rc = cfg_object(r, mcp, mcp_members)) != 0 ||
        (rc = read_origins(r, cfg, json_object_get(mcp, "allowed_origins"))) != 0 ||
        (rc = read_stdio_tenant(r, cfg, mcp)) != 0 ||
        (rc = cfg_uint(r, mcp, "stdio_grace_s", 0, GRACE_MAX_S, &grace)) != 0)
        return rc;
    cfg->stdio_grace_s = (unsigned int)grace;
    gw_pointer_pop(&r->at, mark);
    return 0;
}
