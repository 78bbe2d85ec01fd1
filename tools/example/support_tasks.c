#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support_tasks.h"

/* The example's own schema, kept apart from idem's. One simple-query message is one
 * transaction, so the advisory lock ("idemexam") makes two first runs take turns
 * (CREATE ... IF NOT EXISTS alone can still collide), and SET LOCAL keeps the "already
 * exists" notices of later runs quiet. */
static const char setup_sql[] =
    "SET LOCAL client_min_messages = warning;"
    "SELECT pg_advisory_xact_lock(7594306392181727597);"
    "CREATE SCHEMA IF NOT EXISTS idem_example;"
    "CREATE TABLE IF NOT EXISTS idem_example.support_tasks ("
    " tenant       text        NOT NULL,"
    " task_id      bigint      GENERATED ALWAYS AS IDENTITY,"
    " subject      text        NOT NULL,"
    " status       text        NOT NULL DEFAULT 'open',"
    " operation_id text        NOT NULL,"
    " created_at   timestamptz NOT NULL DEFAULT now(),"
    " CONSTRAINT support_tasks_pkey PRIMARY KEY (tenant, task_id),"
    " CONSTRAINT support_tasks_subject_length CHECK (char_length(subject) BETWEEN 1 AND 200),"
    " CONSTRAINT support_tasks_status_known CHECK (status IN ('open', 'closed')));"
    "COMMENT ON SCHEMA idem_example IS"
    " 'idem''s example write tool (idem-demo, idem-bench, the tests); not used by idem.';"
    "COMMENT ON TABLE idem_example.support_tasks IS"
    " 'Support tasks created through idem by the example tool create_support_task.';"
    "COMMENT ON COLUMN idem_example.support_tasks.status IS"
    " 'Current state: open or closed; changes after creation, unlike the receipt.';"
    "COMMENT ON COLUMN idem_example.support_tasks.operation_id IS"
    " 'The operation that created the task (for tracing; the key lives in idem.operations).';";

static int db_error(idem_error *err, const char *what, const PGresult *res)
{
    const char *sqlstate = PQresultErrorField(res, PG_DIAG_SQLSTATE);

    if (err != NULL) {
        idem_error_clear(err);
        err->code = IDEM_EDB;
        snprintf(err->sqlstate, sizeof(err->sqlstate), "%s", sqlstate != NULL ? sqlstate : "");
        snprintf(err->message, sizeof(err->message), "%s: %s", what, PQresultErrorMessage(res));
    }
    return IDEM_EDB;
}

int example_support_tasks_setup(PGconn *conn, idem_error *err)
{
    PGresult *res = PQexec(conn, setup_sql);
    int rc = PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : db_error(err, "example schema", res);

    PQclear(res);
    return rc;
}

static json_t *rejection(const char *reason)
{
    return json_pack("{s:s, s:s}", "status", "rejected", "reason", reason);
}

/* Characters (Unicode code points) of valid UTF-8: every byte but continuation bytes. */
static size_t utf8_chars(const char *s, size_t bytes)
{
    size_t n = 0;

    for (size_t i = 0; i < bytes; i++)
        n += ((unsigned char)s[i] & 0xc0) != 0x80;
    return n;
}

/* Why the subject is refused, or NULL. */
static const char *subject_problem(const json_t *subject)
{
    size_t bytes, chars;

    if (!json_is_string(subject))
        return "subject must be a string of 1 to 200 characters";
    bytes = json_string_length(subject);
    if (strlen(json_string_value(subject)) != bytes)
        return "subject must not contain NUL characters (\\u0000)";
    chars = utf8_chars(json_string_value(subject), bytes);
    if (chars == 0 || chars > 200)
        return "subject must be a string of 1 to 200 characters";
    return NULL;
}

int example_create_support_task(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                                idem_error *err)
{
    const char *sql = "INSERT INTO idem_example.support_tasks (tenant, subject, operation_id)"
                      " VALUES ($1, $2, $3) RETURNING task_id";
    const json_t *subject = json_object_get(arguments, "subject");
    const char *values[3], *problem = subject_problem(subject);
    PGresult *res = NULL;
    int rc;

    (void)ctx;
    if (problem != NULL) {
        *response = rejection(problem);
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
        rc = db_error(err, "support task", res);
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
                            "SELECT status FROM idem_example.support_tasks"
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
                            "UPDATE idem_example.support_tasks SET status = 'closed'"
                            " WHERE tenant = $1 AND task_id = $2::int8",
                            tenant, task_id, err);

    if (rc != 0)
        return rc;
    if (strcmp(PQcmdTuples(res), "1") != 0)
        rc = IDEM_ENOTFOUND;
    PQclear(res);
    return rc;
}
