/* libmicrohttpd's side: routing, the checks before a call (method, token, tool, media
 * type, size, key), the body, and sending the answer. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "core/clock.h"
#include "call.h"
#include "console.h"
#include "framing.h"
#include "http_api.h"
#include "key.h"
#include "mcp_http.h"
#include "metrics.h"
#include "openapi.h"
#include "ops.h"
#include "reqlog.h"
#include "server.h"
#include "trace.h"

#define TOOLS_PATH "/v1/tools"

/* One request, from its headers to its answer. */
typedef struct request {
    gw_reply reply; /* decided before the body: reply.status != 0 */
    gw_gen *gen;    /* the configuration it runs with: a reference, dropped at its end */
    gw_conn *conn;  /* its connection's record (guard.h); NULL: not watched */
    double started; /* seconds, CLOCK_MONOTONIC */
    const char *route;
    char id[GW_REQUEST_ID_MAX + 1];
    gw_call_ctx ctx; /* the request ID in, the tool, key and status out */
    const gw_tenant *tenant;
    const gw_tool *tool;
    char key[IDEM_OPERATION_ID_MAX + 1];
    char *body;
    size_t len, cap;
    int too_large;
    int unread;              /* answered from its headers alone: the body is not read */
    int mcp;                 /* a message to /mcp (mcp_http.h) */
    const char *mcp_version; /* its MCP-Protocol-Version header (libmicrohttpd's); NULL: none */
    const char *mcp_method;  /* its Mcp-Method header; NULL: none */
    int console;             /* a form posted to the console (console.h) */
} request;

_Static_assert(offsetof(request, reply) == 0, "request_new() clears what follows the reply");

/* The same bytes for a missing and for an unknown token. */
static const char unauthorized_body[] =
    "{\"type\":\"" GW_PROBLEM_PREFIX "unauthorized\",\"title\":\"Unauthorized\",\"status\":401,"
    "\"detail\":\"send Authorization: Bearer with one of the tenant's tokens\"}";

static void unauthorized(gw_reply *r)
{
    if (gw_reply_body(r, 401, "application/problem+json", unauthorized_body,
                      sizeof(unauthorized_body) - 1) != 0)
        gw_internal_error(r);
    gw_reply_header(r, "WWW-Authenticate", "Bearer realm=\"idem-gateway\"");
}

static void refuse(gw_reply *r, unsigned int status, const char *type, const char *title,
                   const char *detail)
{
    if (gw_problem(r, status, type, title, detail, NULL) != 0)
        gw_internal_error(r);
}

static void method_not_allowed(gw_reply *r, const char *allow, const char *method)
{
    char detail[128], shown[41];

    snprintf(detail, sizeof(detail), "%s is not allowed here; use %s",
             gw_printable(shown, sizeof(shown), method), allow);
    gw_reply_header(r, "Allow", "%s", allow);
    refuse(r, 405, "method-not-allowed", "Method not allowed", detail);
}

static int is_json(const char *content_type)
{
    size_t n;

    if (content_type == NULL)
        return 0;
    content_type += strspn(content_type, " \t");
    n = strcspn(content_type, ";");
    while (n > 0 && (content_type[n - 1] == ' ' || content_type[n - 1] == '\t'))
        n--;
    return n == 16 && strncasecmp(content_type, "application/json", 16) == 0;
}

/* The declared length is over the limit (a body without one is counted as it comes). */
static int declared_too_large(struct MHD_Connection *c, size_t max)
{
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    char *end = NULL;
    unsigned long long n;

    if (cl == NULL)
        return 0;
    n = strtoull(cl, &end, 10);
    return end != cl && n > max;
}

static void too_large(gw_reply *r, size_t max)
{
    char detail[96];

    snprintf(detail, sizeof(detail), "the body is longer than %zu bytes (max_body_bytes)", max);
    refuse(r, 413, "body-too-large", "Body too large", detail);
}

