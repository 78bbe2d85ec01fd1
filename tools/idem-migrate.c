/* idem-migrate: apply idem's schema migrations to a PostgreSQL database, and report their
 * state. The migrations are built into the program; --dir reads a folder instead. */
#include <getopt.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/idem.h"

#include "cli.h"
#include "core/parse.h"
#include "core/text.h"
#include "migrate_report.h"

static const char usage_text[] =
    "usage: idem-migrate [OPTIONS] COMMAND\n"
    "\n"
    "Apply idem's schema migrations to a PostgreSQL database and report their state.\n"
    "\n"
    "Commands:\n"
    "  status    list applied and pending migrations, and applied files that changed\n"
    "  plan      print the SQL that up would run; runs nothing\n"
    "  up        apply the pending migrations in version order, each in its own\n"
    "            transaction with its row in the ledger idem.schema_migrations\n"
    "  verify    check that no applied migration's file has changed since it was applied\n"
    "  baseline  with --to N: record the migrations up to N as applied without running\n"
    "            them, after checking that the objects each creates exist; for a\n"
    "            database whose ledger was dropped or lost rows (exit 8)\n"
    "  distribute  on a Citus coordinator, after up: distribute every table of schema\n"
    "            idem with a column tenant (and each --table) by tenant, co-located with\n"
    "            idem.operations; make the ledger a reference table. Idempotent\n"
    "\n"
    "Options:\n"
    "  --dsn CONNINFO      libpq connection string or postgresql:// URI; without it the\n"
    "                      PG* environment variables are used (PGHOST, PGPORT,\n"
    "                      PGDATABASE, PGUSER, PGPASSWORD, PGSERVICE, ...)\n"
    "  --dir DIR           use the NNNN_description.sql files of DIR instead of the\n"
    "                      migrations built into this program\n"
    "  --to N              plan, up: stop after version N; baseline: the last version\n"
    "                      that is really applied (required)\n"
    "  --lock-timeout SEC  up, baseline: wait at most SEC seconds for the migration lock\n"
    "                      (advisory lock 7594306392314963826), which another up or any\n"
    "                      other session may hold (default 60; 0 = do not wait)\n"
    "  --table SCHEMA.NAME distribute, status: also an application's effect table (it\n"
    "                      needs a column tenant); repeatable\n"
    "  --json              status, verify: print JSON (other commands refuse it)\n"
    "  --connect-timeout SEC  longest wait to connect to each host of the DSN (default\n"
    "                      10, or PGCONNECT_TIMEOUT; a connect_timeout in the DSN wins)\n"
    "  -q, --quiet         up, baseline: print errors only\n"
    "  -v, --verbose       also print the server's notices and warnings on stderr, one\n"
    "                      line each (without it they are not shown)\n"
    "  -h, --help          print this help\n"
    "  -V, --version       print the version and the built-in schema version\n"
    "\n"
    "A file whose leading comment lines include \"-- idem:no-transaction\" runs statement\n"
    "by statement outside a transaction (for CREATE INDEX CONCURRENTLY). A UTF-8 byte\n"
    "order mark at the start of a file is skipped (the checksum covers it).\n"
    "\n"
    "If the ledger idem.schema_migrations was dropped or lost rows while idem's objects\n"
    "remain, status, plan, verify and up say so and exit 8, running nothing: restore the\n"
    "ledger from a backup, or record what is applied with baseline --to N.\n"
    "\n"
    "up holds a session-level lock across transactions: it connects to PostgreSQL\n"
    "directly and refuses a connection through a pooler such as PgBouncer. status,\n"
    "plan and verify only read, and work through one.\n"
    "\n";

