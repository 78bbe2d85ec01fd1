/* The invariant checker. Over the whole database: no key has two records; nothing is left
 * pending (this schema has no leases, so no pending record can be explained); every
 * completed operation has exactly one effect, and every effect one completed operation.
 * Over each key of an epoch: the caller's answer is the committed record's receipt, byte
 * for byte, the record carries the fingerprint of the key's own arguments, and the one
 * effect row is the one the receipt names. */
#include <stdlib.h>
#include <string.h>

#include "fault.h"

typedef struct checker {
    fault_run *run;
    PGconn *pg;
    const char *when;
} checker;

static int checker_open(checker *c, fault_run *run, const char *when)
{
    char conninfo[600];

    snprintf(conninfo, sizeof(conninfo), "%s application_name=%s", run->conninfo, FAULT_APP_CHECK);
    c->run = run;
    c->when = when;
    c->pg = PQconnectdb(conninfo);
    if (PQstatus(c->pg) == CONNECTION_OK)
        return 0;
    fault_violation(run, "%s: checker cannot connect: %s", when, PQerrorMessage(c->pg));
    PQfinish(c->pg);
    c->pg = NULL;
    return -1;
}

/* Every row that @sql returns is a violation of @rule; its columns say where. */
static void each_row_violates(checker *c, const char *rule, const char *sql)
{
    PGresult *res = PQexec(c->pg, sql);

    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        fault_violation(c->run, "%s: checker query failed: %s", c->when, PQresultErrorMessage(res));
        PQclear(res);
        return;
    }
    for (int r = 0; r < PQntuples(res); r++) {
        char where[512] = "";
        size_t used = 0;

        for (int f = 0; f < PQnfields(res) && used < sizeof(where); f++)
            used += (size_t)snprintf(where + used, sizeof(where) - used, "%s%s=%s",
                                     f > 0 ? " " : "", PQfname(res, f), PQgetvalue(res, r, f));
        fault_violation(c->run, "%s: %s: %s", c->when, rule, where);
    }
    PQclear(res);
}

static const struct {
    const char *rule;
    const char *sql;
} db_rules[] = {
    {"a key has two records",
     "SELECT tenant, operation_id, count(*) AS records FROM idem.operations"
     " GROUP BY 1, 2 HAVING count(*) > 1 LIMIT 10"},
    {"a pending record is left behind, and no lease explains it",
     "SELECT tenant, operation_id, claim_token, created_at FROM idem.operations"
     " WHERE state = 'pending' LIMIT 10"},
    {"a record is neither completed nor pending (the effect never refuses)",
     "SELECT tenant, operation_id, state FROM idem.operations"
     " WHERE tool = '" FAULT_TOOL "' AND state NOT IN ('completed', 'pending') LIMIT 10"},
    {"a completed operation has not exactly one effect",
     "SELECT o.tenant, o.operation_id, count(e.n) AS effects FROM idem.operations o"
     " LEFT JOIN fault_effects e ON e.tenant = o.tenant AND e.operation_id = o.operation_id"
     " WHERE o.state = 'completed' AND o.tool = '" FAULT_TOOL "'"
     " GROUP BY 1, 2 HAVING count(e.n) <> 1 LIMIT 10"},
    {"an effect has no completed operation",
     "SELECT e.n, e.tenant, e.operation_id, o.state FROM fault_effects e"
     " LEFT JOIN idem.operations o ON o.tenant = e.tenant AND o.operation_id = e.operation_id"
     " WHERE o.state IS DISTINCT FROM 'completed' LIMIT 10"},
};

void fault_check_db(fault_run *run, const char *when)
{
    checker c;

    if (checker_open(&c, run, when) != 0)
        return;
    for (size_t i = 0; i < sizeof(db_rules) / sizeof(db_rules[0]); i++)
        each_row_violates(&c, db_rules[i].rule, db_rules[i].sql);
    PQfinish(c.pg);
}