static const char *header(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

static void mcp_too_large(gw_reply *r, size_t max)
{
    char message[96];

    snprintf(message, sizeof(message), "message too large: longer than %zu bytes (max_body_bytes)",
             max);
    gw_mcp_http_refuse(r, 413, GW_RPC_INVALID_REQUEST, message);
}

static void unknown_tool(gw_reply *r, const char *name)
{
    char detail[160], shown[65];

    snprintf(detail, sizeof(detail), "no tool is called \"%s\"; GET " TOOLS_PATH " lists them",
             gw_printable(shown, sizeof(shown), name));
    refuse(r, 404, "unknown-tool", "Unknown tool", detail);
}

static enum MHD_Result count_key(void *cls, enum MHD_ValueKind kind, const char *name,
                                 const char *value)
{
    if (strcasecmp(name, "Idempotency-Key") == 0)
        (*(unsigned int *)cls)++;
    return MHD_YES;
}

/* The key's header, once: a second one would be joined to the first with a comma, which
 * is no structured-field string (RFC 8941). */
static int parse_key(char out[IDEM_OPERATION_ID_MAX + 1], struct MHD_Connection *c, const char *key,
                     char *why, size_t size)
{
    unsigned int n = 0;

    MHD_get_connection_values(c, MHD_HEADER_KIND, count_key, &n);
    if (n > 1) {
        snprintf(why, size, "the Idempotency-Key header is sent %u times; send it once", n);
        return -1;
    }
    return gw_key_parse(out, key, why, size);
}

static void bad_key(gw_reply *r, const char *key, const char *why)
{
    gw_reply_header(r, "Idem-Status", "invalid");
    refuse(r, 400, key == NULL ? "idempotency-key-missing" : "invalid-idempotency-key",
           key == NULL ? "Idempotency-Key missing" : "Invalid Idempotency-Key", why);
}

/* POST /v1/tools/{tool}: every check before the body, in order. */
static void route_call(const gw_config *cfg, struct MHD_Connection *c, request *q, const char *name,
                       const char *method)
{
    const char *key = header(c, "Idempotency-Key");
    char why[256];

    if (strcmp(method, "POST") != 0)
        method_not_allowed(&q->reply, "POST", method);
    else if ((q->tenant = gw_auth_tenant(cfg, header(c, "Authorization"))) == NULL)
        unauthorized(&q->reply);
    else if ((q->tool = gw_config_tool(cfg, name, strlen(name))) == NULL)
        unknown_tool(&q->reply, name);
    else if (!is_json(header(c, "Content-Type")))
        refuse(&q->reply, 415, "unsupported-media-type", "Unsupported media type",
               "the arguments are sent as Content-Type: application/json");
    else if (declared_too_large(c, cfg->max_body_bytes))
        too_large(&q->reply, cfg->max_body_bytes);
    else if (parse_key(q->key, c, key, why, sizeof(why)) != 0)
        bad_key(&q->reply, key, why);
}

/* POST /mcp: the origin, the method, the token, the protocol revision, the media type
 * and the size, in this order. */
static void route_mcp(const gw_config *cfg, struct MHD_Connection *c, request *q,
                      const char *method)
{
    const char *version = header(c, "MCP-Protocol-Version");
    gw_reply *r = &q->reply;

    q->mcp = 1;
    q->mcp_version = version;
    q->mcp_method = header(c, "Mcp-Method");
    if (!gw_mcp_http_origin_allowed(cfg, header(c, "Origin")))
        gw_mcp_http_refuse(r, 403, GW_RPC_INVALID_REQUEST,
                           "Origin not allowed: list it in mcp.allowed_origins");
    else if (strcmp(method, "POST") != 0) {
        gw_reply_header(r, "Allow", "POST");
        gw_mcp_http_refuse(r, 405, GW_RPC_INVALID_REQUEST,
                           "the gateway's MCP endpoint is stateless: POST one message; it "
                           "offers no stream (GET) and no session (DELETE)");
    } else if ((q->tenant = gw_auth_tenant(cfg, header(c, "Authorization"))) == NULL)
        unauthorized(r);
    else if (version != NULL && !gw_mcp_version_supported(version))
        gw_mcp_http_refuse(
            r, 400, GW_RPC_INVALID_REQUEST,
            "unsupported MCP-Protocol-Version: the gateway speaks " GW_MCP_VERSION_MODERN
            ", " GW_MCP_VERSION_LATEST " and " GW_MCP_VERSION_PREV);
    else if (!is_json(header(c, "Content-Type")))
        gw_mcp_http_refuse(r, 415, GW_RPC_INVALID_REQUEST,
                           "send the message as Content-Type: application/json");
    else if (declared_too_large(c, cfg->max_body_bytes))
        mcp_too_large(r, cfg->max_body_bytes);
}

/* GET /healthz, /readyz, /metrics: 1 when @url is one of them (answered), else 0. */
static int route_ops(gw_server *s, request *q, const char *url, const char *method)
{
    const char *const paths[] = {GW_HEALTHZ_PATH, GW_READYZ_PATH, GW_METRICS_PATH};
    size_t i = 0;

    while (i < 3 && strcmp(url, paths[i]) != 0)
        i++;
    if (i == 3)
        return 0;
    q->route = paths[i] + 1;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        method_not_allowed(&q->reply, "GET", method);
    else if (i == 0)
        gw_ops_healthz(&q->reply);
    else if (i == 1 && atomic_load(&s->stopping))
        refuse(&q->reply, 503, "unavailable", "Stopping", "the gateway is stopping");
    else if (i == 1)
        gw_ops_readyz(&q->reply, s->live->pool);
    else
        gw_ops_metrics(&q->reply, s->live->pool, s->live->boot.pool.max_size);
    return 1;
}

/* A tool's path: its metrics label (the name when configured), then the checks. */
static void route_tool(const gw_config *cfg, struct MHD_Connection *c, request *q, const char *name,
                       const char *method)
{
    const gw_tool *t = gw_config_tool(cfg, name, strlen(name));

    q->route = "call";
    q->ctx.tool = t != NULL ? t->name : GW_METRICS_UNKNOWN_TOOL;
    route_call(cfg, c, q, name, method);
}

/* GET /v1/tools (@tools 1) or GET /v1/openapi.json: with a token, like a call. */
static void route_list(const gw_config *cfg, struct MHD_Connection *c, request *q,
                       const char *method, int tools)
{
    q->route = "list";
    if (strcmp(method, "GET") != 0)
        method_not_allowed(&q->reply, "GET", method);
    else if ((q->tenant = gw_auth_tenant(cfg, header(c, "Authorization"))) == NULL)
        unauthorized(&q->reply);
    else if (tools)
        gw_list_tools(&q->reply, cfg, q->gen->rt->store);
    else
        gw_list_openapi(&q->reply, cfg);
}

static void route(gw_server *s, struct MHD_Connection *c, request *q, const char *url,
                  const char *method)
{
    const gw_config *cfg = q->gen->cfg;

    q->route = "other";
    if (route_ops(s, q, url, method))
        return;
    if (gw_console_owns(cfg, url)) {
        q->route = "console";
        q->console = 1;
        gw_console_begin(&q->reply, cfg, c, url, method);
        return;
    }
    if (strcmp(url, GW_MCP_PATH) == 0) {
        q->route = "mcp";
        route_mcp(cfg, c, q, method);
    } else if (strcmp(url, TOOLS_PATH) == 0 || strcmp(url, GW_OPENAPI_PATH) == 0) {
        route_list(cfg, c, q, method, strcmp(url, TOOLS_PATH) == 0);
    } else if (strncmp(url, TOOLS_PATH "/", sizeof(TOOLS_PATH)) == 0 &&
               strchr(url + sizeof(TOOLS_PATH), '/') == NULL)
        route_tool(cfg, c, q, url + sizeof(TOOLS_PATH), method);
    else
        refuse(&q->reply, 404, "not-found", "Not found",
               "the gateway serves GET " TOOLS_PATH ", GET " GW_OPENAPI_PATH ", POST " TOOLS_PATH
               "/{tool}, POST " GW_MCP_PATH ", and GET " GW_HEALTHZ_PATH ", " GW_READYZ_PATH
               " and " GW_METRICS_PATH);
}

/* Queue @q's answer; its body is handed to libmicrohttpd, which frees it. */
static enum MHD_Result send_reply(gw_server *s, struct MHD_Connection *c, request *q)
{
    gw_reply *r = &q->reply;
    struct MHD_Response *resp =
        r->body != NULL ? MHD_create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_FREE)
                        : MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    enum MHD_Result rc;

    if (resp == NULL)
        return MHD_NO;
    r->body = NULL;
    if (r->content_type != NULL)
        MHD_add_response_header(resp, "Content-Type", r->content_type);
    for (size_t i = 0; i < r->nheaders; i++)
        MHD_add_response_header(resp, r->headers[i].name, r->headers[i].value);
    MHD_add_response_header(resp, "X-Request-Id", q->id);
    if (atomic_load(&s->stopping))
        MHD_add_response_header(resp, "Connection", "close");
    rc = MHD_queue_response(c, r->status, resp);
    MHD_destroy_response(resp);
    return rc;
}