static const char usage_exits[] =
    "Exit status:\n"
    "   0  success; status: the schema is up to date\n"
    "   3  status: migrations are pending, and up would apply them\n"
    "   4  drift: an applied migration's file changed (status, verify), or a pending\n"
    "      migration is older than an applied one (status); plan and up refuse both\n"
    "      with 4; the message names the file\n"
    "   5  up: a migration failed; its transaction was rolled back (a no-transaction\n"
    "      file keeps the statements before the failing one); FILE:LINE and the\n"
    "      server's message are on stderr\n"
    "   7  verify: the schema is not installed (no ledger idem.schema_migrations)\n"
    "   8  the ledger is missing, or lacks a migration that appears applied: idem's\n"
    "      objects exist that idem.schema_migrations does not record (status, plan,\n"
    "      verify, up; nothing is run): restore the ledger from a backup, or baseline\n"
    "   9  baseline: a migration up to --to is not applied (an object it creates is\n"
    "      missing) or cannot be checked; nothing was recorded\n"
    "  10  distribute: the citus extension is not installed in the database, the schema\n"
    "      is not migrated, or a table is distributed otherwise (the message says what\n"
    "      to run)\n"
    "  64  usage error\n"
    "  66  --dir unreadable or without migrations, or a misnamed or duplicate\n"
    "      migration file in it\n"
    "  69  a database error outside a migration that a retry will not fix\n"
    "  71  out of memory\n"
    "  75  try again later: no server answers (or not in time), the connection was\n"
    "      lost, the server is out of resources, a serialization failure, deadlock or\n"
    "      timeout; up, baseline: another session held the migration lock longer than\n"
    "      --lock-timeout (the message names it: pid, application, role, address)\n"
    "  77  the role lacks a privilege (SQLSTATE 42501 outside a migration)\n"
    "  78  connection settings that cannot work (a DSN libpq refuses, a wrong password,\n"
    "      a role or database that does not exist); up, distribute: connected through\n"
    "      a connection pooler (connect to the server directly)\n"
    "\n"
    "On Citus, status also says whether the schema is distributed, and flags each table\n"
    "that is not where distribute puts it. Run every command against the coordinator.\n";

typedef struct cli {
    const char *command;
    const char *dsn;
    int to_version;
    unsigned int connect_timeout_s; /* --connect-timeout; 0: the environment's or 10 s */
    int json;
    int quiet;
    int verbose;
    idem_migrate_options opts;
    int migration_failed;   /* up: a migration reported IDEM_MIGRATE_FAILED */
    int failed_no_tx;       /* ... and it was a no-transaction file */
    const char *tables[64]; /* --table */
    size_t ntables;
} cli;

#define usage_error(...) cli_usage_error("idem-migrate", __VA_ARGS__)

