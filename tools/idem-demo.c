/*
 * idem-demo — the lost-response walk-through, against a real PostgreSQL.
 *
 * A write tool's effect commits, its reply is lost, the agent retries with the same
 * operation ID: the retry finds the first attempt's receipt instead of creating a second
 * task. Then: changed arguments under the same ID are refused, the same ID in another
 * tenant is an independent key, and a second intent with the same subject is a second
 * task. Last, a durable intent: a worker approves an action and "crashes" after its effect
 * commits; a new worker recovers the intent and gets the stored receipt, not a second task.
 *
 * Usage: idem-demo [--dsn CONNINFO]   (default: the PG* environment variables); --help,
 * --version.
 * It applies idem's migrations to that database first, then sets up the example tool's
 * own table (idem_example.support_tasks). Its pool finds out whether a connection pooler
 * stands in between (IDEM_POOLER_AUTO); through one, it only checks the schema, which
 * idem-migrate applies over a direct connection.
 */
#include <idem/idem.h>
#include <idem/migrate.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support_tasks.h"

struct demo {
    idem_pool *pool;
    idem_store *store;
    char op[IDEM_UUID_STRING_SIZE];
};

static int fail(const char *what, const idem_error *err)
{
    fprintf(stderr, "idem-demo: %s: %s\n", what, err->message[0] ? err->message : "failed");
    return 1;
}

/* Rows that operation ID @op left in @table: tasks it created, operation records. */
static int count(struct demo *d, const char *table, const char *op, long *out)
{
    char sql[160];
    const char *values[1] = {op};
    idem_conn *conn = NULL;
    idem_error err = IDEM_ERROR_INIT;
    PGresult *res;
    int rc = idem_pool_acquire(&conn, d->pool, &err);

    if (rc != 0)
        return fail("count", &err);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s WHERE operation_id = $1", table);
    res = PQexecParams(idem_conn_pg(conn), sql, 1, NULL, values, NULL, NULL, 0);
    rc = PQresultStatus(res) == PGRES_TUPLES_OK ? 0 : 1;
    if (rc == 0)
        *out = strtol(PQgetvalue(res, 0, 0), NULL, 10);
    else
        fprintf(stderr, "idem-demo: count: %s", PQresultErrorMessage(res));
    PQclear(res);
    idem_pool_release(conn);
    return rc;
}

static int print_counts(struct demo *d, const char *label, const char *op)
{
    long tasks = 0, operations = 0;

    if (count(d, "idem_example.support_tasks", op, &tasks) != 0 ||
        count(d, "idem.operations", op, &operations) != 0)
        return 1;
    printf("%s: tasks=%ld operations=%ld\n", label, tasks, operations);
    return 0;
}

/* The receipt as the demo shows it: the stored JSON with ", " and ": " separators. */
static char *display(const idem_outcome *out)
{
    json_t *v = json_loadb(out->receipt, out->receipt_len, 0, NULL);
    char *s = v != NULL ? json_dumps(v, JSON_ENCODE_ANY) : NULL;

    json_decref(v);
    return s;
}

/* The intents scene: worker 1 approves and executes; its process dies after the effect
 * committed and before it recorded the result. The effect is the example's, run by the
 * store under the intent's own operation ID and arguments, as the intent's execution
 * runs it; the intent is left as the crash leaves it. */
static int worker_1(struct demo *d, idem_intent **out, const char *approval_ref)
{
    const char *args = "{\"subject\": \"Refund order 1042\"}";
    idem_intent_request ir = IDEM_INTENT_REQUEST_INIT;
    idem_request req = IDEM_REQUEST_INIT;
    idem_outcome o = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;

    ir.tenant = "acme";
    ir.approval_ref = approval_ref;
    ir.tool = EXAMPLE_TOOL_NAME;
    ir.payload_version = EXAMPLE_TOOL_VERSION;
    ir.arguments = args;
    ir.arguments_len = strlen(args);
    ir.approved_by = "ops@acme";
    if (idem_intent_approve(out, d->store, &ir, &err) != 0)
        return fail("approving", &err);
    req.tenant = idem_intent_tenant(*out);
    req.operation_id = idem_intent_operation_id(*out);
    req.tool = idem_intent_tool(*out);
    req.payload_version = idem_intent_payload_version(*out);
    req.arguments = idem_intent_arguments(*out);
    req.arguments_len = strlen(req.arguments);
    req.attempt = 1;
    if (idem_store_execute(&o, d->store, &req, example_create_support_task, NULL, &err) != 0)
        return fail("worker 1's effect", &err);
    idem_outcome_clear(&o);
    printf("Worker 1 approved a refund (intent %s), its effect committed, then the worker "
           "crashed\n",
           idem_intent_state_name(idem_intent_current_state(*out)));
    return 0;
}

