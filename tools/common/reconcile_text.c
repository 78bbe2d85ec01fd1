/* idem-reconcile's text: times as an operator writes them (--since), and the output: the
 * list's table, what show prints, and their JSON. Text that came from outside is shown
 * with its control characters escaped. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "core/parse.h"
#include "reconcile_text.h"

/* An age ("90m", "24h", "7d", "30s") before now, in microseconds since the epoch. */
int rt_parse_age(int64_t *out, const char *text)
{
    long long n;
    char unit = text[0] != '\0' ? text[strlen(text) - 1] : '\0';
    char digits[24];
    int64_t scale = unit == 's'   ? 1
                    : unit == 'm' ? 60
                    : unit == 'h' ? 3600
                    : unit == 'd' ? 86400
                                  : 0;
    size_t len = strlen(text);

    if (scale == 0 || len < 2 || len > sizeof(digits))
        return -1;
    memcpy(digits, text, len - 1);
    digits[len - 1] = '\0';
    if (idem__parse_whole(&n, digits, 0, 36500LL * 86400 / scale) != 0)
        return -1;
    *out = ((int64_t)time(NULL) - n * scale) * 1000000;
    return 0;
}

static int days_in_month(int year, int month)
{
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;

    return days[month - 1] + (month == 2 && leap);
}

/* A UTC time: YYYY-MM-DD, optionally with THH:MM:SS or " HH:MM:SS", optionally with Z.
 * 0, -1 when it is not one, or -2 for a day its month does not have (2024-02-31), which
 * timegm() would move on into the next month in silence. */
int rt_parse_time(int64_t *out, const char *text)
{
    struct tm tm;
    int n = 0, m = 0;
    time_t t;

    memset(&tm, 0, sizeof(tm));
    if (sscanf(text, "%4d-%2d-%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &n) != 3 || n != 10)
        return -1;
    if ((text[n] == 'T' || text[n] == ' ') &&
        (sscanf(text + n + 1, "%2d:%2d:%2d%n", &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &m) != 3 ||
         m != 8))
        return -1;
    n += m > 0 ? m + 1 : 0;
    if (strcmp(text + n, "") != 0 && strcmp(text + n, "Z") != 0)
        return -1;
    if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour < 0 ||
        tm.tm_hour > 23 || tm.tm_min < 0 || tm.tm_min > 59 || tm.tm_sec < 0 || tm.tm_sec > 60 ||
        tm.tm_year < 1970)
        return -1;
    if (tm.tm_mday > days_in_month(tm.tm_year, tm.tm_mon))
        return -2;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    t = timegm(&tm);
    if (t < 0 || t >= (time_t)253402300800LL) /* 10000-01-01: a leap second rolls over */
        return -1;
    *out = (int64_t)t * 1000000;
    return 0;
}

/* "2024-05-01 09:30:00" (UTC), or with @iso "2024-05-01T09:30:00.123456Z"; "" for 0. */
const char *rt_format_time(char *buf, size_t size, int64_t us, int iso)
{
    time_t t = (time_t)(us / 1000000);
    struct tm tm;
    char base[24];

    if (us == 0 || gmtime_r(&t, &tm) == NULL) {
        buf[0] = '\0';
        return buf;
    }
    strftime(base, sizeof(base), iso ? "%Y-%m-%dT%H:%M:%S" : "%Y-%m-%d %H:%M:%S", &tm);
    if (iso)
        snprintf(buf, size, "%s.%06dZ", base, (int)(us % 1000000));
    else
        snprintf(buf, size, "%s", base);
    return buf;
}

json_t *rt_time_json(int64_t us)
{
    char buf[48];

    return us != 0 ? json_string(rt_format_time(buf, sizeof(buf), us, 1)) : json_null();
}

json_t *rt_str_json(const char *s)
{
    return s != NULL ? json_string(s) : json_null();
}

static const char *matches_text(int matches)
{
    return matches > 0 ? "yes" : matches == 0 ? "no" : "unknown";
}

static json_t *item_json(const idem_reconcile_item *it)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:I, s:o, s:o, s:b, s:o, s:o, s:o}", "tenant",
                     it->tenant, "operation_id", it->operation_id, "kind", it->kind, "tool",
                     it->tool, "fingerprint", it->fingerprint, "fingerprint_matches",
                     it->fingerprint_matches < 0 ? json_null()
                                                 : json_boolean(it->fingerprint_matches),
                     "count", (json_int_t)it->count, "first_seen", rt_time_json(it->first_seen),
                     "last_seen", rt_time_json(it->last_seen), "open", it->resolved_at == 0,
                     "resolved_at", rt_time_json(it->resolved_at), "resolved_by",
                     rt_str_json(it->resolved_by), "note", rt_str_json(it->note));
}

json_t *rt_items_json(const idem_reconcile_items *items)
{
    json_t *array = json_array();

    for (size_t i = 0; array != NULL && i < idem_reconcile_items_count(items); i++)
        json_array_append_new(array, item_json(idem_reconcile_items_at(items, i)));
    return array;
}

