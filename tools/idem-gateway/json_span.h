/* JSON text as the client sent it: the extent of a value, and the members of an object or
 * the elements of an array, found without converting anything. MCP's tools/call takes its
 * arguments out of the message with it, so that they are checked and fingerprinted from
 * the bytes the client sent, as over HTTP (a parser would round their numbers first); and
 * the gateway finds with it where in the arguments a refused value is.
 *
 * Not a validator: text it walks may still be refused by the library's parser, which is
 * the judge. Every JSON text jansson accepts is walked as jansson reads it; a text it
 * cannot walk is not JSON. */
#ifndef IDEM_GATEWAY_JSON_SPAN_H
#define IDEM_GATEWAY_JSON_SPAN_H

#include <stddef.h>

/* Bytes of a text; borrowed from it. */
typedef struct gw_span {
    const char *at;
    size_t len;
} gw_span;

/* The elements of an object or an array, one at a time. */
typedef struct gw_span_iter {
    gw_span in;   /* the container's text, its brackets included */
    size_t pos;   /* the next byte to read in it */
    size_t index; /* how many elements were read */
} gw_span_iter;

/* The value at the start of @text (@len bytes; white space around it is allowed): 0 with
 * @out its bytes, or -1 when it is not one whole value. */
int gw_span_value(gw_span *out, const char *text, size_t len);

/* Whether @v is well-formed JSON text as RFC 8259's grammar has it: 0, or -1 where it is
 * not (a missing or extra comma or colon, a bare word, a number or an escape outside the
 * grammar, a control character in a string). What the grammar allows but I-JSON refuses
 * (a number a double rounds, a member twice, invalid UTF-8, an unpaired surrogate) passes:
 * the library's parser judges it. Below GW_SPAN_CHECK_DEPTH levels, containers pass
 * unread (the library's depth limit, 128 by default, refuses them). */
#define GW_SPAN_CHECK_DEPTH 128
int gw_span_well_formed(gw_span v);

/* Start reading the elements of @value: 0, or -1 when it is not an object or an array. */
int gw_span_iter_init(gw_span_iter *it, gw_span value);

/* The next element: 1 with @key (an object member's name as written, quotes included;
 * empty in an array), @value and @whole (from the key, or the value, to the value's end);
 * 0 after the last one; -1 when the text is malformed there. */
int gw_span_next(gw_span_iter *it, gw_span *key, gw_span *value, gw_span *whole);

/* The JSON string literal @s (quotes included) decoded into @out, @size bytes with a
 * terminating NUL: its length in bytes (a "\u0000" in it counts as one), or -1 when it is
 * not a string literal or does not fit. */
long gw_span_string(char *out, size_t size, gw_span s);

/* The members of the object @obj named @name (@len bytes, decoded): how many there are (0,
 * 1 or more), the first one's @value and @whole; -1 when @obj is not an object or is
 * malformed. */
int gw_span_member(gw_span obj, const char *name, size_t len, gw_span *value, gw_span *whole);

#endif
