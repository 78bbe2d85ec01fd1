/* Reading an `http` tool's declaration (config_http.c; README.md in this folder, "HTTP
 * tools"). */
#ifndef IDEM_GATEWAY_CONFIG_HTTP_H
#define IDEM_GATEWAY_CONFIG_HTTP_H

#include <jansson.h>

#include "config_read.h"
#include "upstream.h"

/* The member "http" (@http) of the tool at @r->at. *@out is set first (owned by the
 * caller, gw_http_free(), also on failure); returns 0 or GW_EXIT_DATAERR. */
int cfg_http(cfg_reader *r, gw_http **out, const json_t *http);

#endif
