/* An `http` tool's resolver (README.md in this folder, "Resolvers"): the status request's
 * URL template, which statuses mean done, not done and failed, the condition on a done
 * answer, where its receipt is, and the time limit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_resolver.h"
#include "upstream.h"

#define TIMEOUT_DEFAULT_MS 2000U   /* the library's default (external.h) */
#define TIMEOUT_MAX_MS     600000U /* and its bound */
#define DONE_DEFAULT       200     /* done_status's default */
#define NOT_DONE_DEFAULT   404     /* not_done_status's default */

static const char *const resolver_members[] = {
    "url",           "done_status", "done_when", "receipt", "not_done_status",
    "failed_status", "timeout_ms",  NULL};
static const char *const when_members[] = {"pointer", "equals", NULL};
static const char *const verdict_names[] = {"", "done_status", "failed_status", "not_done_status"};

/* Like an http tool's URL, but its only placeholder is {key}, at least once. */
static int check_url(cfg_reader *r, const char *url)
{
    const char *rest = strncmp(url, "https://", 8) == 0  ? url + 8
                       : strncmp(url, "http://", 7) == 0 ? url + 7
                                                         : NULL;
    const char *path, *s;
    int keys = 0;

    if (rest == NULL)
        return cfg_refuse(r, "url", "must start with https:// or http://");
    path = rest + strcspn(rest, "/?#");
    if (path == rest || memchr(rest, '{', (size_t)(path - rest)) != NULL)
        return cfg_refuse(r, "url", "needs a host, without {key} before the path");
    if (strpbrk(url, " \t\r\n") != NULL)
        return cfg_refuse(r, "url", "contains white space");
    for (s = path; (s = strpbrk(s, "{}")) != NULL; s += 5, keys++) {
        if (strncmp(s, "{key}", 5) != 0)
            return cfg_refuse(r, "url",
                              "its only placeholder is {key}, the percent-encoded downstream key");
    }
    if (keys == 0)
        return cfg_refuse(r, "url",
                          "must hold {key}: the downstream key the provider is asked about");
    return 0;
}

/* When the array @key is absent, its default [@status], once the given arrays are read. */
static int default_status(cfg_reader *r, gw_resolver *res, const json_t *obj, const char *key,
                          idem_external_verdict verdict, int status)
{
    if (json_object_get(obj, key) != NULL)
        return 0;
    if (res->verdicts[status] != IDEM_PROBE_UNKNOWN)
        return cfg_refuse(r, key, "is needed: its default [%d] is also in %s", status,
                          verdict_names[res->verdicts[status]]);
    res->verdicts[status] = (unsigned char)verdict;
    return 0;
}

/* The array @key of HTTP statuses (absent: nothing), each marked @verdict. */
static int read_statuses(cfg_reader *r, gw_resolver *res, const json_t *obj, const char *key,
                         idem_external_verdict verdict)
{
    const json_t *list = json_object_get(obj, key), *v;
    size_t i, mark;

    if (list == NULL)
        return 0;
    if (!json_is_array(list))
        return cfg_refuse(r, key, "must be an array of HTTP statuses, such as [404]");
    mark = gw_pointer_push(&r->at, key);
    json_array_foreach(list, i, v)
    {
        json_int_t s = json_integer_value(v);
        size_t at = gw_pointer_push_index(&r->at, i);

        if (!json_is_integer(v) || s < GW_STATUS_MIN || s > GW_STATUS_MAX)
            return cfg_refuse(r, NULL, "not an HTTP status from 100 to 599");
        if (res->verdicts[s] != IDEM_PROBE_UNKNOWN)
            return cfg_refuse(r, NULL, "%d is already in %s", (int)s,
                              verdict_names[res->verdicts[s]]);
        res->verdicts[s] = (unsigned char)verdict;
        gw_pointer_pop(&r->at, at);
    }
    gw_pointer_pop(&r->at, mark);
    return 0;
}

static int read_pointer(cfg_reader *r, const json_t *obj, const char *key, const char **out)
{
    int rc = cfg_string(r, obj, key, 0, out);

    if (rc == 0 && *out != NULL && !gw_upstream_pointer_ok(*out))
        return cfg_refuse(r, key, "must be a JSON Pointer into the answer, such as \"/message\"");
    return rc;
}

/* {"pointer": P, "equals": VALUE}: done only when the answer holds VALUE at P. */
static int read_when(cfg_reader *r, gw_resolver *res, const json_t *when)
{
    size_t mark = gw_pointer_push(&r->at, "done_when");
    int rc;

    if ((rc = cfg_object(r, when, when_members)) != 0 ||
        (rc = read_pointer(r, when, "pointer", &res->done_pointer)) != 0)
        return rc;
    if (res->done_pointer == NULL)
        return cfg_refuse(r, "pointer", "is required");
    if ((res->done_value = json_object_get(when, "equals")) == NULL)
        return cfg_refuse(r, "equals", "is required: the value that means done");
    gw_pointer_pop(&r->at, mark);
    return 0;
}

static int read_resolver(cfg_reader *r, gw_resolver *res, const json_t *obj)
{
    unsigned long long timeout = TIMEOUT_DEFAULT_MS;
    const json_t *when = json_object_get(obj, "done_when");
    int rc;

    if ((rc = cfg_object(r, obj, resolver_members)) != 0 ||
        (rc = cfg_string(r, obj, "url", 1, &res->url)) != 0 || (rc = check_url(r, res->url)) != 0 ||
        (rc = read_statuses(r, res, obj, "done_status", IDEM_PROBE_DONE)) != 0 ||
        (rc = read_statuses(r, res, obj, "not_done_status", IDEM_PROBE_NOT_DONE)) != 0 ||
        (rc = read_statuses(r, res, obj, "failed_status", IDEM_PROBE_FAILED)) != 0 ||
        (rc = default_status(r, res, obj, "done_status", IDEM_PROBE_DONE, DONE_DEFAULT)) != 0 ||
        (rc = default_status(r, res, obj, "not_done_status", IDEM_PROBE_NOT_DONE,
                             NOT_DONE_DEFAULT)) != 0 ||
        (rc = read_pointer(r, obj, "receipt", &res->receipt)) != 0 ||
        (when != NULL && (rc = read_when(r, res, when)) != 0) ||
        (rc = cfg_uint(r, obj, "timeout_ms", 1, TIMEOUT_MAX_MS, &timeout)) != 0)
        return rc;
    res->timeout_ms = (unsigned int)timeout;
    return 0;
}

int cfg_resolver(cfg_reader *r, gw_resolver **out, const json_t *resolver)
{
    size_t mark;
    int rc;

    *out = NULL;
    if (resolver == NULL)
        return 0;
    if ((*out = calloc(1, sizeof(gw_resolver))) == NULL)
        return cfg_refuse(r, "resolver", "out of memory");
    mark = gw_pointer_push(&r->at, "resolver");
    if ((rc = read_resolver(r, *out, resolver)) != 0)
        return rc;
    gw_pointer_pop(&r->at, mark);
    return 0;
}
