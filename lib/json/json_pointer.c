/* JSON Pointers (RFC 6901): the reference tokens, unescaped, walked from the root. */
#include <stdlib.h>
#include <string.h>

#include "core/text.h"
#include "json_pointer.h"

int idem__json_pointer_check(const char *pointer, const char **why)
{
    if (pointer == NULL || pointer[0] != '/') {
        *why = "a JSON Pointer starts with '/'";
        return -1;
    }
    for (const char *p = pointer; *p != '\0'; p++) {
        if (*p == '~' && p[1] != '0' && p[1] != '1') {
            *why = "'~' must be followed by '0' (for '~') or '1' (for '/')";
            return -1;
        }
    }
    return 0;
}

/* An array index by RFC 6901's grammar: "0", or digits without a leading zero. */
static const json_t *array_get(const json_t *array, const char *token)
{
    char *end = NULL;
    unsigned long long index;

    if (token[0] < '0' || token[0] > '9' || (token[0] == '0' && token[1] != '\0'))
        return NULL;
    index = strtoull(token, &end, 10);
    if (*end != '\0' || index >= json_array_size(array))
        return NULL;
    return json_array_get(array, (size_t)index);
}

int idem__json_pointer_get(const json_t **out, const json_t *doc, const char *pointer)
{
    char *token = malloc(strlen(pointer) + 1);
    const char *p = pointer;
    const json_t *at = doc;

    if (token == NULL)
        return IDEM_ENOMEM;
    while (at != NULL && *p == '/') {
        p = idem__json_pointer_token(p + 1, token);
        if (json_is_object(at))
            at = json_object_get(at, token);
        else if (json_is_array(at))
            at = array_get(at, token);
        else
            at = NULL;
    }
    free(token);
    *out = at;
    return 0;
}