/* Keep the body's bytes, up to the limit; past it, count it too large and drop the rest. */
static void append(request *q, const char *data, size_t n, size_t max)
{
    if (q->too_large || q->reply.status != 0)
        return;
    if (n > max - q->len) {
        q->too_large = 1;
        return;
    }
    if (q->len + n > q->cap) {
        size_t cap = q->cap == 0 ? 4096 : q->cap;
        char *grown;

        while (cap < q->len + n)
            cap *= 2;
        if ((grown = realloc(q->body, cap)) == NULL) {
            gw_internal_error(&q->reply);
            return;
        }
        q->body = grown;
        q->cap = cap;
    }
    memcpy(q->body + q->len, data, n);
    q->len += n;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static gw_conn *connection_record(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

    return info != NULL ? info->socket_context : NULL;
}

/* A connection's spare keeps a body's buffer up to this size (a tool call's arguments are
 * mostly less); a larger one is freed with its request, so that an idle connection holds
 * at most this more. */
#define SPARE_BODY_MAX 8192

/* A cleared request record: the one the previous request of connection @rec (NULL: not
 * watched) left, so that the requests of a kept-alive connection allocate none, else a new
 * one; NULL when out of memory. */
static request *request_new(gw_conn *rec)
{
    request *q = rec != NULL ? rec->spare : NULL;
    char *body;
    size_t cap;

    if (q == NULL)
        return calloc(1, sizeof(*q));
    rec->spare = NULL;
    body = q->body;
    cap = q->cap;
    /* Its reply request_done() emptied (reply.h: nheaders 0 empties the header slots). */
    memset((char *)q + sizeof(q->reply), 0, sizeof(*q) - sizeof(q->reply));
    q->body = body;
    q->cap = cap;
    return q;
}

/* @q is done: its reply emptied, then kept for its connection's next request, or freed. */
static void request_done(gw_conn *rec, request *q)
{
    gw_reply_clear(&q->reply);
    if (q->cap > SPARE_BODY_MAX) {
        free(q->body);
        q->body = NULL;
        q->cap = 0;
    }
    if (rec != NULL && rec->spare == NULL) {
        rec->spare = q;
        return;
    }
    free(q->body);
    free(q);
}

/* A request's headers are in: its generation, its ID, its framing (framing.h), then its
 * route and the checks. */
static request *begin(gw_server *s, struct MHD_Connection *c, const char *url, const char *method)
{
    gw_conn *rec = connection_record(c);
    request *q = request_new(rec);

    if (q == NULL)
        return NULL;
    q->started = now_s();
    q->gen = gw_live_acquire(s->live);
    q->conn = rec;
    gw_guard_phase(&s->guard, q->conn, GW_BODY);
    gw_request_id(q->id, header(c, "X-Request-Id"));
    q->ctx.trace_id = q->id;
    gw_trace_begin(&q->ctx.trace, header(c, "traceparent"), header(c, "tracestate"));
    q->ctx.tool = GW_METRICS_NO_TOOL;
    q->route = "other";
    q->unread = gw_framing_check(&q->reply, c) != 0;
    if (!q->unread)
        route(s, c, q, url, method);
    q->unread = q->unread || q->reply.status == 413;
    return q;
}

/* The body is in: the answer. */
static void finish(request *q, struct MHD_Connection *c, const char *url)
{
    const gw_config *cfg = q->gen->cfg;
    gw_mcp mcp = {cfg, q->gen->rt, &q->ctx, q->mcp_version, q->mcp_method};
    const char *body = q->len > 0 ? q->body : "";

    if (q->reply.status == 0 && q->too_large && q->mcp)
        mcp_too_large(&q->reply, cfg->max_body_bytes);
    else if (q->reply.status == 0 && q->too_large)
        too_large(&q->reply, cfg->max_body_bytes);
    else if (q->reply.status == 0 && q->console)
        gw_console_post(&q->reply, cfg, c, url, body, q->len);
    else if (q->reply.status == 0 && q->mcp)
        gw_mcp_http_answer(&q->reply, &mcp, q->tenant, body, q->len);
    else if (q->reply.status == 0)
        gw_call(&q->reply, cfg, q->gen->rt, q->tenant, q->tool, q->key, body, q->len, &q->ctx);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **state)
{
    gw_server *s = cls;
    request *q = *state;

    if (q == NULL) {
        if ((q = begin(s, c, url, method)) == NULL)
            return MHD_NO;
        *state = q;
        /* A body declared too large, or framed unsoundly, is not read at all. */
        return q->unread ? send_reply(s, c, q) : MHD_YES;
    }
    if (*upload_size > 0) {
        append(q, upload, *upload_size, q->gen->cfg->max_body_bytes);
        *upload_size = 0;
        return MHD_YES;
    }
    gw_guard_phase(&s->guard, q->conn, GW_CALL);
    finish(q, c, url);
    gw_guard_phase(&s->guard, q->conn, GW_ANSWER);
    return send_reply(s, c, q);
}

/* Whether the log is JSON: the command line's choice, else @gen's configuration's. */
static int log_json(const gw_server *s, const gw_gen *gen)
{
    return s->log_format >= 0 ? s->log_format : gen->cfg->log_json;
}

/* The request's line in the log, and its metrics. */
static void account(const gw_server *s, const request *q)
{
    gw_log_entry e = {q->id,
                      q->route,
                      NULL,
                      q->ctx.tool,
                      NULL,
                      q->reply.status,
                      q->ctx.status,
                      now_s() - q->started,
                      q->ctx.trace.trace_id,
                      q->ctx.trace.span_id};

    e.tenant = q->tenant != NULL ? q->tenant->name : NULL;
    e.key = q->ctx.key[0] != '\0' ? q->ctx.key : q->key[0] != '\0' ? q->key : NULL;
    if (q->reply.status != 0)
        gw_metrics_request(q->ctx.tool, q->reply.status, e.seconds);
    gw_log_request(&e, log_json(s, q->gen));
}

static void completed(void *cls, struct MHD_Connection *c, void **state,
                      enum MHD_RequestTerminationCode why)
{
    gw_server *s = cls;
    request *q = *state;

    if (q == NULL)
        return;
    if (why == MHD_REQUEST_TERMINATED_WITH_ERROR && q->reply.status == 0)
        q->reply.status = MHD_HTTP_BAD_REQUEST; /* libmicrohttpd refused what it read */
    account(s, q);
    gw_guard_phase(&s->guard, q->conn, GW_WAITING);
    gw_gen_release(q->gen);
    request_done(q->conn, q);
    *state = NULL;
}

static void connection_event(void *cls, struct MHD_Connection *c, void **socket_context,
                             enum MHD_ConnectionNotificationCode code)
{
    gw_server *s = cls;
    const union MHD_ConnectionInfo *info;

    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = gw_guard_taken(&s->guard, info != NULL ? info->connect_fd : -1);
    } else {
        gw_conn *rec = *socket_context;
        request *spare = rec != NULL ? rec->spare : NULL;

        if (spare != NULL)
            free(spare->body);
        free(spare);
        gw_guard_closed(&s->guard, rec);
        *socket_context = NULL;
    }
}

