/* An `http` tool's declaration (README.md in this folder, "HTTP tools"): method, URL
 * template, headers (secrets from the environment, read once here), body template,
 * timeout and lease, the status classes and the retry policy. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config_http.h"
#include "config_resolver.h"
#include "upstream.h"

#define TIMEOUT_MAX_MS   600000U   /* ten minutes */
#define LEASE_MARGIN_MS  1000U     /* the least time a lease leaves for the report */
#define LEASE_DEFAULT_MS 10000U    /* added to the timeout by default */
#define LEASE_MAX_MS     86400000U /* the library's bound */
#define WAIT_MAX_MS      3600000U
#define ATTEMPTS_MAX     20U
/* The defaults (README.md in this folder, "HTTP tools"): an exchange of ten seconds at most,
 * three attempts with backoffs from 100 ms to 2 s, no retry 30 s after the first attempt. */
#define TIMEOUT_DEFAULT_MS    10000U
#define ATTEMPTS_DEFAULT      3U
#define BASE_DELAY_DEFAULT_MS 100U
#define MAX_DELAY_DEFAULT_MS  2000U
#define DEADLINE_DEFAULT_MS   30000U

static const char *const http_members[] = {
    "method",  "url",      "headers", "body",      "timeout_ms", "lease_ms", "key_header",
    "ca_file", "statuses", "retry",   "reference", "resolver",   NULL};
static const char *const retry_members[] = {"max_attempts", "base_delay_ms", "max_delay_ms",
                                            "deadline_ms", NULL};
static const char *const secret_members[] = {"env", "prefix", NULL};
/* Headers the gateway sets itself. */
static const char *const reserved_headers[] = {
    "Content-Type", "Content-Length", "Host", "Transfer-Encoding", "Expect", "Connection", NULL};

static int is_token(const char *s)
{
    if (*s == '\0')
        return 0;
    for (; *s != '\0'; s++) {
        if (!isalnum((unsigned char)*s) && strchr("!#$%&'*+-.^_`|~", *s) == NULL)
            return 0;
    }
    return 1;
}

/* Printable ASCII, tab and bytes above 127: no line break, no control character. */
static int is_field_value(const char *s)
{
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;

        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return 0;
    }
    return 1;
}

static int is_env_name(const char *s)
{
    if (!isalpha((unsigned char)*s) && *s != '_')
        return 0;
    for (; *s != '\0'; s++) {
        if (!isalnum((unsigned char)*s) && *s != '_')
            return 0;
    }
    return 1;
}

/* {"env": NAME, "prefix": TEXT}: the variable's value, read now; never in a message. */
static int read_secret(cfg_reader *r, gw_http_header *hd, const json_t *ref)
{
    const char *env = NULL, *prefix = "", *value;
    int rc;

    if ((rc = cfg_object(r, ref, secret_members)) != 0 ||
        (rc = cfg_string(r, ref, "env", 1, &env)) != 0 ||
        (rc = cfg_string(r, ref, "prefix", 0, &prefix)) != 0)
        return rc;
    if (!is_env_name(env))
        return cfg_refuse(r, "env", "\"%s\" is not an environment variable's name", env);
    if (!is_field_value(prefix))
        return cfg_refuse(r, "prefix", "must not hold a line break or control character");
    value = getenv(env);
    if (value == NULL || value[0] == '\0')
        return cfg_refuse(r, "env", "the environment variable %s is not set (or is empty)", env);
    if (!is_field_value(value))
        return cfg_refuse(r, "env",
                          "the environment variable %s holds a line break or control "
                          "character, which a header cannot carry",
                          env);
    if ((hd->value = malloc(strlen(prefix) + strlen(value) + 1)) == NULL)
        return cfg_refuse(r, NULL, "out of memory");
    strcpy(hd->value, prefix);
    strcat(hd->value, value);
    hd->secret = 1;
    return 0;
}

static int reserved(const gw_http *h, const char *name)
{
    if (strcasecmp(name, h->key_header) == 0)
        return 1;
    for (const char *const *n = reserved_headers; *n != NULL; n++) {
        if (strcasecmp(name, *n) == 0)
            return 1;
    }
    return 0;
}

static int read_header(cfg_reader *r, gw_http *h, const char *name, const json_t *v)
{
    gw_http_header *hd = &h->headers[h->nheaders++];

    hd->name = name;
    if (!is_token(name))
        return cfg_refuse(r, NULL, "not a header name");
    if (reserved(h, name))
        return cfg_refuse(r, NULL, "the gateway sets this header itself");
    if (json_is_object(v))
        return read_secret(r, hd, v);
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v) ||
        !is_field_value(json_string_value(v)))
        return cfg_refuse(r, NULL,
                          "must be a string without line breaks, or {\"env\": NAME} for a "
                          "secret");
    if ((hd->value = strdup(json_string_value(v))) == NULL)
        return cfg_refuse(r, NULL, "out of memory");
    return 0;
}

