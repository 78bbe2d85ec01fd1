/* idem-reconcile: list, show and resolve reconciliation items, the calls idem refused to
 * execute and a person must look at (include/idem/reconcile.h). */
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/idem.h"
#include "idem/sys/external.h"
#include "idem/sys/reconcile.h"

#include "cli.h"
#include "core/parse.h"
#include "reconcile_probe.h"
#include "reconcile_text.h"

static const char usage_text[] =
    "usage: idem-reconcile [OPTIONS] list\n"
    "       idem-reconcile [OPTIONS] show TENANT OPERATION_ID\n"
    "       idem-reconcile [OPTIONS] resolve TENANT OPERATION_ID --note TEXT\n"
    "       idem-reconcile [OPTIONS] resolve TENANT OPERATION_ID --as OUTCOME --note TEXT\n"
    "       idem-reconcile [OPTIONS] probe [TENANT OPERATION_ID | --all] --config FILE\n"
    "\n"
    "Reconciliation items are calls that idem refused to execute and a person must look\n"
    "at: kind \"expired\" is a retry that arrived after its key's retention window (it ran\n"
    "no effect). One item per tenant, operation ID and kind; a repeated retry raises its\n"
    "count and reopens it. Kind \"outcome_unknown\" is an external dispatch (an email, a\n"
    "payment) whose result is not known: every call on the key answers outcome_unknown\n"
    "until someone finds out at the provider what happened and resolves it with --as.\n"
    "Kinds \"outbox_exhausted\" (an outbox item spent its attempts) and \"lease_lost\" (an\n"
    "attempt reported after another took its key over) are resolved the same way, and so\n"
    "is \"stalled_pending\": a local record left pending after its transaction ended (its\n"
    "effect may have committed; listed once pending for 60 s, calls answer outcome_unknown\n"
    "past their deadline; never run again). Kind \"intent\" is an approved intent whose\n"
    "operation ended expired, outcome_unknown or conflict: the intent waits in state\n"
    "needs_reconciliation.\n"
    "\n"
    "Commands:\n"
    "  list      items, most recently seen first\n"
    "  show      the key's record or tombstone, every item of the key, and an external\n"
    "            operation's downstream key, lease, attempt history and what the provider\n"
    "            answered its resolvers\n"
    "  resolve   mark the key's open items resolved, with a note, who and when; with --as,\n"
    "            also settle an external operation's or a stalled record's outcome:\n"
    "            later calls replay it\n"
    "  probe     ask the provider what became of outcome_unknown operations, by the\n"
    "            resolvers (status requests) that the gateway configuration FILE declares\n"
    "            for its http tools, and settle them by the answer as the gateway would:\n"
    "            done (completed, its result the receipt), failed (rejected), not done\n"
    "            (dispatched again with the same downstream key), or still unknown; every\n"
    "            answer is recorded. Without operands: list the open outcome_unknown items,\n"
    "            whether FILE has a resolver for their tool, how often they were asked;\n"
    "            --all: ask about each of those with a resolver, least recently asked\n"
    "            first. The resolvers an application registers in its own process\n"
    "            (idem_external_set_resolver()) cannot run here\n"
    "\n";

static const char options_text[] =
    "Options:\n"
    "  --dsn CONNINFO         libpq connection string or postgresql:// URI; without it the\n"
    "                         PG* environment variables are used\n"
    "  --tenant TENANT        list, probe: only this tenant's items\n"
    "  --kind KIND            list, resolve: only items of this kind\n"
    "  --open                 list: only open items\n"
    "  --resolved             list: only resolved items\n"
    "  --since WHEN           list: items last seen at or after WHEN, a UTC time\n"
    "                         (2024-05-01, 2024-05-01T09:30:00Z) or an age (90m, 24h, 7d)\n"
    "  --limit N              list, probe: at most N items (default 1000; 0 = all)\n"
    "  --note TEXT            resolve: what was found or done (required)\n"
    "  --by NAME              resolve: who resolved it (default: the database role)\n"
    "  --as OUTCOME           resolve: what the provider did: completed (later calls replay\n"
    "                         the receipt), failed or abandoned (later calls are rejected;\n"
    "                         never dispatched again)\n"
    "  --reference REF        resolve --as: the provider's reference (message, payment ID)\n"
    "  --receipt JSON         resolve --as: the receipt later calls get (default: one saying\n"
    "                         how it was resolved, with the note and reference)\n"
    "  --config FILE          probe: the gateway configuration whose http tools' resolvers\n"
    "                         are run (their secrets' environment variables must be set);\n"
    "                         the database is still --dsn's, not FILE's\n"
    "  --all                  probe: ask about every open outcome_unknown item\n"
    "  --json                 print JSON\n"
    "  --connect-timeout SEC  longest wait to connect (default 10, or PGCONNECT_TIMEOUT)\n"
    "  -h, --help             print this help\n"
    "  -V, --version          print the version\n"
    "\n";