/* The front hands a connection over (front.h); libmicrohttpd owns @fd in every case. */
static int take(void *cls, int fd, const struct sockaddr *addr, socklen_t len)
{
    gw_server *s = cls;

    return MHD_add_connection(s->daemon, fd, addr, len) == MHD_YES ? 0 : -1;
}

/* An answer made before any handler ran: logged and counted as the gateway's own are,
 * under no tool and the route "other". @seconds < 0: no duration. */
static void answered_early(gw_server *s, const char *id, unsigned int code, double seconds)
{
    gw_log_entry e = {id, "other", NULL, GW_METRICS_NO_TOOL, NULL, code, NULL, 0, NULL, NULL};
    gw_trace trace;
    gw_gen *gen;

    gw_trace_begin(&trace, NULL, NULL); /* its head was not read: a trace of its own */
    e.trace_id = trace.trace_id;
    e.span_id = trace.span_id;
    e.seconds = seconds >= 0 ? seconds : 0;
    gw_metrics_request(GW_METRICS_NO_TOOL, code, seconds);
    gen = gw_live_acquire(s->live);
    gw_log_request(&e, log_json(s, gen));
    gw_gen_release(gen);
}

/* The front answered a connection's first head itself (head.h). */
static void answered_by_front(void *cls, const gw_reply *r, const char *id, double seconds)
{
    answered_early(cls, id, r->status, seconds);
}