static int parse_int(int *out, const char *s, long min, long max)
{
    long long v;

    if (idem__parse_whole(&v, s, min, max) != 0)
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_option(cli *c, int opt, const char *arg)
{
    int seconds;

    switch (opt) {
    case 'd':
        c->dsn = arg;
        return 0;
    case 'D':
        c->opts.dir = arg;
        return 0;
    case 't':
        return parse_int(&c->to_version, arg, 1, 9999) == 0
                   ? 0
                   : usage_error("--to: '%s' is not a version (1 to 9999)", arg);
    case 'l':
        if (parse_int(&seconds, arg, 0, 86400) != 0)
            return usage_error("--lock-timeout: '%s' is not a number of seconds (0 to 86400)", arg);
        c->opts.lock_timeout_ms = (unsigned int)seconds * 1000u;
        return 0;
    case 'j':
        c->json = 1;
        return 0;
    case 'c':
        return cli_connect_timeout_option(&c->connect_timeout_s, "idem-migrate", arg);
    case 'T':
        if (c->ntables == sizeof(c->tables) / sizeof(c->tables[0]))
            return usage_error("--table: at most %zu tables", c->ntables);
        if (arg[0] == '\0')
            return usage_error("--table: a table name is needed (schema.name)");
        c->tables[c->ntables++] = arg;
        return 0;
    case 'q':
        c->quiet = 1;
        return 0;
    case 'v':
        c->verbose = 1;
        return 0;
    default:
        return usage_error("unknown option");
    }
}

/* Returns -1 to go on, else the exit status. */
static int parse_args(cli *c, int argc, char **argv)
{
    static const struct option longs[] = {
        {"dsn", required_argument, NULL, 'd'},   {"dir", required_argument, NULL, 'D'},
        {"to", required_argument, NULL, 't'},    {"lock-timeout", required_argument, NULL, 'l'},
        {"json", no_argument, NULL, 'j'},        {"connect-timeout", required_argument, NULL, 'c'},
        {"quiet", no_argument, NULL, 'q'},       {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},        {"version", no_argument, NULL, 'V'},
        {"table", required_argument, NULL, 'T'}, {NULL, 0, NULL, 0},
    };
    int opt, rc;

    opterr = 0;
    while ((opt = getopt_long(argc, argv, "qvhV", longs, NULL)) != -1) {
        if (opt == 'h') {
            fputs(usage_text, stdout);
            fputs(usage_exits, stdout);
            return EXIT_OK;
        }
        if (opt == 'V') {
            printf("idem-migrate %s (schema version %d)\n", idem_version(),
                   idem_migrate_latest_version());
            return EXIT_OK;
        }
        if (opt == '?')
            return usage_error("unknown option or missing argument: %s", argv[optind - 1]);
        if ((rc = parse_option(c, opt, optarg)) != 0)
            return rc;
    }
    if (optind != argc - 1)
        return usage_error(
            "%s", optind == argc
                      ? "a command is needed (status, plan, up, verify, baseline, distribute)"
                      : "one command only");
    c->command = argv[optind];
    return -1;
}

/* Every line this program writes on stderr: "idem-migrate: " and one line, whatever a
 * server message put in it (its newlines and tabs become spaces). */
#define say(...) cli_say("idem-migrate", __VA_ARGS__)

/* The library's log records (one line each already); DEBUG only with --verbose. */
static void on_log(void *ctx, int level, const char *message)
{
    const cli *c = ctx;

    if (level >= IDEM_LOG_WARNING || (level == IDEM_LOG_DEBUG && c->verbose)) {
        say("%s", message);
    } else if (level == IDEM_LOG_INFO && !c->quiet) {
        printf("%s\n", message);
        fflush(stdout);
    }
}

/* The server's notices and warnings ("NOTICE:  relation ... already exists, skipping"):
 * libpq would print them raw on stderr; they are the tool's DEBUG records. */
static void on_notice(void *ctx, const char *message)
{
    on_log(ctx, IDEM_LOG_DEBUG, message);
}

/* Connected with on_notice from the start, so that the notices of the connection's start
 * (a collation version warning, say) reach it like every later one. */
static PGconn *connect_db(cli *c, int *transient)
{
    return cli_connect("idem-migrate", c->dsn, c->connect_timeout_s, on_notice, c, transient);
}

/* What idem-migrate's codes mean here (tools/common/exit.h); the rest as every tool's. */
static int exit_for(int rc, const idem_error *err, int migration_failed)
{
    switch (rc) {
    case IDEM_ESCHEMA:
        return EXIT_DRIFT;
    case IDEM_EIO:
        return EXIT_NOINPUT;
    case IDEM_EINVAL:
        return strcmp(err->field, "dir") == 0 ? EXIT_NOINPUT : EXIT_USAGE;
    case IDEM_OK:
    case IDEM_ENOMEM:
    case IDEM_ELOCKED:
        return cli_exit_for(rc, err);
    default:
        return migration_failed ? EXIT_MIGRATION_FAILED : cli_exit_for(rc, err);
    }
}

/* Migration 0007's hint names the roles script by its place in the source tree; an
 * installed idem has it under share/idem. */
#define ROLES_SCRIPT_SOURCE "tools/idem-roles.sql"

/* The error on one line, with the server's hint when the message does not carry it, and
 * the installed roles script where either names the source tree's. */
static int fail(const char *what, int rc, const idem_error *err, int migration_failed)
{
    const char *message = err->message[0] != '\0' ? err->message : idem_strerror(rc);
    int hint = err->hint[0] != '\0' && strstr(message, err->hint) == NULL;
    int roles = strstr(message, ROLES_SCRIPT_SOURCE) != NULL ||
                (hint && strstr(err->hint, ROLES_SCRIPT_SOURCE) != NULL);

    say("%s: %s%s%s%s%s", what, message, hint ? " (hint: " : "", hint ? err->hint : "",
        hint ? ")" : "", roles ? " (installed: " IDEM_ROLES_SCRIPT ")" : "");
    return exit_for(rc, err, migration_failed);
}

/* plan and up refuse with IDEM_ESCHEMA for drift (4), and when the ledger lacks what
 * exists (8): which one it is. */
static int refusal_exit(cli *c, PGconn *conn)
{
    idem_migrate_list *list = NULL;
    int code = EXIT_DRIFT;

    if (idem_migrate_status(&list, conn, &c->opts, NULL) == 0 &&
        idem_migrate_list_ledger_incomplete(list))
        code = EXIT_LEDGER;
    idem_migrate_list_free(list);
    return code;
}

static int status_exit(const findings *f)
{
    if (f->ledger_incomplete)
        return EXIT_LEDGER;
    return f->refusal[0] != '\0' ? EXIT_DRIFT : f->n.pending > 0 ? EXIT_PENDING : EXIT_OK;
}

static int print_status_json(const idem_migrate_list *list, PGconn *conn, const findings *f)
{
    if (mr_print_status_json(list, conn, f, status_exit(f) == EXIT_OK) != 0) {
        say("out of memory");
        return EXIT_OSERR;
    }
    return status_exit(f);
}

static int print_status_text(const idem_migrate_list *list, PGconn *conn, const findings *f)
{
    mr_print_status_text(list, conn, f);
    return status_exit(f);
}

/* Why up would refuse now, into refusal ("" when it would not): the library's own reason,
 * from the plan of everything pending. Returns 0, or the exit status of a failure. */
static int up_refusal(char *refusal, size_t size, cli *c, PGconn *conn, const char *what)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *plan = NULL;
    int rc = idem_migrate_plan(&plan, conn, 0, &c->opts, &err);

    idem_migrate_list_free(plan);
    refusal[0] = '\0';
    if (rc == IDEM_ESCHEMA)
        snprintf(refusal, size, "%s", err.message);
    else if (rc != 0)
        return fail(what, rc, &err, 0);
    idem__one_line(refusal);
    return 0;
}

