/* Loading the configuration file: the document, then each part checked in turn. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_read.h"
#include "console_config.h"
#include "upstream.h"

#define DEFAULT_PORT 8080
#define PORT_MAX     65535
/* The longest wait an option may set (a pool's, a call's deadline): one hour. */
#define WAIT_MAX_MS 3600000
/* The longest idle connection and Retry-After the gateway accepts: one hour. */
#define HTTP_WAIT_MAX_S 3600
/* The store's bound on clock_skew_s (store.h): one day. */
#define CLOCK_SKEW_MAX_S 86400
#define POOL_SIZE_MAX    1000
#define BODY_MAX_BYTES   (64ULL << 20)
#define CONNECTIONS_MAX  10000
#define HEADER_MIN_BYTES 1024
#define HEADER_MAX_BYTES (1ULL << 20)

static const char *const top_members[] = {"http", "database", "tenants", "tools",
                                          "mcp",  "log",      "console", NULL};
static const char *const http_members[] = {"address",           "port",
                                           "max_body_bytes",    "max_connections",
                                           "idle_timeout_s",    "max_header_bytes",
                                           "request_timeout_s", "shutdown_grace_s",
                                           "retry_after_s",     NULL};
static const char *const log_members[] = {"format", NULL};
static const char *const db_members[] = {"dsn",
                                         "pooler",
                                         "pool_size",
                                         "acquire_timeout_ms",
                                         "connect_timeout_ms",
                                         "statement_timeout_ms",
                                         "deadline_ms",
                                         "clock_skew_s",
                                         NULL};

/* The limits on clients (README.md in this folder, "Limits"). */
static int read_limits(cfg_reader *r, gw_config *cfg, const json_t *http)
{
    unsigned long long conns = cfg->max_connections, idle = cfg->idle_timeout_s;
    unsigned long long header = cfg->max_header_bytes, request = cfg->request_timeout_s;
    unsigned long long grace = cfg->shutdown_grace_s;
    int rc;

    if ((rc = cfg_uint(r, http, "max_connections", 1, CONNECTIONS_MAX, &conns)) != 0 ||
        (rc = cfg_uint(r, http, "idle_timeout_s", 1, HTTP_WAIT_MAX_S, &idle)) != 0 ||
        (rc = cfg_uint(r, http, "max_header_bytes", HEADER_MIN_BYTES, HEADER_MAX_BYTES, &header)) !=
            0 ||
        (rc = cfg_uint(r, http, "request_timeout_s", 1, HTTP_WAIT_MAX_S, &request)) != 0 ||
        (rc = cfg_uint(r, http, "shutdown_grace_s", 0, HTTP_WAIT_MAX_S, &grace)) != 0)
        return rc;
    cfg->max_connections = (unsigned int)conns;
    cfg->idle_timeout_s = (unsigned int)idle;
    cfg->max_header_bytes = (size_t)header;
    cfg->request_timeout_s = (unsigned int)request;
    cfg->shutdown_grace_s = (unsigned int)grace;
    return 0;
}

static int read_http(cfg_reader *r, gw_config *cfg, const json_t *http)
{
    unsigned long long port = DEFAULT_PORT, body = cfg->max_body_bytes;
    unsigned long long retry = cfg->retry_after_s;
    int rc;

    if (http == NULL)
        return 0;
    if ((rc = cfg_object(r, http, http_members)) != 0 ||
        (rc = cfg_string(r, http, "address", 0, &cfg->address)) != 0 ||
        (rc = cfg_uint(r, http, "port", 0, PORT_MAX, &port)) != 0 ||
        (rc = cfg_uint(r, http, "max_body_bytes", 1, BODY_MAX_BYTES, &body)) != 0 ||
        (rc = read_limits(r, cfg, http)) != 0 ||
        (rc = cfg_uint(r, http, "retry_after_s", 1, HTTP_WAIT_MAX_S, &retry)) != 0)
        return rc;
    cfg->port = (unsigned int)port;
    cfg->max_body_bytes = (size_t)body;
    cfg->retry_after_s = (unsigned int)retry;
    return 0;
}

