/* Validating an instance against a checked schema (schema.h): the first failure, with the
 * place it is at as a JSON Pointer. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "schema.h"

/* A schema's keywords that validation reads; NULL where the schema has none. */
typedef struct keywords {
    const json_t *type, *enum_values, *const_value, *minimum, *maximum, *min_length, *max_length,
        *max_items, *items, *required, *properties, *additional;
} keywords;

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

static int check_bounds(const keywords *kw, const json_t *x, vctx *v)
{
    double d = json_number_value(x);

    if (json_is_number(x) && kw->minimum != NULL && d < json_number_value(kw->minimum))
        return fail(v, "must be at least %.17g", json_number_value(kw->minimum));
    if (json_is_number(x) && kw->maximum != NULL && d > json_number_value(kw->maximum))
        return fail(v, "must be at most %.17g", json_number_value(kw->maximum));
    if (json_is_string(x) && kw->min_length != NULL &&
        (double)code_points(x) < json_number_value(kw->min_length))
        return fail(v, "must be at least %.0f characters long", json_number_value(kw->min_length));
    if (json_is_string(x) && kw->max_length != NULL &&
        (double)code_points(x) > json_number_value(kw->max_length))
        return fail(v, "must be at most %.0f characters long", json_number_value(kw->max_length));
    if (json_is_array(x) && kw->max_items != NULL &&
        (double)json_array_size(x) > json_number_value(kw->max_items))
        return fail(v, "must have at most %.0f items", json_number_value(kw->max_items));
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

static int check_members(const keywords *kw, const json_t *x, vctx *v)
{
    const char *name;
    const json_t *member;

    json_object_foreach((json_t *)x, name, member)
    {
        const json_t *sub = kw->properties != NULL ? json_object_get(kw->properties, name) : NULL;
        size_t mark = gw_pointer_push(v->at, name);

        if (sub == NULL && json_is_false(kw->additional))
            return fail(v, "is not allowed: the schema lists no such member");
        if (sub == NULL)
            sub = kw->additional;
        if (sub != NULL && validate(sub, member, v) != 0)
            return -1;
        gw_pointer_pop(v->at, mark);
    }
    return 0;
}

/* The keywords of @schema (an object, checked) into @kw, in one pass over its members: a
 * schema has a few, and a lookup of each of the twelve that validation reads cost a call
 * more than its whole check. */
static void gather(const json_t *schema, keywords *kw)
{
    static const struct {
        const char *name;
        size_t at;
    } slots[] = {
        {"type", offsetof(keywords, type)},
        {"enum", offsetof(keywords, enum_values)},
        {"const", offsetof(keywords, const_value)},
        {"minimum", offsetof(keywords, minimum)},
        {"maximum", offsetof(keywords, maximum)},
        {"minLength", offsetof(keywords, min_length)},
        {"maxLength", offsetof(keywords, max_length)},
        {"maxItems", offsetof(keywords, max_items)},
        {"items", offsetof(keywords, items)},
        {"required", offsetof(keywords, required)},
        {"properties", offsetof(keywords, properties)},
        {"additionalProperties", offsetof(keywords, additional)},
    };
    const char *k;
    const json_t *value;

    memset(kw, 0, sizeof(*kw));
    json_object_foreach((json_t *)schema, k, value)
    {
        for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++) {
            if (k[0] == slots[i].name[0] && strcmp(k, slots[i].name) == 0) {
                *(const json_t **)((char *)kw + slots[i].at) = value;
                break;
            }
        }
    }
}

static int validate(const json_t *schema, const json_t *x, vctx *v)
{
    keywords kw;

    if (json_is_boolean(schema))
        return json_is_true(schema) ? 0 : fail(v, "no value is allowed here");
    gather(schema, &kw);
    if (kw.type != NULL && check_type(kw.type, x, v) != 0)
        return -1;
    if (kw.enum_values != NULL && check_enum(kw.enum_values, x, v) != 0)
        return -1;
    if (kw.const_value != NULL && !gw_json_equal(kw.const_value, x))
        return fail(v, "must equal the schema's const");
    if (check_bounds(&kw, x, v) != 0)
        return -1;
    if (json_is_array(x) && kw.items != NULL && check_items(kw.items, x, v) != 0)
        return -1;
    if (json_is_object(x) && kw.required != NULL && check_required(kw.required, x, v) != 0)
        return -1;
    if (json_is_object(x))
        return check_members(&kw, x, v);
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
