/* idem-sweep: the retention sweeper, for cron or a systemd timer. Turns operation records
 * past their retention window into tombstones and deletes tombstones past their key
 * memory (include/idem/sweep.h); silent on success. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "idem/idem.h"
#include "idem/sys/reconcile.h"
#include "idem/sys/sweep.h"

#include "cli.h"
#include "core/parse.h"
#include "sweep_probe.h"

static const char usage_text[] =
    "usage: idem-sweep [OPTIONS]\n"
    "\n"
    "Turn idem's operation records that are past their retention window into tombstones\n"
    "(key, tool, fingerprint and times; the receipt is dropped), and delete tombstones\n"
    "that are past their key memory. Pending records and the rows effects wrote are never\n"
    "touched. Works in batches, one short transaction each, skipping rows that live calls\n"
    "hold; a backlog larger than one run is worked off across runs. Only one idem-sweep\n"
    "works at a time (advisory lock 7594306392416544112); a second one exits 0 at once.\n"
    "The lock is session-level: connect to PostgreSQL directly; a connection through a\n"
    "pooler such as PgBouncer is refused.\n"
    "Silent on success: meant for cron or a systemd timer.\n"
    "With --config, it then asks the provider about open outcome_unknown items, by the\n"
    "resolvers (status requests) that the gateway configuration FILE declares for its\n"
    "http tools, and settles each by the answer (as idem-reconcile probe does), least\n"
    "recently asked first, at most --probe-limit per run, each item again only after its\n"
    "backoff. Resolvers an application registers in its own process cannot run here.\n"
    "\n";

static const char options_text[] =
    "Options:\n"
    "  --dsn CONNINFO         libpq connection string or postgresql:// URI; without it the\n"
    "                         PG* environment variables are used\n"
    "  --batch N              rows per transaction (default 5000)\n"
    "  --max-runtime SEC      start no batch after SEC seconds; what is left waits for the\n"
    "                         next run (default: until nothing is due)\n"
    "  --max-batches N        stop after N batches (default: no limit)\n"
    "  --key-memory SEC       key memory of records claimed before schema version 3, which\n"
    "                         lack their own: 1 to 315360000 (3650 days; default 2592000,\n"
    "                         30 days)\n"
    "  --clock-skew SEC       the store's clock skew allowance; tombstones are deleted twice\n"
    "                         this long after their key memory ends (default 300)\n"
    "  --lock-timeout SEC     longest wait for a table lock held by someone else, per batch\n"
    "                         (default 5)\n"
    "  --connect-timeout SEC  longest wait to connect (default 10, or PGCONNECT_TIMEOUT)\n"
    "  --dry-run              print what is due now; change nothing (no metrics file)\n"
    "  --json                 print a JSON summary on stdout\n"
    "  --metrics-file PATH    after a successful run, write Prometheus text-format metrics\n"
    "                         to PATH (atomically: a temporary file renamed over it)\n"
    "  --config FILE          ask the provider about outcome_unknown items by FILE's\n"
    "                         resolvers (a gateway configuration; the secrets'\n"
    "                         environment variables must be set; the database is still\n"
    "                         --dsn's); the role also needs idem_operator's rights\n"
    "  --probe-limit N        --config: ask about at most N items per run (default 20)\n"
    "  --probe-backoff SEC    --config: ask about an item again SEC seconds after the\n"
    "                         first question, twice as long after each further one, at\n"
    "                         most a day (default 300)\n"
    "  -v, --verbose          narrate on stderr\n"
    "  -h, --help             print this help\n"
    "  -V, --version          print the version\n"
    "\n"
    "Exit status:\n"
    "   0  done, or another idem-sweep is running (said on stderr with --verbose)\n"
    "   7  the schema lacks migration 0003 (run idem-migrate up)\n"
    "  64  usage error; --config given to an idem-sweep built without HTTP support\n"
    "      (libcurl)\n"
    "  65  --config: FILE is not a valid gateway configuration (the message names the\n"
    "      place as a JSON Pointer)\n"
    "  66  --config: FILE cannot be read\n"
    "  69  a database error that a retry will not fix\n"
    "  71  out of memory\n"
    "  74  the metrics file cannot be written (checked before any work: nothing swept)\n"
    "  75  try again later: no server answers (or not in time), connection lost, the\n"
    "      server out of resources (disk full, out of memory, too many connections:\n"
    "      SQLSTATE class 53), a serialization failure or deadlock, a statement timeout,\n"
    "      or a table lock held longer than --lock-timeout (--dry-run too); the next\n"
    "      run retries\n"
    "  77  a role without idem_sweeper's rights (the message says what to GRANT)\n"
    "  78  connection settings that cannot work (a DSN that does not parse or holds a\n"
    "      value libpq refuses, a wrong password, a role or database that does not\n"
    "      exist, directly or through a pooler), or connected through a connection\n"
    "      pooler (connect to the server directly)\n";

#define PROBE_LIMIT_DEFAULT     20
#define PROBE_BACKOFF_DEFAULT_S 300

typedef struct cli {
    const char *dsn;
    const char *metrics_file;
    unsigned int connect_timeout_s;
    int json;
    int verbose;
    idem_sweep_options opts;
    sp_options probe; /* probe.config NULL: no probing */
} cli;