/* Worker 2, after a restart: recover acme's unfinished intents and resume them. */
static int worker_2(struct demo *d, const char *op)
{
    idem_intent_list *list = NULL;
    idem_outcome o = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    int rc = 0;
    char *shown;

    if (idem_intent_recover(&list, d->store, "acme", NULL, &err) != 0)
        return fail("recovering", &err);
    for (size_t i = 0; rc == 0 && i < idem_intent_list_count(list); i++) {
        idem_intent *t = idem_intent_list_at(list, i);

        if (strcmp(idem_intent_operation_id(t), op) != 0)
            continue; /* another run's leftovers are not this scene's */
        if (idem_intent_execute(&o, d->store, t, example_create_support_task, NULL, NULL, &err) !=
            0) {
            rc = fail("resuming the intent", &err);
            break;
        }
        shown = display(&o);
        printf("Worker 2 recovered it: %s %s, intent %s\n", idem_status_name(o.status), shown,
               idem_intent_state_name(idem_intent_current_state(t)));
        free(shown);
        idem_outcome_clear(&o);
    }
    idem_intent_list_free(list);
    return rc;
}

static int durable_intent(struct demo *d)
{
    char ref[64], op[IDEM_UUID_STRING_SIZE];
    idem_intent *t = NULL;
    int rc;

    printf("\n");
    snprintf(ref, sizeof(ref), "msg-%s", d->op); /* the approving message, once per run */
    if ((rc = worker_1(d, &t, ref)) != 0)
        return rc;
    snprintf(op, sizeof(op), "%s", idem_intent_operation_id(t));
    idem_intent_free(t);
    if ((rc = worker_2(d, op)) != 0)
        return rc;
    return print_counts(d, "After recovery", op);
}

/* @attempt: 1 for a first attempt, 2 for a retry (see idem_request.attempt). */
static int call(struct demo *d, idem_outcome *out, const char *tenant, const char *op,
                unsigned int attempt, const char *subject, idem_error *err)
{
    char args[256];
    idem_request req = IDEM_REQUEST_INIT;

    snprintf(args, sizeof(args), "{\"subject\": \"%s\"}", subject);
    req.tenant = tenant;
    req.operation_id = op;
    req.tool = EXAMPLE_TOOL_NAME;
    req.payload_version = EXAMPLE_TOOL_VERSION;
    req.arguments = args;
    req.arguments_len = strlen(args);
    req.attempt = attempt;
    idem_outcome_clear(out);
    return idem_store_execute(out, d->store, &req, example_create_support_task, NULL, err);
}

/* The migration lock is held across transactions, which a pooler in transaction mode
 * would spread over server sessions: through a pooler the schema is only checked. */
static int schema(PGconn *pg)
{
    idem_error err = IDEM_ERROR_INIT;
    int pooled = 0;

    if (idem_pooler_detect(&pooled, pg, &err) != 0)
        return fail("connecting", &err);
    if (!pooled && idem_migrate_up(pg, 0, NULL, &err) != 0)
        return fail("applying migrations", &err);
    if (pooled && idem_migrate_check(pg, &err) != 0)
        return fail("through a connection pooler, checking the schema (apply it with "
                    "idem-migrate up over a direct connection)",
                    &err);
    return 0;
}

static int setup(struct demo *d, const char *dsn)
{
    idem_pool_options opts = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_conn *conn = NULL;
    int rc;

    opts.pooler = IDEM_POOLER_AUTO;
    if (idem_pool_new(&d->pool, dsn, &opts, &err) != 0)
        return fail("connecting", &err);
    if (idem_pool_acquire(&conn, d->pool, &err) != 0)
        return fail("connecting", &err);
    rc = schema(idem_conn_pg(conn));
    if (rc == 0 && example_support_tasks_setup(idem_conn_pg(conn), &err) != 0)
        rc = fail("setting up the example's table", &err);
    idem_pool_release(conn);
    if (rc != 0)
        return rc;
    if (idem_store_new(&d->store, d->pool, NULL, &err) != 0)
        return fail("store", &err);
    if (idem_uuid_v7(d->op, &err) != 0)
        return fail("operation ID", &err);
    return 0;
}

