/* Internal: JSON Pointers (RFC 6901) into a parsed document, for declared effects'
 * parameters and tools' identity fields ("/order/id", with ~1 for '/' and ~0 for '~' in a
 * member's name). */
#ifndef IDEM_LIB_JSON_POINTER_H
#define IDEM_LIB_JSON_POINTER_H

#include <jansson.h>

#include "core/text.h"
#include "idem/common.h"

/* Whether @pointer is a JSON Pointer that names a value below the root: it starts with
 * '/', and every '~' in it is followed by '0' or '1'. Returns 0, or -1 with *why (static)
 * saying what is wrong. */
int idem__json_pointer_check(const char *pointer, const char **why);

/* Its tokens are read with idem__json_pointer_token() (core/text.h). */
/* *out = the value @pointer (checked) names in @doc, borrowed from it; NULL when there is
 * none: a member that is missing, an index past the end, "-", or a token that is not an
 * index ("01", "x") into an array, or a step into a string, number, boolean or null.
 * Returns 0, or IDEM_ENOMEM (*out untouched). */
int idem__json_pointer_get(const json_t **out, const json_t *doc, const char *pointer);

#endif
