/* Text as idem writes it: one line per message, an identifier as SQL writes it. */
#include <stdio.h>
#include <string.h>

#include "text.h"

void idem__chomp(char *s)
{
    size_t n = strlen(s);

    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
        s[--n] = '\0';
}

void idem__one_line(char *s)
{
    idem__chomp(s);
    for (char *p = s; *p != '\0'; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    }
}

void idem__quote_ident(char *out, size_t size, const char *name)
{
    size_t o = 0;
    int plain = (name[0] >= 'a' && name[0] <= 'z') || name[0] == '_';

    for (const char *p = name; plain && *p != '\0'; p++)
        plain = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '$';
    if (plain) {
        snprintf(out, size, "%s", name);
        return;
    }
    out[o++] = '"';
    for (const char *p = name; *p != '\0' && o + 3 < size; p++) {
        if (*p == '"')
            out[o++] = '"';
        out[o++] = *p;
    }
    out[o++] = '"';
    out[o] = '\0';
}

const char *idem__json_pointer_token(const char *p, char *out)
{
    size_t n = 0;

    while (*p != '\0' && *p != '/') {
        if (*p == '~') {
            out[n++] = p[1] == '1' ? '/' : '~';
            p += 2;
        } else {
            out[n++] = *p++;
        }
    }
    out[n] = '\0';
    return p;
}
