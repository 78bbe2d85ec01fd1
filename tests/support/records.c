#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgtest.h"
#include "records.h"

void records_insert(PGconn *conn, const char *tenant, const char *prefix, int from, int to,
                    const char *state, const char *expires_in, const char *forget_in)
{
    static const char sql[] =
        "INSERT INTO idem.operations (tenant, operation_id, tool, payload_version, fingerprint,"
        " state, response, trace_id, claim_token, completed_at, expires_at, forget_at,"
        " expired_at)"
        " SELECT $1, $2 || i, 't', 1, sha256(($2 || i)::bytea), $3,"
        " CASE WHEN $3 IN ('completed', 'failed') THEN convert_to('{\"n\":' || i || '}', 'UTF8')"
        " END, CASE WHEN $3 <> 'expired' THEN 'trace-' || i END, gen_random_uuid(),"
        " CASE WHEN $3 <> 'pending' THEN now() END, now() + $4::interval,"
        " now() + $5::interval, CASE WHEN $3 = 'expired' THEN now() END"
        " FROM generate_series($6::int, $7::int - 1) AS i";
    char lo[16], hi[16];
    const char *values[7] = {tenant, prefix, state, expires_in, forget_in, lo, hi};
    PGresult *res;

    snprintf(lo, sizeof(lo), "%d", from);
    snprintf(hi, sizeof(hi), "%d", to);
    res = PQexecParams(conn, sql, 7, NULL, values, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        cr_assert_fail("records_insert: %s", PQresultErrorMessage(res));
    PQclear(res);
}

long records_count(PGconn *conn, const char *state)
{
    const char *values[1] = {state};
    PGresult *res = PQexecParams(conn,
                                 "SELECT count(*) FROM idem.operations"
                                 " WHERE $1 = '' OR state = $1",
                                 1, NULL, values, NULL, NULL, 0);
    long n;

    if (PQresultStatus(res) != PGRES_TUPLES_OK)
        cr_assert_fail("records_count: %s", PQresultErrorMessage(res));
    n = strtol(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return n;
}

char *records_digest(PGconn *conn)
{
    PGresult *res = pgtest_exec(
        conn, "SELECT md5(coalesce((SELECT string_agg(o::text, ',' ORDER BY tenant, operation_id)"
              " FROM idem.operations o), '') || '|' ||"
              " coalesce((SELECT string_agg(r::text, ',' ORDER BY tenant, operation_id, kind)"
              " FROM idem.reconciliation_items r), ''))");
    char *digest = strdup(PQgetvalue(res, 0, 0));

    PQclear(res);
    return digest;
}

void records_insert_item(PGconn *conn, const char *tenant, const char *operation_id,
                         const char *kind, long count, const char *seen_in)
{
    char n[24];
    const char *values[5] = {tenant, operation_id, kind, n, seen_in};
    PGresult *res;

    snprintf(n, sizeof(n), "%ld", count);
    res = PQexecParams(
        conn,
        "INSERT INTO idem.reconciliation_items (tenant, operation_id, kind, tool,"
        " fingerprint, fingerprint_matches, first_seen, last_seen, count)"
        " VALUES ($1, $2::text, $3, 't', sha256($2::text::bytea), true, now() + $5::interval,"
        " now() + $5::interval, $4::int8)",
        5, NULL, values, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        cr_assert_fail("records_insert_item: %s", PQresultErrorMessage(res));
    PQclear(res);
}
