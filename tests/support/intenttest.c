#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "intenttest.h"
#include "pgtest.h"

idem_intent *intenttest_approve(idem_store *store, const char *tenant, const char *ref,
                                const char *tool, const char *args)
{
    idem_intent_request req = IDEM_INTENT_REQUEST_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_intent *t = NULL;

    req.tenant = tenant;
    req.approval_ref = ref;
    req.tool = tool;
    req.arguments = args;
    req.arguments_len = strlen(args);
    req.approved_by = "alice";
    cr_assert_eq(idem_intent_approve(&t, store, &req, &err), 0, "approve %s/%s: %s", tenant, ref,
                 err.message);
    return t;
}

idem_intent *intenttest_get(idem_store *store, const char *tenant, const char *op)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_intent *t = NULL;

    cr_assert_eq(idem_intent_get(&t, store, tenant, op, &err), 0, "get %s/%s: %s", tenant, op,
                 err.message);
    return t;
}

void intenttest_lapse(PGconn *check, const char *tenant, const char *op)
{
    const char *values[2] = {tenant, op};
    PGresult *res =
        PQexecParams(check,
                     "UPDATE idem.intents SET lease_until = now() - interval '1 second'"
                     " WHERE tenant = $1 AND operation_id = $2 AND lease_until IS NOT NULL",
                     2, NULL, values, NULL, NULL, 0);

    cr_assert_eq(PQresultStatus(res), PGRES_COMMAND_OK, "%s", PQresultErrorMessage(res));
    cr_assert_str_eq(PQcmdTuples(res), "1", "one lease to lapse");
    PQclear(res);
}

long intenttest_count(PGconn *check, const char *state)
{
    char sql[160];

    if (state == NULL)
        return pgtest_scalar(check, "SELECT count(*) FROM idem.intents");
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM idem.intents WHERE state = '%s'", state);
    return pgtest_scalar(check, sql);
}