static int cmd_status(cli *c, PGconn *conn)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *list = NULL;
    findings f;
    int rc = idem_migrate_status(&list, conn, &c->opts, &err), code;

    if (rc != 0)
        return fail("status", rc, &err, 0);
    f.n = mr_count_states(list);
    f.ledger_incomplete = idem_migrate_list_ledger_incomplete(list);
    f.distribution = NULL;
    code = up_refusal(f.refusal, sizeof(f.refusal), c, conn, "status");
    rc = code == 0 ? idem_migrate_distribution(&f.distribution, conn, c->tables, c->ntables, &err)
                   : 0;
    if (rc != 0 && rc != IDEM_ESCHEMA)
        code = fail("status", rc, &err, 0);
    if (code == 0 && c->json)
        code = print_status_json(list, conn, &f);
    else if (code == 0)
        code = print_status_text(list, conn, &f);
    idem_migrate_list_free(list);
    idem_distribution_free(f.distribution);
    return code;
}

static void print_verify_item(const idem_migration *m)
{
    if (m->state == IDEM_MIGRATION_DRIFTED && strcmp(m->name, m->applied_name) != 0)
        say("verify: %s: version %04d was applied as %s", m->name, m->version, m->applied_name);
    else if (m->state == IDEM_MIGRATION_DRIFTED)
        say("verify: %s: changed since it was applied (sha256 applied %s, file %s)", m->name,
            m->applied_checksum, m->checksum);
    else if (m->state == IDEM_MIGRATION_UNKNOWN)
        printf("note: %s (version %04d) is applied but not among these migrations\n", m->name,
               m->version);
}

/* verify on a database whose ledger lacks what exists: say so (8), or that there is
 * no schema at all (7). */
static int verify_no_ledger(cli *c, PGconn *conn, const idem_migrate_list *list)
{
    char refusal[IDEM_ERROR_MESSAGE_MAX];
    int code;

    if (!idem_migrate_list_ledger_incomplete(list)) {
        say("verify: the idem schema is not installed in database \"%s\" (no table "
            "idem.schema_migrations): run idem-migrate up",
            PQdb(conn));
        return EXIT_NO_SCHEMA;
    }
    code = up_refusal(refusal, sizeof(refusal), c, conn, "verify");
    if (code == 0)
        say("verify: %s", refusal);
    return code != 0 ? code : EXIT_LEDGER;
}

/* verify --json: {"verified", "applied", "drifted": [...], "unknown": [...]}, the same
 * findings as the text; the exit status is the same too. */
