/* The request log's lines and the request ID. */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <idem/idem.h>

#include "json_write.h"
#include "reqlog.h"

void gw_request_id(char out[GW_REQUEST_ID_MAX + 1], const char *header)
{
    char id[IDEM_UUID_STRING_SIZE];
    size_t n = header != NULL ? strlen(header) : 0;
    int ok = n > 0 && n <= GW_REQUEST_ID_MAX;

    for (size_t i = 0; ok && i < n; i++)
        ok = header[i] > 0x20 && header[i] < 0x7f;
    if (ok) {
        memcpy(out, header, n + 1);
        return;
    }
    /* The library's identifiers draw from a per-thread batch, no system call each. */
    if (idem_uuid_v7(id, NULL) != 0)
        snprintf(id, sizeof(id), "%lx-%lx", (unsigned long)time(NULL), (unsigned long)random());
    memcpy(out, id, strlen(id) + 1);
}

/* The time now, UTC, as "2026-12-01T21:05:33.120Z" (24 characters) into @out. The part to
 * the second is made once a second in each thread, the milliseconds by hand: strftime() and
 * snprintf() for every request cost more than the rest of its line. */
static void utc_now(char out[32])
{
    static __thread time_t made_for = -1;
    static __thread char made[24];
    struct timespec ts;
    size_t n;
    long thousandths;

    clock_gettime(CLOCK_REALTIME, &ts);
    if (ts.tv_sec != made_for) {
        struct tm tm;

        gmtime_r(&ts.tv_sec, &tm);
        if (strftime(made, sizeof(made), "%Y-%m-%dT%H:%M:%S", &tm) == 0)
            made[0] = '\0';
        made_for = ts.tv_sec;
    }
    n = strlen(made);
    memcpy(out, made, n);
    thousandths = ts.tv_nsec / 1000000L; /* of the second */
    out[n++] = '.';
    out[n++] = (char)('0' + thousandths / 100);
    out[n++] = (char)('0' + thousandths / 10 % 10);
    out[n++] = (char)('0' + thousandths % 10);
    out[n++] = 'Z';
    out[n] = '\0';
}

/* Write all of @len bytes of @buf to standard error. */
static void write_all(const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(STDERR_FILENO, buf, len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return; /* nowhere to say it */
        buf += n;
        len -= (size_t)n;
    }
}

/* One line of the request log, written with one write(): every request's thread writes
 * one, and stdio's stream lock on stderr made them queue behind each other under load.
 * A line up to PIPE_BUF bytes reaches a pipe whole, between other threads' lines. */
__attribute__((format(printf, 1, 2))) static void log_line(const char *fmt, ...)
{
    char stack[1024], *buf = stack;
    va_list ap;
    int len;

    va_start(ap, fmt);
    len = vsnprintf(stack, sizeof(stack), fmt, ap);
    va_end(ap);
    if (len < 0)
        return;
    if ((size_t)len >= sizeof(stack)) {
        if ((buf = malloc((size_t)len + 1)) == NULL)
            return;
        va_start(ap, fmt);
        vsnprintf(buf, (size_t)len + 1, fmt, ap);
        va_end(ap);
    }
    write_all(buf, (size_t)len);
    if (buf != stack)
        free(buf);
}

/* A line built in a buffer (printf and jansson cost a request more than its schema check):
 * fields appended; ok stays 0 once one does not fit, or is not the builder's to write. */
typedef struct plain {
    char buf[1024];
    size_t len;
    int ok;
} plain;

static void put_n(plain *l, const char *s, size_t n)
{
    if (n >= sizeof(l->buf) - l->len) {
        l->ok = 0;
        return;
    }
    memcpy(l->buf + l->len, s, n);
    l->len += n;
}

static void put(plain *l, const char *s)
{
    put_n(l, s, strlen(s));
}

static void put_unsigned(plain *l, unsigned long long v)
{
    char digits[24];
    size_t at = sizeof(digits) - 1;

    digits[at] = '\0';
    do
        digits[--at] = (char)('0' + v % 10);
    while ((v /= 10) > 0);
    put(l, digits + at);
}

/* @s as a JSON string, escaped as jansson escapes it (json_write.h), null for NULL; ok = 0
 * when it does not fit, or is not UTF-8 (jansson refuses it too). */
static void put_json_string(plain *l, const char *s)
{
    size_t room = sizeof(l->buf) - l->len, len;

    if (s == NULL) {
        put(l, "null");
        return;
    }
    len = gw_json_string(l->buf + l->len, room, s, strlen(s));
    if (len == 0 || len >= room) {
        l->ok = 0;
        return;
    }
    l->len += len;
}

