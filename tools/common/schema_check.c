/* Checking a schema against the subset (schema.h): every keyword known, every value of
 * the shape its keyword needs. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "schema.h"

static const char *const type_names[] = {"object", "array",   "string", "integer",
                                         "number", "boolean", "null"};

static int refuse(char *why, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int refuse(char *why, size_t size, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, size, fmt, ap);
    va_end(ap);
    return -1;
}

static int is_type_name(const char *s)
{
    for (size_t i = 0; i < sizeof(type_names) / sizeof(type_names[0]); i++) {
        if (strcmp(s, type_names[i]) == 0)
            return 1;
    }
    return 0;
}

/* A non-empty array of distinct strings, each accepted by @ok when it is given. */
static int string_set(const json_t *v, int (*ok)(const char *), char *why, size_t size,
                      const char *what)
{
    size_t i, j;
    const json_t *s;

    if (!json_is_array(v) || (ok != NULL && json_array_size(v) == 0))
        return refuse(why, size, "must be %s", what);
    json_array_foreach(v, i, s)
    {
        if (!json_is_string(s) || (ok != NULL && !ok(json_string_value(s))))
            return refuse(why, size, "must be %s", what);
        for (j = 0; j < i; j++) {
            if (strcmp(json_string_value(json_array_get(v, j)), json_string_value(s)) == 0)
                return refuse(why, size, "lists \"%s\" twice", json_string_value(s));
        }
    }
    return 0;
}

static int check_type(const json_t *v, char *why, size_t size)
{
    static const char what[] = "a type name (object, array, string, integer, number, boolean, "
                               "null) or a non-empty array of distinct ones";

    if (json_is_string(v))
        return is_type_name(json_string_value(v)) ? 0 : refuse(why, size, "must be %s", what);
    return string_set(v, is_type_name, why, size, what);
}

static int check_count(const json_t *v, char *why, size_t size)
{
    double d = json_number_value(v);

    if (!json_is_number(v) || d < 0 || d != floor(d) || d > 9007199254740992.0)
        return refuse(why, size, "must be a whole number >= 0");
    return 0;
}

static int check_properties(const json_t *v, gw_pointer *at, char *why, size_t size)
{
    const char *name;
    const json_t *sub;

    if (!json_is_object(v))
        return refuse(why, size, "must be an object of schemas");
    json_object_foreach((json_t *)v, name, sub)
    {
        size_t mark = gw_pointer_push(at, name);

        if (gw_schema_check(sub, at, why, size) != 0)
            return -1;
        gw_pointer_pop(at, mark);
    }
    return 0;
}

/* One keyword's value; @at points at it. */
static int check_keyword(const char *k, const json_t *v, gw_pointer *at, char *why, size_t size)
{
    if (strcmp(k, "type") == 0)
        return check_type(v, why, size);
    if (strcmp(k, "properties") == 0)
        return check_properties(v, at, why, size);
    if (strcmp(k, "required") == 0)
        return string_set(v, NULL, why, size, "an array of distinct member names");
    if (strcmp(k, "additionalProperties") == 0 || strcmp(k, "items") == 0)
        return gw_schema_check(v, at, why, size);
    if (strcmp(k, "enum") == 0)
        return json_is_array(v) && json_array_size(v) > 0
                   ? 0
                   : refuse(why, size, "must be a non-empty array of values");
    if (strcmp(k, "const") == 0)
        return 0;
    if (strcmp(k, "minimum") == 0 || strcmp(k, "maximum") == 0)
        return json_is_number(v) ? 0 : refuse(why, size, "must be a number");
    if (strcmp(k, "minLength") == 0 || strcmp(k, "maxLength") == 0 || strcmp(k, "maxItems") == 0)
        return check_count(v, why, size);
    if (strcmp(k, "title") == 0 || strcmp(k, "description") == 0)
        return json_is_string(v) ? 0 : refuse(why, size, "must be a string");
    return refuse(why, size,
                  "unknown keyword \"%s\": the gateway's schemas know type, properties, required, "
                  "additionalProperties, items, enum, const, minimum, maximum, minLength, "
                  "maxLength, maxItems, title and description",
                  k);
}

int gw_schema_check(const json_t *schema, gw_pointer *at, char *why, size_t size)
{
    const char *k;
    const json_t *v;

    if (json_is_boolean(schema))
        return 0;
    if (!json_is_object(schema))
        return refuse(why, size, "a schema must be an object or a boolean");
    json_object_foreach((json_t *)schema, k, v)
    {
        size_t mark = gw_pointer_push(at, k);

        if (check_keyword(k, v, at, why, size) != 0)
            return -1;
        gw_pointer_pop(at, mark);
    }
    return 0;
}
