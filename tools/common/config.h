/* The gateway's configuration file (README.md in this folder, "Configuration"): where it
 * listens, the database, the tenants and their token digests, the tools. Loading checks
 * everything that can be checked without a server: each tool's schema (schema.h) and
 * SQL declaration (idem_declared_new()), the windows, the digests, the names. */
#ifndef IDEM_GATEWAY_CONFIG_H
#define IDEM_GATEWAY_CONFIG_H

#include <idem/idem.h>
#include <jansson.h>
#include <stddef.h>

#include "exit.h"

/* Exit statuses of loading (every tool's table, ../exit.h). */
#define GW_EXIT_DATAERR EXIT_DATAERR /* the file is not a valid configuration */
#define GW_EXIT_NOINPUT EXIT_NOINPUT /* the file cannot be read */

#define GW_DIGEST_SIZE 32 /* SHA-256 */

/* A budget's rate (README.md in this folder, "Budgets"): @per_minute tokens come back each
 * minute, up to @burst. per_minute 0: no budget. */
typedef struct gw_rate {
    unsigned int per_minute;
    unsigned int burst;
} gw_rate;

typedef struct gw_tenant {
    const char *name;                         /* borrowed from the document */
    unsigned char (*digests)[GW_DIGEST_SIZE]; /* its tokens' SHA-256 digests; owned */
    size_t ndigests;
    gw_rate calls;          /* its budget of tool calls, replays included */
    gw_rate new_operations; /* its budget of calls that create an operation */
} gw_tenant;

struct gw_http;           /* upstream.h */
struct gw_console_config; /* console_config.h */

typedef struct gw_tool {
    const char *name; /* borrowed from the document, as every string here */
    int payload_version;
    unsigned int retention_s;  /* as configured, else the store's default */
    unsigned int key_memory_s; /* as configured, else the store's default or the retention */
    const json_t *schema;      /* the argument schema */
    const char *sql;
    const char **params; /* owned array of borrowed strings */
    size_t nparams;
    idem_declared *effect; /* owned; NULL for an http tool */
    struct gw_http *http;  /* owned; NULL for a sql tool */
    /* For MCP hosts (config_mcp.c): */
    const char *title;                 /* NULL: none */
    const char *description;           /* NULL: none */
    int destructive;                   /* destructiveHint; 1 unless configured false */
    const char *operation_id_argument; /* the argument carrying the operation ID, or NULL */
    json_t *input_schema;              /* the schema MCP lists (with that argument); owned */
    /* Its identity policy (config_tools.c): mode all unless configured. */
    idem_tool_identity identity;  /* identity.fields is @identity_fields */
    const char **identity_fields; /* owned array of borrowed strings */
} gw_tool;

typedef struct gw_config {
    json_t *doc; /* the parsed file; owned */
    const char *address;
    unsigned int port; /* 0: any free port */
    size_t max_body_bytes;
    unsigned int max_connections;
    unsigned int idle_timeout_s;
    size_t max_header_bytes;        /* the request line and headers */
    unsigned int request_timeout_s; /* a request's body, and its answer, must pass in this */
    unsigned int shutdown_grace_s;  /* SIGTERM: how long the calls under way may take */
    unsigned int retry_after_s;
    int log_json; /* log.format: the request log as JSON lines (else plain) */
    const char *dsn;
    idem_pool_options pool;
    idem_store_options store;              /* its tools point at @windows, its identities at
                                              @identities */
    idem_tool_retention *windows;          /* one per tool; owned */
    const idem_tool_identity **identities; /* one per tool with a policy; owned */
    gw_tenant *tenants;
    size_t ntenants;
    gw_tool *tools;
    size_t ntools;
    const json_t *mcp_origins;         /* mcp.allowed_origins: an array of strings, or NULL */
    const gw_tenant *stdio_tenant;     /* mcp.stdio_tenant, or NULL */
    unsigned int stdio_grace_s;        /* mcp.stdio_grace_s */
    struct gw_console_config *console; /* the console's member; NULL: no console; owned */
} gw_config;

/* Load and check the file at @path. @out: caller owns, gw_config_free(). On failure
 * returns GW_EXIT_NOINPUT or GW_EXIT_DATAERR with @why (of @size bytes) saying what and
 * where: a JSON Pointer into the file, then the reason. */
int gw_config_load(gw_config **out, const char *path, char *why, size_t size);

/* The tool called @name, or NULL. */
const gw_tool *gw_config_tool(const gw_config *cfg, const char *name, size_t len);

/* NULL is accepted. */
void gw_config_free(gw_config *cfg);

#endif
