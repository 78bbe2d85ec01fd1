/* `http` tools: one call to another service (tools/idem-gateway/README.md, "HTTP tools"),
 * made as an idem external effect (include/idem/external.h). This module holds an http
 * tool's declaration as the configuration reads it (gw_http: plain data), builds the
 * upstream request from the arguments, and, through a client made from the declaration
 * (gw_upstream: libcurl and the external-effect path), sends it and classifies the answer;
 * the gateway's http_call.c runs the external-effect protocol around it, and resolver.h
 * asks the provider about a key with the same client. */
#ifndef IDEM_GATEWAY_UPSTREAM_H
#define IDEM_GATEWAY_UPSTREAM_H

#include <curl/curl.h>
#include <idem/idem.h>
#include <jansson.h>
#include <pthread.h>
#include <stddef.h>

#include "pointer.h"

/* What an upstream answer (or its absence) means for the operation. */
typedef enum gw_class {
    GW_CLASS_SUCCESS = 1,   /* done: the answer is the receipt */
    GW_CLASS_FINAL = 2,     /* refused for good: stored, replayed as rejected */
    GW_CLASS_TRANSIENT = 3, /* nothing was done: retried with the same downstream key */
    GW_CLASS_UNKNOWN = 4    /* may have been done: outcome_unknown, never sent again */
} gw_class;

#define GW_STATUS_MIN 100
#define GW_STATUS_MAX 599

typedef struct gw_http_header {
    const char *name; /* borrowed from the document */
    char *value;      /* owned; a secret's value when @secret: never logged nor echoed */
    int secret;
} gw_http_header;

/* An `http` tool's resolver as declared (config_resolver.c; tools/idem-gateway/README.md,
 * "Resolvers"): a status request about a downstream key, its answer read as an
 * idem_external_verdict. Plain data; resolver.h runs it. */
typedef struct gw_resolver {
    const char *url;          /* the template: {key} replaced by the percent-encoded key */
    const char *done_pointer; /* with done_value: done only when the answer holds it there */
    const json_t *done_value; /* borrowed from the document; NULL: no condition */
    const char *receipt;      /* a JSON Pointer to the receipt in the answer; NULL: all of it */
    unsigned int timeout_ms;  /* the longest the status request and the library wait */
    unsigned char verdicts[GW_STATUS_MAX + 1]; /* idem_external_verdict by status */
} gw_resolver;

/* An `http` tool's declaration (config_http.c): plain data, no handle. */
typedef struct gw_http {
    const char *method;      /* GET POST PUT PATCH DELETE; borrowed, as every string here */
    const char *url;         /* the template: {/json/pointer} replaced, percent-encoded */
    const json_t *body;      /* the body's template; NULL: the arguments themselves */
    int has_body;            /* POST, PUT and PATCH send a JSON body */
    const char *key_header;  /* the header that carries the downstream key */
    const char *ca_file;     /* NULL: the system's CAs */
    const char *reference;   /* a JSON Pointer to the provider's reference in its answer */
    gw_http_header *headers; /* owned */
    size_t nheaders;
    unsigned int timeout_ms;                  /* the whole exchange, connection included */
    unsigned int lease_ms;                    /* at least timeout_ms plus the report's margin */
    unsigned char classes[GW_STATUS_MAX + 1]; /* gw_class by status */
    idem_retry_policy retry;
    gw_resolver *resolver; /* owned; NULL: none */
} gw_http;

/* An http tool's client, made from its declaration by gw_upstream_open() (runtime.h). */
typedef struct gw_upstream {
    const gw_http *decl; /* borrowed: the configuration's, which outlives the client */
    idem_external *ext;  /* the external-effect path over the runtime's store; owned */
    CURLSH *share;       /* connections, DNS and TLS sessions reused across calls; owned */
    pthread_mutex_t locks[CURL_LOCK_DATA_LAST];
} gw_upstream;

/* Free a declaration (its headers' secrets wiped first); NULL is accepted. */
void gw_http_free(gw_http *h);

/* A request made from one call's arguments. */
typedef struct gw_upstream_request {
    char *url;         /* owned */
    char *body;        /* owned; NULL without a body */
    char *traceparent; /* owned; NULL: none (W3C Trace Context, sent as a header) */
    char *tracestate;  /* owned; NULL: none */
} gw_upstream_request;