#define usage_error(...) cli_usage_error("idem-sweep", __VA_ARGS__)
/* Every line on stderr: "idem-sweep: " and one line, whatever libpq or the server put in
 * it (cli.c). */
#define say(...) cli_say("idem-sweep", __VA_ARGS__)

static int parse_uint(unsigned int *out, const char *opt, const char *arg, long long min,
                      long long max, long long scale)
{
    long long v;

    if (idem__parse_whole(&v, arg, min, max) != 0)
        return usage_error("%s: '%s' is not a whole number from %lld to %lld", opt, arg, min, max);
    *out = (unsigned int)(v * scale);
    return 0;
}

static int parse_option(cli *c, int opt, const char *arg)
{
    switch (opt) {
    case 'd':
        c->dsn = arg;
        return 0;
    case 'b':
        return parse_uint(&c->opts.batch_size, "--batch", arg, 1, 1000000, 1);
    case 'r':
        return parse_uint(&c->opts.max_runtime_ms, "--max-runtime", arg, 1, 86400, 1000);
    case 'n':
        return parse_uint(&c->opts.max_batches, "--max-batches", arg, 1, 1000000000, 1);
    case 'k':
        return parse_uint(&c->opts.key_memory_s, "--key-memory", arg, IDEM_WINDOW_MIN_S,
                          IDEM_WINDOW_MAX_S, 1);
    case 's':
        return parse_uint(&c->opts.clock_skew_s, "--clock-skew", arg, 0, 86400, 1);
    case 'l':
        return parse_uint(&c->opts.lock_timeout_ms, "--lock-timeout", arg, 1, 3600, 1000);
    case 'c':
        return cli_connect_timeout_option(&c->connect_timeout_s, "idem-sweep", arg);
    case 'D':
        c->opts.dry_run = 1;
        return 0;
    case 'j':
        c->json = 1;
        return 0;
    case 'm':
        c->metrics_file = arg;
        return arg[0] != '\0' ? 0 : usage_error("--metrics-file: empty path");
    case 'v':
        c->verbose = 1;
        return 0;
    case 'C':
        c->probe.config = arg;
        return 0;
    case 'P':
        return parse_uint(&c->probe.limit, "--probe-limit", arg, 1, 1000, 1);
    case 'B':
        return parse_uint(&c->probe.backoff_s, "--probe-backoff", arg, 1, 86400, 1);
    default:
        return usage_error("unknown option");
    }
}

