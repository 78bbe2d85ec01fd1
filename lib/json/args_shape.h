/* The common shape of a request's arguments (private to lib/json): the subset of JSON that
 * the one-pass readers take, jcs_args.c's canonical writer and json_tree.c's tree. Objects,
 * arrays, true, false, null, strings without escapes (valid UTF-8, no control characters),
 * integers of at most 15 digits (exactly doubles, written as RFC 8785 writes them: their
 * digits). Everything else (an escape, a fraction or an exponent, a longer integer, -0, a
 * duplicate name, deep nesting, anything invalid) is left to the full path,
 * idem_json_parse_arguments()'s parse and idem__jcs_write_value(): so every text read
 * here is one that path accepts, into the same bytes and the same tree, and every error
 * is still reported in its words. args_shape.c reads the tokens. */
#ifndef IDEM_JSON_ARGS_SHAPE_H
#define IDEM_JSON_ARGS_SHAPE_H

#include <stddef.h>

#include "jcs.h"

/* Nesting the readers follow; deeper text goes the full path (whose own limit, the
 * options' max_depth, is at least IDEM_JSON_MAX_DEPTH_DEFAULT). */
#define IDEM__SHAPE_MAX_DEPTH 32
/* Integer digits that are always exactly a double (< 2^53) and written as they are. */
#define IDEM__SHAPE_MAX_DIGITS 15

/* A reader's answers: read; outside the shape (the full path judges); out of memory. */
enum { IDEM__SHAPE_OK = 0, IDEM__SHAPE_NO = 1, IDEM__SHAPE_NOMEM = -1 };

typedef struct idem__shape_reader {
    const char *s;
    size_t n, i;
    idem__buf *out; /* the canonical writer's output; NULL for the tree */
    int max_depth;  /* values nested this deep or deeper go the full path */
} idem__shape_reader;

/* true, false and null, by the index idem__shape_word() answers. */
extern const char *const idem__shape_words[3];

/* Skip JSON's blanks at r->i. */
void idem__shape_blanks(idem__shape_reader *r);
/* A string at r->i (its opening quote) without escapes or control characters, its bytes
 * valid UTF-8: IDEM__SHAPE_OK with *start and *len its contents in the text, r->i past it;
 * else IDEM__SHAPE_NO. */
int idem__shape_string(idem__shape_reader *r, size_t *start, size_t *len);
/* An integer at r->i (r->i < r->n) in the shape, read: its length in the text, or 0. */
size_t idem__shape_integer(idem__shape_reader *r);
/* true, false or null at r->i, read: its index in idem__shape_words, or -1. */
int idem__shape_word(idem__shape_reader *r);
/* After an item of an array or object that @close ends: blanks, then a comma (0; the blanks
 * after it skipped too) or @close (1), read; anything else -1. */
int idem__shape_next(idem__shape_reader *r, char close);

#endif
