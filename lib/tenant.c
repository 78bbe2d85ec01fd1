/* The tenant of a transaction (tenant.h): one statement, sent in front of the statements
 * it governs, in the same pipeline. */
#include <assert.h>
#include <stddef.h>

#include "error.h"
#include "tenant.h"

const idem__stmt idem__tenant_stmt = {"idem_tenant_set",
                                      "SELECT set_config('idem.tenant', $1, true)", 1};

idem__pipe_cmd idem__tenant_cmd(const char *const *tenant)
{
    return (idem__pipe_cmd){&idem__tenant_stmt, NULL, 0, tenant, NULL, NULL, 0, NULL};
}

int idem__tenant_exec(PGresult **out, idem_conn *conn, const char *tenant, const idem__stmt *stmt,
                      const char *const *values, const int *lengths, const int *formats,
                      int result_format, idem_error *err)
{
    idem__pipe_cmd cmds[2] = {
        idem__tenant_cmd(&tenant),
        {stmt, NULL, 0, values, lengths, formats, result_format, NULL},
    };
    size_t failed_at;
    int rc;

    assert(out != NULL && stmt != NULL);
    rc = idem__conn_pipeline(conn, cmds, 2, &failed_at, err);
    PQclear(cmds[0].result);
    if (rc == 0)
        *out = cmds[1].result;
    else
        PQclear(cmds[1].result);
    return rc;
}

/* The first result of the next command of a pipeline (NULL if none came); the rest of that
 * command's results are read and dropped. */
static PGresult *command_result(PGconn *conn)
{
    PGresult *first = PQgetResult(conn), *more;

    if (first == NULL || PQresultStatus(first) == PGRES_PIPELINE_SYNC)
        return first;
    while ((more = PQgetResult(conn)) != NULL)
        PQclear(more);
    return first;
}

static int ok(const PGresult *res)
{
    ExecStatusType st = PQresultStatus(res);

    return res != NULL && (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK);
}

/* Read up to the pipeline's Sync, and leave pipeline mode. */
static void finish_pipeline(PGconn *conn, PGresult *last)
{
    while (last != NULL && PQresultStatus(last) != PGRES_PIPELINE_SYNC) {
        PQclear(last);
        last = PQgetResult(conn);
    }
    PQclear(last);
    PQexitPipelineMode(conn);
}

int idem__tenant_pg_exec(PGresult **out, PGconn *conn, const char *tenant, const char *sql,
                         int nparams, const char *const *values, const int *lengths,
                         const int *formats, int result_format, const char *what, idem_error *err)
{
    const char *tenant_values[1] = {tenant};
    PGresult *set = NULL, *res = NULL;
    int rc = 0;

    assert(out != NULL && conn != NULL && sql != NULL);
    if (PQenterPipelineMode(conn) != 1)
        return idem__error_pg(err, conn, NULL, "%s", what);
    if (PQsendQueryParams(conn, idem__tenant_stmt.sql, 1, NULL, tenant_values, NULL, NULL, 0) !=
            1 ||
        PQsendQueryParams(conn, sql, nparams, NULL, values, lengths, formats, result_format) != 1 ||
        PQpipelineSync(conn) != 1) {
        rc = idem__error_pg(err, conn, NULL, "%s", what);
        PQexitPipelineMode(conn);
        return rc;
    }
    set = command_result(conn);
    res = set != NULL && PQresultStatus(set) != PGRES_PIPELINE_SYNC ? command_result(conn) : NULL;
    if (!ok(set))
        rc = idem__error_misconfigured(err, idem__error_pg(err, conn, set, "%s", what));
    else if (!ok(res))
        rc = idem__error_misconfigured(err, idem__error_pg(err, conn, res, "%s", what));
    finish_pipeline(conn, PQgetResult(conn));
    PQclear(set);
    if (rc != 0) {
        PQclear(res);
        return rc;
    }
    *out = res;
    return 0;
}
