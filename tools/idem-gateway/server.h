/* The HTTP server: libmicrohttpd with a thread per connection, so that a call waiting on
 * PostgreSQL holds only its own connection's thread and never the thread that accepts
 * and reads the others. Routes: GET /v1/tools, POST /v1/tools/{tool}, POST /mcp
 * (mcp_http.h). */
#ifndef IDEM_GATEWAY_SERVER_H
#define IDEM_GATEWAY_SERVER_H

#include <idem/idem.h>
#include <stddef.h>

#include "config.h"
#include "mcp.h"

typedef struct gw_server {
    const gw_config *cfg; /* borrowed; outlives the server */
    idem_store *store;    /* borrowed; outlives the server */
    gw_mcp mcp;           /* the MCP endpoint's */
    struct MHD_Daemon *daemon;
    unsigned int port; /* the port it listens on (the configured one, or the one given for 0) */
} gw_server;

/* Start serving on the configured address. Returns 0, or -1 with @why (of @size bytes). */
int gw_server_start(gw_server *s, const gw_config *cfg, idem_store *store, char *why, size_t size);

/* Stop accepting, wait for the calls under way to end, close every connection. */
void gw_server_stop(gw_server *s);

#endif
