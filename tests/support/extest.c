#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "extest.h"
#include "pgtest.h"

extest ex;

void extest_open(const char *tag, unsigned int lease_ms, unsigned int pool_size)
{
    idem_pool_options popts = IDEM_POOL_OPTIONS_INIT;
    idem_external_options xopts = IDEM_EXTERNAL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char *app;

    memset(&ex, 0, sizeof(ex));
    ex.conninfo = pgtest_new_example_database(tag);
    ex.check = pgtest_connect(ex.conninfo);
    popts.max_size = pool_size;
    xopts.lease_ms = lease_ms;
    app = pgtest_as(ex.conninfo, PGTEST_APP); /* under row-level security, as storetest.c */
    cr_assert_eq(idem_pool_new(&ex.pool, app, &popts, &err), 0, "%s", err.message);
    free(app);
    cr_assert_eq(idem_store_new(&ex.store, ex.pool, NULL, &err), 0, "%s", err.message);
    cr_assert_eq(idem_external_new(&ex.ext, ex.store, &xopts, &err), 0, "%s", err.message);
}

void extest_init(void)
{
    extest_open("external", 30000, 8);
}

void extest_close(void)
{
    idem_external_free(ex.ext);
    idem_store_free(ex.store);
    idem_pool_free(ex.pool);
    PQfinish(ex.check);
    free(ex.conninfo);
    memset(&ex, 0, sizeof(ex));
}

fake_provider *extest_init_provider(void)
{
    extest_init();
    return fake_provider_new(1);
}

void extest_close_provider(fake_provider *p)
{
    idem__fault_reset();
    fake_provider_free(p);
    extest_close();
}

idem_request extest_request(const char *tenant, const char *operation_id, const char *args)
{
    idem_request req = IDEM_REQUEST_INIT;

    req.tenant = tenant;
    req.operation_id = operation_id;
    req.tool = EXTEST_TOOL;
    req.payload_version = 1;
    req.arguments = args;
    req.arguments_len = strlen(args);
    return req;
}

int extest_begin(idem_external_attempt **a, idem_outcome *out, const char *tenant,
                 const char *operation_id, const char *args)
{
    idem_request req = extest_request(tenant, operation_id, args);
    idem_error err = IDEM_ERROR_INIT;

    idem_outcome_clear(out);
    return idem_external_begin(a, out, ex.ext, &req, &err);
}

int extest_dispatch(idem_outcome *out, idem_external_attempt *a, fake_provider *p)
{
    char ref[FAKE_REF_SIZE];
    idem_error err = IDEM_ERROR_INIT;
    json_t *response;
    int sent = fake_provider_send(p, idem_external_attempt_downstream_key(a),
                                  idem_external_attempt_operation_id(a), ref),
        rc;

    idem_outcome_clear(out);
    if (sent == FAKE_FAILED)
        return idem_external_fail(out, a, IDEM_EXTERNAL_TRANSIENT, NULL, "provider said 503", &err);
    if (sent == FAKE_TIMEOUT)
        return idem_external_unknown(out, a, NULL, "no reply within 10 s", &err);
    response = json_pack("{s:s}", "message_id", ref);
    rc = idem_external_complete(out, a, ref, response, &err);
    json_decref(response);
    return rc;
}

void extest_lapse(const char *tenant, const char *operation_id)
{
    const char *values[2] = {tenant, operation_id};
    PGresult *res = PQexecParams(ex.check,
                                 "UPDATE idem.operations SET lease_expires_at = now()"
                                 " - interval '1 second' WHERE tenant = $1 AND operation_id = $2"
                                 " AND lease_expires_at IS NOT NULL",
                                 2, NULL, values, NULL, NULL, 0);

    cr_assert_eq(PQresultStatus(res), PGRES_COMMAND_OK, "%s", PQresultErrorMessage(res));
    cr_assert_str_eq(PQcmdTuples(res), "1", "one lease to lapse");
    PQclear(res);
}

long extest_scalar(const char *sql)
{
    return pgtest_scalar(ex.check, sql);
}

void extest_exec(const char *sql)
{
    PQclear(pgtest_exec(ex.check, sql));
}
