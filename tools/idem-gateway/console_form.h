/* A form's fields from an application/x-www-form-urlencoded body (the console's POSTs). */
#ifndef IDEM_GATEWAY_CONSOLE_FORM_H
#define IDEM_GATEWAY_CONSOLE_FORM_H

#include <stddef.h>

/* The decoded value of the first field called @name in @body (@len bytes): caller owns,
 * free(). NULL when the field is absent, its encoding is broken (a '%' without two hex
 * digits), it decodes to a NUL byte, or memory ran out. */
char *gw_form_value(const char *body, size_t len, const char *name);

#endif