/* Returns -1 to go on, else the exit status. */
static int parse_args(cli *c, int argc, char **argv)
{
    static const struct option longs[] = {
        {"dsn", required_argument, NULL, 'd'},
        {"batch", required_argument, NULL, 'b'},
        {"max-runtime", required_argument, NULL, 'r'},
        {"max-batches", required_argument, NULL, 'n'},
        {"key-memory", required_argument, NULL, 'k'},
        {"clock-skew", required_argument, NULL, 's'},
        {"lock-timeout", required_argument, NULL, 'l'},
        {"connect-timeout", required_argument, NULL, 'c'},
        {"dry-run", no_argument, NULL, 'D'},
        {"json", no_argument, NULL, 'j'},
        {"metrics-file", required_argument, NULL, 'm'},
        {"verbose", no_argument, NULL, 'v'},
        {"config", required_argument, NULL, 'C'},
        {"probe-limit", required_argument, NULL, 'P'},
        {"probe-backoff", required_argument, NULL, 'B'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int opt, rc;

    opterr = 0;
    while ((opt = getopt_long(argc, argv, "vhV", longs, NULL)) != -1) {
        if (opt == 'h') {
            fputs(usage_text, stdout);
            fputs(options_text, stdout);
            return EXIT_OK;
        }
        if (opt == 'V') {
            printf("idem-sweep %s\n", idem_version());
            return EXIT_OK;
        }
        if (opt == '?')
            return usage_error("unknown option or missing argument: %s", argv[optind - 1]);
        if ((rc = parse_option(c, opt, optarg)) != 0)
            return rc;
    }
    if (optind != argc)
        return usage_error("unexpected argument '%s' (idem-sweep takes options only)",
                           argv[optind]);
    if (c->probe.config == NULL && (c->probe.limit != 0 || c->probe.backoff_s != 0))
        return usage_error("--probe-limit and --probe-backoff are for --config");
    return -1;
}

/* Connect, bounded by --connect-timeout, else by PGCONNECT_TIMEOUT (cli.c makes 10 s the
 * default); a connect_timeout in the DSN wins over both. */
static PGconn *connect_db(const cli *c, int *transient)
{
    return cli_connect("idem-sweep", c->dsn, c->connect_timeout_s, NULL, NULL, transient);
}

/* Refuse a connection through a pooler: the sweep lock is session-level, held across the
 * batches' transactions, which a pooler in transaction mode would spread over server
 * sessions (and the lock would outlive the run on a session the pooler keeps). */
static int refuse_pooler(PGconn *conn)
{
    idem_error err = IDEM_ERROR_INIT;
    int pooled = 0;

    if (idem_pooler_detect(&pooled, conn, &err) != 0) {
        say("%s", err.message);
        return cli_exit_for(err.code, &err);
    }
    if (!pooled)
        return EXIT_OK;
    say("connected through a connection pooler (PgBouncer?): the sweep lock is a session-level "
        "advisory lock held across transactions, which a pooler in transaction mode spreads "
        "over server sessions; connect to the PostgreSQL server directly (its own host and "
        "port)");
    return EXIT_CONFIG;
}

static void on_log(void *ctx, int level, const char *message)
{
    const cli *c = ctx;

    if (c->verbose || level >= IDEM_LOG_WARNING)
        say("%s", message);
}

/* Another sweep holding the lock is a done run here; a statement the library does not
 * classify itself (--dry-run's count) may still have met a lock held past --lock-timeout,
 * or a lost connection: cli_exit_for() goes by the core's classes, as the library does. */
static int exit_for(int rc, const idem_error *err)
{
    return rc == IDEM_ELOCKED ? EXIT_OK : cli_exit_for(rc, err);
}

static int print_json(const idem_sweep_result *r, int locked, int dry_run, const sp_summary *probes)
{
    json_t *doc =
        json_pack("{s:b, s:b, s:I, s:I, s:i, s:b, s:I, s:I, s:f}", "locked_out", locked, "dry_run",
                  dry_run, "expired", (json_int_t)r->expired, "purged", (json_int_t)r->purged,
                  "batches", (int)r->batches, "complete", r->complete, "late_retries",
                  (json_int_t)r->late_retries, "open_reconciliation_items",
                  (json_int_t)r->open_items, "duration_seconds", (double)r->duration_ms / 1000.0);
    if (doc != NULL && probes != NULL)
        json_object_set_new(doc, "probes",
                            json_pack("{s:i, s:i, s:i, s:i, s:i}", "due", (int)probes->due, "asked",
                                      (int)probes->asked, "settled", (int)probes->settled,
                                      "unknown", (int)probes->unknown, "waiting",
                                      (int)probes->waiting));
    char *text =
        doc != NULL ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9))
                    : NULL;

    json_decref(doc);
    if (text == NULL) {
        say("out of memory");
        return EXIT_OSERR;
    }
    puts(text);
    free(text);
    return EXIT_OK;
}

