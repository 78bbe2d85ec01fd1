/* The upstream client: libcurl, connections shared across calls, a request sent at most
 * once per attempt, its answer classified. */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "upstream.h"

/* A connection idle longer than this is not reused: servers commonly close idle ones after
 * 5 s, and a request sent on one they have just closed has no answer, which counts as sent
 * (unknown) since it cannot be resent (prereq() below). */
#define REUSE_IDLE_MAX_S 4L

/* A trace context header's line: the name and a tracestate of up to 512 bytes (trace.h). */
#define TRACE_LINE_MAX 1024

/* The longest upstream answer kept; a longer one ends the exchange (after sending: unknown). */
#define RESPONSE_MAX_BYTES ((size_t)1 << 20)

typedef struct exchange {
    gw_upstream_result *res;
    size_t cap;
    int too_long;
} exchange;

/* Called by libcurl just before it sends the request, on each connection it uses. A second
 * call is libcurl resending on a fresh connection after a reused one died without an
 * answer, which a provider may take as a second request: refused. */
static int prereq(void *cls, char *ip, char *local_ip, int remote_port, int local_port)
{
    exchange *x = cls;

    if (x->res->sent)
        return CURL_PREREQFUNC_ABORT;
    x->res->sent = 1;
    return CURL_PREREQFUNC_OK;
}

static size_t on_body(char *data, size_t size, size_t n, void *cls)
{
    exchange *x = cls;
    gw_upstream_result *res = x->res;

    n *= size;
    if (n > RESPONSE_MAX_BYTES - res->len) {
        x->too_long = 1;
        return 0;
    }
    if (res->len + n + 1 > x->cap) {
        size_t cap = x->cap == 0 ? 4096 : x->cap;
        char *grown;

        while (cap < res->len + n + 1)
            cap *= 2;
        if ((grown = realloc(res->body, cap)) == NULL)
            return 0;
        res->body = grown;
        x->cap = cap;
    }
    memcpy(res->body + res->len, data, n);
    res->len += n;
    res->body[res->len] = '\0';
    return n;
}

/* The header lines: the configured ones, the key (when @key is not NULL), and the body's
 * type. NULL on no memory. */
static struct curl_slist *header_list(const gw_http *h, const char *key, int has_body)
{
    struct curl_slist *list = NULL, *next;
    char line[8192];

    for (size_t i = 0; i <= h->nheaders + 2; i++) {
        if (i < h->nheaders)
            snprintf(line, sizeof(line), "%s: %s", h->headers[i].name, h->headers[i].value);
        else if (i == h->nheaders && key != NULL)
            snprintf(line, sizeof(line), "%s: %s", h->key_header, key);
        else if (i == h->nheaders)
            continue;
        else if (i == h->nheaders + 1)
            snprintf(line, sizeof(line), "%s",
                     has_body ? "Content-Type: application/json" : "Content-Type:");
        else
            snprintf(line, sizeof(line), "Expect:"); /* no 100-continue round trip */
        next = curl_slist_append(list, line);
        OPENSSL_cleanse(line, sizeof(line));
        if (next == NULL) {
            curl_slist_free_all(list);
            return NULL;
        }
        list = next;
    }
    return list;
}

/* @list with the trace context's lines of @req (NULL: none) appended; NULL on no memory
 * (@list is then freed). */
static struct curl_slist *trace_lines(struct curl_slist *list, const gw_upstream_request *req)
{
    const char *const names[] = {"traceparent", "tracestate"};
    const char *values[] = {req != NULL ? req->traceparent : NULL,
                            req != NULL ? req->tracestate : NULL};
    struct curl_slist *next;
    char line[TRACE_LINE_MAX];

    for (size_t i = 0; list != NULL && i < 2; i++) {
        if (values[i] == NULL)
            continue;
        snprintf(line, sizeof(line), "%s: %s", names[i], values[i]);
        if ((next = curl_slist_append(list, line)) == NULL)
            curl_slist_free_all(list);
        list = next;
    }
    return list;
}

/* One request: @method to @url with @body (NULL: none). */
typedef struct outgoing {
    const char *method;
    const char *url;
    const char *body;
    unsigned int timeout_ms;
    const gw_upstream_request *trace; /* its trace context; NULL: none (a status request) */
} outgoing;