/* libmicrohttpd's messages, on standard error as they are: they are read by people, never
 * by the gateway (its counts come from its own answers and from libmicrohttpd's codes). */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[512];
    size_t n;

    vsnprintf(line, sizeof(line), fmt, ap);
    n = strlen(line);
    while (n > 0 && line[n - 1] == '\n')
        line[--n] = '\0';
    fprintf(stderr, "idem-gateway: http: %s\n", line);
}

/* The configured address as a socket address; 0, or -1 when it is not an IP address. */
static int socket_address(struct sockaddr_storage *ss, const gw_config *cfg)
{
    struct sockaddr_in *in = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

    memset(ss, 0, sizeof(*ss));
    if (inet_pton(AF_INET, cfg->address, &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)cfg->port);
        return 0;
    }
    if (inet_pton(AF_INET6, cfg->address, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)cfg->port);
        return 0;
    }
    return -1;
}

static int hex_digit(char ch)
{
    return ch >= '0' && ch <= '9'   ? ch - '0'
           : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
           : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                    : -1;
}

/* Percent-decoding of the request target, in place, as libmicrohttpd's own but for "%00",
 * which stays as written: a decoded NUL would end the C string there, and
 * /v1/tools/create_note%00x would call create_note. Returns the new length. */
static size_t unescape(void *cls, struct MHD_Connection *c, char *uri)
{
    char *out = uri;

    (void)cls;
    (void)c;
    for (const char *in = uri; *in != '\0'; out++) {
        int hi = in[0] == '%' ? hex_digit(in[1]) : -1, lo = hi >= 0 ? hex_digit(in[2]) : -1;

        if (lo >= 0 && (hi | lo) != 0) {
            *out = (char)(hi * 16 + lo);
            in += 3;
        } else {
            *out = *in++;
        }
    }
    *out = '\0';
    return (size_t)(out - uri);
}

