/* The fault suite's judges can fail: each kind of violation, planted in a database after a
 * clean run or fed to the call judge as an outcome, is reported; a clean run is not. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "pgtest.h"

#define NOPS 6

static fault_run *run;
static char *conninfo;

static int reported(const char *needle)
{
    for (size_t i = 0; i < run->nmessages; i++) {
        if (run->messages[i] != NULL && strstr(run->messages[i], needle) != NULL)
            return 1;
    }
    return 0;
}

/* The messages, when the test is about to fail: a passing test prints no violation. */
static void print_messages_if(int failing)
{
    if (failing)
        fault_print_violations(run, stderr);
}

/* A database where NOPS keys ("chk"/"op-0"...) were each called once, without faults. */
static void clean_run(void)
{
    fault_config cfg;
    char why[512], id[16];
    uint64_t rng = 1;

    fault_config_from_env(&cfg);
    conninfo = pgtest_new_migrated_database("fault_checker");
    cr_assert_eq(fault_schema_create(conninfo, why, sizeof(why)), 0, "%s", why);
    cr_assert_eq(fault_run_new(&run, &cfg, conninfo, why, sizeof(why)), 0, "%s", why);
    run->epoch = fault_epoch_new(0, NOPS);
    for (int i = 0; i < NOPS; i++) {
        snprintf(id, sizeof(id), "op-%d", i);
        fault_op *op = fault_epoch_add(run, "chk", id, 0);
        cr_assert_eq(fault_call(run, op, CALL_OWNER, &run->policy, NULL, &rng),
                     IDEM_STATUS_CREATED);
    }
}

static void close_run(void)
{
    fault_run_free(run);
    run = NULL;
    free(conninfo);
    conninfo = NULL;
}

TestSuite(fault_checker, .init = clean_run, .fini = close_run);

static void check_all(void)
{
    fault_check_db(run, "check");
    fault_check_ops(run, run->epoch);
}

Test(fault_checker, a_clean_run_has_no_violations)
{
    check_all();
    print_messages_if(run->violations != 0);
    cr_assert_eq(run->violations, 0);
}

/* Parameters are indexes into these tables: Criterion runs each test in a new process,
 * where pointers made by the parent would not hold. */
static const struct plant {
    const char *sql;
    const char *expect;
} plants[] = {
    {"INSERT INTO fault_effects (tenant, operation_id, payload) VALUES ('chk', 'op-1', 'x')",
     "a completed operation has not exactly one effect"},
    {"DELETE FROM fault_effects WHERE operation_id = 'op-2'", "has 0 effects"},
    {"INSERT INTO fault_effects (tenant, operation_id, payload) VALUES ('chk', 'nobody', 'x')",
     "an effect has no completed operation"},
    {"INSERT INTO idem.operations (tenant, operation_id, tool, payload_version, fingerprint,"
     " state, claim_token, expires_at) VALUES ('chk', 'op-left', 'fault_write', 1,"
     " sha256('x'), 'pending', gen_random_uuid(), now() + interval '1 day')",
     "a pending record is left behind"},
    {"UPDATE idem.operations SET response = response || '\\x20'::bytea"
     " WHERE operation_id = 'op-3'",
     "the committed receipt is not what callers got"},
    {"UPDATE idem.operations SET fingerprint = sha256('other') WHERE operation_id = 'op-4'",
     "not its arguments'"},
    {"DELETE FROM idem.operations WHERE operation_id = 'op-5'", "op-5 has no record"},
    {"UPDATE idem.operations SET state = 'failed' WHERE operation_id = 'op-0'",
     "neither completed nor pending"},
    {"UPDATE fault_effects SET operation_id = 'op-0' WHERE operation_id = 'op-1'", "has 2 effects"},
};

#define NPLANTS (sizeof(plants) / sizeof(plants[0]))

ParameterizedTestParameters(fault_checker, reports_each_planted_violation)
{
    static size_t index[NPLANTS];

    for (size_t i = 0; i < NPLANTS; i++)
        index[i] = i;
    return cr_make_param_array(size_t, index, NPLANTS);
}