static int print_verify_json(const idem_migrate_list *list, const counts *n)
{
    json_t *drifted = json_array(), *unknown = json_array();

    for (size_t i = 0; drifted != NULL && unknown != NULL && i < idem_migrate_list_count(list);
         i++) {
        const idem_migration *m = idem_migrate_list_at(list, i);

        if (m->state == IDEM_MIGRATION_DRIFTED)
            json_array_append_new(drifted, json_pack("{s:i, s:s, s:s, s:s, s:s}", "version",
                                                     m->version, "name", m->name, "applied_name",
                                                     m->applied_name, "applied_checksum",
                                                     m->applied_checksum, "checksum", m->checksum));
        else if (m->state == IDEM_MIGRATION_UNKNOWN)
            json_array_append_new(unknown,
                                  json_pack("{s:i, s:s}", "version", m->version, "name", m->name));
    }
    if (drifted == NULL || unknown == NULL ||
        cli_print_json(json_pack("{s:b, s:I, s:o, s:o}", "verified", n->drifted == 0, "applied",
                                 (json_int_t)n->applied, "drifted", drifted, "unknown", unknown)) !=
            0) {
        say("out of memory");
        return EXIT_OSERR;
    }
    return n->drifted > 0 ? EXIT_DRIFT : EXIT_OK;
}

static int cmd_verify(cli *c, PGconn *conn)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *list = NULL;
    int rc = idem_migrate_status(&list, conn, &c->opts, &err), code = EXIT_OK;
    counts n;

    if (rc != 0)
        return fail("verify", rc, &err, 0);
    n = mr_count_states(list);
    if (!idem_migrate_list_ledger_exists(list) || n.unrecorded > 0)
        code = verify_no_ledger(c, conn, list);
    if (code == EXIT_OK && c->json) {
        code = print_verify_json(list, &n);
        idem_migrate_list_free(list);
        return code;
    }
    for (size_t i = 0; code == EXIT_OK && i < idem_migrate_list_count(list); i++)
        print_verify_item(idem_migrate_list_at(list, i));
    idem_migrate_list_free(list);
    if (code == EXIT_OK && n.drifted > 0)
        return EXIT_DRIFT;
    if (code == EXIT_OK)
        printf("verified: %zu applied migration%s unchanged\n", n.applied,
               n.applied == 1 ? "" : "s");
    return code;
}

static int cmd_plan(cli *c, PGconn *conn)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *list = NULL;
    int rc = idem_migrate_plan(&list, conn, c->to_version, &c->opts, &err);
    size_t n;

    if (rc == IDEM_ESCHEMA) {
        fail("plan: up would refuse", rc, &err, 0);
        return refusal_exit(c, conn);
    }
    if (rc != 0)
        return fail("plan", rc, &err, 0);
    n = idem_migrate_list_count(list);
    printf("-- idem-migrate plan for database \"%s\": %zu migration%s to apply; nothing has run.\n",
           PQdb(conn), n, n == 1 ? "" : "s");
    if (n > 0 && !idem_migrate_list_ledger_exists(list))
        printf("-- up first creates the schema idem and its ledger idem.schema_migrations.\n");
    if (n > 0)
        printf("-- Each file runs with search_path = idem; up records it in "
               "idem.schema_migrations.\n\n");
    for (size_t i = 0; i < n; i++)
        mr_print_plan_item(idem_migrate_list_at(list, i));
    idem_migrate_list_free(list);
    return EXIT_OK;
}

static void on_progress(void *ctx, idem_migrate_event event, const idem_migration *m)
{
    cli *c = ctx;

    if (event == IDEM_MIGRATE_FAILED) {
        c->migration_failed = 1;
        c->failed_no_tx = m->no_transaction;
    }
}

/* Refuse a connection through a pooler: in transaction mode the lock would be taken on
 * one server session and the migrations run on others, and the lock would outlive the run
 * on a session the pooler keeps. */
static int refuse_pooler(PGconn *conn)
{
    idem_error err = IDEM_ERROR_INIT;
    int pooled = 0;

    if (idem_pooler_detect(&pooled, conn, &err) != 0)
        return fail("up", err.code, &err, 0);
    if (!pooled)
        return EXIT_OK;
    fprintf(stderr, "idem-migrate: up: connected through a connection pooler (PgBouncer?): the "
                    "migration lock is a session-level advisory lock held across transactions, "
                    "which a pooler in transaction mode spreads over server sessions; connect "
                    "to the PostgreSQL server directly (its own host and port)\n");
    return EXIT_CONFIG;
}