static int read_headers(cfg_reader *r, gw_http *h, const json_t *headers)
{
    const char *name;
    const json_t *v;
    size_t mark;
    int rc;

    if (headers == NULL)
        return 0;
    if (!json_is_object(headers))
        return cfg_refuse(r, "headers", "must be an object of header names and values");
    if ((h->headers = calloc(json_object_size(headers) + 1, sizeof(gw_http_header))) == NULL)
        return cfg_refuse(r, "headers", "out of memory");
    mark = gw_pointer_push(&r->at, "headers");
    json_object_foreach((json_t *)headers, name, v)
    {
        size_t at = gw_pointer_push(&r->at, name);

        if ((rc = read_header(r, h, name, v)) != 0)
            return rc;
        gw_pointer_pop(&r->at, at);
    }
    gw_pointer_pop(&r->at, mark);
    return 0;
}

static int read_method(cfg_reader *r, gw_http *h, const json_t *http)
{
    static const char *const methods[] = {"GET", "POST", "PUT", "PATCH", "DELETE", NULL};
    int rc;

    h->method = "POST";
    if ((rc = cfg_string(r, http, "method", 0, &h->method)) != 0)
        return rc;
    for (const char *const *m = methods; *m != NULL; m++) {
        if (strcmp(h->method, *m) == 0) {
            h->has_body = m[0][0] == 'P';
            return 0;
        }
    }
    return cfg_refuse(r, "method", "must be \"GET\", \"POST\", \"PUT\", \"PATCH\" or \"DELETE\"");
}

static int read_target(cfg_reader *r, gw_http *h, const json_t *http)
{
    char why[256];
    size_t mark;
    int rc;

    if ((rc = cfg_string(r, http, "url", 1, &h->url)) != 0)
        return rc;
    if (gw_upstream_check_url(h->url, why, sizeof(why)) != 0)
        return cfg_refuse(r, "url", "%s", why);
    h->body = json_object_get(http, "body");
    if (h->body != NULL && !h->has_body)
        return cfg_refuse(r, "body", "%s sends no body", h->method);
    mark = gw_pointer_push(&r->at, "body");
    if (h->body != NULL && gw_upstream_check_body(h->body, &r->at, why, sizeof(why)) != 0)
        return cfg_refuse(r, NULL, "%s", why);
    gw_pointer_pop(&r->at, mark);
    if ((rc = cfg_string(r, http, "ca_file", 0, &h->ca_file)) != 0)
        return rc;
    if (h->ca_file != NULL && access(h->ca_file, R_OK) != 0)
        return cfg_refuse(r, "ca_file", "cannot read %s", h->ca_file);
    if ((rc = cfg_string(r, http, "reference", 0, &h->reference)) != 0)
        return rc;
    if (h->reference != NULL && (h->reference[0] != '/' || !gw_upstream_pointer_ok(h->reference)))
        return cfg_refuse(r, "reference",
                          "must be a JSON Pointer into the answer, such as \"/id\"");
    if ((rc = cfg_string(r, http, "key_header", 0, &h->key_header)) != 0)
        return rc;
    if (!is_token(h->key_header))
        return cfg_refuse(r, "key_header", "not a header name");
    return 0;
}

static void default_classes(gw_http *h)
{
    for (int s = GW_STATUS_MIN; s <= GW_STATUS_MAX; s++) {
        if (s >= 200 && s < 300)
            h->classes[s] = GW_CLASS_SUCCESS;
        else if (s < 200)
            h->classes[s] = GW_CLASS_UNKNOWN;
        else if (s == 408 || s == 409 || s == 429 || s >= 500)
            h->classes[s] = GW_CLASS_TRANSIENT;
        else
            h->classes[s] = GW_CLASS_FINAL;
    }
}

static int class_named(const char *name)
{
    static const char *const names[] = {"success", "final", "transient", "unknown", NULL};

    for (int i = 0; name != NULL && names[i] != NULL; i++) {
        if (strcmp(name, names[i]) == 0)
            return i + 1;
    }
    return 0;
}

