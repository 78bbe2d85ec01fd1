/* JSON Pointers (RFC 6901) built as the gateway walks a document, for messages that name
 * where a value is: "/tools/create_note/arguments", "/items/0/sku". */
#ifndef IDEM_GATEWAY_POINTER_H
#define IDEM_GATEWAY_POINTER_H

#include <stddef.h>

/* A pointer in a fixed buffer; one that would overflow ends in "/..." instead. */
typedef struct gw_pointer {
    char text[512];
    size_t len;
} gw_pointer;

/* The empty pointer: the whole document. */
void gw_pointer_init(gw_pointer *p);

/* Append one reference token (a member's name, '~' and '/' escaped), or an array index.
 * Returns the length before, for gw_pointer_pop(). */
size_t gw_pointer_push(gw_pointer *p, const char *name);
size_t gw_pointer_push_index(gw_pointer *p, size_t index);

/* Back to what it was before the push that returned @mark. */
void gw_pointer_pop(gw_pointer *p, size_t mark);

#endif