/* @s as text for a terminal: bytes that would move the cursor or change the terminal (C0
 * controls, DEL) written \xNN. A note, a provider's reference or error text came from
 * outside; what is shown must not be able to rewrite what is around it. In @buf; cut at
 * its size. */
static const char *shown(char *buf, size_t size, const char *s)
{
    size_t o = 0;

    for (; s != NULL && *s != '\0' && o + 5 < size; s++) {
        unsigned char ch = (unsigned char)*s;

        if (ch < 0x20 || ch == 0x7f)
            o += (size_t)snprintf(buf + o, size - o, "\\x%02x", ch);
        else
            buf[o++] = (char)ch;
    }
    buf[o] = '\0';
    return buf;
}

void rt_print_item_row(const idem_reconcile_item *it)
{
    char first[32], last[32], resolved[32], by[256];

    printf("%-16s %-36s %-16s %-24s %-7s %6lld  %-19s  %-19s  ", it->tenant, it->operation_id,
           it->kind, it->tool, matches_text(it->fingerprint_matches), it->count,
           rt_format_time(first, sizeof(first), it->first_seen, 0),
           rt_format_time(last, sizeof(last), it->last_seen, 0));
    if (it->resolved_at == 0)
        printf("open\n");
    else
        printf("%s by %s\n", rt_format_time(resolved, sizeof(resolved), it->resolved_at, 0),
               shown(by, sizeof(by), it->resolved_by));
}

json_t *rt_record_json(const idem_reconcile_record *r)
{
    if (r == NULL)
        return json_null();
    return json_pack(
        "{s:s, s:s, s:i, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "state", r->state, "tool",
        r->tool, "payload_version", r->payload_version, "fingerprint", r->fingerprint, "receipt",
        r->receipt != NULL ? json_stringn(r->receipt, r->receipt_len) : json_null(), "trace_id",
        rt_str_json(r->trace_id), "created_at", rt_time_json(r->created_at), "completed_at",
        rt_time_json(r->completed_at), "expires_at", rt_time_json(r->expires_at), "forget_at",
        rt_time_json(r->forget_at), "expired_at", rt_time_json(r->expired_at));
}

void rt_print_record(const idem_reconcile_record *r)
{
    char t[32];
    int tomb = strcmp(r->state, "expired") == 0;

    printf("%s: state %s\n", tomb ? "tombstone" : "record", r->state);
    printf("  tool           %s (payload version %d)\n", r->tool, r->payload_version);
    printf("  fingerprint    %s\n", r->fingerprint);
    printf("  created        %s UTC\n", rt_format_time(t, sizeof(t), r->created_at, 0));
    if (r->completed_at != 0)
        printf("  completed      %s UTC\n", rt_format_time(t, sizeof(t), r->completed_at, 0));
    if (tomb)
        printf("  expired        %s UTC (receipt dropped)\n",
               rt_format_time(t, sizeof(t), r->expired_at, 0));
    else
        printf("  kept until     %s UTC\n", rt_format_time(t, sizeof(t), r->expires_at, 0));
    /* A key is remembered while its record is kept, and then as a tombstone until its
     * forget_at: never to a time before the record's expiry. */
    if (r->forget_at != 0 || tomb)
        printf("  remembered to  %s UTC\n",
               rt_format_time(t, sizeof(t),
                              r->forget_at > r->expires_at ? r->forget_at : r->expires_at, 0));
    if (r->trace_id != NULL)
        printf("  trace ID       %s\n", r->trace_id); /* validated: no control characters */
    if (r->receipt != NULL)
        printf("  receipt        %.*s\n", (int)r->receipt_len, r->receipt);
}

/* What the item's latest fingerprint was compared with: the key's tombstone, its live
 * record, or nothing when the key is forgotten. */
static void print_item_fingerprint(const idem_reconcile_item *it, const idem_reconcile_record *r)
{
    if (r == NULL || it->fingerprint_matches < 0)
        printf("fingerprint %s (the key is forgotten: nothing to compare it with)\n",
               it->fingerprint);
    else
        printf("fingerprint %s matches the %s: %s\n", it->fingerprint,
               strcmp(r->state, "expired") == 0 ? "tombstone" : "record",
               matches_text(it->fingerprint_matches));
}

void rt_print_item_detail(const idem_reconcile_item *it, const idem_reconcile_record *record)
{
    char first[32], last[32], resolved[32], text[4096];

    printf("  %s: %lld request%s, first %s, last %s UTC; tool %s; ", it->kind, it->count,
           it->count == 1 ? "" : "s", rt_format_time(first, sizeof(first), it->first_seen, 0),
           rt_format_time(last, sizeof(last), it->last_seen, 0), it->tool);
    print_item_fingerprint(it, record);
    if (it->resolved_at != 0)
        printf("    resolved %s UTC by %s\n",
               rt_format_time(resolved, sizeof(resolved), it->resolved_at, 0),
               shown(text, sizeof(text), it->resolved_by));
    else
        printf("    open\n");
    if (it->note != NULL)
        printf("    note: %s\n", shown(text, sizeof(text), it->note));
}