/* Too long for one string literal (C's 4095). */
static const char usage_exits[] =
    "Exit status:\n"
    "   0  done (list: also when nothing matches; probe: settled)\n"
    "   2  show, probe: nothing is recorded for the key; resolve: no open item for it\n"
    "      (--as: no external operation or stalled local record under it, or its\n"
    "      outcome is already settled)\n"
    "   7  the schema lacks migration 0003 (run idem-migrate up)\n"
    "  11  probe: the outcome is still unknown (--all: of at least one item): the\n"
    "      provider could not tell, did not answer in time or answered what the\n"
    "      resolver cannot read (the reason is printed)\n"
    "  12  probe: not asked: the operation's tool has no resolver in FILE, or the\n"
    "      operation is not outcome_unknown (any more)\n"
    "  64  usage error; probe --config in an idem-reconcile built without HTTP support\n"
    "      (libcurl)\n"
    "  65  probe: FILE is not a valid gateway configuration (the message names the\n"
    "      place as a JSON Pointer)\n"
    "  66  probe: FILE cannot be read\n"
    "  69  a database error that a retry will not fix\n"
    "  71  out of memory\n"
    "  75  try again later: no server answers (or not in time), connection lost,\n"
    "      the server out of resources (SQLSTATE class 53), a serialization failure or\n"
    "      deadlock, a lock or statement timeout; resolve --as: an attempt holds a live\n"
    "      lease, or a local record is pending for less than 60 s\n"
    "  77  a role without idem_operator's rights (the message says what to GRANT)\n"
    "  78  connection settings that cannot work (a DSN that does not parse or holds a\n"
    "      value libpq refuses, a wrong password, a role or database that does not\n"
    "      exist, directly or through a pooler)\n";

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
    const char *config; /* probe */
    int all;            /* probe */
} cli;

#define usage_error(...) cli_usage_error("idem-reconcile", __VA_ARGS__)
/* Every line on stderr: "idem-reconcile: " and one line, whatever libpq or the server put
 * in it (cli.c). */
#define say(...) cli_say("idem-reconcile", __VA_ARGS__)

/* ---- options ----------------------------------------------------------------------------- */

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

    if (rt_parse_age(&c->filter.since, arg) == 0)
        return 0;
    rc = rt_parse_time(&c->filter.since, arg);
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
        if (idem__parse_whole(&n, arg, 0, 1000000000) != 0)
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
        return cli_connect_timeout_option(&c->connect_timeout_s, "idem-reconcile", arg);
    case 'C':
        c->config = arg;
        return 0;
    case 'A':
        c->all = 1;
        return 0;
    default:
        return usage_error("unknown option");
    }
}

/* probe's operands and options. */
static int check_probe(cli *c, int nargs, char **args)
{
    if (c->config == NULL)
        return usage_error("probe needs --config FILE: the gateway configuration whose "
                           "resolvers are run");
    if (nargs != 0 && nargs != 2)
        return usage_error("probe takes TENANT OPERATION_ID, or no operands (with --all: ask "
                           "about every open item)");
    if (nargs == 2 && (c->all || c->filter.tenant != NULL))
        return usage_error("--all and --tenant are for probe without operands");
    if (c->filter.kind != NULL || c->filter.state != IDEM_RECONCILE_ANY || c->filter.since != 0 ||
        c->note != NULL || c->by != NULL || c->resolve_as >= 0 || c->reference != NULL ||
        c->receipt != NULL)
        return usage_error("probe takes --config, --all, --tenant, --limit and --json");
    if (nargs == 2) {
        c->tenant = args[0];
        c->operation_id = args[1];
    }
    return -1;
}

