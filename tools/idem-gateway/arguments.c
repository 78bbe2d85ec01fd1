/* A call's arguments before anything runs: JSON as I-JSON reads it (the library's parser),
 * the tool's schema, and for a sql tool the values its statement binds; each refusal with
 * the JSON Pointer of the value at fault. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "json_span.h"
#include "schema.h"
#include "upstream.h"

/* Deeper than this (the library's default depth limit), a refused value is named by its
 * container at this depth. */
#define BLAME_DEPTH_MAX GW_SPAN_CHECK_DEPTH

/* Whether the library's parser refuses @v read alone. */
static int refused(gw_span v, const idem_json_options *opts)
{
    idem_error err = IDEM_ERROR_INIT;
    json_t *doc = NULL;
    int rc = idem_json_parse_arguments(&doc, v.at, v.len, opts, &err);

    json_decref(doc);
    return rc != 0;
}

/* An element's reference token pushed onto @at: an object member's name, or an index. */
static void push(gw_pointer *at, gw_span key, size_t index)
{
    char *name;

    if (key.len == 0) {
        gw_pointer_push_index(at, index);
        return;
    }
    if ((name = malloc(key.len)) != NULL && gw_span_string(name, key.len, key) >= 0)
        gw_pointer_push(at, name);
    else
        gw_pointer_push(at, "...");
    free(name);
}

/* @at, the pointer of @v (refused), made that of the deepest value in it that the parser
 * refuses alone: a number I-JSON refuses, a string that is not valid UTF-8, an object with
 * a member twice; @v itself when none of its elements is refused alone (it is too large, too
 * deep, or not JSON at all). */
static void blame(gw_pointer *at, gw_span v, const idem_json_options *opts, int depth)
{
    gw_span_iter it;
    gw_span key, value, whole;

    if (depth == BLAME_DEPTH_MAX || gw_span_iter_init(&it, v) != 0)
        return;
    while (gw_span_next(&it, &key, &value, &whole) == 1) {
        if (refused(value, opts)) {
            push(at, key, it.index - 1);
            blame(at, value, opts, depth + 1);
            return;
        }
    }
}

/* Not JSON, or a value I-JSON refuses: @run invalid with the library's words and the place. */
static void unparsed(gw_run *run, const char *body, size_t len, const idem_json_options *opts)
{
    gw_pointer at;
    gw_span whole;

    gw_pointer_init(&at);
    if (run->err.code == IDEM_EINVAL && gw_span_value(&whole, body, len) == 0)
        blame(&at, whole, opts, 0);
    gw_run_invalid(run, at.text, NULL);
}

/* A value a sql tool's statement binds as text cannot hold a NUL: 0, or -1 with @run
 * invalid at that parameter's pointer (the library refuses it too, in other words). */
static int bound_values(gw_run *run, const gw_tool *tool, const json_t *args)
{
    for (size_t i = 0; tool->http == NULL && i < tool->nparams; i++) {
        const char *p = tool->params[i];
        const json_t *v = p[0] == '/'   ? gw_upstream_resolve(args, p)
                          : p[0] == '$' ? NULL
                                        : json_object_get(args, p);

        if (json_is_string(v) && strlen(json_string_value(v)) != json_string_length(v)) {
            gw_run_invalid(run, p[0] == '/' ? p : "",
                           "%s: holds a NUL character (\\u0000), which a statement's text "
                           "parameter cannot carry",
                           p);
            return -1;
        }
    }
    return 0;
}

int gw_check_arguments(idem_arguments **parsed, gw_run *run, const gw_config *cfg,
                       const gw_tool *tool, const char *body, size_t len)
{
    idem_json_options opts = IDEM_JSON_OPTIONS_INIT;
    idem_arguments *a = NULL;
    const json_t *args;
    gw_pointer at;
    char why[512];
    int rc;

    opts.max_bytes = cfg->max_body_bytes;
    if (idem_arguments_parse(&a, body, len, &opts, &run->err) != 0) {
        unparsed(run, body, len, &opts);
        return -1;
    }
    args = idem_arguments_json(a);
    gw_pointer_init(&at);
    rc = gw_schema_validate(tool->schema, args, &at, why, sizeof(why));
    if (rc != 0)
        gw_run_invalid(run, at.text, "%.150s: %.300s", at.len > 0 ? at.text : "the arguments", why);
    else
        rc = bound_values(run, tool, args);
    if (rc != 0) {
        idem_arguments_free(a);
        return -1;
    }
    *parsed = a;
    return 0;
}
