/* An upstream request from a call's arguments: the URL template's {/pointer}
 * placeholders (percent-encoded values) and the body template's {"$arg": "/pointer"}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "upstream.h"

/* A growing string. */
typedef struct buf {
    char *s;
    size_t len, cap;
    int failed;
} buf;

static void put(buf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap == 0 ? 256 : b->cap;
        char *grown;

        while (cap < b->len + n + 1)
            cap *= 2;
        if ((grown = realloc(b->s, cap)) == NULL) {
            b->failed = 1;
            return;
        }
        b->s = grown;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

/* RFC 3986 unreserved characters stay; every other byte is %XX. */
static void put_encoded(buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";

    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[3] = {'%', hex[c >> 4], hex[c & 15]};

        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~')
            put(b, (const char *)&s[i], 1);
        else
            put(b, esc, 3);
    }
}

/* Whether @p (@n bytes) is a JSON Pointer: empty, or '/'-separated tokens whose '~' is
 * followed by 0 or 1. */
static int pointer_ok(const char *p, size_t n)
{
    if (n == 0)
        return 1;
    if (p[0] != '/')
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '~' && (i + 1 == n || (p[i + 1] != '0' && p[i + 1] != '1')))
            return 0;
        if (p[i] == '{' || p[i] == '}')
            return 0;
    }
    return 1;
}

/* The value at pointer @p (@n bytes) in @doc, or NULL. */
static const json_t *resolve(const json_t *doc, const char *p, size_t n)
{
    char token[512];

    while (doc != NULL && n > 0) {
        size_t k = 1, t = 0;

        for (; k < n && p[k] != '/'; k++) {
            if (t + 1 >= sizeof(token))
                return NULL;
            if (p[k] == '~') {
                token[t++] = p[k + 1] == '1' ? '/' : '~';
                k++;
            } else {
                token[t++] = p[k];
            }
        }
        token[t] = '\0';
        if (json_is_object(doc)) {
            doc = json_object_get(doc, token);
        } else if (json_is_array(doc) && t > 0 && strspn(token, "0123456789") == t &&
                   (t == 1 || token[0] != '0')) {
            doc = json_array_get(doc, strtoul(token, NULL, 10));
        } else {
            doc = NULL;
        }
        p += k;
        n -= k;
    }
    return doc;
}

int gw_upstream_pointer_ok(const char *p)
{
    return pointer_ok(p, strlen(p));
}

const json_t *gw_upstream_resolve(const json_t *doc, const char *p)
{
    return resolve(doc, p, strlen(p));
}

int gw_upstream_check_url(const char *url, char *why, size_t size)
{
    const char *rest, *path, *open;

    if (strncmp(url, "http://", 7) == 0)
        rest = url + 7;
    else if (strncmp(url, "https://", 8) == 0)
        rest = url + 8;
    else
        return snprintf(why, size, "must start with https:// or http://"), -1;
    path = rest + strcspn(rest, "/?#");
    if (path == rest || memchr(rest, '{', (size_t)(path - rest)) != NULL)
        return snprintf(why, size, "needs a host, without {placeholders} before the path"), -1;
    if (strpbrk(url, " \t\r\n") != NULL)
        return snprintf(why, size, "contains white space"), -1;
    for (open = strchr(path, '{'); open != NULL; open = strchr(open + 1, '{')) {
        const char *close = strchr(open, '}');

        if (close == NULL || close == open + 1 || !pointer_ok(open + 1, (size_t)(close - open - 1)))
            return snprintf(why, size,
                            "a placeholder is {/json/pointer}: a '/' then the argument's path, "
                            "'~' escaped as ~0 and '/' as ~1"),
                   -1;
        open = close;
    }
    if (strchr(path, '}') != NULL && strchr(path, '{') == NULL)
        return snprintf(why, size, "has a '}' without its '{'"), -1;
    return 0;
}

/* {"$arg": POINTER}: one member, a string. */
static const char *arg_reference(const json_t *v)
{
    const json_t *p = json_object_get(v, "$arg");

    return json_is_object(v) && json_object_size(v) == 1 && json_is_string(p) ? json_string_value(p)
                                                                              : NULL;
}

int gw_upstream_check_body(const json_t *body, gw_pointer *at, char *why, size_t size)
{
    const char *key;
    const json_t *v;
    size_t i, mark;

    if (json_is_object(body) && json_object_get(body, "$arg") != NULL) {
        const char *p = arg_reference(body);

        if (p == NULL || p[0] == '\0' || !pointer_ok(p, strlen(p)))
            return snprintf(why, size,
                            "{\"$arg\": POINTER} stands for an argument: one member, a JSON "
                            "Pointer such as \"/to\""),
                   -1;
        return 0;
    }
    if (json_is_object(body)) {
        json_object_foreach((json_t *)body, key, v)
        {
            mark = gw_pointer_push(at, key);
            if (gw_upstream_check_body(v, at, why, size) != 0)
                return -1;
            gw_pointer_pop(at, mark);
        }
    } else if (json_is_array(body)) {
        json_array_foreach(body, i, v)
        {
            mark = gw_pointer_push_index(at, i);
            if (gw_upstream_check_body(v, at, why, size) != 0)
                return -1;
            gw_pointer_pop(at, mark);
        }
    }
    return 0;
}