/* One metric: HELP, TYPE and its value. */
static void metric(FILE *f, const char *name, const char *type, const char *help, double value)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %.15g\n", name, help, name, type, name, value);
}

/* Open reconciliation items by kind, every kind idem records (0 for a kind with none), so
 * that an alert can name the kind: read after the run, on its connection. */
typedef struct open_by_kind {
    const char *kind[16];
    unsigned long long count[16];
    size_t n;
} open_by_kind;

static const char SQL_OPEN_BY_KIND[] = "SELECT kind, count(*) FROM idem.reconciliation_items"
                                       " WHERE resolved_at IS NULL GROUP BY kind";

/* Fill @o; 0, or the exit status (said on stderr) when the query failed. */
static int read_open_by_kind(open_by_kind *o, PGconn *conn)
{
    static const char *const kinds[] = {IDEM_RECONCILE_KINDS};
    PGresult *res = PQexec(conn, SQL_OPEN_BY_KIND);
    idem_error err = IDEM_ERROR_INIT;
    int rc = PQresultStatus(res) == PGRES_TUPLES_OK ? 0 : -1;

    o->n = 0;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]) && o->n < 16; i++) {
        o->kind[o->n] = kinds[i];
        o->count[o->n++] = 0;
    }
    for (int row = 0; rc == 0 && row < PQntuples(res); row++)
        for (size_t i = 0; i < o->n; i++)
            if (strcmp(PQgetvalue(res, row, 0), o->kind[i]) == 0)
                o->count[i] = strtoull(PQgetvalue(res, row, 1), NULL, 10);
    if (rc != 0) {
        const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

        say("counting open reconciliation items by kind: %s", PQerrorMessage(conn));
        snprintf(err.sqlstate, sizeof(err.sqlstate), "%s", state != NULL ? state : "");
        rc = PQstatus(conn) != CONNECTION_OK ? EXIT_TEMPFAIL : cli_exit_for(IDEM_EDB, &err);
    }
    PQclear(res);
    return rc;
}

static void write_metrics_to(FILE *f, const idem_sweep_result *r, const open_by_kind *open,
                             double now)
{
    metric(f, "idem_sweep_expired_rows", "gauge",
           "Records turned into tombstones by the last successful run.", (double)r->expired);
    metric(f, "idem_sweep_purged_tombstones", "gauge",
           "Tombstones deleted by the last successful run.", (double)r->purged);
    metric(f, "idem_sweep_batches", "gauge", "Batches (transactions) of the last successful run.",
           (double)r->batches);
    metric(f, "idem_sweep_complete", "gauge",
           "1 when the last successful run left nothing due, 0 when it stopped at its limit.",
           (double)r->complete);
    metric(f, "idem_late_retries_recorded_total", "counter",
           "Late retries recorded for reconciliation since the schema was made (retries after "
           "retention, not executed).",
           (double)r->late_retries);
    fprintf(f, "# HELP idem_reconciliation_items_open Reconciliation items not yet resolved, by "
               "kind (idem-reconcile list --open --kind KIND).\n"
               "# TYPE idem_reconciliation_items_open gauge\n");
    for (size_t i = 0; i < open->n; i++)
        fprintf(f, "idem_reconciliation_items_open{kind=\"%s\"} %llu\n", open->kind[i],
                open->count[i]);
    metric(f, "idem_sweep_duration_seconds", "gauge", "Duration of the last successful run.",
           (double)r->duration_ms / 1000.0);
    metric(f, "idem_sweep_last_success_timestamp_seconds", "gauge",
           "When the last successful run ended, in seconds since the Unix epoch.", now);
}