static void set_options(CURL *c, const gw_upstream *u, const outgoing *req,
                        struct curl_slist *headers, exchange *x, char *errbuf)
{
    const gw_http *h = u->decl;

    curl_easy_setopt(c, CURLOPT_URL, req->url);
    curl_easy_setopt(c, CURLOPT_SHARE, u->share);
    curl_easy_setopt(c, CURLOPT_MAXAGE_CONN, REUSE_IDLE_MAX_S);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    if (h->ca_file != NULL)
        curl_easy_setopt(c, CURLOPT_CAINFO, h->ca_file);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)req->timeout_ms);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(c, CURLOPT_PREREQFUNCTION, prereq);
    curl_easy_setopt(c, CURLOPT_PREREQDATA, x);
    if (req->body != NULL) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(req->body));
    }
    if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "POST") != 0)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req->method);
}

/* After the exchange: the status's class, or, without an answer, transient when nothing
 * was sent and unknown after. */
static void classify(gw_upstream_result *res, const gw_http *h, CURL *c, CURLcode rc,
                     const exchange *x, const char *errbuf)
{
    const char *type = NULL;

    if (rc == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &res->status);
        curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &type);
        res->content_type = type != NULL ? strdup(type) : NULL;
        res->cls = res->status >= GW_STATUS_MIN && res->status <= GW_STATUS_MAX
                       ? (gw_class)h->classes[res->status]
                       : GW_CLASS_UNKNOWN;
        return;
    }
    res->status = 0;
    res->cls = res->sent ? GW_CLASS_UNKNOWN : GW_CLASS_TRANSIENT;
    res->timed_out = rc == CURLE_OPERATION_TIMEDOUT;
    snprintf(res->error, sizeof(res->error), "%s%s",
             x->too_long                       ? "the answer is longer than 1 MiB: "
             : rc == CURLE_ABORTED_BY_CALLBACK ? "the connection was lost after sending: "
                                               : "",
             errbuf[0] != '\0' ? errbuf : curl_easy_strerror(rc));
}

static void exchange_once(gw_upstream_result *out, gw_upstream *u, const outgoing *req,
                          const char *key)
{
    const gw_http *h = u->decl;
    exchange x = {out, 0, 0};
    char errbuf[CURL_ERROR_SIZE] = "";
    struct curl_slist *headers = NULL;
    CURL *c = curl_easy_init();
    CURLcode rc;

    memset(out, 0, sizeof(*out));
    if (c == NULL ||
        (headers = trace_lines(header_list(h, key, req->body != NULL), req->trace)) == NULL) {
        out->cls = GW_CLASS_TRANSIENT;
        snprintf(out->error, sizeof(out->error), "out of memory before sending");
        curl_easy_cleanup(c);
        return;
    }
    set_options(c, u, req, headers, &x, errbuf);
    rc = curl_easy_perform(c);
    classify(out, h, c, rc, &x, errbuf);
    curl_easy_cleanup(c);
    curl_slist_free_all(headers);
}

void gw_upstream_send(gw_upstream_result *out, gw_upstream *u, const gw_upstream_request *req,
                      const char *key)
{
    outgoing o = {u->decl->method, req->url, req->body, u->decl->timeout_ms, req};

    exchange_once(out, u, &o, key);
}

void gw_upstream_ask(gw_upstream_result *out, gw_upstream *u, const char *url,
                     unsigned int timeout_ms)
{
    outgoing o = {"GET", url, NULL, timeout_ms, NULL};

    exchange_once(out, u, &o, NULL);
}

void gw_upstream_result_clear(gw_upstream_result *res)
{
    free(res->content_type);
    free(res->body);
    res->content_type = res->body = NULL;
    res->len = 0;
}

/* The bytes as a JSON string, or base64 when they are not UTF-8. */
static int set_bytes(json_t *env, const gw_upstream_result *res)
{
    json_t *s = json_stringn(res->len > 0 ? res->body : "", res->len);
    unsigned char *b64;
    int rc;

    if (s != NULL)
        return json_object_set_new(env, "body", s);
    if ((b64 = malloc(4 * ((res->len + 2) / 3) + 1)) == NULL)
        return -1;
    EVP_EncodeBlock(b64, (const unsigned char *)res->body, (int)res->len);
    rc = json_object_set_new(env, "body_base64", json_string((char *)b64));
    free(b64);
    return rc;
}

