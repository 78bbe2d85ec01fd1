/* Transaction-local settings as SET LOCAL statements (settings.h): the tenant that
 * row-level security checks a record against, and the lock timeouts of a claim and of an
 * effect, sent in the transaction's own pipeline. */
#include "settings.h"

#include <stdio.h>
#include <string.h>

static int name_ok(const char *name)
{
    if (name == NULL || name[0] == '\0')
        return 0;
    for (const char *p = name; *p != '\0'; p++) {
        if (!(*p >= 'a' && *p <= 'z') && !(*p >= '0' && *p <= '9') && *p != '_' && *p != '.')
            return 0;
    }
    return 1;
}

int idem__set_local(char *buf, size_t size, const char *name, const char *value)
{
    int len;
    size_t at;

    if (buf == NULL || size == 0)
        return -1;
    buf[0] = '\0';
    if (!name_ok(name) || value == NULL)
        return -1;
    len = snprintf(buf, size, "SET LOCAL %s = '", name);
    if (len < 0 || (size_t)len >= size)
        goto overflow;
    at = (size_t)len;
    for (const char *p = value; *p != '\0'; p++) {
        if (at + (*p == '\'' ? 2 : 1) + 2 > size)
            goto overflow;
        if (*p == '\'')
            buf[at++] = '\'';
        buf[at++] = *p;
    }
    buf[at++] = '\'';
    buf[at] = '\0';
    return 0;
overflow:
    buf[0] = '\0';
    return -1;
}

int idem__set_local_ms(char *buf, size_t size, const char *name, uint64_t ms)
{
    char value[32];

    snprintf(value, sizeof(value), "%llums", (unsigned long long)(ms > 0 ? ms : 1));
    return idem__set_local(buf, size, name, value);
}
