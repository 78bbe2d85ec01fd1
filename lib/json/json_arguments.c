/* A request's arguments parsed once (idem/json.h, idem_arguments): their text, copied,
 * beside the tree idem_json_parse_arguments() made of it and the depth it allowed, so that
 * the store can take the tree only where its own parse would have made the same one. */
#include <stdlib.h>
#include <string.h>

#include "arguments.h"
#include "error.h"

struct idem_arguments {
    json_t *tree;
    char *text;
    size_t len, max_depth;
};

int idem_arguments_parse(idem_arguments **out, const char *text, size_t len,
                         const idem_json_options *opts, idem_error *err)
{
    idem_arguments *a;
    json_t *tree = NULL;
    int rc;

    if (out == NULL)
        return idem__error_field(err, IDEM_EINVAL, "out", "must not be NULL");
    if (text == NULL && len > 0)
        return idem__error_field(err, IDEM_EINVAL, "text", "is NULL with %zu bytes", len);
    if ((rc = idem_json_parse_arguments(&tree, text, len, opts, err)) != 0)
        return rc;
    a = calloc(1, sizeof(*a));
    if (a == NULL || (a->text = malloc(len + 1)) == NULL) {
        free(a);
        json_decref(tree);
        return idem__error_set(err, IDEM_ENOMEM, "arguments: out of memory");
    }
    if (len > 0)
        memcpy(a->text, text, len);
    a->text[len] = '\0';
    a->len = len;
    a->tree = tree;
    a->max_depth =
        opts != NULL && opts->max_depth != 0 ? opts->max_depth : IDEM_JSON_MAX_DEPTH_DEFAULT;
    *out = a;
    return 0;
}

const json_t *idem_arguments_json(const idem_arguments *args)
{
    return args != NULL ? args->tree : NULL;
}

void idem_arguments_free(idem_arguments *args)
{
    if (args == NULL)
        return;
    json_decref(args->tree);
    free(args->text);
    free(args);
}

int idem__arguments_tree(json_t **out, const idem_arguments *args, const char *text, size_t len,
                         size_t max_depth)
{
    if (args->len != len || (len > 0 && memcmp(args->text, text, len) != 0))
        return -1;
    if (args->max_depth > max_depth)
        return 1;
    *out = json_incref(args->tree);
    return 0;
}