/* What came back. */
typedef struct gw_upstream_result {
    gw_class cls;
    long status;        /* 0: no HTTP answer */
    char *content_type; /* owned; NULL when none */
    char *body;         /* owned (NUL-terminated) */
    size_t len;
    int sent;                         /* whether any byte of the request went out */
    int timed_out;                    /* no answer within the tool's timeout_ms */
    char error[CURL_ERROR_SIZE + 64]; /* what went wrong when no answer (no secrets) */
} gw_upstream_result;

/* Check a template at load: its {/pointer} placeholders well formed and only in the path
 * and query. Returns 0, or -1 with @why. */
int gw_upstream_check_url(const char *url, char *why, size_t size);
/* Whether @p is a JSON Pointer ("" or "/a/b", '~' escaped); and the value it names in
 * @doc, or NULL (borrowed). */
int gw_upstream_pointer_ok(const char *p);
const json_t *gw_upstream_resolve(const json_t *doc, const char *p);

/* Check a body template's {"$arg": "/pointer"} references (the first bad one in @at). */
int gw_upstream_check_body(const json_t *body, gw_pointer *at, char *why, size_t size);

/* Build the request for @args. Returns 0, or -1 with @at naming the argument and @why
 * (a missing value, one that is not a string, number or boolean in the URL). */
int gw_upstream_prepare(gw_upstream_request *out, const gw_http *h, const json_t *args,
                        gw_pointer *at, char *why, size_t size);
void gw_upstream_request_clear(gw_upstream_request *req);
/* The trace context @req carries (copies of @traceparent and @tracestate, each NULL for
 * none; checked by the caller). Returns 0, or -1 when out of memory. */
int gw_upstream_trace(gw_upstream_request *req, const char *traceparent, const char *tracestate);

/* Send @req with @key as the key header (and its trace context), at most once: libcurl's own resend
 * of a request on a reused connection that died is refused (the request counts as sent). Fills @out
 * (clear it with gw_upstream_result_clear()). */
void gw_upstream_send(gw_upstream_result *out, gw_upstream *u, const gw_upstream_request *req,
                      const char *key);
/* A status request: GET @url with the tool's headers (no key header, no body), at most
 * @timeout_ms. Fills @out as gw_upstream_send() does (its class is not used). */
void gw_upstream_ask(gw_upstream_result *out, gw_upstream *u, const char *url,
                     unsigned int timeout_ms);
void gw_upstream_result_clear(gw_upstream_result *res);

/* The answer as a JSON document: the body when it is JSON and @raw is 0; otherwise the
 * envelope {"status", "content_type", "body"} ("body_base64" when the bytes are not UTF-8).
 * New reference, NULL on no memory. */
json_t *gw_upstream_document(const gw_upstream_result *res, int raw);

/* The provider's reference at the tool's pointer (h->reference) in the answer @doc: a
 * string or an integer of 1 to GW_REFERENCE_MAX printable ASCII characters; otherwise NULL
 * (none). Points into @buf or is NULL. */
#define GW_REFERENCE_MAX 256 /* the longest the library stores (external.h) */
const char *gw_upstream_reference(char buf[GW_REFERENCE_MAX + 1], const gw_http *h,
                                  const json_t *doc);

/* A resolver's URL template with {key} replaced by @key, percent-encoded
 * (upstream_request.c). Returns 0 with *@out owned by the caller, or -1 (no memory). */
int gw_upstream_key_url(char **out, const char *tmpl, const char *key);

/* The client of the declaration @h (borrowed: it must outlive the client) and its
 * external-effect path over @store; before any thread. @out: caller owns,
 * gw_upstream_close(). Returns 0, or -1 with @why. */
int gw_upstream_open(gw_upstream **out, const gw_http *h, idem_store *store, char *why,
                     size_t size);
/* Free what gw_upstream_open() made (before the store goes), once nothing uses it: no call
 * and no status request under way (resolver.h stops its own first); NULL is accepted. */
void gw_upstream_close(gw_upstream *u);

#endif
