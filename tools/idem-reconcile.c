/* idem-reconcile: list, show and resolve reconciliation items, the calls idem refused to
 * execute and a person must look at (include/idem/reconcile.h). */
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "idem/idem.h"

#include "cli.h"

enum exit_code {
    EXIT_OK = 0,
    EXIT_ERROR = 1,
    EXIT_NOT_FOUND = 2,
    EXIT_USAGE = CLI_EXIT_USAGE,
    EXIT_TEMPFAIL = 75,
};

static const char usage_text[] =
    "usage: idem-reconcile [OPTIONS] list\n"
    "       idem-reconcile [OPTIONS] show TENANT OPERATION_ID\n"
    "       idem-reconcile [OPTIONS] resolve TENANT OPERATION_ID --note TEXT\n"
    "       idem-reconcile [OPTIONS] resolve TENANT OPERATION_ID --as OUTCOME --note TEXT\n"
    "\n"
    "Reconciliation items are calls that idem refused to execute and a person must look\n"
    "at: kind \"expired\" is a retry that arrived after its key's retention window (it ran\n"
    "no effect). One item per tenant, operation ID and kind; a repeated retry raises its\n"
    "count and reopens it. Kind \"outcome_unknown\" is an external dispatch (an email, a\n"
    "payment) whose result is not known: every call on the key answers outcome_unknown\n"
    "until someone finds out at the provider what happened and resolves it with --as.\n"
    "Kinds \"outbox_exhausted\" (an outbox item spent its attempts) and \"lease_lost\" (an\n"
    "attempt reported after another took its key over) are resolved the same way. Kind\n"
    "\"intent\" is an approved intent whose operation ended expired, outcome_unknown or\n"
    "conflict: the intent waits in state needs_reconciliation.\n"
    "\n"
    "Commands:\n"
    "  list      items, most recently seen first\n"
    "  show      the key's record or tombstone, every item of the key, and an external\n"
    "            operation's downstream key, lease and attempt history\n"
    "  resolve   mark the key's open items resolved, with a note, who and when; with --as,\n"
    "            also settle an external operation's outcome: later calls replay it\n"
    "\n"
    "Options:\n"
    "  --dsn CONNINFO         libpq connection string or postgresql:// URI; without it the\n"
    "                         PG* environment variables are used\n"
    "  --tenant TENANT        list: only this tenant's items\n"
    "  --kind KIND            list, resolve: only items of this kind\n"
    "  --open                 list: only open items\n"
    "  --resolved             list: only resolved items\n"
    "  --since WHEN           list: items last seen at or after WHEN, a UTC time\n"
    "                         (2024-05-01, 2024-05-01T09:30:00Z) or an age (90m, 24h, 7d)\n"
    "  --limit N              list: at most N items (default 1000; 0 = all)\n"
    "  --note TEXT            resolve: what was found or done (required)\n"
    "  --by NAME              resolve: who resolved it (default: the database role)\n"
    "  --as OUTCOME           resolve: what the provider did: completed (later calls replay\n"
    "                         the receipt), failed or abandoned (later calls are rejected;\n"
    "                         never dispatched again)\n"
    "  --reference REF        resolve --as: the provider's reference (message, payment ID)\n"
    "  --receipt JSON         resolve --as: the receipt later calls get (default: one saying\n"
    "                         how it was resolved, with the note and reference)\n"
    "  --json                 print JSON\n"
    "  --connect-timeout SEC  longest wait to connect (default 10, or PGCONNECT_TIMEOUT)\n"
    "  -h, --help             print this help\n"
    "  -V, --version          print the version\n"
    "\n"
    "Exit status:\n"
    "   0  done (list: also when nothing matches)\n"
    "   1  error: a database error, the schema lacks migration 0003, connection\n"
    "      settings that cannot work (a DSN that does not parse, a wrong password, a\n"
    "      role or database that does not exist), or a role without idem_operator's\n"
    "      rights (the message says what to GRANT)\n"
    "   2  show: nothing is recorded for the key; resolve: no open item for it (--as: no\n"
    "      external operation under it)\n"
    "  64  usage error\n"
    "  75  database unavailable: no server answers (or not in time), connection lost,\n"
    "      a lock or statement timeout; resolve --as: an attempt holds a live lease, try\n"
    "      later\n";

