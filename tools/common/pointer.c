/* JSON Pointers built token by token, escaped as RFC 6901 says ('~' as ~0, '/' as ~1). */
#include <stdio.h>
#include <string.h>

#include "pointer.h"

#define ELLIPSIS "/..."

void gw_pointer_init(gw_pointer *p)
{
    p->text[0] = '\0';
    p->len = 0;
}

/* Append @s (@n bytes); on overflow the pointer ends in "/..." and stays so. */
static void append(gw_pointer *p, const char *s, size_t n)
{
    size_t room = sizeof(p->text) - sizeof(ELLIPSIS);

    if (p->len > room || n > room - p->len) {
        if (p->len <= room) {
            memcpy(p->text + p->len, ELLIPSIS, sizeof(ELLIPSIS));
            p->len += sizeof(ELLIPSIS) - 1;
        }
        return;
    }
    memcpy(p->text + p->len, s, n);
    p->len += n;
    p->text[p->len] = '\0';
}

size_t gw_pointer_push(gw_pointer *p, const char *name)
{
    size_t mark = p->len;

    append(p, "/", 1);
    for (const char *c = name; *c != '\0'; c++) {
        if (*c == '~')
            append(p, "~0", 2);
        else if (*c == '/')
            append(p, "~1", 2);
        else
            append(p, c, 1);
    }
    return mark;
}

size_t gw_pointer_push_index(gw_pointer *p, size_t index)
{
    char token[32];

    snprintf(token, sizeof(token), "%zu", index);
    return gw_pointer_push(p, token);
}

void gw_pointer_pop(gw_pointer *p, size_t mark)
{
    if (mark <= p->len) {
        p->len = mark;
        p->text[mark] = '\0';
    }
}