/* One placeholder's value as URL text; -1 when it cannot be one. */
static int put_argument(buf *b, const json_t *args, const char *p, size_t n, gw_pointer *at,
                        char *why, size_t size)
{
    const json_t *v = resolve(args, p, n);
    char num[64];

    snprintf(at->text, sizeof(at->text), "%.*s", (int)n, p);
    at->len = strlen(at->text);
    if (json_is_string(v)) {
        put_encoded(b, json_string_value(v), json_string_length(v));
    } else if (json_is_integer(v)) {
        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        put_encoded(b, num, strlen(num));
    } else if (json_is_real(v)) {
        snprintf(num, sizeof(num), "%.17g", json_real_value(v));
        put_encoded(b, num, strlen(num));
    } else if (json_is_boolean(v)) {
        put(b, json_is_true(v) ? "true" : "false", json_is_true(v) ? 4 : 5);
    } else {
        snprintf(why, size, "%s: the URL needs this argument, a string, number or boolean",
                 at->text);
        return -1;
    }
    return 0;
}

static int build_url(char **out, const char *tmpl, const json_t *args, gw_pointer *at, char *why,
                     size_t size)
{
    buf b = {0};
    const char *s = tmpl, *open;

    while ((open = strchr(s, '{')) != NULL) {
        const char *close = strchr(open, '}');

        put(&b, s, (size_t)(open - s));
        if (put_argument(&b, args, open + 1, (size_t)(close - open - 1), at, why, size) != 0) {
            free(b.s);
            return -1;
        }
        s = close + 1;
    }
    put(&b, s, strlen(s));
    if (b.failed) {
        free(b.s);
        return snprintf(why, size, "out of memory"), -1;
    }
    *out = b.s;
    return 0;
}

/* The body template with its references replaced; a reference to nothing leaves its
 * member out (null in an array). New reference or NULL (memory). */
static json_t *fill(const json_t *tmpl, const json_t *args)
{
    const char *p = arg_reference(tmpl), *key;
    const json_t *v;
    json_t *out;
    size_t i;

    if (p != NULL) {
        v = resolve(args, p, strlen(p));
        return v != NULL ? json_deep_copy(v) : json_null();
    }
    if (json_is_object(tmpl)) {
        out = json_object();
        json_object_foreach((json_t *)tmpl, key, v)
        {
            const char *ref = arg_reference(v);

            if (ref != NULL && resolve(args, ref, strlen(ref)) == NULL)
                continue;
            if (out != NULL && json_object_set_new(out, key, fill(v, args)) != 0)
                out = (json_decref(out), NULL);
        }
        return out;
    }
    if (json_is_array(tmpl)) {
        out = json_array();
        json_array_foreach(tmpl, i, v)
        {
            json_t *e = fill(v, args);

            if (out != NULL && json_array_append_new(out, e != NULL ? e : json_null()) != 0)
                out = (json_decref(out), NULL);
        }
        return out;
    }
    return json_deep_copy(tmpl);
}

int gw_upstream_prepare(gw_upstream_request *out, const gw_http *h, const json_t *args,
                        gw_pointer *at, char *why, size_t size)
{
    gw_upstream_request req = {NULL, NULL, NULL, NULL};
    json_t *body = NULL;

    if (build_url(&req.url, h->url, args, at, why, size) != 0)
        return -1;
    if (h->has_body) {
        body = h->body != NULL ? fill(h->body, args) : json_incref((json_t *)args);
        if (body != NULL)
            req.body = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
        json_decref(body);
        if (req.body == NULL) {
            gw_upstream_request_clear(&req);
            gw_pointer_init(at);
            return snprintf(why, size, "out of memory"), -1;
        }
    }
    *out = req;
    return 0;
}

void gw_upstream_request_clear(gw_upstream_request *req)
{
    free(req->url);
    free(req->body);
    free(req->traceparent);
    free(req->tracestate);
    req->url = req->body = req->traceparent = req->tracestate = NULL;
}

int gw_upstream_trace(gw_upstream_request *req, const char *traceparent, const char *tracestate)
{
    char *parent = traceparent != NULL ? strdup(traceparent) : NULL;
    char *state = tracestate != NULL ? strdup(tracestate) : NULL;

    if ((traceparent != NULL && parent == NULL) || (tracestate != NULL && state == NULL)) {
        free(parent);
        free(state);
        return -1;
    }
    free(req->traceparent);
    free(req->tracestate);
    req->traceparent = parent;
    req->tracestate = state;
    return 0;
}

int gw_upstream_key_url(char **out, const char *tmpl, const char *key)
{
    static const char placeholder[] = "{key}";
    buf b = {0};
    const char *s = tmpl, *at;

    while ((at = strstr(s, placeholder)) != NULL) {
        put(&b, s, (size_t)(at - s));
        put_encoded(&b, key, strlen(key));
        s = at + strlen(placeholder);
    }
    put(&b, s, strlen(s));
    if (b.failed) {
        free(b.s);
        return -1;
    }
    *out = b.s;
    return 0;
}