typedef struct cli {
    const char *command;
    const char *dsn;
    const char *tenant;       /* show, resolve */
    const char *operation_id; /* show, resolve */
    const char *note;
    const char *by;
    unsigned int connect_timeout_s;
    int json;
    idem_reconcile_filter filter;
    int resolve_as; /* -1: not given */
    const char *reference;
    const char *receipt;
} cli;

#define usage_error(...) cli_usage_error("idem-reconcile", __VA_ARGS__)
/* Every line on stderr: "idem-reconcile: " and one line, whatever libpq or the server put
 * in it (cli.c). */
#define say(...) cli_say("idem-reconcile", __VA_ARGS__)

/* ---- options ----------------------------------------------------------------------------- */

/* An age ("90m", "24h", "7d", "30s") before now, in microseconds since the epoch. */
static int parse_age(int64_t *out, const char *text)
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
    if (cli_parse_number(&n, digits, 0, 36500LL * 86400 / scale) != 0)
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
static int parse_time(int64_t *out, const char *text)
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
    if (t < 0)
        return -1;
    *out = (int64_t)t * 1000000;
    return 0;
}

static int parse_resolution(cli *c, const char *arg)
{
    static const char *const names[] = {"completed", "failed", "abandoned"};

    for (int i = 0; i < 3; i++) {
        if (strcmp(arg, names[i]) == 0) {
            c->resolve_as = i;
            return 0;
        }
    }
    return usage_error("--as: '%s' is not completed, failed or abandoned", arg);
}

/* --since: an age or a UTC time. */
static int parse_since(cli *c, const char *arg)
{
    int rc;

    if (parse_age(&c->filter.since, arg) == 0)
        return 0;
    rc = parse_time(&c->filter.since, arg);
    if (rc == -2)
        return usage_error("--since: '%s' is not a day of the calendar (its month is shorter)",
                           arg);
    if (rc != 0)
        return usage_error("--since: '%s' is neither a UTC time (2024-05-01, "
                           "2024-05-01T09:30:00Z) nor an age (90m, 24h, 7d)",
                           arg);
    return 0;
}

/* --open or --resolved; both at once would match nothing, and the last one given would
 * otherwise win in silence. */
static int set_state(cli *c, idem_reconcile_state state)
{
    if (c->filter.state != IDEM_RECONCILE_ANY && c->filter.state != state)
        return usage_error("--open and --resolved contradict each other: give one of them, or "
                           "neither for every item");
    c->filter.state = state;
    return 0;
}

static int parse_option(cli *c, int opt, const char *arg)
{
    long long n;

    switch (opt) {
    case 'd':
        c->dsn = arg;
        return 0;
    case 't':
        c->filter.tenant = arg;
        return 0;
    case 'k':
        c->filter.kind = arg;
        return 0;
    case 'o':
        return set_state(c, IDEM_RECONCILE_OPEN);
    case 'r':
        return set_state(c, IDEM_RECONCILE_RESOLVED);
    case 's':
        return parse_since(c, arg);
    case 'l':
        if (cli_parse_number(&n, arg, 0, 1000000000) != 0)
            return usage_error("--limit: '%s' is not a whole number from 0 to 1000000000", arg);
        c->filter.limit = (unsigned int)n;
        return 0;
    case 'n':
        c->note = arg;
        return 0;
    case 'b':
        c->by = arg;
        return 0;
    case 'j':
        c->json = 1;
        return 0;
    case 'a':
        return parse_resolution(c, arg);
    case 'R':
        c->reference = arg;
        return 0;
    case 'J':
        c->receipt = arg;
        return 0;
    case 'c':
        if (cli_parse_number(&n, arg, 1, 3600) != 0)
            return usage_error("--connect-timeout: '%s' is not a number of seconds (1 to 3600)",
                               arg);
        c->connect_timeout_s = (unsigned int)n;
        return 0;
    default:
        return usage_error("unknown option");
    }
}

