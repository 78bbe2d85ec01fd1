/* Reading the configuration document: typed members with their bounds, every error as
 * "POINTER: reason" (config.h). Shared by config.c and config_tools.c. */
#ifndef IDEM_GATEWAY_CONFIG_READ_H
#define IDEM_GATEWAY_CONFIG_READ_H

#include <jansson.h>
#include <stddef.h>

#include "config.h"
#include "pointer.h"

typedef struct cfg_reader {
    gw_pointer at; /* where the reader is in the document */
    char *why;
    size_t size;
} cfg_reader;

/* Record "POINTER: reason" (the pointer of @r->at, with @member appended when it is not
 * NULL); returns GW_EXIT_DATAERR. */
int cfg_refuse(cfg_reader *r, const char *member, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* @obj (at @r->at) must be an object whose members are all in @known (NULL-terminated). */
int cfg_object(cfg_reader *r, const json_t *obj, const char *const *known);

/* Member @key of @obj: absent leaves *out as it is (its default), unless @required. */
int cfg_uint(cfg_reader *r, const json_t *obj, const char *key, unsigned long long min,
             unsigned long long max, unsigned long long *out);
int cfg_string(cfg_reader *r, const json_t *obj, const char *key, int required, const char **out);

/* Tenants and tools (config_tools.c). */
int cfg_tenants(cfg_reader *r, gw_config *cfg, const json_t *tenants);
int cfg_tools(cfg_reader *r, gw_config *cfg, const json_t *tools);

/* What MCP hosts are told of a tool (config_mcp.c): title, description, destructive,
 * operation_id_argument; and the gateway's mcp member. */
int cfg_tool_mcp(cfg_reader *r, gw_tool *t, const json_t *tool);
int cfg_mcp(cfg_reader *r, gw_config *cfg, const json_t *mcp);

#endif
