/* The store's side of idem_arguments (idem/json.h). */
#ifndef IDEM_JSON_ARGUMENTS_H
#define IDEM_JSON_ARGUMENTS_H

#include <stddef.h>

#include "idem/json.h"

/* The tree of @args, a new reference in *out, as a parse of @text (@len bytes) allowing
 * @max_depth levels would make it. 0; 1 when @args allowed deeper nesting (parse the text
 * instead); -1 when it was made from other bytes. */
int idem__arguments_tree(json_t **out, const idem_arguments *args, const char *text, size_t len,
                         size_t max_depth);

#endif
