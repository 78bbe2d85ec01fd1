/* A tool's contract from the configuration (contract.h). */
#include "contract.h"
#include "mcp.h"

/* Within the retention a retry gets the stored receipt; after it (once idem-sweep has
 * turned the record into a tombstone) it is expired and never runs again. */
static json_t *retention(const gw_tool *tool)
{
    return json_pack("{s:I, s:s, s:s}", "seconds", (json_int_t)tool->retention_s, "within",
                     idem_status_name(IDEM_STATUS_REPLAYED), "after",
                     idem_status_name(IDEM_STATUS_EXPIRED));
}

/* After the key memory the tombstone is gone: a UUIDv7 key is still told expired by its
 * time (with the clock skew allowance), any other key is a new operation. */
static json_t *key_memory(const gw_config *cfg, const gw_tool *tool)
{
    return json_pack("{s:I, s:I, s:{s:s, s:s}}", "seconds", (json_int_t)tool->key_memory_s,
                     "clock_skew_s", (json_int_t)cfg->store.clock_skew_s, "after", "uuidv7",
                     idem_status_name(IDEM_STATUS_EXPIRED), "other", "new");
}

/* Where MCP takes the operation ID: _meta, and the tool's argument when it names one. */
static json_t *mcp_key_sources(const gw_tool *tool)
{
    json_t *sources = json_pack("[{s:s}]", "meta", GW_MCP_META_OPERATION_ID);

    if (sources != NULL && tool->operation_id_argument != NULL &&
        json_array_append_new(sources,
                              json_pack("{s:s}", "argument", tool->operation_id_argument)) != 0) {
        json_decref(sources);
        return NULL;
    }
    return sources;
}

/* Required on every transport; MCP's sources; the allocation MCP offers. */
static json_t *key(const gw_tool *tool)
{
    return json_pack("{s:s, s:i, s:[{s:s}], s:o, s:{s:{s:s}}}", "requirement", GW_KEY_REQUIRED,
                     "max_bytes", IDEM_OPERATION_ID_MAX, "http", "header", GW_KEY_HEADER, "mcp",
                     mcp_key_sources(tool), "allocation", "mcp", "meta", GW_MCP_META_ALLOCATE);
}

/* The tenant comes from the bearer token (stdio: the configuration), never the arguments. */
static json_t *tenant(void)
{
    return json_pack("{s:b, s:{s:s, s:s}, s:{s:s, s:s}, s:{s:s}}", "from_arguments", 0, "http",
                     "header", "Authorization", "scheme", "Bearer", "mcp", "header",
                     "Authorization", "scheme", "Bearer", "mcp_stdio", "config",
                     "mcp.stdio_tenant");
}

/* The arguments that make up the fingerprint, as the store's policy names them. */
static json_t *identity(const gw_tool *tool)
{
    json_t *fields;

    if (tool->identity.mode == IDEM_IDENTITY_ALL)
        return json_pack("{s:s}", "mode", idem_identity_mode_name(IDEM_IDENTITY_ALL));
    if ((fields = json_array()) == NULL)
        return NULL;
    for (size_t i = 0; i < tool->identity.nfields; i++) {
        if (json_array_append_new(fields, json_string(tool->identity.fields[i])) != 0) {
            json_decref(fields);
            return NULL;
        }
    }
    return json_pack("{s:s, s:o}", "mode", idem_identity_mode_name(tool->identity.mode), "fields",
                     fields);
}

json_t *gw_contract(const gw_config *cfg, const gw_tool *tool)
{
    /* json_pack's "o*": a NULL part (out of memory) fails the whole object, not a member. */
    json_t *doc = json_pack("{s:i, s:o*, s:o*, s:o*, s:o*, s:o*}", "version", GW_CONTRACT_VERSION,
                            "retention", retention(tool), "key_memory", key_memory(cfg, tool),
                            "key", key(tool), "tenant", tenant(), "identity", identity(tool));

    if (doc != NULL && json_object_size(doc) != 6) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

json_t *gw_contract_meta(const gw_config *cfg, const gw_tool *tool)
{
    return json_pack("{s:o}", GW_CONTRACT_META, gw_contract(cfg, tool));
}
