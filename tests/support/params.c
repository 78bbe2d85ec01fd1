#include <criterion/alloc.h>
#include <stdlib.h>
#include <string.h>

#include "params.h"

char *params_strndup(const char *s, size_t len)
{
    char *copy;

    if (s == NULL)
        return NULL;
    /* Called by the runner, outside any test: nothing to fail but the run. */
    copy = cr_malloc(len + 1);
    if (copy == NULL)
        abort();
    memcpy(copy, s, len);
    copy[len] = '\0';
    return copy;
}

char *params_strdup(const char *s)
{
    return params_strndup(s, s != NULL ? strlen(s) : 0);
}
