/* idem-migrate: apply idem's schema migrations to a PostgreSQL database, and report their
 * state. The migrations are built into the program; --dir reads a folder instead. */
#include <getopt.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/idem.h"

#include "cli.h"

enum exit_code {
    EXIT_OK = 0,
    EXIT_INTERNAL = 1,
    EXIT_DATABASE = 2,
    EXIT_PENDING = 3,
    EXIT_DRIFT = 4,
    EXIT_MIGRATION_FAILED = 5,
    EXIT_LOCKED = 6,
    EXIT_NO_SCHEMA = 7,
    EXIT_USAGE = 64,
    EXIT_NOINPUT = 66,
};

static const char usage_text[] =
    "usage: idem-migrate [OPTIONS] COMMAND\n"
    "\n"
    "Apply idem's schema migrations to a PostgreSQL database and report their state.\n"
    "\n"
    "Commands:\n"
    "  status   list applied and pending migrations, and applied files that changed\n"
    "  plan     print the SQL that up would run; runs nothing\n"
    "  up       apply the pending migrations in version order, each in its own\n"
    "           transaction with its row in the ledger idem.schema_migrations\n"
    "  verify   check that no applied migration's file has changed since it was applied\n"
    "\n"
    "Options:\n"
    "  --dsn CONNINFO      libpq connection string or postgresql:// URI; without it the\n"
    "                      PG* environment variables are used (PGHOST, PGPORT,\n"
    "                      PGDATABASE, PGUSER, PGPASSWORD, PGSERVICE, ...)\n"
    "  --dir DIR           use the NNNN_description.sql files of DIR instead of the\n"
    "                      migrations built into this program\n"
    "  --to N              plan, up: stop after version N\n"
    "  --lock-timeout SEC  up: wait at most SEC seconds for the migration lock (advisory\n"
    "                      lock 7594306392314963826), which another up or any other\n"
    "                      session may hold (default 60; 0 = do not wait)\n"
    "  --json              status: print JSON\n"
    "  -q, --quiet         up: print errors only\n"
    "  -h, --help          print this help\n"
    "  -V, --version       print the version and the built-in schema version\n"
    "\n"
    "A file whose leading comment lines include \"-- idem:no-transaction\" runs statement\n"
    "by statement outside a transaction (for CREATE INDEX CONCURRENTLY).\n"
    "\n"
    "up holds a session-level lock across transactions: it connects to PostgreSQL\n"
    "directly and refuses a connection through a pooler such as PgBouncer. status,\n"
    "plan and verify only read, and work through one.\n"
    "\n"
    "Exit status:\n"
    "   0  success; status: the schema is up to date\n"
    "   1  internal error (out of memory)\n"
    "   2  cannot connect, or a database error outside a migration; up: connected\n"
    "      through a connection pooler (connect to the server directly)\n"
    "   3  status: migrations are pending, and up would apply them\n"
    "   4  drift: an applied migration's file changed (status, verify), or a pending\n"
    "      migration is older than an applied one (status); plan and up refuse both\n"
    "      with 4; the message names the file\n"
    "   5  up: a migration failed; its transaction was rolled back (a no-transaction\n"
    "      file keeps the statements before the failing one); FILE:LINE and the\n"
    "      server's message are on stderr\n"
    "   6  up: another session held the migration lock longer than --lock-timeout; the\n"
    "      message names it (pid, application, role, client address)\n"
    "   7  verify: the schema is not installed (no ledger idem.schema_migrations)\n"
    "  64  usage error\n"
    "  66  --dir unreadable, or a misnamed or duplicate migration file in it\n";

typedef struct cli {
    const char *command;
    const char *dsn;
    int to_version;
    int json;
    int quiet;
    idem_migrate_options opts;
    int migration_failed; /* up: a migration reported IDEM_MIGRATE_FAILED */
    int failed_no_tx;     /* ... and it was a no-transaction file */
} cli;

#define usage_error(...) cli_usage_error("idem-migrate", __VA_ARGS__)

static int parse_int(int *out, const char *s, long min, long max)
{
    long long v;

    if (cli_parse_number(&v, s, min, max) != 0)
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
    case 'q':
        c->quiet = 1;
        return 0;
    default:
        return usage_error("unknown option");
    }
}

