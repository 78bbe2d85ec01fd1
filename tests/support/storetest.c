#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storetest.h"

store_fixture fx;

void storetest_init(void)
{
    char tag[32];

    /* Short enough that the database name keeps its unique tail. */
    snprintf(tag, sizeof(tag), "%.24s", criterion_current_test->name);
    fx.conninfo = pgtest_new_example_database(tag);
    fx.check = pgtest_connect(fx.conninfo);
}

void storetest_fini(void)
{
    storetest_close();
    PQfinish(fx.check);
    free(fx.conninfo);
    fx = (store_fixture){NULL, NULL, NULL, NULL};
}

void storetest_open(const idem_store_options *opts, unsigned int pool_size)
{
    /* The library runs as the application's role, under row-level security: a statement
     * that does not set its tenant finds nothing, and fails its test. */
    storetest_open_as(opts, pool_size, PGTEST_APP);
}

/* fx.pool with @popts (its size and statement timeout; the rest the fixture's), connecting
 * as @role, and fx.store over it. */
static void open_pool(const idem_store_options *opts, idem_pool_options popts, const char *role)
{
    idem_error err = IDEM_ERROR_INIT;
    char *where = pgtest_as(fx.conninfo, role);

    popts.acquire_timeout_ms = 30000;
    popts.connect_timeout_ms = 30000;
    if (pgtest_through_pgbouncer()) {
        char *direct = where;

        where = pgtest_pgbouncer_conninfo(direct);
        free(direct);
        popts.pooler = IDEM_POOLER_TRANSACTION;
    }
    cr_assert_null(fx.pool, "one store at a time");
    cr_assert_eq(idem_pool_new(&fx.pool, where, &popts, &err), 0, "%s", err.message);
    free(where);
    cr_assert_eq(idem_store_new(&fx.store, fx.pool, opts, &err), 0, "%s", err.message);
}

void storetest_open_as(const idem_store_options *opts, unsigned int pool_size, const char *role)
{
    idem_pool_options popts = IDEM_POOL_OPTIONS_INIT;

    popts.max_size = pool_size;
    open_pool(opts, popts, role);
}

void storetest_open_statement_timeout(const idem_store_options *opts,
                                      unsigned int statement_timeout_ms)
{
    idem_pool_options popts = IDEM_POOL_OPTIONS_INIT;

    popts.max_size = 1;
    popts.statement_timeout_ms = statement_timeout_ms;
    open_pool(opts, popts, PGTEST_APP);
}

void storetest_close(void)
{
    idem_store_free(fx.store);
    idem_pool_free(fx.pool);
    fx.store = NULL;
    fx.pool = NULL;
}

long storetest_tasks(void)
{
    return pgtest_scalar(fx.check, "SELECT count(*) FROM idem_example.support_tasks");
}

long storetest_operations(void)
{
    return pgtest_scalar(fx.check, "SELECT count(*) FROM idem.operations");
}

idem_request storetest_request(const char *tenant, const char *op, const char *args)
{
    idem_request req = IDEM_REQUEST_INIT;

    req.tenant = tenant;
    req.operation_id = op;
    req.tool = EXAMPLE_TOOL_NAME;
    req.payload_version = EXAMPLE_TOOL_VERSION;
    req.arguments = args;
    req.arguments_len = args != NULL ? strlen(args) : 0;
    return req;
}

int storetest_create_task(idem_outcome *out, const char *tenant, const char *op, const char *args,
                          idem_error *err)
{
    idem_request req = storetest_request(tenant, op, args);

    return idem_store_execute(out, fx.store, &req, example_create_support_task, NULL, err);
}

idem_declared *storetest_declared_task(void)
{
    static const char *const params[] = {"$tenant", "subject", "$operation_id"};
    idem_declared *d = NULL;
    idem_error err = IDEM_ERROR_INIT;

    /* The receipt in immutable operators (json_build_object() is stable), which Citus
     * accepts in the RETURNING of a distributed INSERT (migrations/README.md,
     * "Scaling out on Citus"). */
    cr_assert_eq(idem_declared_new(&d,
                                   "INSERT INTO idem_example.support_tasks"
                                   " (tenant, subject, operation_id) VALUES ($1, $2, $3)"
                                   " RETURNING '{\"status\" : \"created\", \"task_id\" : '"
                                   " || task_id::text || '}'",
                                   params, 3, &err),
                 0, "%s", err.message);
    return d;
}

void storetest_insert_completed(const char *tenant, const char *op, const char *args,
                                const char *receipt)
{
    idem_fingerprint fp;
    char version[16];
    const char *values[5] = {tenant, op, (const char *)fp.bytes, receipt, version};
    int lengths[5] = {0, 0, IDEM_FINGERPRINT_SIZE, 0, 0}, formats[5] = {0, 0, 1, 0, 0};
    PGresult *res;

    snprintf(version, sizeof(version), "%d", EXAMPLE_TOOL_VERSION);
    cr_assert_eq(idem_fingerprint_compute_text(&fp, EXAMPLE_TOOL_NAME, EXAMPLE_TOOL_VERSION, args,
                                               strlen(args), NULL, NULL),
                 0);
    res = PQexecParams(fx.check,
                       "INSERT INTO idem.operations (tenant, operation_id, tool, payload_version,"
                       " fingerprint, state, response, claim_token, completed_at, expires_at,"
                       " forget_at) VALUES ($1, $2, '" EXAMPLE_TOOL_NAME "', $5::int4, $3,"
                       " 'completed', convert_to($4, 'UTF8'), gen_random_uuid(), now(),"
                       " now() + interval '1 day', now() + interval '2 days')",
                       5, NULL, values, lengths, formats, 0);
    cr_assert_eq(PQresultStatus(res), PGRES_COMMAND_OK, "%s", PQresultErrorMessage(res));
    PQclear(res);
}

char *storetest_receipt(const char *tenant, const char *op)
{
    const char *values[2] = {tenant, op};
    PGresult *res = PQexecParams(fx.check,
                                 "SELECT convert_from(response, 'UTF8') FROM idem.operations"
                                 " WHERE tenant = $1 AND operation_id = $2",
                                 2, NULL, values, NULL, NULL, 0);
    char *s;

    cr_assert_eq(PQresultStatus(res), PGRES_TUPLES_OK, "%s", PQresultErrorMessage(res));
    cr_assert_eq(PQntuples(res), 1);
    s = strdup(PQgetvalue(res, 0, 0));
    PQclear(res);
    return s;
}

int counting_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                    idem_error *err)
{
    ((effect_counter *)ctx)->runs++;
    return example_create_support_task(response, tx, arguments, NULL, err);
}