/* The command and its operands, and which options it takes. */
static int check_command(cli *c, int nargs, char **args)
{
    int list = strcmp(c->command, "list") == 0, resolve = strcmp(c->command, "resolve") == 0;

    if (!list && !resolve && strcmp(c->command, "show") != 0)
        return usage_error("unknown command '%s' (list, show, resolve)", c->command);
    if (list && nargs != 0)
        return usage_error("list takes no operands (filter with --tenant, --kind, ...)");
    if (!list && nargs != 2)
        return usage_error("%s needs TENANT OPERATION_ID", c->command);
    if (!list) {
        c->tenant = args[0];
        c->operation_id = args[1];
    }
    if (!list &&
        (c->filter.tenant != NULL || c->filter.state != IDEM_RECONCILE_ANY || c->filter.since != 0))
        return usage_error("--tenant, --open, --resolved and --since are for list");
    if (!list && !resolve && c->filter.kind != NULL)
        return usage_error("--kind is for list and resolve");
    if (!resolve && (c->note != NULL || c->by != NULL))
        return usage_error("--note and --by are for resolve");
    if (resolve && c->note == NULL)
        return usage_error("resolve needs --note TEXT: what was found or done");
    if (c->resolve_as < 0 && (c->reference != NULL || c->receipt != NULL))
        return usage_error("--reference and --receipt are for resolve --as");
    if (c->resolve_as >= 0 && (!resolve || c->filter.kind != NULL))
        return usage_error("--as is for resolve, without --kind");
    return -1;
}

/* Returns -1 to go on, else the exit status. */
static int parse_args(cli *c, int argc, char **argv)
{
    static const struct option longs[] = {
        {"dsn", required_argument, NULL, 'd'},
        {"tenant", required_argument, NULL, 't'},
        {"kind", required_argument, NULL, 'k'},
        {"open", no_argument, NULL, 'o'},
        {"resolved", no_argument, NULL, 'r'},
        {"since", required_argument, NULL, 's'},
        {"limit", required_argument, NULL, 'l'},
        {"note", required_argument, NULL, 'n'},
        {"by", required_argument, NULL, 'b'},
        {"json", no_argument, NULL, 'j'},
        {"connect-timeout", required_argument, NULL, 'c'},
        {"as", required_argument, NULL, 'a'},
        {"reference", required_argument, NULL, 'R'},
        {"receipt", required_argument, NULL, 'J'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int opt, rc;

    opterr = 0;
    while ((opt = getopt_long(argc, argv, "hV", longs, NULL)) != -1) {
        if (opt == 'h') {
            fputs(usage_text, stdout);
            return EXIT_OK;
        }
        if (opt == 'V') {
            printf("idem-reconcile %s\n", idem_version());
            return EXIT_OK;
        }
        if (opt == '?')
            return usage_error("unknown option or missing argument: %s", argv[optind - 1]);
        if ((rc = parse_option(c, opt, optarg)) != 0)
            return rc;
    }
    if (optind == argc)
        return usage_error("a command is needed (list, show, resolve)");
    c->command = argv[optind];
    return check_command(c, argc - optind - 1, argv + optind + 1);
}

/* Connect, bounded by --connect-timeout, else by PGCONNECT_TIMEOUT (cli.c makes 10 s the
 * default); a connect_timeout in the DSN wins over both. */
static PGconn *connect_db(const cli *c, int *transient)
{
    char timeout[16];

    if (c->connect_timeout_s > 0) {
        snprintf(timeout, sizeof(timeout), "%u", c->connect_timeout_s);
        setenv("PGCONNECT_TIMEOUT", timeout, 1);
    }
    return cli_connect("idem-reconcile", c->dsn, transient);
}

static int fail(const char *what, int rc, const idem_error *err)
{
    say("%s: %s", what, err->message[0] != '\0' ? err->message : idem_strerror(rc));
    switch (rc) {
    case IDEM_ENOTFOUND:
        return EXIT_NOT_FOUND;
    case IDEM_EINVAL:
        return EXIT_USAGE;
    case IDEM_EUNAVAIL:
    case IDEM_EBUSY:
        return EXIT_TEMPFAIL;
    case IDEM_EDB: /* a lock or statement timeout, say */
        return cli_sqlstate_transient(err->sqlstate) ? EXIT_TEMPFAIL : EXIT_ERROR;
    default:
        return EXIT_ERROR;
    }
}

/* ---- output ------------------------------------------------------------------------------ */

/* "2024-05-01 09:30:00" (UTC), or with @iso "2024-05-01T09:30:00.123456Z"; "" for 0. */
static const char *format_time(char *buf, size_t size, int64_t us, int iso)
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

static json_t *time_json(int64_t us)
{
    char buf[48];

    return us != 0 ? json_string(format_time(buf, sizeof(buf), us, 1)) : json_null();
}

static json_t *str_json(const char *s)
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
                     "count", (json_int_t)it->count, "first_seen", time_json(it->first_seen),
                     "last_seen", time_json(it->last_seen), "open", it->resolved_at == 0,
                     "resolved_at", time_json(it->resolved_at), "resolved_by",
                     str_json(it->resolved_by), "note", str_json(it->note));
}