static const char key_sql[] =
    "SELECT o.state, encode(o.response, 'hex'), encode(o.fingerprint, 'hex'),"
    " (SELECT count(*) FROM fault_effects e"
    "   WHERE e.tenant = o.tenant AND e.operation_id = o.operation_id),"
    " (SELECT coalesce(min(e.n), 0) FROM fault_effects e"
    "   WHERE e.tenant = o.tenant AND e.operation_id = o.operation_id)"
    " FROM idem.operations o WHERE o.tenant = $1 AND o.operation_id = $2";

static void hex(char *out, const char *bytes, size_t len)
{
    static const char digits[] = "0123456789abcdef";

    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[(unsigned char)bytes[i] >> 4];
        out[2 * i + 1] = digits[(unsigned char)bytes[i] & 15];
    }
    out[2 * len] = '\0';
}

/* The fingerprint of the key's own arguments, in hex. */
static void expected_fingerprint(char out[IDEM_FINGERPRINT_HEX_SIZE], const fault_op *op)
{
    char args[256];
    idem_fingerprint fp;

    fault_op_arguments(args, sizeof(args), op, 0);
    if (idem_fingerprint_compute_text(&fp, FAULT_TOOL, 1, args, strlen(args), NULL, NULL) != 0)
        abort();
    idem_fingerprint_hex(out, &fp);
}

/* One key's record against what its callers were told (@res: key_sql's result). */
static void check_record(checker *c, const fault_op *op, const PGresult *res)
{
    char fp[IDEM_FINGERPRINT_HEX_SIZE], *told;
    const char *who = op->tenant, *id = op->id;

    if (PQntuples(res) != 1) {
        fault_violation(c->run, "%s: %s/%s has no record", c->when, who, id);
        return;
    }
    if (strcmp(PQgetvalue(res, 0, 0), "completed") != 0)
        fault_violation(c->run, "%s: %s/%s is %s", c->when, who, id, PQgetvalue(res, 0, 0));
    expected_fingerprint(fp, op);
    if (strcmp(PQgetvalue(res, 0, 2), fp) != 0)
        fault_violation(c->run, "%s: %s/%s stores fingerprint %s, not its arguments' %s", c->when,
                        who, id, PQgetvalue(res, 0, 2), fp);
    if (op->receipt == NULL) {
        fault_violation(c->run, "%s: %s/%s: no caller was ever answered", c->when, who, id);
        return;
    }
    if (strcmp(PQgetvalue(res, 0, 3), "1") != 0 || atoll(PQgetvalue(res, 0, 4)) != op->effect_n)
        fault_violation(c->run, "%s: %s/%s has %s effects (first n=%s), its receipt names n=%lld",
                        c->when, who, id, PQgetvalue(res, 0, 3), PQgetvalue(res, 0, 4),
                        op->effect_n);
    if ((told = malloc(2 * op->receipt_len + 1)) == NULL)
        abort();
    hex(told, op->receipt, op->receipt_len);
    if (strcmp(PQgetvalue(res, 0, 1), told) != 0)
        fault_violation(c->run, "%s: %s/%s: the committed receipt is not what callers got: %.*s",
                        c->when, who, id, (int)op->receipt_len, op->receipt);
    free(told);
}

void fault_check_ops(fault_run *run, const fault_epoch *epoch)
{
    checker c;
    PGresult *res;

    if (checker_open(&c, run, "keys") != 0)
        return;
    res = PQprepare(c.pg, "fault_key", key_sql, 2, NULL);
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        fault_violation(run, "checker: %s", PQresultErrorMessage(res));
    PQclear(res);
    for (size_t i = 0; i < epoch->nops; i++) {
        const fault_op *op = &epoch->ops[i];
        const char *values[2] = {op->tenant, op->id};

        res = PQexecPrepared(c.pg, "fault_key", 2, values, NULL, NULL, 0);
        if (PQresultStatus(res) == PGRES_TUPLES_OK)
            check_record(&c, op, res);
        else
            fault_violation(run, "checker: %s", PQresultErrorMessage(res));
        PQclear(res);
    }
    PQfinish(c.pg);
}
