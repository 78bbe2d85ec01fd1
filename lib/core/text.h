/* The core's text helpers (core/text.c), for the library and the tools. No state. */
#ifndef IDEM_CORE_TEXT_H
#define IDEM_CORE_TEXT_H

#include <stddef.h>

/* Drop @s's trailing newlines, carriage returns and spaces (libpq ends its messages with a
 * newline), in place. */
void idem__chomp(char *s);

/* Make @s one line, in place, as every log record and tool message is: idem__chomp(), then
 * other control characters (a server message's newlines and tabs) become spaces. */
void idem__one_line(char *s);

/* @name into @out (@size bytes, at least 4) as a GRANT a reader copies writes it: as it is
 * when it needs no quotes (lower case letters, digits, '_' and '$', not first a digit or
 * '$'), else double-quoted with its quotes doubled, cut to fit. */
void idem__quote_ident(char *out, size_t size, const char *name);

/* The JSON Pointer (RFC 6901) reference token at @p (just after its '/', up to the next
 * '/' or the end), unescaped ("~1" is '/', "~0" is '~') into @out (at least as long as the
 * rest of the pointer). Returns where the token ends: at the next '/' or the terminator. */
const char *idem__json_pointer_token(const char *p, char *out);

#endif
