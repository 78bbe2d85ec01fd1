/* Typed members of the configuration document, refused with their JSON Pointer. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config_read.h"

int cfg_refuse(cfg_reader *r, const char *member, const char *fmt, ...)
{
    size_t mark = r->at.len, n;
    va_list ap;

    if (member != NULL)
        mark = gw_pointer_push(&r->at, member);
    n = (size_t)snprintf(r->why, r->size, "%s: ", r->at.len > 0 ? r->at.text : "(the document)");
    gw_pointer_pop(&r->at, mark);
    if (n < r->size) {
        va_start(ap, fmt);
        vsnprintf(r->why + n, r->size - n, fmt, ap);
        va_end(ap);
    }
    return GW_EXIT_DATAERR;
}

static int known_member(const char *key, const char *const *known)
{
    for (; *known != NULL; known++) {
        if (strcmp(key, *known) == 0)
            return 1;
    }
    return 0;
}

int cfg_object(cfg_reader *r, const json_t *obj, const char *const *known)
{
    const char *key;
    const json_t *v;

    if (!json_is_object(obj))
        return cfg_refuse(r, NULL, "must be an object");
    json_object_foreach((json_t *)obj, key, v)
    {
        if (!known_member(key, known))
            return cfg_refuse(r, key, "unknown member");
    }
    return 0;
}

int cfg_uint(cfg_reader *r, const json_t *obj, const char *key, unsigned long long min,
             unsigned long long max, unsigned long long *out)
{
    const json_t *v = json_object_get(obj, key);

    if (v == NULL)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        (unsigned long long)json_integer_value(v) < min ||
        (unsigned long long)json_integer_value(v) > max)
        return cfg_refuse(r, key, "must be a whole number from %llu to %llu", min, max);
    *out = (unsigned long long)json_integer_value(v);
    return 0;
}

int cfg_string(cfg_reader *r, const json_t *obj, const char *key, int required, const char **out)
{
    const json_t *v = json_object_get(obj, key);

    if (v == NULL && !required)
        return 0;
    if (v == NULL)
        return cfg_refuse(r, key, "is required");
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
        return cfg_refuse(r, key, "must be a string (without NUL)");
    *out = json_string_value(v);
    return 0;
}
