/* MCP's two eras: which one a request speaks (the 2026-07-28 envelope in _meta, the
 * MCP-Protocol-Version and Mcp-Method headers), server/discover, and the members a
 * 2026-07-28 result carries. The gateway keeps no session in either era. */
#include <stdio.h>
#include <string.h>

#include "mcp.h"
#include "reply.h"

/* tools/list under 2026-07-28 says how long a client may keep it: not at all (ttlMs 0), since
 * a reload of the configuration (SIGHUP) may change the tools at any time and the gateway
 * sends no list_changed notification; per client (cacheScope private). */
#define TOOLS_TTL_MS 0

int gw_mcp_version_supported(const char *version)
{
    return version != NULL && (strcmp(version, GW_MCP_VERSION_MODERN) == 0 ||
                               strcmp(version, GW_MCP_VERSION_LATEST) == 0 ||
                               strcmp(version, GW_MCP_VERSION_PREV) == 0);
}

/* Every revision spoken, newest first. A new reference, or NULL (memory). */
static json_t *supported(void)
{
    return json_pack("[s, s, s]", GW_MCP_VERSION_MODERN, GW_MCP_VERSION_LATEST,
                     GW_MCP_VERSION_PREV);
}

json_t *gw_mcp_server_info(void)
{
    return json_pack("{s:s, s:s, s:s}", "name", "idem-gateway", "title", "idem gateway", "version",
                     idem_version());
}

/* The envelope's revision claim: 0 with @claim (NULL: none), or -1 when it is not a
 * string. */
static int envelope_claim(const char **claim, const json_t *params)
{
    const json_t *meta = json_object_get(params, "_meta");
    const json_t *v =
        json_is_object(meta) ? json_object_get(meta, GW_MCP_META_PROTOCOL_VERSION) : NULL;

    *claim = json_string_value(v);
    return v == NULL || json_is_string(v) ? 0 : -1;
}

static int unsupported(json_t **data, const char *claim, char *why, size_t size)
{
    char shown[41];

    snprintf(why, size,
             "unsupported protocol revision \"%s\" in _meta[\"" GW_MCP_META_PROTOCOL_VERSION
             "\"]: the gateway speaks " GW_MCP_VERSION_MODERN
             " (server/discover), " GW_MCP_VERSION_LATEST " and " GW_MCP_VERSION_PREV
             " (initialize)",
             gw_printable(shown, sizeof(shown), claim));
    *data = json_pack("{s:o, s:s}", "supported", supported(), "requested", claim);
    return GW_RPC_UNSUPPORTED_REVISION;
}

/* Whether the headers agree with a 2026-07-28 request of @method: 0, or -32020 with @why. */
static int headers_agree(const gw_mcp *m, const char *method, const char *claim, char *why,
                         size_t size)
{
    char a[41], b[41];

    if (m->http_version != NULL && strcmp(m->http_version, claim) != 0) {
        snprintf(why, size,
                 "header mismatch: MCP-Protocol-Version is \"%s\" but "
                 "_meta[\"" GW_MCP_META_PROTOCOL_VERSION
                 "\"] is \"%s\"; send the same revision in both",
                 gw_printable(a, sizeof(a), m->http_version), gw_printable(b, sizeof(b), claim));
        return GW_RPC_HEADER_MISMATCH;
    }
    if (m->http_method != NULL && strcmp(m->http_method, method) != 0) {
        snprintf(why, size,
                 "header mismatch: Mcp-Method is \"%s\" but the message's method is \"%s\"",
                 gw_printable(a, sizeof(a), m->http_method), gw_printable(b, sizeof(b), method));
        return GW_RPC_HEADER_MISMATCH;
    }
    return 0;
}

int gw_mcp_revision(int *modern, json_t **data, const gw_mcp *m, const char *method,
                    const json_t *params, char *why, size_t size)
{
    const char *claim = NULL;
    int header_modern =
        m->http_version != NULL && strcmp(m->http_version, GW_MCP_VERSION_MODERN) == 0;

    *modern = 0;
    *data = NULL;
    if (envelope_claim(&claim, params) != 0) {
        snprintf(why, size, "params._meta[\"" GW_MCP_META_PROTOCOL_VERSION "\"] must be a string");
        return GW_RPC_INVALID_PARAMS;
    }
    if (claim == NULL && header_modern && strcmp(method, "server/discover") != 0) {
        snprintf(why, size,
                 "a request of revision " GW_MCP_VERSION_MODERN " carries its envelope: "
                 "params._meta[\"" GW_MCP_META_PROTOCOL_VERSION "\"] is missing");
        return GW_RPC_INVALID_PARAMS;
    }
    if (claim == NULL) {
        *modern = header_modern;
        return 0; /* the 2025 era (or a bare server/discover) */
    }
    if (strcmp(claim, GW_MCP_VERSION_MODERN) != 0)
        return unsupported(data, claim, why, size);
    *modern = 1;
    return headers_agree(m, method, claim, why, size);
}

json_t *gw_mcp_discover(const char *instructions)
{
    return json_pack("{s:o, s:{s:{s:b}}, s:s, s:i, s:s, s:s, s:{s:o}}", "supportedVersions",
                     supported(), "capabilities", "tools", "listChanged", 0, "instructions",
                     instructions, "ttlMs", TOOLS_TTL_MS, "cacheScope", "private", "resultType",
                     "complete", "_meta", GW_MCP_META_SERVER_INFO, gw_mcp_server_info());
}

int gw_mcp_modern_result(json_t *result, const char *method)
{
    json_t *meta = json_object_get(result, "_meta");

    if (meta == NULL && json_object_set_new(result, "_meta", meta = json_object()) != 0)
        return -1;
    if (json_object_get(meta, GW_MCP_META_SERVER_INFO) == NULL &&
        json_object_set_new(meta, GW_MCP_META_SERVER_INFO, gw_mcp_server_info()) != 0)
        return -1;
    if (json_object_get(result, "resultType") == NULL &&
        json_object_set_new(result, "resultType", json_string("complete")) != 0)
        return -1;
    if (strcmp(method, "tools/list") == 0 &&
        (json_object_set_new(result, "ttlMs", json_integer(TOOLS_TTL_MS)) != 0 ||
         json_object_set_new(result, "cacheScope", json_string("private")) != 0))
        return -1;
    return 0;
}
