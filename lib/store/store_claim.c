/* The claim's parameters (store_internal.h, claim_params): the key, its tool and
 * fingerprint, the tool's windows, and the span of the database's clock in which the key
 * may claim, made once per call when a write is about to happen, for the callback path's
 * claims and the declared statement alike. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "store_internal.h"

void idem__u64_text(char out[24], uint64_t v, const char *suffix)
{
    char digits[20];
    int k = 0;

    do
        digits[k++] = (char)('0' + v % 10);
    while ((v /= 10) > 0);
    while (k > 0)
        *out++ = digits[--k];
    strcpy(out, suffix);
}

/* @v as a binary int8 or timestamptz parameter: big-endian. */
static void int64_binary(char out[8], int64_t v)
{
    uint64_t u = (uint64_t)v;

    for (int i = 7; i >= 0; i--, u >>= 8)
        out[i] = (char)(u & 0xff);
}

/* The window of the database's clock in which the key may claim: a UUIDv7's time less the
 * clock skew allowance to its time plus the key memory and the allowance (outside it, the
 * key is dated ahead or older than the tool's key memory); -infinity to infinity (the
 * extreme timestamptz values) for other IDs. Binary timestamptz: microseconds. */
static void claim_window(claim_params *p, const call *c, unsigned int key_memory_s)
{
    const int64_t skew_ms = (int64_t)c->store->opts.clock_skew_s * 1000;
    uint64_t born_ms;
    int64_t from;

    if (idem_uuid_v7_time_ms(&born_ms, c->req->operation_id) != 0) {
        int64_binary(p->not_before, INT64_MIN);
        int64_binary(p->not_after, INT64_MAX);
        return;
    }
    from = (int64_t)born_ms - IDEM__PG_EPOCH_MS;
    int64_binary(p->not_before, (from - skew_ms) * 1000);
    int64_binary(p->not_after, (from + (int64_t)key_memory_s * 1000 + skew_ms) * 1000);
}

void idem__store_claim_params_init(call *c)
{
    claim_params *p = &c->cp;
    unsigned int retention_s, key_memory_s;

    idem__store_windows(c->store, c->req->tool, &retention_s, &key_memory_s);
    if (c->req->payload_version >= 0)
        idem__u64_text(p->version, (uint64_t)c->req->payload_version, "");
    else
        snprintf(p->version, sizeof(p->version), "%d", c->req->payload_version);
    idem__u64_text(p->retention, retention_s, "");
    idem__u64_text(p->key_memory, key_memory_s, "");
    claim_window(p, c, key_memory_s);
    p->values[0] = c->req->tenant;
    p->values[1] = c->req->operation_id;
    p->values[2] = c->req->tool;
    p->values[3] = p->version;
    p->values[4] = (const char *)c->fp.bytes;
    p->values[5] = c->req->trace_id;
    p->values[6] = c->claim;
    p->values[7] = p->retention;
    p->values[8] = p->key_memory;
    p->values[9] = p->not_before;
    p->values[10] = p->not_after;
    memset(p->lengths, 0, sizeof(p->lengths));
    memset(p->formats, 0, sizeof(p->formats));
    p->lengths[4] = IDEM_FINGERPRINT_SIZE;
    p->formats[4] = 1;
    p->lengths[9] = p->lengths[10] = 8;
    p->formats[9] = p->formats[10] = 1;
}
