/* W3C Trace Context: traceparent read and written, trace and span IDs made. */
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "trace.h"

static int lower_hex(char ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
}

/* @n lowercase hex digits at @s, not all zero when @nonzero. */
static int hex_field(const char *s, size_t n, int nonzero)
{
    int any = 0;

    for (size_t i = 0; i < n; i++) {
        if (!lower_hex(s[i]))
            return 0;
        any |= s[i] != '0';
    }
    return any || !nonzero;
}

int gw_trace_parse(gw_trace *out, const char *traceparent)
{
    const char *p = traceparent;
    size_t n = p != NULL ? strlen(p) : 0;

    if (n < GW_TRACEPARENT_LEN || !hex_field(p, 2, 0) || memcmp(p, "ff", 2) == 0)
        return -1;
    if (memcmp(p, "00", 2) == 0 ? n != GW_TRACEPARENT_LEN
                                : n > GW_TRACEPARENT_LEN && p[GW_TRACEPARENT_LEN] != '-')
        return -1;
    if (p[2] != '-' || p[35] != '-' || p[52] != '-' || !hex_field(p + 3, 32, 1) ||
        !hex_field(p + 36, 16, 1) || !hex_field(p + 53, 2, 0))
        return -1;
    memcpy(out->trace_id, p + 3, 32);
    out->trace_id[32] = '\0';
    memcpy(out->parent_id, p + 36, 16);
    out->parent_id[16] = '\0';
    memcpy(out->flags, p + 53, 2);
    out->flags[2] = '\0';
    return 0;
}

/* One member of a tracestate list, @n bytes at @s: empty (allowed), or key=value. */
static int member_ok(const char *s, size_t n)
{
    const char *eq;

    while (n > 0 && (*s == ' ' || *s == '\t'))
        s++, n--;
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    if (n == 0)
        return 1;
    eq = memchr(s, '=', n);
    return eq != NULL && eq != s && eq != s + n - 1;
}

int gw_tracestate_ok(const char *tracestate)
{
    size_t n = tracestate != NULL ? strlen(tracestate) : 0, start = 0;

    if (n == 0 || n > GW_TRACESTATE_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (tracestate[i] < 0x20 || tracestate[i] > 0x7e)
            return 0;
    }
    for (size_t i = 0; i <= n; i++) {
        if (i < n && tracestate[i] != ',')
            continue;
        if (!member_ok(tracestate + start, i - start))
            return 0;
        start = i + 1;
    }
    return 1;
}

/* The CSPRNG's bytes drawn a few hundred at a time, per thread: one RAND_bytes() call
 * costs about as much for 384 bytes as for 8 (its lock, its fork check), and a request
 * takes 34 (its trace and span IDs, its request ID). Bytes handed out are wiped from the
 * batch. */
#define RANDOM_BATCH 384

static _Thread_local struct {
    unsigned char bytes[RANDOM_BATCH];
    size_t left;
} batch;

static pthread_once_t fork_hook_once = PTHREAD_ONCE_INIT;

/* A child made by fork() never hands out its parent's bytes. */
static void forget_batch(void)
{
    memset(&batch, 0, sizeof(batch));
}

static void add_fork_hook(void)
{
    (void)pthread_atfork(NULL, NULL, forget_batch);
}

int gw_random_bytes(unsigned char *out, size_t n)
{
    pthread_once(&fork_hook_once, add_fork_hook);
    if (batch.left < n) {
        if (RAND_bytes(batch.bytes, RANDOM_BATCH) != 1)
            return -1;
        batch.left = RANDOM_BATCH;
    }
    batch.left -= n;
    memcpy(out, batch.bytes + batch.left, n);
    memset(batch.bytes + batch.left, 0, n);
    return 0;
}

/* @n random bytes as 2 * @n lowercase hex digits into @out, not all zero. */
static void random_id(char *out, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char bytes[16] = {0};
    int any = 0;

    while (!any) {
        if (gw_random_bytes(bytes, n) != 0) { /* no CSPRNG: still unique enough to trace */
            struct timespec ts;

            clock_gettime(CLOCK_REALTIME, &ts);
            for (size_t i = 0; i < n; i++)
                bytes[i] ^= (unsigned char)((unsigned long)ts.tv_nsec >> (i % 4 * 8)) ^
                            (unsigned char)(i * 131);
        }
        for (size_t i = 0; i < n; i++)
            any |= bytes[i] != 0;
    }
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[bytes[i] >> 4];
        out[2 * i + 1] = hex[bytes[i] & 15];
    }
    out[2 * n] = '\0';
}

void gw_trace_begin(gw_trace *t, const char *traceparent, const char *tracestate)
{
    if (gw_trace_parse(t, traceparent) != 0) {
        random_id(t->trace_id, 16);
        t->parent_id[0] = '\0';
        memcpy(t->flags, "00", 3);
        t->tracestate[0] = '\0';
    } else if (gw_tracestate_ok(tracestate)) {
        snprintf(t->tracestate, sizeof(t->tracestate), "%s", tracestate);
    } else {
        t->tracestate[0] = '\0';
    }
    random_id(t->span_id, 8);
}

const char *gw_trace_header(char out[GW_TRACEPARENT_LEN + 1], const gw_trace *t)
{
    snprintf(out, GW_TRACEPARENT_LEN + 1, "00-%s-%s-%s", t->trace_id, t->span_id, t->flags);
    return out;
}