static int read_log(cfg_reader *r, gw_config *cfg, const json_t *log)
{
    const char *format = NULL;
    int rc;

    if (log == NULL)
        return 0;
    if ((rc = cfg_object(r, log, log_members)) != 0 ||
        (rc = cfg_string(r, log, "format", 0, &format)) != 0)
        return rc;
    if (format != NULL && strcmp(format, "json") != 0 && strcmp(format, "plain") != 0)
        return cfg_refuse(r, "format", "must be \"plain\" or \"json\"");
    cfg->log_json = format != NULL && strcmp(format, "json") == 0;
    return 0;
}

static int read_pooler(cfg_reader *r, gw_config *cfg, const json_t *db)
{
    const char *pooler = NULL;
    int rc = cfg_string(r, db, "pooler", 0, &pooler);

    if (rc != 0 || pooler == NULL)
        return rc;
    if (strcmp(pooler, "none") == 0)
        cfg->pool.pooler = IDEM_POOLER_NONE;
    else if (strcmp(pooler, "transaction") == 0)
        cfg->pool.pooler = IDEM_POOLER_TRANSACTION;
    else if (strcmp(pooler, "auto") == 0)
        cfg->pool.pooler = IDEM_POOLER_AUTO;
    else
        return cfg_refuse(r, "pooler", "must be \"none\", \"transaction\" or \"auto\"");
    return 0;
}

static int read_database(cfg_reader *r, gw_config *cfg, const json_t *db)
{
    unsigned long long size = cfg->pool.max_size, acquire = cfg->pool.acquire_timeout_ms;
    unsigned long long connect = cfg->pool.connect_timeout_ms;
    unsigned long long statement = cfg->pool.statement_timeout_ms;
    unsigned long long deadline = cfg->store.deadline_ms, skew = cfg->store.clock_skew_s;
    int rc;

    if ((rc = cfg_object(r, db, db_members)) != 0 ||
        (rc = cfg_string(r, db, "dsn", 1, &cfg->dsn)) != 0 || (rc = read_pooler(r, cfg, db)) != 0 ||
        (rc = cfg_uint(r, db, "pool_size", 1, POOL_SIZE_MAX, &size)) != 0 ||
        (rc = cfg_uint(r, db, "acquire_timeout_ms", 1, WAIT_MAX_MS, &acquire)) != 0 ||
        (rc = cfg_uint(r, db, "connect_timeout_ms", 0, WAIT_MAX_MS, &connect)) != 0 ||
        (rc = cfg_uint(r, db, "statement_timeout_ms", 0, WAIT_MAX_MS, &statement)) != 0 ||
        (rc = cfg_uint(r, db, "deadline_ms", 1, WAIT_MAX_MS, &deadline)) != 0 ||
        (rc = cfg_uint(r, db, "clock_skew_s", 0, CLOCK_SKEW_MAX_S, &skew)) != 0)
        return rc;
    cfg->pool.max_size = (unsigned int)size;
    cfg->pool.acquire_timeout_ms = (unsigned int)acquire;
    cfg->pool.connect_timeout_ms = (unsigned int)connect;
    cfg->pool.statement_timeout_ms = (unsigned int)statement;
    cfg->store.deadline_ms = (unsigned int)deadline;
    cfg->store.clock_skew_s = (unsigned int)skew;
    return 0;
}

static void set_defaults(gw_config *cfg)
{
    idem_pool_options pool = IDEM_POOL_OPTIONS_INIT;
    idem_store_options store = IDEM_STORE_OPTIONS_INIT;

    cfg->address = "127.0.0.1";
    cfg->port = DEFAULT_PORT;
    cfg->max_body_bytes = (size_t)1 << 20;
    cfg->max_connections = 256;
    cfg->idle_timeout_s = 60;
    cfg->max_header_bytes = 16384;
    cfg->request_timeout_s = 30;
    cfg->shutdown_grace_s = 30;
    cfg->retry_after_s = 1;
    cfg->stdio_grace_s = 30;
    pool.application_name = "idem-gateway";
    cfg->pool = pool;
    cfg->store = store;
}