/* Returns -1 to go on, else the exit status. */
static int parse_args(cli *c, int argc, char **argv)
{
    static const struct option longs[] = {
        {"dsn", required_argument, NULL, 'd'},
        {"dir", required_argument, NULL, 'D'},
        {"to", required_argument, NULL, 't'},
        {"lock-timeout", required_argument, NULL, 'l'},
        {"json", no_argument, NULL, 'j'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int opt, rc;

    opterr = 0;
    while ((opt = getopt_long(argc, argv, "qhV", longs, NULL)) != -1) {
        if (opt == 'h') {
            fputs(usage_text, stdout);
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
        return usage_error("%s", optind == argc ? "a command is needed (status, plan, up, verify)"
                                                : "one command only");
    c->command = argv[optind];
    return -1;
}

static int exit_for(int rc, const idem_error *err, int migration_failed)
{
    switch (rc) {
    case IDEM_OK:
        return EXIT_OK;
    case IDEM_ENOMEM:
        return EXIT_INTERNAL;
    case IDEM_ESCHEMA:
        return EXIT_DRIFT;
    case IDEM_ELOCKED:
        return EXIT_LOCKED;
    case IDEM_EIO:
        return EXIT_NOINPUT;
    case IDEM_EINVAL:
        return strcmp(err->field, "dir") == 0 ? EXIT_NOINPUT : EXIT_USAGE;
    default:
        return migration_failed ? EXIT_MIGRATION_FAILED : EXIT_DATABASE;
    }
}

static int fail(const char *what, int rc, const idem_error *err, int migration_failed)
{
    fprintf(stderr, "idem-migrate: %s: %s\n", what,
            err->message[0] != '\0' ? err->message : idem_strerror(rc));
    return exit_for(rc, err, migration_failed);
}

typedef struct counts {
    size_t applied, pending, drifted, unknown;
} counts;

static counts count_states(const idem_migrate_list *list)
{
    counts n = {0, 0, 0, 0};

    for (size_t i = 0; i < idem_migrate_list_count(list); i++) {
        switch (idem_migrate_list_at(list, i)->state) {
        case IDEM_MIGRATION_APPLIED:
            n.applied++;
            break;
        case IDEM_MIGRATION_PENDING:
            n.pending++;
            break;
        case IDEM_MIGRATION_DRIFTED:
            n.drifted++;
            break;
        case IDEM_MIGRATION_UNKNOWN:
            n.unknown++;
            break;
        }
    }
    return n;
}

/* refusal: why up would refuse now, "" when it would not. */
static int status_exit(counts n, const char *refusal)
{
    return refusal[0] != '\0' ? EXIT_DRIFT : n.pending > 0 ? EXIT_PENDING : EXIT_OK;
}

static json_t *str_or_null(const char *s)
{
    return s != NULL && s[0] != '\0' ? json_string(s) : json_null();
}

static json_t *migration_json(const idem_migration *m)
{
    int applied = m->state != IDEM_MIGRATION_PENDING;

    return json_pack("{s:i, s:s, s:s, s:b, s:o, s:o, s:o, s:o, s:o, s:o}", "version", m->version,
                     "name", m->name, "state", idem_migrate_state_name(m->state), "no_transaction",
                     m->no_transaction, "checksum", str_or_null(m->checksum), "applied_name",
                     str_or_null(m->applied_name), "applied_checksum",
                     str_or_null(m->applied_checksum), "applied_at", str_or_null(m->applied_at),
                     "duration_ms", applied ? json_integer(m->duration_ms) : json_null(),
                     "applied_by", str_or_null(m->applied_by));
}

static int print_status_json(const idem_migrate_list *list, PGconn *conn, counts n,
                             const char *refusal)
{
    json_t *items = json_array(), *doc;
    char *text;

    for (size_t i = 0; items != NULL && i < idem_migrate_list_count(list); i++)
        json_array_append_new(items, migration_json(idem_migrate_list_at(list, i)));
    doc = json_pack("{s:s, s:b, s:b, s:o, s:i, s:I, s:I, s:I, s:I, s:o}", "database", PQdb(conn),
                    "ledger", idem_migrate_list_ledger_exists(list), "up_to_date",
                    status_exit(n, refusal) == EXIT_OK, "up_would_refuse", str_or_null(refusal),
                    "schema_version", idem_migrate_latest_version(), "applied",
                    (json_int_t)n.applied, "pending", (json_int_t)n.pending, "drifted",
                    (json_int_t)n.drifted, "unknown", (json_int_t)n.unknown, "migrations", items);
    text = doc != NULL ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(doc);
    if (text == NULL) {
        fprintf(stderr, "idem-migrate: out of memory\n");
        return EXIT_INTERNAL;
    }
    puts(text);
    free(text);
    return status_exit(n, refusal);
}

static void print_status_row(const idem_migration *m)
{
    char ms[24] = "";

    if (m->duration_ms >= 0)
        snprintf(ms, sizeof(ms), "%lld", m->duration_ms);
    printf("%04d     %-8s %-25s %-12s %7s  %s", m->version, idem_migrate_state_name(m->state),
           m->applied_at, m->applied_by, ms, m->name);
    if (m->state == IDEM_MIGRATION_DRIFTED && strcmp(m->name, m->applied_name) != 0)
        printf("  (applied as %s)", m->applied_name);
    else if (m->state == IDEM_MIGRATION_DRIFTED)
        printf("  (changed since applied: sha256 applied %.16s..., file %.16s...)",
               m->applied_checksum, m->checksum);
    if (m->state == IDEM_MIGRATION_UNKNOWN)
        printf("  (applied, but not among these migrations: a newer schema, or a removed file)");
    putchar('\n');
}

static void print_status_summary(counts n, const char *refusal)
{
    if (n.drifted > 0)
        printf("DRIFT: %zu applied migration%s changed since applied; see idem-migrate verify\n",
               n.drifted, n.drifted == 1 ? "" : "s");
    else if (n.pending > 0 && refusal[0] == '\0')
        printf("%zu applied, %zu pending: run idem-migrate up\n", n.applied, n.pending);
    else if (n.pending > 0)
        printf("%zu applied, %zu pending\n", n.applied, n.pending);
    else
        printf("up to date: %zu applied\n", n.applied);
    if (refusal[0] != '\0')
        printf("up would refuse: %s\n", refusal);
}

static int print_status_text(const idem_migrate_list *list, PGconn *conn, counts n,
                             const char *refusal)
{
    printf("database \"%s\" on %s:%s, ledger idem.schema_migrations %s\n", PQdb(conn), PQhost(conn),
           PQport(conn), idem_migrate_list_ledger_exists(list) ? "present" : "absent");
    printf("%-8s %-8s %-25s %-12s %7s  %s\n", "VERSION", "STATE", "APPLIED AT (UTC)", "BY", "MS",
           "NAME");
    for (size_t i = 0; i < idem_migrate_list_count(list); i++)
        print_status_row(idem_migrate_list_at(list, i));
    print_status_summary(n, refusal);
    return status_exit(n, refusal);
}

/* Why up would refuse now, into refusal ("" when it would not): the library's own reason,
 * from the plan of everything pending. Returns 0, or the exit status of a failure. */
static int up_refusal(char *refusal, size_t size, cli *c, PGconn *conn)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *plan = NULL;
    int rc = idem_migrate_plan(&plan, conn, 0, &c->opts, &err);

    idem_migrate_list_free(plan);
    refusal[0] = '\0';
    if (rc == IDEM_ESCHEMA)
        snprintf(refusal, size, "%s", err.message);
    else if (rc != 0)
        return fail("status", rc, &err, 0);
    return 0;
}

static int cmd_status(cli *c, PGconn *conn)
{
    char refusal[IDEM_ERROR_MESSAGE_MAX];
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *list = NULL;
    int rc = idem_migrate_status(&list, conn, &c->opts, &err), code;

    if (rc != 0)
        return fail("status", rc, &err, 0);
    code = up_refusal(refusal, sizeof(refusal), c, conn);
    if (code == 0 && c->json)
        code = print_status_json(list, conn, count_states(list), refusal);
    else if (code == 0)
        code = print_status_text(list, conn, count_states(list), refusal);
    idem_migrate_list_free(list);
    return code;
}

static void print_verify_item(const idem_migration *m)
{
    if (m->state == IDEM_MIGRATION_DRIFTED && strcmp(m->name, m->applied_name) != 0)
        fprintf(stderr, "idem-migrate: verify: %s: version %04d was applied as %s\n", m->name,
                m->version, m->applied_name);
    else if (m->state == IDEM_MIGRATION_DRIFTED)
        fprintf(stderr,
                "idem-migrate: verify: %s: changed since it was applied (sha256 applied %s, "
                "file %s)\n",
                m->name, m->applied_checksum, m->checksum);
    else if (m->state == IDEM_MIGRATION_UNKNOWN)
        printf("note: %s (version %04d) is applied but not among these migrations\n", m->name,
               m->version);
}

static int cmd_verify(cli *c, PGconn *conn)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *list = NULL;
    int rc = idem_migrate_status(&list, conn, &c->opts, &err);
    counts n;

    if (rc != 0)
        return fail("verify", rc, &err, 0);
    if (!idem_migrate_list_ledger_exists(list)) {
        fprintf(stderr,
                "idem-migrate: verify: the idem schema is not installed in database \"%s\" (no "
                "table idem.schema_migrations): run idem-migrate up\n",
                PQdb(conn));
        idem_migrate_list_free(list);
        return EXIT_NO_SCHEMA;
    }
    n = count_states(list);
    for (size_t i = 0; i < idem_migrate_list_count(list); i++)
        print_verify_item(idem_migrate_list_at(list, i));
    idem_migrate_list_free(list);
    if (n.drifted > 0)
        return EXIT_DRIFT;
    printf("verified: %zu applied migration%s unchanged\n", n.applied, n.applied == 1 ? "" : "s");
    return EXIT_OK;
}

static void print_plan_item(const idem_migration *m)
{
    printf("-- ---- %s (version %04d, sha256 %s), %s\n", m->name, m->version, m->checksum,
           m->no_transaction ? "statement by statement, outside a transaction"
                             : "in one transaction with its ledger row");
    fwrite(m->sql, 1, m->sql_len, stdout);
    if (m->sql_len > 0 && m->sql[m->sql_len - 1] != '\n')
        putchar('\n');
    printf("-- ---- end of %s\n\n", m->name);
}

static int cmd_plan(cli *c, PGconn *conn)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_migrate_list *list = NULL;
    int rc = idem_migrate_plan(&list, conn, c->to_version, &c->opts, &err);
    size_t n;

    if (rc != 0)
        return fail("plan: up would refuse", rc, &err, 0);
    n = idem_migrate_list_count(list);
    printf("-- idem-migrate plan for database \"%s\": %zu migration%s to apply; nothing has run.\n",
           PQdb(conn), n, n == 1 ? "" : "s");
    if (n > 0 && !idem_migrate_list_ledger_exists(list))
        printf("-- up first creates the schema idem and its ledger idem.schema_migrations.\n");
    if (n > 0)
        printf("-- Each file runs with search_path = idem; up records it in "
               "idem.schema_migrations.\n\n");
    for (size_t i = 0; i < n; i++)
        print_plan_item(idem_migrate_list_at(list, i));
    idem_migrate_list_free(list);
    return EXIT_OK;
}

static void on_log(void *ctx, int level, const char *message)
{
    const cli *c = ctx;

    if (level >= IDEM_LOG_WARNING)
        fprintf(stderr, "idem-migrate: %s\n", message);
    else if (!c->quiet)
        printf("%s\n", message);
    fflush(stdout);
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
    return EXIT_DATABASE;
}

static int cmd_up(cli *c, PGconn *conn)
{
    idem_error err = IDEM_ERROR_INIT;
    int rc = refuse_pooler(conn);

    if (rc != EXIT_OK)
        return rc;
    c->opts.log = on_log;
    c->opts.log_ctx = c;
    c->opts.progress = on_progress;
    c->opts.progress_ctx = c;
    rc = idem_migrate_up(conn, c->to_version, &c->opts, &err);
    if (rc != 0 && c->migration_failed)
        return fail(c->failed_no_tx ? "up: migration failed"
                                    : "up: migration failed and was rolled back",
                    rc, &err, 1);
    if (rc != 0)
        return fail("up", rc, &err, 0);
    return EXIT_OK;
}

int main(int argc, char **argv)
{
    idem_migrate_options defaults = IDEM_MIGRATE_OPTIONS_INIT;
    cli c;
    PGconn *conn;
    int code;

    memset(&c, 0, sizeof(c));
    c.opts = defaults;
    code = parse_args(&c, argc, argv);
    if (code >= 0)
        return code;
    if (strcmp(c.command, "status") != 0 && strcmp(c.command, "plan") != 0 &&
        strcmp(c.command, "up") != 0 && strcmp(c.command, "verify") != 0)
        return usage_error("unknown command '%s' (status, plan, up, verify)", c.command);
    conn = cli_connect("idem-migrate", c.dsn);
    if (conn == NULL)
        return EXIT_DATABASE;
    if (strcmp(c.command, "status") == 0)
        code = cmd_status(&c, conn);
    else if (strcmp(c.command, "plan") == 0)
        code = cmd_plan(&c, conn);
    else if (strcmp(c.command, "up") == 0)
        code = cmd_up(&c, conn);
    else
        code = cmd_verify(&c, conn);
    PQfinish(conn);
    return code;
}