/* The daemon, with the limits (README.md in this folder, "Limits"), without a listening
 * socket: the front (front.h) accepts, admits and hands the connections over.
 * libmicrohttpd's own connection limit is a margin above the configured one, which the
 * front enforces and counts: a closed connection's thread may still be ending. */
static struct MHD_Daemon *daemon_start(gw_server *s, const gw_config *cfg)
{
    unsigned int flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                         MHD_USE_POLL | MHD_USE_ERROR_LOG | MHD_USE_ITC | MHD_USE_NO_LISTEN_SOCKET;

    /* The logger first, so that every message of libmicrohttpd's goes through it. */
    return MHD_start_daemon(
        flags, 0, NULL, NULL, handle, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
        MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections + 64, MHD_OPTION_CONNECTION_TIMEOUT,
        cfg->idle_timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)cfg->max_header_bytes * 2,
        MHD_OPTION_THREAD_STACK_SIZE, (size_t)GW_THREAD_STACK_BYTES, MHD_OPTION_NOTIFY_COMPLETED,
        completed, s, MHD_OPTION_NOTIFY_CONNECTION, connection_event, s,
        MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_END);
}

/* The front over @cfg's address @ss. Returns 0 or -1 with @why. */
static int front_start(gw_server *s, const gw_config *cfg, const struct sockaddr_storage *ss,
                       char *why, size_t size)
{
    gw_front *f = &s->front;
    char reason[256];

    f->max_head = cfg->max_header_bytes;
    f->timeout_s = cfg->request_timeout_s;
    f->guard = &s->guard;
    f->hand = take;
    f->answered = answered_by_front;
    f->cls = s;
    if (gw_front_start(f, (const struct sockaddr *)ss,
                       ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                 : sizeof(struct sockaddr_in),
                       &s->port, reason, sizeof(reason)) == 0)
        return 0;
    snprintf(why, size, "cannot listen on %s port %u: %s", cfg->address, cfg->port, reason);
    return -1;
}

