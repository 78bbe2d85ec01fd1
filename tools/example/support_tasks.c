#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support_tasks.h"

static json_t *rejection(const char *reason)
{
    return json_pack("{s:s, s:s}", "status", "rejected", "reason", reason);
}

int example_create_support_task(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                                idem_error *err)
{
    const char *sql = "INSERT INTO idem.support_tasks (tenant, subject, operation_id)"
                      " VALUES ($1, $2, $3) RETURNING task_id";
    const json_t *subject = json_object_get(arguments, "subject");
    const char *values[3];
    PGresult *res = NULL;
    int rc;

    (void)ctx;
    if (!json_is_string(subject) || json_string_length(subject) == 0 ||
        json_string_length(subject) > 200) {
        *response = rejection("subject must be a string of 1 to 200 characters");
        return IDEM_EFFECT_FINAL_FAILURE;
    }
    values[0] = idem_tx_tenant(tx);
    values[1] = json_string_value(subject);
    values[2] = idem_tx_operation_id(tx);
    rc = idem_tx_exec(&res, tx, sql, 3, values, err);
    if (rc != 0)
        return rc;
    *response = json_pack("{s:s, s:I}", "status", "created", "task_id",
                          (json_int_t)strtoll(PQgetvalue(res, 0, 0), NULL, 10));
    PQclear(res);
    return *response != NULL ? IDEM_EFFECT_OK : IDEM_ENOMEM;
}

/* Run one statement on a pooled connection, with tenant and task as parameters. */
static int task_statement(PGresult **out, idem_pool *pool, const char *sql, const char *tenant,
                          long long task_id, idem_error *err)
{
    char id[24];
    const char *values[2] = {tenant, id};
    idem_conn *conn = NULL;
    PGresult *res;
    int rc = idem_pool_acquire(&conn, pool, err);

    if (rc != 0)
        return rc;
    snprintf(id, sizeof(id), "%lld", task_id);
    res = PQexecParams(idem_conn_pg(conn), sql, 2, NULL, values, NULL, NULL, 0);
    if (PQresultStatus(res) == PGRES_TUPLES_OK || PQresultStatus(res) == PGRES_COMMAND_OK) {
        *out = res;
    } else {
        rc = IDEM_EDB;
        if (err != NULL) {
            idem_error_clear(err);
            err->code = rc;
            snprintf(err->message, sizeof(err->message), "support task: %s",
                     PQresultErrorMessage(res));
        }
        PQclear(res);
    }
    idem_pool_release(conn);
    return rc;
}

int example_support_task_status(char *out, size_t size, idem_pool *pool, const char *tenant,
                                long long task_id, idem_error *err)
{
    PGresult *res = NULL;
    int rc = task_statement(&res, pool,
                            "SELECT status FROM idem.support_tasks"
                            " WHERE tenant = $1 AND task_id = $2::int8",
                            tenant, task_id, err);

    if (rc != 0)
        return rc;
    if (PQntuples(res) == 1)
        snprintf(out, size, "%s", PQgetvalue(res, 0, 0));
    else
        rc = IDEM_ENOTFOUND;
    PQclear(res);
    return rc;
}

int example_support_task_close(idem_pool *pool, const char *tenant, long long task_id,
                               idem_error *err)
{
    PGresult *res = NULL;
    int rc = task_statement(&res, pool,
                            "UPDATE idem.support_tasks SET status = 'closed'"
                            " WHERE tenant = $1 AND task_id = $2::int8",
                            tenant, task_id, err);

    if (rc != 0)
        return rc;
    if (strcmp(PQcmdTuples(res), "1") != 0)
        rc = IDEM_ENOTFOUND;
    PQclear(res);
    return rc;
}