static json_t *items_json(const idem_reconcile_items *items)
{
    json_t *array = json_array();

    for (size_t i = 0; array != NULL && i < idem_reconcile_items_count(items); i++)
        json_array_append_new(array, item_json(idem_reconcile_items_at(items, i)));
    return array;
}

static int print_json(json_t *doc)
{
    char *text = doc != NULL ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;

    json_decref(doc);
    if (text == NULL) {
        say("out of memory");
        return EXIT_ERROR;
    }
    puts(text);
    free(text);
    return EXIT_OK;
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

static void print_item_row(const idem_reconcile_item *it)
{
    char first[32], last[32], resolved[32], by[256];

    printf("%-16s %-36s %-16s %-24s %-7s %6lld  %-19s  %-19s  ", it->tenant, it->operation_id,
           it->kind, it->tool, matches_text(it->fingerprint_matches), it->count,
           format_time(first, sizeof(first), it->first_seen, 0),
           format_time(last, sizeof(last), it->last_seen, 0));
    if (it->resolved_at == 0)
        printf("open\n");
    else
        printf("%s by %s\n", format_time(resolved, sizeof(resolved), it->resolved_at, 0),
               shown(by, sizeof(by), it->resolved_by));
}

static int cmd_list(cli *c, PGconn *conn)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_reconcile_items *items = NULL;
    size_t n, open = 0;
    int rc = idem_reconcile_list(&items, conn, &c->filter, &err);

    if (rc != 0)
        return fail("list", rc, &err);
    n = idem_reconcile_items_count(items);
    if (c->json) {
        rc =
            print_json(json_pack("{s:I, s:o}", "count", (json_int_t)n, "items", items_json(items)));
        idem_reconcile_items_free(items);
        return rc;
    }
    if (n > 0)
        printf("%-16s %-36s %-16s %-24s %-7s %6s  %-19s  %-19s  %s\n", "TENANT", "OPERATION ID",
               "KIND", "TOOL", "MATCHES", "COUNT", "FIRST SEEN (UTC)", "LAST SEEN (UTC)",
               "RESOLVED");
    for (size_t i = 0; i < n; i++) {
        print_item_row(idem_reconcile_items_at(items, i));
        open += idem_reconcile_items_at(items, i)->resolved_at == 0;
    }
    printf("%zu item%s, %zu open\n", n, n == 1 ? "" : "s", open);
    idem_reconcile_items_free(items);
    return EXIT_OK;
}

static json_t *record_json(const idem_reconcile_record *r)
{
    if (r == NULL)
        return json_null();
    return json_pack(
        "{s:s, s:s, s:i, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "state", r->state, "tool",
        r->tool, "payload_version", r->payload_version, "fingerprint", r->fingerprint, "receipt",
        r->receipt != NULL ? json_stringn(r->receipt, r->receipt_len) : json_null(), "trace_id",
        str_json(r->trace_id), "created_at", time_json(r->created_at), "completed_at",
        time_json(r->completed_at), "expires_at", time_json(r->expires_at), "forget_at",
        time_json(r->forget_at), "expired_at", time_json(r->expired_at));
}

static void print_record(const idem_reconcile_record *r)
{
    char t[32];
    int tomb = strcmp(r->state, "expired") == 0;

    printf("%s: state %s\n", tomb ? "tombstone" : "record", r->state);
    printf("  tool           %s (payload version %d)\n", r->tool, r->payload_version);
    printf("  fingerprint    %s\n", r->fingerprint);
    printf("  created        %s UTC\n", format_time(t, sizeof(t), r->created_at, 0));
    if (r->completed_at != 0)
        printf("  completed      %s UTC\n", format_time(t, sizeof(t), r->completed_at, 0));
    if (tomb)
        printf("  expired        %s UTC (receipt dropped)\n",
               format_time(t, sizeof(t), r->expired_at, 0));
    else
        printf("  kept until     %s UTC\n", format_time(t, sizeof(t), r->expires_at, 0));
    if (r->forget_at != 0 || tomb)
        printf("  remembered to  %s UTC\n",
               format_time(t, sizeof(t), r->forget_at != 0 ? r->forget_at : r->expires_at, 0));
    if (r->trace_id != NULL)
        printf("  trace ID       %s\n", r->trace_id); /* validated: no control characters */
    if (r->receipt != NULL)
        printf("  receipt        %.*s\n", (int)r->receipt_len, r->receipt);
}

