/* The tenant of a transaction (tenant.h): its settings (settings.h) sent in front of the
 * statements they govern, in the same pipeline. */
#include <assert.h>
#include <string.h>

#include "error.h"
#include "tenant.h"

static idem__pipe_cmd text_cmd(const char *sql)
{
    return (idem__pipe_cmd){NULL, sql, 0, NULL, NULL, NULL, 0, NULL};
}

size_t idem__tenant_wrap(idem__pipe_cmd *all, idem__tx_settings *s, enum idem__tenant_form form,
                         const idem__pipe_cmd *cmds, size_t n, size_t *first)
{
    size_t at = 0;

    if (form == IDEM__TENANT_IMPLICIT) {
        at = idem__tx_settings_cmds(all, s, IDEM__SETTINGS_PLAIN);
    } else if (form == IDEM__TENANT_IN_TX) {
        at = idem__tx_settings_cmds(all, s, IDEM__SETTINGS_TENANT);
    } else {
        all[at++] = text_cmd("BEGIN");
        at += idem__tx_settings_cmds(all + at, s, IDEM__SETTINGS_CITUS);
    }
    *first = at;
    memcpy(all + at, cmds, n * sizeof(*cmds));
    at += n;
    /* END is COMMIT by another name; the fault points (exec.h) that match "COMMIT" stay
     * those of the transactions the store and external effects open themselves. */
    if (form == IDEM__TENANT_OWN_TX)
        all[at++] = text_cmd("END");
    return at;
}

static int in_transaction(PGconn *pg)
{
    PGTransactionStatusType st = PQtransactionStatus(pg);

    return st == PQTRANS_INTRANS || st == PQTRANS_INERROR;
}

enum idem__tenant_form idem__tenant_form_for(idem_conn *conn)
{
    if (in_transaction(idem_conn_pg(conn)))
        return IDEM__TENANT_IN_TX;
    return idem__conn_citus(conn) ? IDEM__TENANT_OWN_TX : IDEM__TENANT_IMPLICIT;
}

static void clear_all(idem__pipe_cmd *cmds, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        PQclear(cmds[i].result);
        cmds[i].result = NULL;
    }
}

int idem__tenant_exec_either(PGresult **out, idem_conn *conn, const char *tenant,
                             const idem__stmt *stmt, const idem__stmt *sets_tenant,
                             const char *const *values, const int *lengths, const int *formats,
                             int result_format, idem_error *err)
{
    if (sets_tenant != NULL && idem__tenant_form_for(conn) == IDEM__TENANT_IMPLICIT)
        return idem__conn_exec_prepared(out, conn, sets_tenant, values, lengths, formats,
                                        result_format, err);
    return idem__tenant_exec(out, conn, tenant, stmt, values, lengths, formats, result_format, err);
}

int idem__tenant_exec(PGresult **out, idem_conn *conn, const char *tenant, const idem__stmt *stmt,
                      const char *const *values, const int *lengths, const int *formats,
                      int result_format, idem_error *err)
{
    idem__pipe_cmd one = {stmt, NULL, 0, values, lengths, formats, result_format, NULL};
    idem__pipe_cmd all[1 + IDEM__TENANT_EXTRA];
    idem__tx_settings settings;
    enum idem__tenant_form form = idem__tenant_form_for(conn);
    size_t first, failed_at, n;
    PGresult *res = NULL;
    int rc;

    assert(out != NULL && stmt != NULL);
    idem__tx_settings_for(&settings, conn, tenant);
    n = idem__tenant_wrap(all, &settings, form, &one, 1, &first);
    rc = idem__conn_pipeline(conn, all, n, &failed_at, err);
    if (rc == 0) {
        *out = all[first].result;
        all[first].result = NULL;
    } else if (form == IDEM__TENANT_OWN_TX && !idem__conn_failed(conn) &&
               in_transaction(idem_conn_pg(conn)) &&
               idem__conn_exec(&res, conn, "ROLLBACK", NULL) == 0) {
        PQclear(res);
    }
    clear_all(all, n);
    return rc;
}

static int ok(const PGresult *res)
{
    ExecStatusType st = PQresultStatus(res);

    return res != NULL && (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK);
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

/* Read up to the pipeline's Sync, and leave pipeline mode. Each command's results end with
 * a NULL, those aborted after a failure too: read on past them to the Sync (two NULLs in a
 * row: nothing more is coming, the connection is gone). */
static void finish_pipeline(PGconn *conn, PGresult *last)
{
    int nulls = 0;

    while (nulls < 2 && (last == NULL || PQresultStatus(last) != PGRES_PIPELINE_SYNC)) {
        nulls = last == NULL ? nulls + 1 : 0;
        PQclear(last);
        last = PQgetResult(conn);
    }
    PQclear(last);
    PQexitPipelineMode(conn);
}

static int send_all(PGconn *conn, const idem__pipe_cmd *cmds, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (PQsendQueryParams(conn, cmds[i].sql, cmds[i].nparams, NULL, cmds[i].values,
                              cmds[i].lengths, cmds[i].formats, cmds[i].result_format) != 1)
            return -1;
    }
    return PQpipelineSync(conn) == 1 ? 0 : -1;
}

/* Collect each command's result until the first that failed; on failure err has its words. */
static int collect_all(PGconn *conn, idem__pipe_cmd *cmds, size_t n, const char *what,
                       idem_error *err)
{
    PGresult *res = NULL;

    for (size_t i = 0; i < n; i++) {
        res = command_result(conn);
        if (!ok(res)) {
            int rc = idem__error_pg(err, conn, res, "%s", what);

            finish_pipeline(conn, res);
            return rc;
        }
        cmds[i].result = res;
    }
    finish_pipeline(conn, PQgetResult(conn));
    return 0;
}

static int pg_pipeline(PGconn *conn, idem__pipe_cmd *cmds, size_t n, const char *what,
                       idem_error *err)
{
    int rc;

    if (PQenterPipelineMode(conn) != 1)
        return idem__error_pg(err, conn, NULL, "%s", what);
    if (send_all(conn, cmds, n) != 0) {
        rc = idem__error_pg(err, conn, NULL, "%s", what);
        PQexitPipelineMode(conn);
        return rc;
    }
    return collect_all(conn, cmds, n, what, err);
}

int idem__tenant_pg_exec(PGresult **out, PGconn *conn, const char *tenant, const char *sql,
                         int nparams, const char *const *values, const int *lengths,
                         const int *formats, int result_format, const char *what, idem_error *err)
{
    idem__pipe_cmd one = {NULL, sql, nparams, values, lengths, formats, result_format, NULL};
    idem__pipe_cmd all[1 + IDEM__TENANT_EXTRA];
    idem__tx_settings settings;
    int in_tx = in_transaction(conn);
    size_t first, n;
    int rc;

    assert(out != NULL && conn != NULL && sql != NULL);
    idem__tx_settings_init(&settings, tenant, 0, 0);
    n = idem__tenant_wrap(all, &settings, in_tx ? IDEM__TENANT_IN_TX : IDEM__TENANT_OWN_TX, &one, 1,
                          &first);
    rc = pg_pipeline(conn, all, n, what, err);
    if (rc == 0) {
        *out = all[first].result;
        all[first].result = NULL;
    } else if (!in_tx && in_transaction(conn)) {
        PQclear(PQexec(conn, "ROLLBACK"));
    }
    clear_all(all, n);
    return rc == 0 ? 0 : idem__error_misconfigured(err, rc);
}
