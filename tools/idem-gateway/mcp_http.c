/* MCP over Streamable HTTP: the answers of /mcp. */
#include <stdlib.h>
#include <string.h>

#include "reply.h"
#include "mcp_http.h"

int gw_mcp_http_origin_allowed(const gw_config *cfg, const char *origin)
{
    size_t i;
    const json_t *v;

    if (origin == NULL)
        return 1;
    json_array_foreach(cfg->mcp_origins, i, v)
    {
        if (strcmp(json_string_value(v), origin) == 0)
            return 1;
    }
    return 0;
}

void gw_mcp_http_refuse(gw_reply *r, unsigned int status, int code, const char *message)
{
    char *text = gw_mcp_error_text(code, message);

    if (text == NULL || gw_reply_body(r, status, "application/json", text, strlen(text)) != 0)
        gw_internal_error(r);
    free(text);
}

void gw_mcp_http_answer(gw_reply *r, const gw_mcp *m, const gw_tenant *tenant, const char *body,
                        size_t len)
{
    char *text = NULL;
    int refused = 0;

    if (gw_mcp_handle(&text, &refused, m, tenant, body, len) != 0)
        gw_internal_error(r);
    else if (text == NULL)
        r->status = 202; /* a notification or a response: accepted, nothing to answer */
    else if (gw_reply_body(r, refused ? 400 : 200, "application/json", text, strlen(text)) != 0)
        gw_internal_error(r);
    free(text);
}