static void use_hooks(cli *c)
{
    c->opts.log = on_log;
    c->opts.log_ctx = c;
    c->opts.progress = on_progress;
    c->opts.progress_ctx = c;
}

static int cmd_up(cli *c, PGconn *conn)
{
    idem_error err = IDEM_ERROR_INIT;
    int rc = refuse_pooler(conn);

    if (rc != EXIT_OK)
        return rc;
    use_hooks(c);
    rc = idem_migrate_up(conn, c->to_version, &c->opts, &err);
    if (rc != 0 && c->migration_failed)
        return fail(c->failed_no_tx ? "up: migration failed"
                                    : "up: migration failed and was rolled back",
                    rc, &err, 1);
    if (rc == IDEM_ESCHEMA) {
        fail("up", rc, &err, 0);
        return refusal_exit(c, conn);
    }
    if (rc != 0)
        return fail("up", rc, &err, 0);
    return EXIT_OK;
}

static int cmd_baseline(cli *c, PGconn *conn)
{
    idem_error err = IDEM_ERROR_INIT;
    int rc;

    use_hooks(c);
    rc = idem_migrate_baseline(conn, c->to_version, &c->opts, &err);
    if (rc == IDEM_ESCHEMA) {
        fail("baseline", rc, &err, 0);
        return EXIT_NOT_APPLIED;
    }
    return rc != 0 ? fail("baseline", rc, &err, 0) : EXIT_OK;
}

static int cmd_distribute(cli *c, PGconn *conn)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_distribution *d = NULL;
    size_t changed = 0;
    int rc = refuse_pooler(conn);

    if (rc != EXIT_OK)
        return rc;
    use_hooks(c);
    rc = idem_migrate_distribute(&d, conn, c->tables, c->ntables, &c->opts, &err);
    if (rc != 0) {
        int code = fail("distribute", rc, &err, 0);

        if (rc == IDEM_ESCHEMA)
            return EXIT_NOT_DISTRIBUTABLE;
        /* a --table that does not exist is the caller's, not idem's schema missing */
        return code == EXIT_NO_SCHEMA ? EXIT_DATABASE : code;
    }
    for (size_t i = 0; i < idem_distribution_count(d); i++) {
        const idem_distributed_table *t = idem_distribution_at(d, i);

        changed += t->changed != 0;
        if (t->changed && !c->quiet)
            printf("%s: %s\n", t->name,
                   t->tenant ? "distributed by tenant, co-located with idem.operations"
                             : "reference table");
    }
    if (!c->quiet)
        printf("distributed: %zu table%s placed now, %zu already in place\n", changed,
               changed == 1 ? "" : "s", idem_distribution_count(d) - changed);
    idem_distribution_free(d);
    return EXIT_OK;
}

typedef int (*command_fn)(cli *c, PGconn *conn);

static command_fn find_command(const char *name)
{
    static const struct {
        const char *name;
        command_fn fn;
    } commands[] = {
        {"status", cmd_status}, {"plan", cmd_plan},         {"up", cmd_up},
        {"verify", cmd_verify}, {"baseline", cmd_baseline}, {"distribute", cmd_distribute}};

    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(name, commands[i].name) == 0)
            return commands[i].fn;
    return NULL;
}

int main(int argc, char **argv)
{
    idem_migrate_options defaults = IDEM_MIGRATE_OPTIONS_INIT;
    command_fn command;
    cli c;
    PGconn *conn;
    int code, transient;

    memset(&c, 0, sizeof(c));
    c.opts = defaults;
    code = parse_args(&c, argc, argv);
    if (code >= 0)
        return code;
    command = find_command(c.command);
    if (command == NULL)
        return usage_error("unknown command '%s' (status, plan, up, verify, baseline, distribute)",
                           c.command);
    if (c.json && command != cmd_status && command != cmd_verify)
        return usage_error("--json is for status and verify");
    if (command == cmd_baseline && c.to_version == 0)
        return usage_error("baseline needs --to N: the last version that is really applied");
    conn = connect_db(&c, &transient);
    if (conn == NULL)
        return cli_connect_exit(transient);
    code = command(&c, conn);
    PQfinish(conn);
    return code;
}
