/* A jansson tree as compact JSON text, written by hand: MCP's answers, where
 * json_dumps() cost a tools/call more than the call's own work (about 110 instructions a
 * byte, against 25 here); and a JSON string alone, for the request log's JSON line.
 *
 * The text is byte for byte what json_dumps(@doc, JSON_COMPACT) writes: members in their
 * order, strings escaped as jansson escapes them, integers in decimal, reals in jansson's
 * own form (it writes those). One string of the tree may be named raw: it holds JSON text,
 * which is written as it is instead of as a string (a receipt, whose numbers a parser
 * would round or refuse). */
#ifndef IDEM_GATEWAY_JSON_WRITE_H
#define IDEM_GATEWAY_JSON_WRITE_H

#include <jansson.h>
#include <stddef.h>

/* @s (@n bytes of UTF-8) as a JSON string, its quotes included, escaped as jansson escapes
 * it ('"', '\\' and the control characters, in short forms where JSON has them), into @buf
 * (@size bytes, no NUL added): its length, which is more than @size when it did not fit
 * (@buf then holds its start), or 0 when @s is not UTF-8 (jansson refuses it too). */
size_t gw_json_string(char *buf, size_t size, const char *s, size_t n);

/* @doc as text (malloc'd, NUL-terminated), with the string @raw (a value of @doc's,
 * compared by address; NULL: none) written as the JSON text it holds. NULL when out of
 * memory, or where json_dumps() fails too: a string that is not UTF-8, a real that is not
 * finite, a tree deeper than jansson writes. */
char *gw_json_dump(const json_t *doc, const json_t *raw);

#endif