/* The provider's answers to resolvers (external.h, "Resolvers"), oldest first. */
static json_t *probes_json(const idem_external_history *h)
{
    json_t *probes = json_array();

    for (size_t i = 0; probes != NULL && i < idem_external_history_probe_count(h); i++) {
        const idem_external_probe_record *p = idem_external_history_probe_at(h, i);

        json_array_append_new(probes, json_pack("{s:o, s:i, s:s, s:s, s:s, s:o, s:o, s:o, s:b}",
                                                "answered_at", rt_time_json(p->answered_at),
                                                "took_ms", p->took_ms, "asked_by", p->asked_by,
                                                "resolver", p->resolver, "answer", p->answer,
                                                "provider_ref", rt_str_json(p->provider_ref),
                                                "result", rt_str_json(p->result), "reason",
                                                rt_str_json(p->reason), "changed", p->changed));
    }
    return probes;
}

json_t *rt_history_json(const idem_external_history *h)
{
    json_t *attempts, *doc;

    if (h == NULL)
        return json_null();
    attempts = json_array();
    for (size_t i = 0; attempts != NULL && i < idem_external_history_count(h); i++) {
        const idem_external_attempt_record *a = idem_external_history_at(h, i);

        json_array_append_new(
            attempts, json_pack("{s:i, s:o, s:o, s:o, s:o, s:o}", "number", a->number, "started_at",
                                rt_time_json(a->started_at), "ended_at", rt_time_json(a->ended_at),
                                "outcome", rt_str_json(a->outcome), "provider_ref",
                                rt_str_json(a->provider_ref), "error", rt_str_json(a->error)));
    }
    doc = json_pack("{s:s, s:o, s:o, s:b, s:o, s:o, s:o}", "downstream_key",
                    idem_external_history_downstream_key(h), "provider_ref",
                    rt_str_json(idem_external_history_provider_ref(h)), "lease_expires_at",
                    rt_time_json(idem_external_history_lease_expires_at(h)), "lease_live",
                    idem_external_history_lease_live(h), "outbox_state",
                    rt_str_json(idem_external_history_outbox_state(h)), "next_attempt_at",
                    rt_time_json(idem_external_history_next_attempt_at(h)), "attempts", attempts);
    if (doc != NULL)
        json_object_set_new(doc, "probes", probes_json(h));
    return doc;
}

/* The provider's answers, one a line. */
static void print_probes(const idem_external_history *h)
{
    char t[32], text[4096];

    if (idem_external_history_probe_count(h) == 0)
        return;
    printf("provider asked: %zu\n", idem_external_history_probe_count(h));
    for (size_t i = 0; i < idem_external_history_probe_count(h); i++) {
        const idem_external_probe_record *p = idem_external_history_probe_at(h, i);

        printf("  %s UTC by %s (%s, %d ms): %s%s", rt_format_time(t, sizeof(t), p->answered_at, 0),
               shown(text, sizeof(text), p->resolver), p->asked_by, p->took_ms, p->answer,
               p->changed ? ", settled the record" : "");
        if (p->provider_ref != NULL)
            printf("; provider ref %s", shown(text, sizeof(text), p->provider_ref));
        if (p->reason != NULL)
            printf("; %s", shown(text, sizeof(text), p->reason));
        printf("\n");
    }
}

void rt_print_history(const idem_external_history *h)
{
    char t[32], u[32], text[4096];

    printf("external operation: downstream key %s\n", idem_external_history_downstream_key(h));
    if (idem_external_history_provider_ref(h) != NULL)
        printf("  provider ref   %s\n",
               shown(text, sizeof(text), idem_external_history_provider_ref(h)));
    if (idem_external_history_lease_expires_at(h) != 0)
        printf("  lease          %s %s UTC\n",
               idem_external_history_lease_live(h) ? "held until" : "lapsed at",
               rt_format_time(t, sizeof(t), idem_external_history_lease_expires_at(h), 0));
    if (idem_external_history_outbox_state(h) != NULL)
        printf("  outbox item    %s%s%s\n", idem_external_history_outbox_state(h),
               idem_external_history_next_attempt_at(h) != 0 ? ", next attempt at " : "",
               rt_format_time(t, sizeof(t), idem_external_history_next_attempt_at(h), 0));
    printf("attempts: %zu\n", idem_external_history_count(h));
    for (size_t i = 0; i < idem_external_history_count(h); i++) {
        const idem_external_attempt_record *a = idem_external_history_at(h, i);

        printf("  %d: started %s UTC, %s%s%s", a->number,
               rt_format_time(t, sizeof(t), a->started_at, 0),
               a->outcome != NULL ? a->outcome : "running", a->ended_at != 0 ? " at " : "",
               rt_format_time(u, sizeof(u), a->ended_at, 0));
        if (a->provider_ref != NULL)
            printf("; provider ref %s", shown(text, sizeof(text), a->provider_ref));
        if (a->error != NULL)
            printf("; error: %s", shown(text, sizeof(text), a->error));
        printf("\n");
    }
    print_probes(h);
}