static int read_statuses(cfg_reader *r, gw_http *h, const json_t *statuses)
{
    const char *code;
    const json_t *v;
    size_t mark;

    default_classes(h);
    if (statuses == NULL)
        return 0;
    if (!json_is_object(statuses))
        return cfg_refuse(r, "statuses", "must be an object: {\"STATUS\": CLASS}");
    mark = gw_pointer_push(&r->at, "statuses");
    json_object_foreach((json_t *)statuses, code, v)
    {
        int cls = class_named(json_string_value(v));
        unsigned long s = strtoul(code, NULL, 10);

        if (strlen(code) != 3 || strspn(code, "0123456789") != 3 || s < 200 || s > GW_STATUS_MAX)
            return cfg_refuse(r, code, "not an HTTP status from 200 to 599");
        if (cls == 0)
            return cfg_refuse(r, code,
                              "must be \"success\", \"final\", \"transient\" or \"unknown\"");
        h->classes[s] = (unsigned char)cls;
    }
    gw_pointer_pop(&r->at, mark);
    return 0;
}

static int read_retry(cfg_reader *r, gw_http *h, const json_t *retry)
{
    unsigned long long attempts = ATTEMPTS_DEFAULT, base = BASE_DELAY_DEFAULT_MS;
    unsigned long long max = MAX_DELAY_DEFAULT_MS, deadline = DEADLINE_DEFAULT_MS;
    size_t mark = gw_pointer_push(&r->at, "retry");
    int rc;

    if (retry != NULL &&
        ((rc = cfg_object(r, retry, retry_members)) != 0 ||
         (rc = cfg_uint(r, retry, "max_attempts", 1, ATTEMPTS_MAX, &attempts)) != 0 ||
         (rc = cfg_uint(r, retry, "base_delay_ms", 1, WAIT_MAX_MS, &base)) != 0 ||
         (rc = cfg_uint(r, retry, "max_delay_ms", 1, WAIT_MAX_MS, &max)) != 0 ||
         (rc = cfg_uint(r, retry, "deadline_ms", 1, WAIT_MAX_MS, &deadline)) != 0))
        return rc;
    gw_pointer_pop(&r->at, mark);
    h->retry.max_attempts = (unsigned int)attempts;
    h->retry.base_delay_ms = (unsigned int)base;
    h->retry.max_delay_ms = (unsigned int)max;
    h->retry.deadline_ms = (unsigned int)deadline;
    return 0;
}

/* The timeout, and a lease that outlasts it by at least the report's margin. */
static int read_times(cfg_reader *r, gw_http *h, const json_t *http)
{
    unsigned long long timeout = TIMEOUT_DEFAULT_MS, lease = 0;
    int rc;

    if ((rc = cfg_uint(r, http, "timeout_ms", 1, TIMEOUT_MAX_MS, &timeout)) != 0 ||
        (rc = cfg_uint(r, http, "lease_ms", 1, LEASE_MAX_MS, &lease)) != 0)
        return rc;
    if (lease == 0)
        lease = timeout + LEASE_DEFAULT_MS;
    if (lease < timeout + LEASE_MARGIN_MS)
        return cfg_refuse(r, "lease_ms",
                          "%llu is too short: a lease lasts at least timeout_ms (%llu) + %u, "
                          "so that no other call takes the key over while this one waits",
                          lease, timeout, LEASE_MARGIN_MS);
    h->timeout_ms = (unsigned int)timeout;
    h->lease_ms = (unsigned int)lease;
    return 0;
}

static int read_http(cfg_reader *r, gw_http *h, const json_t *http)
{
    idem_retry_policy policy = IDEM_RETRY_POLICY_INIT;
    int rc;

    h->retry = policy;
    h->key_header = "Idempotency-Key";
    if ((rc = cfg_object(r, http, http_members)) != 0 || (rc = read_method(r, h, http)) != 0 ||
        (rc = read_target(r, h, http)) != 0 || (rc = read_times(r, h, http)) != 0 ||
        (rc = read_headers(r, h, json_object_get(http, "headers"))) != 0 ||
        (rc = read_statuses(r, h, json_object_get(http, "statuses"))) != 0 ||
        (rc = read_retry(r, h, json_object_get(http, "retry"))) != 0)
        return rc;
    return cfg_resolver(r, &h->resolver, json_object_get(http, "resolver"));
}

int cfg_http(cfg_reader *r, gw_http **out, const json_t *http)
{
    size_t mark = gw_pointer_push(&r->at, "http");
    int rc;

    if ((*out = calloc(1, sizeof(gw_http))) == NULL)
        return cfg_refuse(r, NULL, "out of memory");
    if ((rc = read_http(r, *out, http)) != 0)
        return rc;
    gw_pointer_pop(&r->at, mark);
    return 0;
}