int gw_server_start(gw_server *s, gw_live *live, int log_format, char *why, size_t size)
{
    const gw_config *cfg = &live->boot;
    struct sockaddr_storage ss;

    s->live = live;
    s->log_format = log_format;
    atomic_init(&s->stopping, 0);
    if (socket_address(&ss, cfg) != 0) {
        snprintf(why, size, "http.address: \"%s\" is not an IPv4 or IPv6 address", cfg->address);
        return -1;
    }
    if (gw_guard_start(&s->guard, cfg->max_connections, cfg->idle_timeout_s,
                       cfg->request_timeout_s) != 0) {
        snprintf(why, size, "cannot start the connections' watchdog thread");
        return -1;
    }
    if ((s->daemon = daemon_start(s, cfg)) == NULL) {
        snprintf(why, size, "cannot start the HTTP server (see the line above)");
        gw_server_stop(s);
        return -1;
    }
    if (front_start(s, cfg, &ss, why, size) != 0) {
        gw_server_stop(s);
        return -1;
    }
    return 0;
}

unsigned int gw_server_drain(gw_server *s, unsigned int grace_s)
{
    atomic_store(&s->stopping, 1);
    gw_front_stop(&s->front);
    return gw_guard_drain(&s->guard, idem__now_ms() + (uint64_t)grace_s * 1000U);
}

void gw_server_stop(gw_server *s)
{
    gw_front_stop(&s->front);
    if (s->daemon != NULL)
        MHD_stop_daemon(s->daemon);
    s->daemon = NULL;
    gw_guard_stop(&s->guard);
}