/* The seed's transcript. */
static int lost_response(struct demo *d)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char *shown;

    /* The first attempt commits; its reply never reaches the agent. */
    if (call(d, &out, "acme", d->op, 1, "Check delayed delivery", &err) != 0)
        return fail("first attempt", &err);
    idem_outcome_clear(&out);
    printf("Committed, but response was lost\n");
    if (print_counts(d, "After timeout", d->op) != 0)
        return 1;
    if (call(d, &out, "acme", d->op, 2, "Check delayed delivery", &err) != 0)
        return fail("retry", &err);
    shown = display(&out);
    printf("Retry: %s\n", shown != NULL ? shown : out.receipt);
    free(shown);
    if (print_counts(d, "After retry", d->op) != 0)
        return 1;
    if (call(d, &out, "acme", d->op, 2, "Cancel my order", &err) == IDEM_ECONFLICT)
        printf("Conflict: Same operation ID used with different arguments\n");
    else
        return fail("changed arguments were not refused", &err);
    idem_outcome_clear(&out);
    return 0;
}

static int isolation_and_intents(struct demo *d)
{
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char second[IDEM_UUID_STRING_SIZE], *shown;

    printf("\n");
    if (call(d, &out, "globex", d->op, 1, "Check delayed delivery", &err) != 0)
        return fail("other tenant", &err);
    shown = display(&out);
    printf("Tenant globex, same operation ID: %s %s (its own task; acme's receipt is "
           "never shown)\n",
           idem_status_name(out.status), shown);
    free(shown);
    if (idem_uuid_v7(second, &err) != 0 ||
        call(d, &out, "acme", second, 1, "Check delayed delivery", &err) != 0)
        return fail("second intent", &err);
    shown = display(&out);
    printf("Second intent, same subject, new operation ID: %s %s\n", idem_status_name(out.status),
           shown);
    free(shown);
    if (call(d, &out, "acme", d->op, 2, "Check delayed delivery", &err) != 0)
        return fail("replay", &err);
    printf("Retry of the first intent again: %s, next step: %s\n", idem_status_name(out.status),
           idem_next_step_name(idem_status_next_step(out.status)));
    idem_outcome_clear(&out);
    return 0;
}

static const char usage_text[] =
    "usage: idem-demo [--dsn CONNINFO]\n"
    "\n"
    "The lost-response walk-through, against a real PostgreSQL: it applies idem's\n"
    "migrations to the database first, then sets up the example tool's table.\n"
    "\n"
    "Options:\n"
    "  --dsn CONNINFO  libpq connection string or postgresql:// URI; without it the PG*\n"
    "                  environment variables are used\n"
    "  -h, --help      print this help\n"
    "  -V, --version   print the version\n"
    "\n"
    "Exit status: 0 done, 1 error, 64 usage error\n";

/* The command line: *dsn, or the exit status (0 for --help and --version, 64 for a usage
 * error); -1 to go on. */
static int parse_args(const char **dsn, int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (argc == 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
        printf("idem-demo %s\n", idem_version());
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "--dsn") == 0) {
        *dsn = argv[2];
        return -1;
    }
    if (argc == 1)
        return -1;
    if (argc == 2 && strcmp(argv[1], "--dsn") == 0)
        fprintf(stderr, "idem-demo: --dsn: a connection string is needed\n");
    else
        fprintf(stderr, "idem-demo: unexpected argument '%s' (idem-demo takes --dsn CONNINFO)\n",
                argv[strcmp(argv[1], "--dsn") == 0 ? 3 : 1]);
    fprintf(stderr, "Try 'idem-demo --help'.\n");
    return 64;
}

int main(int argc, char **argv)
{
    struct demo d = {NULL, NULL, ""};
    const char *dsn = "";
    int rc = parse_args(&dsn, argc, argv);

    if (rc >= 0)
        return rc;
    rc = setup(&d, dsn);
    if (rc == 0)
        rc = lost_response(&d);
    if (rc == 0)
        rc = isolation_and_intents(&d);
    if (rc == 0)
        rc = durable_intent(&d);
    idem_store_free(d.store);
    idem_pool_free(d.pool);
    return rc;
}