static int read_document(cfg_reader *r, gw_config *cfg)
{
    const json_t *doc = cfg->doc;
    size_t mark;
    int rc;

    if ((rc = cfg_object(r, doc, top_members)) != 0)
        return rc;
    mark = gw_pointer_push(&r->at, "http");
    rc = read_http(r, cfg, json_object_get(doc, "http"));
    gw_pointer_pop(&r->at, mark);
    if (rc != 0)
        return rc;
    if (json_object_get(doc, "database") == NULL)
        return cfg_refuse(r, "database", "is required");
    mark = gw_pointer_push(&r->at, "database");
    rc = read_database(r, cfg, json_object_get(doc, "database"));
    gw_pointer_pop(&r->at, mark);
    if (rc != 0)
        return rc;
    cfg->store.max_arguments_bytes = cfg->max_body_bytes;
    if ((rc = cfg_tenants(r, cfg, json_object_get(doc, "tenants"))) != 0)
        return rc;
    if ((rc = cfg_tools(r, cfg, json_object_get(doc, "tools"))) != 0)
        return rc;
    mark = gw_pointer_push(&r->at, "log");
    rc = read_log(r, cfg, json_object_get(doc, "log"));
    gw_pointer_pop(&r->at, mark);
    if (rc != 0)
        return rc;
    if ((rc = cfg_mcp(r, cfg, json_object_get(doc, "mcp"))) != 0)
        return rc;
    return cfg_console(r, cfg, json_object_get(doc, "console"));
}

/* The file's text as JSON: 66 when it cannot be read, 65 when it is not one JSON value
 * (duplicate members included). */
static int parse_file(json_t **out, const char *path, char *why, size_t size)
{
    FILE *f = fopen(path, "rb");
    json_error_t jerr;

    if (f == NULL) {
        snprintf(why, size, "%s: cannot read: %s", path, strerror(errno));
        return GW_EXIT_NOINPUT;
    }
    *out = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
    if (*out == NULL && ferror(f)) {
        snprintf(why, size, "%s: cannot read: %s", path, strerror(errno));
        fclose(f);
        return GW_EXIT_NOINPUT;
    }
    fclose(f);
    if (*out == NULL) {
        snprintf(why, size, "%s: line %d, column %d: not valid JSON: %s", path, jerr.line,
                 jerr.column, jerr.text);
        return GW_EXIT_DATAERR;
    }
    return 0;
}

int gw_config_load(gw_config **out, const char *path, char *why, size_t size)
{
    gw_config *cfg = calloc(1, sizeof(*cfg));
    cfg_reader r = {{"", 0}, why, size};
    char inner[1024];
    int rc;

    if (cfg == NULL) {
        snprintf(why, size, "out of memory");
        return GW_EXIT_DATAERR;
    }
    set_defaults(cfg);
    if ((rc = parse_file(&cfg->doc, path, why, size)) != 0)
        goto done;
    r.why = inner;
    r.size = sizeof(inner);
    if ((rc = read_document(&r, cfg)) != 0)
        snprintf(why, size, "%s: %s", path, inner);
done:
    if (rc != 0)
        gw_config_free(cfg);
    else
        *out = cfg;
    return rc;
}

const gw_tool *gw_config_tool(const gw_config *cfg, const char *name, size_t len)
{
    for (size_t i = 0; i < cfg->ntools; i++) {
        if (strlen(cfg->tools[i].name) == len && memcmp(cfg->tools[i].name, name, len) == 0)
            return &cfg->tools[i];
    }
    return NULL;
}

void gw_config_free(gw_config *cfg)
{
    if (cfg == NULL)
        return;
    for (size_t i = 0; i < cfg->ntenants; i++)
        free(cfg->tenants[i].digests);
    free(cfg->tenants);
    for (size_t i = 0; i < cfg->ntools; i++) {
        free(cfg->tools[i].params);
        idem_declared_free(cfg->tools[i].effect);
        gw_http_free(cfg->tools[i].http);
        json_decref(cfg->tools[i].input_schema);
        free(cfg->tools[i].identity_fields);
    }
    free(cfg->tools);
    free(cfg->windows);
    free(cfg->identities);
    gw_console_config_free(cfg->console);
    json_decref(cfg->doc);
    free(cfg);
}
