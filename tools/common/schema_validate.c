/* Validating an instance against a checked schema (schema.h): the first failure, with the
 * place it is at as a JSON Pointer. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "schema.h"

typedef struct vctx {
    gw_pointer *at;
    char *why;
    size_t size;
} vctx;

static int fail(vctx *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(vctx *v, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(v->why, v->size, fmt, ap);
    va_end(ap);
    return -1;
}

static int validate(const json_t *schema, const json_t *x, vctx *v);

static const char *type_of(const json_t *x)
{
    switch (json_typeof(x)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    default:
        return "null";
    }
}

static int has_type(const json_t *x, const char *type)
{
    if (strcmp(type, "integer") == 0)
        return json_is_number(x) && json_number_value(x) == floor(json_number_value(x));
    return strcmp(type, type_of(x)) == 0;
}

static int check_type(const json_t *type, const json_t *x, vctx *v)
{
    size_t i;
    const json_t *t;

    if (json_is_string(type))
        return has_type(x, json_string_value(type))
                   ? 0
                   : fail(v, "must be of type %s, not %s", json_string_value(type), type_of(x));
    json_array_foreach(type, i, t)
    {
        if (has_type(x, json_string_value(t)))
            return 0;
    }
    return fail(v, "must be of one of the types the schema lists, not %s", type_of(x));
}

static int check_enum(const json_t *values, const json_t *x, vctx *v)
{
    size_t i;
    const json_t *e;

    json_array_foreach(values, i, e)
    {
        if (gw_json_equal(e, x))
            return 0;
    }
    return fail(v, "must be one of the values the schema's enum lists");
}

/* Unicode code points in a UTF-8 string (jansson's strings are valid UTF-8). */
static size_t code_points(const json_t *s)
{
    const unsigned char *p = (const unsigned char *)json_string_value(s);
    size_t len = json_string_length(s), n = 0;

    for (size_t i = 0; i < len; i++)
        n += (p[i] & 0xC0) != 0x80;
    return n;
}

static int check_bounds(const json_t *schema, const json_t *x, vctx *v)
{
    const json_t *min = json_object_get(schema, "minimum"),
                 *max = json_object_get(schema, "maximum");
    const json_t *minl = json_object_get(schema, "minLength");
    const json_t *maxl = json_object_get(schema, "maxLength");
    const json_t *maxi = json_object_get(schema, "maxItems");
    double d = json_number_value(x);

    if (json_is_number(x) && min != NULL && d < json_number_value(min))
        return fail(v, "must be at least %.17g", json_number_value(min));
    if (json_is_number(x) && max != NULL && d > json_number_value(max))
        return fail(v, "must be at most %.17g", json_number_value(max));
    if (json_is_string(x) && minl != NULL && (double)code_points(x) < json_number_value(minl))
        return fail(v, "must be at least %.0f characters long", json_number_value(minl));
    if (json_is_string(x) && maxl != NULL && (double)code_points(x) > json_number_value(maxl))
        return fail(v, "must be at most %.0f characters long", json_number_value(maxl));
    if (json_is_array(x) && maxi != NULL && (double)json_array_size(x) > json_number_value(maxi))
        return fail(v, "must have at most %.0f items", json_number_value(maxi));
    return 0;
}

static int check_items(const json_t *items, const json_t *x, vctx *v)
{
    size_t i;
    const json_t *e;

    json_array_foreach(x, i, e)
    {
        size_t mark = gw_pointer_push_index(v->at, i);

        if (validate(items, e, v) != 0)
            return -1;
        gw_pointer_pop(v->at, mark);
    }
    return 0;
}

static int check_required(const json_t *required, const json_t *x, vctx *v)
{
    size_t i;
    const json_t *name;

    json_array_foreach(required, i, name)
    {
        if (json_object_get(x, json_string_value(name)) == NULL) {
            gw_pointer_push(v->at, json_string_value(name));
            return fail(v, "is required");
        }
    }
    return 0;
}

static int check_members(const json_t *schema, const json_t *x, vctx *v)
{
    const json_t *props = json_object_get(schema, "properties");
    const json_t *extra = json_object_get(schema, "additionalProperties");
    const char *name;
    const json_t *member;

    json_object_foreach((json_t *)x, name, member)
    {
        const json_t *sub = props != NULL ? json_object_get(props, name) : NULL;
        size_t mark = gw_pointer_push(v->at, name);

        if (sub == NULL && json_is_false(extra))
            return fail(v, "is not allowed: the schema lists no such member");
        if (sub == NULL)
            sub = extra;
        if (sub != NULL && validate(sub, member, v) != 0)
            return -1;
        gw_pointer_pop(v->at, mark);
    }
    return 0;
}

static int validate(const json_t *schema, const json_t *x, vctx *v)
{
    const json_t *k;

    if (json_is_boolean(schema))
        return json_is_true(schema) ? 0 : fail(v, "no value is allowed here");
    if ((k = json_object_get(schema, "type")) != NULL && check_type(k, x, v) != 0)
        return -1;
    if ((k = json_object_get(schema, "enum")) != NULL && check_enum(k, x, v) != 0)
        return -1;
    if ((k = json_object_get(schema, "const")) != NULL && !gw_json_equal(k, x))
        return fail(v, "must equal the schema's const");
    if (check_bounds(schema, x, v) != 0)
        return -1;
    if (json_is_array(x) && (k = json_object_get(schema, "items")) != NULL &&
        check_items(k, x, v) != 0)
        return -1;
    if (json_is_object(x) && (k = json_object_get(schema, "required")) != NULL &&
        check_required(k, x, v) != 0)
        return -1;
    if (json_is_object(x))
        return check_members(schema, x, v);
    return 0;
}

int gw_schema_validate(const json_t *schema, const json_t *instance, gw_pointer *at, char *why,
                       size_t size)
{
    vctx v = {at, why, size};

    return validate(schema, instance, &v);
}

static int objects_equal(const json_t *a, const json_t *b)
{
    const char *k;
    const json_t *va;

    if (json_object_size(a) != json_object_size(b))
        return 0;
    json_object_foreach((json_t *)a, k, va)
    {
        const json_t *vb = json_object_get(b, k);

        if (vb == NULL || !gw_json_equal(va, vb))
            return 0;
    }
    return 1;
}

static int arrays_equal(const json_t *a, const json_t *b)
{
    size_t i;
    const json_t *va;

    if (json_array_size(a) != json_array_size(b))
        return 0;
    json_array_foreach(a, i, va)
    {
        if (!gw_json_equal(va, json_array_get(b, i)))
            return 0;
    }
    return 1;
}

int gw_json_equal(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b))
        return json_number_value(a) == json_number_value(b);
    if (json_typeof(a) != json_typeof(b))
        return 0;
    if (json_is_object(a))
        return objects_equal(a, b);
    if (json_is_array(a))
        return arrays_equal(a, b);
    if (json_is_string(a))
        return json_string_length(a) == json_string_length(b) &&
               memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
    return 1; /* true, false, null */
}