static void print_item_detail(const idem_reconcile_item *it)
{
    char first[32], last[32], resolved[32], text[4096];

    printf("  %s: %lld request%s, first %s, last %s UTC; tool %s; fingerprint %s matches the "
           "tombstone: %s\n",
           it->kind, it->count, it->count == 1 ? "" : "s",
           format_time(first, sizeof(first), it->first_seen, 0),
           format_time(last, sizeof(last), it->last_seen, 0), it->tool, it->fingerprint,
           matches_text(it->fingerprint_matches));
    if (it->resolved_at != 0)
        printf("    resolved %s UTC by %s\n",
               format_time(resolved, sizeof(resolved), it->resolved_at, 0),
               shown(text, sizeof(text), it->resolved_by));
    else
        printf("    open\n");
    if (it->note != NULL)
        printf("    note: %s\n", shown(text, sizeof(text), it->note));
}

/* An external operation's downstream key, lease, outbox item and attempts; NULL when the key
 * is not one (or the schema predates external effects). */
static idem_external_history *read_history(PGconn *conn, const cli *c)
{
    idem_external_history *h = NULL;
    idem_error err = IDEM_ERROR_INIT;

    if (idem_external_history_get(&h, conn, c->tenant, c->operation_id, &err) != 0)
        return NULL;
    return h;
}

static json_t *history_json(const idem_external_history *h)
{
    json_t *attempts;

    if (h == NULL)
        return json_null();
    attempts = json_array();
    for (size_t i = 0; attempts != NULL && i < idem_external_history_count(h); i++) {
        const idem_external_attempt_record *a = idem_external_history_at(h, i);

        json_array_append_new(
            attempts, json_pack("{s:i, s:o, s:o, s:o, s:o, s:o}", "number", a->number, "started_at",
                                time_json(a->started_at), "ended_at", time_json(a->ended_at),
                                "outcome", str_json(a->outcome), "provider_ref",
                                str_json(a->provider_ref), "error", str_json(a->error)));
    }
    return json_pack("{s:s, s:o, s:o, s:b, s:o, s:o, s:o}", "downstream_key",
                     idem_external_history_downstream_key(h), "provider_ref",
                     str_json(idem_external_history_provider_ref(h)), "lease_expires_at",
                     time_json(idem_external_history_lease_expires_at(h)), "lease_live",
                     idem_external_history_lease_live(h), "outbox_state",
                     str_json(idem_external_history_outbox_state(h)), "next_attempt_at",
                     time_json(idem_external_history_next_attempt_at(h)), "attempts", attempts);
}

static void print_history(const idem_external_history *h)
{
    char t[32], u[32], text[4096];

    printf("external operation: downstream key %s\n", idem_external_history_downstream_key(h));
    if (idem_external_history_provider_ref(h) != NULL)
        printf("  provider ref   %s\n",
               shown(text, sizeof(text), idem_external_history_provider_ref(h)));
    if (idem_external_history_lease_expires_at(h) != 0)
        printf("  lease          %s %s UTC\n",
               idem_external_history_lease_live(h) ? "held until" : "lapsed at",
               format_time(t, sizeof(t), idem_external_history_lease_expires_at(h), 0));
    if (idem_external_history_outbox_state(h) != NULL)
        printf("  outbox item    %s%s%s\n", idem_external_history_outbox_state(h),
               idem_external_history_next_attempt_at(h) != 0 ? ", next attempt at " : "",
               format_time(t, sizeof(t), idem_external_history_next_attempt_at(h), 0));
    printf("attempts: %zu\n", idem_external_history_count(h));
    for (size_t i = 0; i < idem_external_history_count(h); i++) {
        const idem_external_attempt_record *a = idem_external_history_at(h, i);

        printf("  %d: started %s UTC, %s%s%s", a->number,
               format_time(t, sizeof(t), a->started_at, 0),
               a->outcome != NULL ? a->outcome : "running", a->ended_at != 0 ? " at " : "",
               format_time(u, sizeof(u), a->ended_at, 0));
        if (a->provider_ref != NULL)
            printf("; provider ref %s", shown(text, sizeof(text), a->provider_ref));
        if (a->error != NULL)
            printf("; error: %s", shown(text, sizeof(text), a->error));
        printf("\n");
    }
}