json_t *gw_upstream_document(const gw_upstream_result *res, int raw)
{
    json_t *doc = NULL;

    if (!raw && res->len > 0)
        doc = json_loadb(res->body, res->len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
    if (doc != NULL)
        return doc;
    doc = json_pack("{s:i, s:s?}", "status", (int)res->status, "content_type", res->content_type);
    if (doc != NULL && set_bytes(doc, res) != 0) {
        json_decref(doc);
        doc = NULL;
    }
    return doc;
}

const char *gw_upstream_reference(char buf[GW_REFERENCE_MAX + 1], const gw_http *h,
                                  const json_t *doc)
{
    const json_t *v = h->reference != NULL ? gw_upstream_resolve(doc, h->reference) : NULL;
    size_t n;

    if (json_is_integer(v))
        snprintf(buf, GW_REFERENCE_MAX + 1, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else if (json_is_string(v) && json_string_length(v) <= GW_REFERENCE_MAX)
        memcpy(buf, json_string_value(v), json_string_length(v) + 1);
    else
        return NULL;
    n = strlen(buf);
    if (n == 0 || (json_is_string(v) && n != json_string_length(v)))
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (buf[i] < 0x21 || buf[i] > 0x7e)
            return NULL;
    }
    return buf;
}

static void lock(CURL *c, curl_lock_data data, curl_lock_access access, void *cls)
{
    gw_upstream *u = cls;

    pthread_mutex_lock(&u->locks[data]);
}

static void unlock(CURL *c, curl_lock_data data, void *cls)
{
    gw_upstream *u = cls;

    pthread_mutex_unlock(&u->locks[data]);
}

static int open_share(gw_upstream *u)
{
    if ((u->share = curl_share_init()) == NULL)
        return -1;
    if (curl_share_setopt(u->share, CURLSHOPT_LOCKFUNC, lock) != CURLSHE_OK ||
        curl_share_setopt(u->share, CURLSHOPT_UNLOCKFUNC, unlock) != CURLSHE_OK ||
        curl_share_setopt(u->share, CURLSHOPT_USERDATA, u) != CURLSHE_OK ||
        curl_share_setopt(u->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT) != CURLSHE_OK ||
        curl_share_setopt(u->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) != CURLSHE_OK ||
        curl_share_setopt(u->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK)
        return -1;
    return 0;
}

/* The client, its locks ready, before libcurl: gw_upstream_close() may then free it. */
static gw_upstream *client_new(const gw_http *h)
{
    gw_upstream *u = calloc(1, sizeof(*u));

    if (u == NULL)
        return NULL;
    u->decl = h;
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_init(&u->locks[i], NULL);
    return u;
}

int gw_upstream_open(gw_upstream **out, const gw_http *h, idem_store *store, char *why, size_t size)
{
    idem_external_options opts = IDEM_EXTERNAL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    gw_upstream *u = NULL;
    int rc = -1;

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return snprintf(why, size, "libcurl cannot be initialized"), -1;
    if ((u = client_new(h)) == NULL) {
        snprintf(why, size, "out of memory");
        curl_global_cleanup();
        return -1;
    }
    opts.lease_ms = h->lease_ms;
    if (open_share(u) != 0)
        snprintf(why, size, "libcurl's connection sharing cannot be set up");
    else if (idem_external_new(&u->ext, store, &opts, &err) != 0)
        snprintf(why, size, "cannot create the external-effect path: %s%s%s", err.field,
                 err.field[0] != '\0' ? ": " : "", err.message);
    else
        rc = 0;
    if (rc != 0)
        gw_upstream_close(u);
    else
        *out = u;
    return rc;
}

void gw_upstream_close(gw_upstream *u)
{
    if (u == NULL)
        return;
    idem_external_free(u->ext);
    if (u->share != NULL)
        curl_share_cleanup(u->share);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_destroy(&u->locks[i]);
    free(u);
    curl_global_cleanup();
}

void gw_http_free(gw_http *h)
{
    if (h == NULL)
        return;
    for (size_t i = 0; i < h->nheaders; i++) {
        if (h->headers[i].value != NULL)
            OPENSSL_cleanse(h->headers[i].value, strlen(h->headers[i].value));
        free(h->headers[i].value);
    }
    free(h->headers);
    free(h->resolver); /* plain data: its strings and values are the document's */
    free(h);
}