ParameterizedTest(size_t *i, fault_checker, reports_each_planted_violation)
{
    const struct plant *p = &plants[*i];
    PGconn *pg = pgtest_connect(conninfo);

    PQclear(pgtest_exec(pg, p->sql));
    PQfinish(pg);
    check_all();
    print_messages_if(!reported(p->expect));
    cr_assert(reported(p->expect), "not reported: \"%s\" after %s", p->expect, p->sql);
}

/* The call judge, without a database: outcomes in the order callers were told them. */
#define R1 "{\"effect\":5,\"op\":\"op\",\"payload\":\"x\",\"tenant\":\"t\"}"

struct told {
    int changed;
    idem_status status;
    const char *receipt;
    const char *sqlstate; /* NULL ends a story */
};

static const struct story {
    struct told calls[5];
    const char *expect; /* NULL: no violation */
} stories[] = {
    {{{0, IDEM_STATUS_UNAVAILABLE, NULL, "08006"},
      {0, IDEM_STATUS_CREATED, R1, ""},
      {0, IDEM_STATUS_REPLAYED, R1, ""},
      {1, IDEM_STATUS_CONFLICT, NULL, ""},
      {0, IDEM_STATUS_UNAVAILABLE, NULL, "57014"}},
     NULL},
    {{{0, IDEM_STATUS_EFFECT_FAILED, NULL, "57014"}}, "same arguments ended effect_failed"},
    {{{0, IDEM_STATUS_CREATED, R1, ""}, {0, IDEM_STATUS_CREATED, R1, ""}},
     "2 calls were told created"},
    {{{0, IDEM_STATUS_CREATED, R1, ""}, {0, IDEM_STATUS_REPLAYED, "{\"effect\":5}", ""}},
     "differs from the first"},
    {{{0, IDEM_STATUS_CONFLICT, NULL, ""}}, "same arguments ended conflict"},
    {{{0, IDEM_STATUS_CREATED, R1, ""}, {1, IDEM_STATUS_REPLAYED, R1, ""}},
     "changed arguments ended replayed"},
    {{{0, IDEM_STATUS_EFFECT_FAILED, NULL, ""}}, "same arguments ended effect_failed"},
    {{{0, IDEM_STATUS_MISCONFIGURED, NULL, "42P01"}}, "same arguments ended misconfigured"},
    {{{0, IDEM_STATUS_REPLAYED, "{\"effect\":5,\"op\":\"op2\",\"payload\":\"x\",\"tenant\":\"t\"}",
       ""}},
     "the receipt of another key"},
    {{{0, IDEM_STATUS_CREATED, "{\"op\":\"op\",\"tenant\":\"t\"}", ""}}, "malformed receipt"},
};

#define NSTORIES (sizeof(stories) / sizeof(stories[0]))

ParameterizedTestParameters(fault_judge, judges_what_callers_were_told)
{
    static size_t index[NSTORIES];

    for (size_t i = 0; i < NSTORIES; i++)
        index[i] = i;
    return cr_make_param_array(size_t, index, NSTORIES);
}

ParameterizedTest(size_t *i, fault_judge, judges_what_callers_were_told)
{
    const struct story *s = &stories[*i];
    fault_config cfg;
    fault_op op = {.tenant = "t", .id = "op"};
    char why[256];

    fault_config_from_env(&cfg);
    cr_assert_eq(fault_run_new(&run, &cfg, NULL, why, sizeof(why)), 0, "%s", why);
    for (int c = 0; c < 5 && s->calls[c].sqlstate != NULL; c++) {
        idem_outcome out = IDEM_OUTCOME_INIT;
        idem_error err = IDEM_ERROR_INIT;

        out.status = s->calls[c].status;
        out.receipt = (char *)s->calls[c].receipt;
        out.receipt_len = out.receipt != NULL ? strlen(out.receipt) : 0;
        snprintf(err.sqlstate, sizeof(err.sqlstate), "%s", s->calls[c].sqlstate);
        fault_judge(run, &op, s->calls[c].changed, &out, &err);
    }
    print_messages_if(s->expect == NULL ? run->violations != 0 : !reported(s->expect));
    if (s->expect == NULL)
        cr_assert_eq(run->violations, 0);
    else
        cr_assert(reported(s->expect), "story %zu: not reported: %s", *i, s->expect);
    free(op.receipt);
    fault_run_free(run);
    run = NULL;
}