static int cmd_show(cli *c, PGconn *conn)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_reconcile_key *key = NULL;
    idem_external_history *history;
    const idem_reconcile_record *record;
    const idem_reconcile_items *items;
    int rc = idem_reconcile_show(&key, conn, c->tenant, c->operation_id, &err);

    if (rc != 0)
        return fail("show", rc, &err);
    record = idem_reconcile_key_record(key);
    items = idem_reconcile_key_items(key);
    history = read_history(conn, c);
    if (c->json) {
        rc = print_json(json_pack("{s:s, s:s, s:o, s:o, s:o}", "tenant", c->tenant, "operation_id",
                                  c->operation_id, "record", record_json(record), "items",
                                  items_json(items), "external", history_json(history)));
        idem_external_history_free(history);
        idem_reconcile_key_free(key);
        return rc;
    }
    printf("tenant %s, operation %s\n", c->tenant, c->operation_id);
    if (record != NULL)
        print_record(record);
    else
        printf("no record or tombstone: the key has been forgotten\n");
    printf("reconciliation items: %zu\n", idem_reconcile_items_count(items));
    for (size_t i = 0; i < idem_reconcile_items_count(items); i++)
        print_item_detail(idem_reconcile_items_at(items, i));
    if (history != NULL)
        print_history(history);
    idem_external_history_free(history);
    idem_reconcile_key_free(key);
    return EXIT_OK;
}

/* Settle an external operation's outcome, and resolve its items. */
static int cmd_resolve_as(cli *c, PGconn *conn)
{
    static const char *const names[] = {"completed", "failed", "abandoned"};
    idem_error err = IDEM_ERROR_INIT;
    idem_resolution r = IDEM_RESOLUTION_INIT;
    int rc;

    r.as = (idem_resolution_kind)c->resolve_as;
    r.provider_ref = c->reference;
    r.receipt = c->receipt;
    r.receipt_len = c->receipt != NULL ? strlen(c->receipt) : 0;
    r.note = c->note;
    r.by = c->by;
    rc = idem_external_resolve(conn, c->tenant, c->operation_id, &r, &err);
    if (rc != 0)
        return fail("resolve", rc, &err);
    if (c->json)
        return print_json(json_pack("{s:s, s:s, s:s}", "tenant", c->tenant, "operation_id",
                                    c->operation_id, "resolved_as", names[c->resolve_as]));
    printf("resolved operation %s in tenant %s as %s\n", c->operation_id, c->tenant,
           names[c->resolve_as]);
    return EXIT_OK;
}

static int cmd_resolve(cli *c, PGconn *conn)
{
    idem_error err = IDEM_ERROR_INIT;
    unsigned int n = 0;
    int rc = idem_reconcile_resolve(&n, conn, c->tenant, c->operation_id, c->filter.kind, c->note,
                                    c->by, &err);

    if (rc != 0)
        return fail("resolve", rc, &err);
    if (c->json)
        return print_json(json_pack("{s:s, s:s, s:i}", "tenant", c->tenant, "operation_id",
                                    c->operation_id, "resolved", (int)n));
    printf("resolved %u item%s of operation %s in tenant %s\n", n, n == 1 ? "" : "s",
           c->operation_id, c->tenant);
    return EXIT_OK;
}

int main(int argc, char **argv)
{
    idem_reconcile_filter filter = IDEM_RECONCILE_FILTER_INIT;
    cli c;
    PGconn *conn;
    int code, transient;

    memset(&c, 0, sizeof(c));
    c.filter = filter;
    c.resolve_as = -1;
    code = parse_args(&c, argc, argv);
    if (code >= 0)
        return code;
    conn = connect_db(&c, &transient);
    if (conn == NULL)
        return transient ? EXIT_TEMPFAIL : EXIT_ERROR;
    if ((code = cli_check_all_tenants(conn, "idem-reconcile", "idem_operator")) != 0) {
        PQfinish(conn);
        return code < 0 ? EXIT_TEMPFAIL : EXIT_ERROR;
    }
    if (strcmp(c.command, "list") == 0)
        code = cmd_list(&c, conn);
    else if (strcmp(c.command, "show") == 0)
        code = cmd_show(&c, conn);
    else if (c.resolve_as >= 0)
        code = cmd_resolve_as(&c, conn);
    else
        code = cmd_resolve(&c, conn);
    PQfinish(conn);
    return code;
}
