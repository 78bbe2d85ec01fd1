/* HTTP answers and RFC 9457 problem documents. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reply.h"

/* @s into @value as vsnprintf() would put it (cut to fit). */
static void copy_value(char value[], size_t size, const char *s)
{
    size_t n = strnlen(s, size - 1);

    memcpy(value, s, n);
    value[n] = '\0';
}

void gw_reply_header(gw_reply *r, const char *name, const char *fmt, ...)
{
    char *value;
    va_list ap;

    if (r->nheaders >= GW_REPLY_HEADERS)
        return;
    r->headers[r->nheaders].name = name;
    value = r->headers[r->nheaders].value;
    va_start(ap, fmt);
    /* Most values are a string or a constant: copied, not formatted (every answer has a few). */
    if (strcmp(fmt, "%s") == 0)
        copy_value(value, sizeof(r->headers[0].value), va_arg(ap, const char *));
    else if (strchr(fmt, '%') == NULL)
        copy_value(value, sizeof(r->headers[0].value), fmt);
    else
        vsnprintf(value, sizeof(r->headers[0].value), fmt, ap);
    va_end(ap);
    r->nheaders++;
}

int gw_reply_body(gw_reply *r, unsigned int status, const char *content_type, const char *body,
                  size_t len)
{
    char *copy = malloc(len + 1);

    if (copy == NULL)
        return -1;
    memcpy(copy, body, len);
    copy[len] = '\0';
    free(r->body);
    r->body = copy;
    r->len = len;
    r->status = status;
    r->content_type = content_type;
    return 0;
}

int gw_problem(gw_reply *r, unsigned int status, const char *type, const char *title,
               const char *detail, json_t *extra)
{
    char uri[96];
    json_t *doc;
    char *text = NULL;
    int rc = -1;

    snprintf(uri, sizeof(uri), GW_PROBLEM_PREFIX "%s", type);
    doc = json_pack("{s:s, s:s, s:i, s:s}", "type", uri, "title", title, "status", (int)status,
                    "detail", detail);
    if (doc != NULL && (extra == NULL || json_object_update(doc, extra) == 0))
        text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (text != NULL)
        rc = gw_reply_body(r, status, "application/problem+json", text, strlen(text));
    free(text);
    json_decref(doc);
    json_decref(extra);
    return rc;
}

void gw_reply_clear(gw_reply *r)
{
    free(r->body);
    r->status = 0;
    r->content_type = NULL;
    r->body = NULL;
    r->len = 0;
    r->nheaders = 0; /* the slots are not cleared: an answer's are 2 KiB */
}

const char *gw_printable(char *out, size_t size, const char *text)
{
    size_t n = 0;

    for (; text[n] != '\0' && n + 1 < size; n++)
        out[n] = text[n] >= 0x20 && text[n] < 0x7f ? text[n] : '?';
    out[n] = '\0';
    return out;
}

void gw_internal_error(gw_reply *r)
{
    static const char body[] = "{\"type\":\"" GW_PROBLEM_PREFIX "internal\",\"title\":\"Internal "
                               "error\",\"status\":500,\"detail\":\"the gateway ran out of "
                               "memory\"}";

    if (gw_reply_body(r, 500, "application/problem+json", body, sizeof(body) - 1) != 0)
        r->status = 500; /* no body: libmicrohttpd's empty answer */
}