/* Write PATH.tmp.PID next to PATH, then rename it over PATH: a reader (node_exporter's
 * textfile collector) sees the old file or the new one, never half of one. */
static int write_metrics(const char *path, const idem_sweep_result *r, const open_by_kind *open)
{
    size_t size = strlen(path) + 32;
    char *tmp = malloc(size);
    struct timespec now;
    FILE *f = NULL;
    int rc = -1;

    if (tmp == NULL) {
        say("out of memory");
        return EXIT_OSERR;
    }
    snprintf(tmp, size, "%s.tmp.%ld", path, (long)getpid());
    clock_gettime(CLOCK_REALTIME, &now);
    f = fopen(tmp, "w");
    if (f != NULL) {
        write_metrics_to(f, r, open, (double)now.tv_sec + (double)now.tv_nsec / 1e9);
        rc = ferror(f) ? -1 : 0;
        if (fflush(f) != 0 || fsync(fileno(f)) != 0)
            rc = -1;
        if (fclose(f) != 0)
            rc = -1;
    }
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -1;
    if (rc != 0) {
        say("cannot write the metrics file %s: %s", path, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    return rc == 0 ? EXIT_OK : EXIT_IOERR;
}

/* Before any work: whether the metrics file can be written where it goes (its temporary
 * file beside it is made and removed), so that a run does not sweep and then fail. */
static int metrics_writable(const char *path)
{
    size_t size = strlen(path) + 32;
    char *tmp = malloc(size);
    FILE *f = NULL;

    if (tmp == NULL) {
        say("out of memory");
        return EXIT_OSERR;
    }
    snprintf(tmp, size, "%s.tmp.%ld", path, (long)getpid());
    f = fopen(tmp, "w");
    if (f == NULL)
        say("cannot write the metrics file %s: %s; nothing was swept", path, strerror(errno));
    else {
        fclose(f);
        unlink(tmp);
    }
    free(tmp);
    return f != NULL ? EXIT_OK : EXIT_IOERR;
}

/* A dry run says what is due even when not asked to be verbose: that is its point. */
static void say_dry_run(const cli *c, const idem_sweep_result *r)
{
    printf("dry run: %llu records due to expire, %llu tombstones due to purge; nothing was "
           "changed%s\n",
           r->expired, r->purged, c->metrics_file != NULL ? ", no metrics file written" : "");
}

/* What --config did, on stderr with --verbose (a dry run says it anyway). */
static void say_probes(const cli *c, const sp_summary *p)
{
    if (c->opts.dry_run && !c->json)
        printf("dry run: %u outcome_unknown item%s due to be asked about, %u waiting for their "
               "backoff; none was asked\n",
               p->due, p->due == 1 ? "" : "s", p->waiting);
    else if (c->verbose)
        say("asked the provider about %u outcome_unknown item%s: %u settled, %u still unknown; "
            "%u more due, %u waiting for their backoff",
            p->asked, p->asked == 1 ? "" : "s", p->settled, p->unknown, p->due - p->asked,
            p->waiting);
}

static int report(const cli *c, PGconn *conn, int rc, const idem_sweep_result *r,
                  const idem_error *err, const sp_summary *probes)
{
    int code = exit_for(rc, err);
    open_by_kind open;

    if (rc == IDEM_ELOCKED && c->verbose)
        say("%s", err->message);
    else if (rc != 0 && rc != IDEM_ELOCKED)
        say("%s", err->message[0] ? err->message : idem_strerror(rc));
    if (rc == 0 && c->verbose)
        say("%s %llu records, %s %llu tombstones in %u batches, %.3f s%s",
            c->opts.dry_run ? "due to expire:" : "expired", r->expired,
            c->opts.dry_run ? "due to purge:" : "purged", r->purged, r->batches,
            (double)r->duration_ms / 1000.0,
            r->complete || c->opts.dry_run ? "" : "; more is due: the next run continues");
    if (rc == 0 && c->opts.dry_run && !c->verbose && !c->json)
        say_dry_run(c, r);
    if (code == EXIT_OK && c->json)
        code = print_json(r, rc == IDEM_ELOCKED, c->opts.dry_run, probes);
    if (probes != NULL)
        say_probes(c, probes);
    if (rc == 0 && code == EXIT_OK && c->metrics_file != NULL && !c->opts.dry_run)
        if ((code = read_open_by_kind(&open, conn)) == EXIT_OK)
            code = write_metrics(c->metrics_file, r, &open);
    return code;
}

/* After a sweep that went well: --config's questions, then the report of both. */
static int finish_with_probes(cli *c, PGconn *conn, const idem_sweep_result *result,
                              const idem_error *swept)
{
    sp_summary probes;
    idem_error err = IDEM_ERROR_INIT;
    int rc, code;

    c->probe.dsn = c->dsn;
    c->probe.dry_run = c->opts.dry_run;
    c->probe.verbose = c->verbose;
    if (c->probe.limit == 0)
        c->probe.limit = PROBE_LIMIT_DEFAULT;
    if (c->probe.backoff_s == 0)
        c->probe.backoff_s = PROBE_BACKOFF_DEFAULT_S;
    rc = sp_probe(&probes, &c->probe, conn, &err);
    if (rc > 0) {
        code = rc;
    } else if (rc < 0) {
        say("--config: %s", err.message[0] ? err.message : idem_strerror(rc));
        code = exit_for(rc, &err);
        if (rc == IDEM_EINVAL)
            code = EXIT_USAGE; /* built without HTTP support */
    } else {
        code = report(c, conn, 0, result, swept, &probes);
    }
    PQfinish(conn);
    return code;
}

int main(int argc, char **argv)
{
    idem_sweep_options defaults = IDEM_SWEEP_OPTIONS_INIT;
    idem_sweep_result result = IDEM_SWEEP_RESULT_INIT;
    idem_error err = IDEM_ERROR_INIT;
    cli c;
    PGconn *conn;
    int code, rc, transient;

    memset(&c, 0, sizeof(c));
    c.opts = defaults;
    code = parse_args(&c, argc, argv);
    if (code >= 0)
        return code;
    c.opts.log = on_log;
    c.opts.log_ctx = &c;
    if (c.metrics_file != NULL && !c.opts.dry_run && (code = metrics_writable(c.metrics_file)) != 0)
        return code;
    conn = connect_db(&c, &transient);
    if (conn == NULL)
        return cli_connect_exit(transient);
    if ((code = refuse_pooler(conn)) != EXIT_OK) {
        PQfinish(conn);
        return code;
    }
    if ((code = cli_check_all_tenants(conn, "idem-sweep", "idem_sweeper")) != 0) {
        PQfinish(conn);
        return code;
    }
    rc = idem_sweep_run(&result, conn, &c.opts, &err);
    if (rc == 0 && c.probe.config != NULL)
        return finish_with_probes(&c, conn, &result, &err);
    code = report(&c, conn, rc, &result, &err, NULL);
    PQfinish(conn);
    return code;
}