/* @seconds (>= 0) to the microsecond, as a JSON number with a fraction ("0.0253", "2.0");
 * a duration is never negative nor over a day, but is held to 0 .. 1e9 s all the same. */
static void put_seconds(plain *l, double seconds)
{
    unsigned long long us =
        seconds > 0 ? (unsigned long long)((seconds < 1e9 ? seconds : 1e9) * 1e6 + 0.5) : 0ULL;
    char frac[6];
    size_t n = sizeof(frac);

    put_unsigned(l, us / 1000000ULL);
    put(l, ".");
    for (size_t i = sizeof(frac); i-- > 0; us /= 10)
        frac[i] = (char)('0' + us % 10);
    while (n > 1 && frac[n - 1] == '0')
        n--;
    put_n(l, frac, n);
}

/* The JSON line of gw_log_request() into @l, its members in the order jansson wrote them;
 * 0 when a field did not fit or is not UTF-8. */
static int json_line(plain *l, const gw_log_entry *e)
{
    char when[32];

    utc_now(when);
    l->len = 0;
    l->ok = 1;
    put(l, "{\"time\":\"");
    put(l, when);
    put(l, "\",\"msg\":\"request\",\"id\":");
    put_json_string(l, e->id);
    put(l, ",\"route\":");
    put_json_string(l, e->route);
    put(l, ",\"tenant\":");
    put_json_string(l, e->tenant);
    put(l, ",\"tool\":");
    put_json_string(l, e->tool);
    put(l, ",\"key\":");
    put_json_string(l, e->key);
    put(l, ",\"code\":");
    put_unsigned(l, e->code);
    put(l, ",\"status\":");
    put_json_string(l, e->status);
    put(l, ",\"seconds\":");
    put_seconds(l, e->seconds);
    put(l, ",\"trace_id\":");
    put_json_string(l, e->trace_id);
    put(l, ",\"span_id\":");
    put_json_string(l, e->span_id);
    put(l, "}\n");
    return l->ok;
}

/* The JSON line through jansson: for a line longer than json_line()'s buffer. */
static void log_json(const gw_log_entry *e)
{
    char when[32], *text;
    json_t *line;

    utc_now(when);
    line = json_pack("{s:s, s:s, s:s, s:s, s:s?, s:s, s:s?, s:i, s:s?, s:f, s:s?, s:s?}", "time",
                     when, "msg", "request", "id", e->id, "route", e->route, "tenant", e->tenant,
                     "tool", e->tool, "key", e->key, "code", (int)e->code, "status", e->status,
                     "seconds", e->seconds, "trace_id", e->trace_id, "span_id", e->span_id);
    text = line != NULL ? json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    if (text != NULL)
        log_line("%s\n", text);
    free(text);
    json_decref(line);
}

/* The line of gw_log_request() into @l; 0 when a field did not fit. */
static int plain_line(plain *l, const gw_log_entry *e)
{
    /* Milliseconds to one decimal, rounded half up (a duration is never negative). */
    unsigned long long tenths =
        e->seconds > 0 ? (unsigned long long)(e->seconds * 10000.0 + 0.5) : 0ULL;

    l->len = 0;
    l->ok = 1;
    put(l, "idem-gateway: request id=");
    put(l, e->id);
    put(l, " route=");
    put(l, e->route);
    put(l, " tenant=");
    put(l, e->tenant != NULL ? e->tenant : "-");
    put(l, " tool=");
    put(l, e->tool);
    put(l, " key=");
    put(l, e->key != NULL ? e->key : "-");
    put(l, " code=");
    put_unsigned(l, e->code);
    put(l, " status=");
    put(l, e->status != NULL ? e->status : "-");
    put(l, " ms=");
    put_unsigned(l, tenths / 10);
    put(l, ".");
    put_unsigned(l, tenths % 10);
    put(l, " trace=");
    put(l, e->trace_id != NULL ? e->trace_id : "-");
    put(l, " span=");
    put(l, e->span_id != NULL ? e->span_id : "-");
    put(l, "\n");
    return l->ok;
}

void gw_log_request(const gw_log_entry *e, int json)
{
    plain l;

    if (json ? json_line(&l, e) : plain_line(&l, e)) {
        write_all(l.buf, l.len);
        return;
    }
    if (json) {
        log_json(e);
        return;
    }
    log_line("idem-gateway: request id=%s route=%s tenant=%s tool=%s key=%s code=%u status=%s "
             "ms=%.1f trace=%s span=%s\n",
             e->id, e->route, e->tenant != NULL ? e->tenant : "-", e->tool,
             e->key != NULL ? e->key : "-", e->code, e->status != NULL ? e->status : "-",
             e->seconds * 1000.0, e->trace_id != NULL ? e->trace_id : "-",
             e->span_id != NULL ? e->span_id : "-");
}
