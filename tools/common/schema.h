/* A tool's argument schema: a subset of JSON Schema 2020-12, on jansson.
 *
 * | keyword                | applies to | meaning                                        |
 * | ---------------------- | ---------- | ---------------------------------------------- |
 * | type                   | any        | a type name or an array of them: object, array, |
 * |                        |            | string, integer (a number with no fraction),   |
 * |                        |            | number, boolean, null                          |
 * | enum                   | any        | one of the listed values (JSON equality)       |
 * | const                  | any        | equal to the value                             |
 * | properties             | objects    | each member present validates against its      |
 * |                        |            | schema                                         |
 * | required               | objects    | these members are present                      |
 * | additionalProperties   | objects    | members not in properties validate against it  |
 * | items                  | arrays     | every element validates against it             |
 * | maxItems               | arrays     | at most this many elements                     |
 * | minimum, maximum       | numbers    | inclusive bounds                               |
 * | minLength, maxLength   | strings    | bounds on the length in Unicode code points    |
 * | title, description     | any        | annotations; no effect on validation           |
 *
 * A schema is an object of these keywords, or true (anything) or false (nothing). Any other
 * keyword is refused when the configuration is checked, so that no schema silently means
 * less than it says. */
#ifndef IDEM_GATEWAY_SCHEMA_H
#define IDEM_GATEWAY_SCHEMA_H

#include <jansson.h>
#include <stddef.h>

#include "pointer.h"

/* Whether @schema is a schema of the subset. Returns 0, or -1 with @at (which starts as
 * the schema's place in its document) naming the offending place and @why (of @size
 * bytes) saying what is wrong. */
int gw_schema_check(const json_t *schema, gw_pointer *at, char *why, size_t size);

/* Whether @instance is valid against @schema (checked). Returns 0, or -1 with @at (which
 * starts empty) pointing at the first invalid value in @instance and @why (of @size bytes)
 * saying why. */
int gw_schema_validate(const json_t *schema, const json_t *instance, gw_pointer *at, char *why,
                       size_t size);

/* JSON Schema's equality: numbers by value (1 and 1.0 are equal), objects by members
 * whatever their order, arrays element by element. 1 or 0. */
int gw_json_equal(const json_t *a, const json_t *b);

#endif
