/* The suite's effect: one row in fault_effects labelled with the key, so that the checker
 * can join effects to operations; a slow variant sleeps in the transaction, so that
 * duplicates arrive while it is in flight. The table has no unique key on purpose: a
 * second effect for one key must be visible, not prevented. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"

static const char *const schema_sql[] = {
    "CREATE TABLE fault_effects ("
    " n bigserial PRIMARY KEY,"
    " tenant text NOT NULL,"
    " operation_id text NOT NULL,"
    " payload text NOT NULL,"
    " at timestamptz NOT NULL DEFAULT clock_timestamp())",
    "CREATE INDEX fault_effects_key ON fault_effects (tenant, operation_id)",
};

/* The cluster of tools/with-postgres runs with synchronous_commit off, with which an
 * immediate shutdown may lose commits that were acknowledged: a server setting that
 * the library cannot see. The suite's database makes commits durable. */
static int make_durable(PGconn *pg, char *why, size_t why_size)
{
    char sql[256];
    PGresult *res;
    int ok;

    snprintf(sql, sizeof(sql), "ALTER DATABASE \"%s\" SET synchronous_commit = on", PQdb(pg));
    res = PQexec(pg, sql);
    ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    if (!ok)
        snprintf(why, why_size, "%s: %s", sql, PQresultErrorMessage(res));
    PQclear(res);
    return ok ? 0 : -1;
}

int fault_schema_create(const char *conninfo, char *why, size_t why_size)
{
    PGconn *pg = PQconnectdb(conninfo);
    PGresult *res = NULL;
    int rc = -1;

    if (PQstatus(pg) != CONNECTION_OK) {
        snprintf(why, why_size, "connect: %s", PQerrorMessage(pg));
        goto done;
    }
    for (size_t i = 0; i < sizeof(schema_sql) / sizeof(schema_sql[0]); i++) {
        res = PQexec(pg, schema_sql[i]);
        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
            snprintf(why, why_size, "%s: %s", schema_sql[i], PQresultErrorMessage(res));
            goto done;
        }
        PQclear(res);
        res = NULL;
    }
    rc = make_durable(pg, why, why_size);
done:
    PQclear(res);
    PQfinish(pg);
    return rc;
}

/* The receipt: which effect row, for which key. */
static json_t *receipt(const idem_tx *tx, long long n, const char *payload)
{
    return json_pack("{s:I, s:s, s:s, s:s}", "effect", (json_int_t)n, "tenant", idem_tx_tenant(tx),
                     "op", idem_tx_operation_id(tx), "payload", payload);
}

static int slow_down(idem_tx *tx, double sleep_ms, idem_error *err)
{
    char seconds[32];
    const char *values[1] = {seconds};
    PGresult *res = NULL;
    int rc;

    snprintf(seconds, sizeof(seconds), "%.3f", sleep_ms / 1000.0);
    rc = idem_tx_exec(&res, tx, "SELECT pg_sleep($1::float8)", 1, values, err);
    PQclear(res);
    return rc;
}

int fault_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                 idem_error *err)
{
    const char *payload = json_string_value(json_object_get(arguments, "payload"));
    double sleep_ms = json_number_value(json_object_get(arguments, "sleep_ms"));
    const char *values[3] = {idem_tx_tenant(tx), idem_tx_operation_id(tx), payload};
    PGresult *res = NULL;
    long long n;
    int rc;

    (void)ctx;
    if (payload == NULL)
        return idem_error_set(err, IDEM_EEFFECT, "arguments: payload is missing");
    rc = idem_tx_exec(&res, tx,
                      "INSERT INTO fault_effects (tenant, operation_id, payload)"
                      " VALUES ($1, $2, $3) RETURNING n",
                      3, values, err);
    if (rc != 0)
        return rc;
    n = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    if (sleep_ms > 0 && (rc = slow_down(tx, sleep_ms, err)) != 0)
        return rc;
    *response = receipt(tx, n, payload);
    return *response != NULL ? IDEM_EFFECT_OK : idem_error_set(err, IDEM_ENOMEM, "no memory");
}
