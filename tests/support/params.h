/*
 * Strings for ParameterizedTest parameters. Each test runs in a process of its own, which
 * sees its parameters only where they live in Criterion's shared memory (cr_malloc): a
 * pointer into the runner's static data is not valid there. Copy the strings of a table
 * with these, and free them with cr_free() in the parameters' cleanup function.
 */
#ifndef IDEM_TESTS_PARAMS_H
#define IDEM_TESTS_PARAMS_H

#include <stddef.h>

/* The @len bytes at @s and a NUL, in shared memory; NULL for NULL. */
char *params_strndup(const char *s, size_t len);

/* params_strndup(s, strlen(s)); NULL for NULL. */
char *params_strdup(const char *s);

#endif
