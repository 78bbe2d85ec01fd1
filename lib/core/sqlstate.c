/* SQLSTATE classes: what a PostgreSQL error code says about a failure, for the library and
 * the tools alike. */
#include <string.h>

#include "sqlstate.h"

int idem__sqlstate_is_disconnect(const char *s)
{
    if (s == NULL || s[0] == '\0')
        return 0;
    if (strncmp(s, "08", 2) == 0)
        return 1;
    return strcmp(s, "57P01") == 0 || strcmp(s, "57P02") == 0 || strcmp(s, "57P03") == 0;
}

int idem__sqlstate_is_retryable(const char *s)
{
    if (s == NULL)
        return 0;
    return strcmp(s, "40001") == 0 || strcmp(s, "40P01") == 0;
}

int idem__sqlstate_is_timeout(const char *s)
{
    if (s == NULL)
        return 0;
    return strcmp(s, "55P03") == 0 || strcmp(s, "57014") == 0;
}
