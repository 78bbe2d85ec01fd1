/* idem-reconcile's text (reconcile_text.c): times as an operator writes them, and items,
 * records and external histories as the table and text an operator reads, or as JSON. */
#ifndef IDEM_TOOLS_RECONCILE_TEXT_H
#define IDEM_TOOLS_RECONCILE_TEXT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "idem/idem.h"
#include "idem/sys/external.h"
#include "idem/sys/reconcile.h"

/* An age ("90m", "24h", "7d", "30s") before now, in microseconds since the epoch: 0 or -1. */
int rt_parse_age(int64_t *out, const char *text);
/* A UTC time: YYYY-MM-DD, optionally with THH:MM:SS or " HH:MM:SS", optionally with Z.
 * 0, -1 when it is not one, or -2 for a day its month does not have (2024-02-31). */
int rt_parse_time(int64_t *out, const char *text);

/* "2024-05-01 09:30:00" (UTC), or with @iso "2024-05-01T09:30:00.123456Z"; "" for 0. */
const char *rt_format_time(char *buf, size_t size, int64_t us, int iso);
json_t *rt_time_json(int64_t us);
json_t *rt_str_json(const char *s);
json_t *rt_items_json(const idem_reconcile_items *items);
json_t *rt_record_json(const idem_reconcile_record *r);
json_t *rt_history_json(const idem_external_history *h);

void rt_print_item_row(const idem_reconcile_item *it);
void rt_print_record(const idem_reconcile_record *r);
/* One item of a key, its fingerprint compared with the key's @record (NULL: forgotten). */
void rt_print_item_detail(const idem_reconcile_item *it, const idem_reconcile_record *record);
void rt_print_history(const idem_external_history *h);

#endif