/* The command and its operands, and which options it takes. */
static int check_command(cli *c, int nargs, char **args)
{
    int list = strcmp(c->command, "list") == 0, resolve = strcmp(c->command, "resolve") == 0;

    if (strcmp(c->command, "probe") == 0)
        return check_probe(c, nargs, args);
    if (c->config != NULL || c->all)
        return usage_error("--config and --all are for probe");
    if (!list && !resolve && strcmp(c->command, "show") != 0)
        return usage_error("unknown command '%s' (list, show, resolve, probe)", c->command);
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
        {"config", required_argument, NULL, 'C'},
        {"all", no_argument, NULL, 'A'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int opt, rc;

    opterr = 0;
    while ((opt = getopt_long(argc, argv, "hV", longs, NULL)) != -1) {
        if (opt == 'h') {
            fputs(usage_text, stdout);
            fputs(options_text, stdout);
            fputs(usage_exits, stdout);
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
        return usage_error("a command is needed (list, show, resolve, probe)");
    c->command = argv[optind];
    return check_command(c, argc - optind - 1, argv + optind + 1);
}

/* Connect, bounded by --connect-timeout, else by PGCONNECT_TIMEOUT (cli.c makes 10 s the
 * default); a connect_timeout in the DSN wins over both. */
static PGconn *connect_db(const cli *c, int *transient)
{
    return cli_connect("idem-reconcile", c->dsn, c->connect_timeout_s, NULL, NULL, transient);
}

static int fail(const char *what, int rc, const idem_error *err)
{
    say("%s: %s", what, err->message[0] != '\0' ? err->message : idem_strerror(rc));
    /* resolve --as on an outcome already settled: nothing to resolve, as for none */
    return rc == IDEM_ECONFLICT ? EXIT_NOT_FOUND : cli_exit_for(rc, err);
}

static int print_json(json_t *doc)
{
    if (cli_print_json(doc) != 0) {
        say("out of memory");
        return EXIT_OSERR;
    }
    return EXIT_OK;
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
        rc = print_json(
            json_pack("{s:I, s:o}", "count", (json_int_t)n, "items", rt_items_json(items)));
        idem_reconcile_items_free(items);
        return rc;
    }
    if (n > 0)
        printf("%-16s %-36s %-16s %-24s %-7s %6s  %-19s  %-19s  %s\n", "TENANT", "OPERATION ID",
               "KIND", "TOOL", "MATCHES", "COUNT", "FIRST SEEN (UTC)", "LAST SEEN (UTC)",
               "RESOLVED");
    for (size_t i = 0; i < n; i++) {
        rt_print_item_row(idem_reconcile_items_at(items, i));
        open += idem_reconcile_items_at(items, i)->resolved_at == 0;
    }
    printf("%zu item%s, %zu open\n", n, n == 1 ? "" : "s", open);
    idem_reconcile_items_free(items);
    return EXIT_OK;
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
                                  c->operation_id, "record", rt_record_json(record), "items",
                                  rt_items_json(items), "external", rt_history_json(history)));
        idem_external_history_free(history);
        idem_reconcile_key_free(key);
        return rc;
    }
    printf("tenant %s, operation %s\n", c->tenant, c->operation_id);
    if (record != NULL)
        rt_print_record(record);
    else
        printf("no record or tombstone: the key has been forgotten\n");
    printf("reconciliation items: %zu\n", idem_reconcile_items_count(items));
    for (size_t i = 0; i < idem_reconcile_items_count(items); i++)
        rt_print_item_detail(idem_reconcile_items_at(items, i), record);
    if (history != NULL)
        rt_print_history(history);
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
    idem_reconcile_resolution r = IDEM_RECONCILE_RESOLUTION_INIT;
    unsigned int n = 0;
    int rc;

    r.kind = c->filter.kind;
    r.note = c->note;
    r.by = c->by;
    rc = idem_reconcile_resolve_items(&n, conn, c->tenant, c->operation_id, &r, &err);

    if (rc != 0)
        return fail("resolve", rc, &err);
    if (c->json)
        return print_json(json_pack("{s:s, s:s, s:i}", "tenant", c->tenant, "operation_id",
                                    c->operation_id, "resolved", (int)n));
    printf("resolved %u item%s of operation %s in tenant %s\n", n, n == 1 ? "" : "s",
           c->operation_id, c->tenant);
    return EXIT_OK;
}

static int cmd_probe(cli *c, PGconn *conn)
{
    rp_options o = {c->config,       c->dsn, c->tenant != NULL ? c->tenant : c->filter.tenant,
                    c->operation_id, c->all, c->json,
                    c->filter.limit, fail};

    return rp_probe(&o, conn);
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
        return cli_connect_exit(transient);
    if ((code = cli_check_all_tenants(conn, "idem-reconcile", "idem_operator")) != 0) {
        PQfinish(conn);
        return code;
    }
    if (strcmp(c.command, "list") == 0)
        code = cmd_list(&c, conn);
    else if (strcmp(c.command, "probe") == 0)
        code = cmd_probe(&c, conn);
    else if (strcmp(c.command, "show") == 0)
        code = cmd_show(&c, conn);
    else if (c.resolve_as >= 0)
        code = cmd_resolve_as(&c, conn);
    else
        code = cmd_resolve(&c, conn);
    PQfinish(conn);
    return code;
}
