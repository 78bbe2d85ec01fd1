/* idem-gateway's per-tenant budgets without a network: the token bucket (budget.h) on a
 * clock the test moves, and the configuration's budget member, every refusal naming its
 * place. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "budget.h"
#include "config.h"

static void fini(void)
{
    gw_budget_free();
}

TestSuite(budget, .fini = fini);

Test(budget, a_bucket_starts_full_and_refuses_when_spent)
{
    gw_rate rate = {60, 3}; /* one a second, three at once */
    gw_budget_view v;

    for (unsigned int i = 0; i < 3; i++) {
        cr_assert_eq(gw_budget_take_at("acme", GW_BUDGET_CALLS, &rate, 100.0, &v), 1);
        cr_assert_eq(v.remaining, 2 - i);
    }
    cr_assert_eq(gw_budget_take_at("acme", GW_BUDGET_CALLS, &rate, 100.0, &v), 0);
    cr_assert_eq(v.remaining, 0);
    cr_assert_eq(v.retry_s, 1);
    cr_assert_eq(v.quota, 3);
    cr_assert_eq(v.window_s, 3);
    cr_assert_eq(v.reset_s, 3);
}

Test(budget, tokens_come_back_at_the_rate_up_to_the_burst)
{
    gw_rate rate = {6, 2}; /* one every ten seconds, two at once */
    gw_budget_view v;

    cr_assert_eq(gw_budget_take_at("acme", GW_BUDGET_NEW, &rate, 0.0, &v), 1);
    cr_assert_eq(gw_budget_take_at("acme", GW_BUDGET_NEW, &rate, 0.0, &v), 1);
    cr_assert_eq(gw_budget_take_at("acme", GW_BUDGET_NEW, &rate, 4.0, &v), 0);
    cr_assert_eq(v.retry_s, 6, "%u", v.retry_s); /* 0.4 of a token there: 6 s for the rest */
    cr_assert_eq(gw_budget_take_at("acme", GW_BUDGET_NEW, &rate, 10.0, &v), 1);
    /* An hour later the bucket holds its burst, not more. */
    cr_assert_eq(gw_budget_take_at("acme", GW_BUDGET_NEW, &rate, 3610.0, &v), 1);
    cr_assert_eq(gw_budget_take_at("acme", GW_BUDGET_NEW, &rate, 3610.0, &v), 1);
    cr_assert_eq(gw_budget_take_at("acme", GW_BUDGET_NEW, &rate, 3610.0, &v), 0);
}

Test(budget, tenants_and_kinds_have_buckets_of_their_own)
{
    gw_rate rate = {1, 1};

    cr_assert_eq(gw_budget_take_at("acme", GW_BUDGET_CALLS, &rate, 0.0, NULL), 1);
    cr_assert_eq(gw_budget_take_at("acme", GW_BUDGET_CALLS, &rate, 0.0, NULL), 0);
    cr_assert_eq(gw_budget_take_at("globex", GW_BUDGET_CALLS, &rate, 0.0, NULL), 1);
    cr_assert_eq(gw_budget_take_at("acme", GW_BUDGET_NEW, &rate, 0.0, NULL), 1);
}

/* What gw_budget_each() tells of acme's new operations: taken, refused. */
static void count(void *arg, const char *tenant, gw_budget_kind kind, unsigned long long taken,
                  unsigned long long refused)
{
    unsigned long long *counts = arg;

    if (strcmp(tenant, "acme") == 0 && kind == GW_BUDGET_NEW) {
        counts[0] = taken;
        counts[1] = refused;
    }
}

Test(budget, a_token_given_back_can_be_taken_again_and_refusals_are_counted)
{
    gw_rate rate = {1, 1};
    unsigned long long counts[2] = {0, 0};

    cr_assert_eq(gw_budget_take_at("acme", GW_BUDGET_NEW, &rate, 0.0, NULL), 1);
    cr_assert_eq(gw_budget_take_at("acme", GW_BUDGET_NEW, &rate, 0.0, NULL), 0);
    gw_budget_refused("acme", GW_BUDGET_NEW);
    gw_budget_give_back("acme", GW_BUDGET_NEW, &rate);
    cr_assert_eq(gw_budget_take_at("acme", GW_BUDGET_NEW, &rate, 0.0, NULL), 1);
    gw_budget_each(count, counts);
    cr_assert_eq(counts[0], 1); /* two taken, one given back */
    cr_assert_eq(counts[1], 1);
}

static char dir[] = "/tmp/idem-gateway-budget.XXXXXX";

/* The configuration with @budget as acme's budget member: gw_config_load()'s answer, its
 * refusal in @why. */
static int load(const char *budget, char *why, size_t size)
{
    char path[sizeof(dir) + 32], text[2048];
    gw_config *cfg = NULL;
    FILE *f;
    int rc;

    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/gateway.json", dir);
    snprintf(text, sizeof(text),
             "{\"database\": {\"dsn\": \"dbname=never_reached\"},"
             " \"tenants\": {\"acme\": {\"tokens\": [\"%064d\"], \"budget\": %s}},"
             " \"tools\": {\"note\": {\"arguments\": {\"type\": \"object\"},"
             "  \"sql\": {\"statement\": \"SELECT '{}'::json\", \"params\": []}}}}",
             0, budget);
    cr_assert_not_null(f = fopen(path, "w"));
    fputs(text, f);
    fclose(f);
    rc = gw_config_load(&cfg, path, why, size);
    if (rc == 0) {
        const gw_tenant *t = &cfg->tenants[0];

        snprintf(why, size, "calls %u/%u new %u/%u", t->calls.per_minute, t->calls.burst,
                 t->new_operations.per_minute, t->new_operations.burst);
        gw_config_free(cfg);
    }
    unlink(path);
    rmdir(dir);
    memcpy(dir + sizeof(dir) - 7, "XXXXXX", 6);
    return rc;
}

Test(budget, the_configuration_reads_each_budget_and_its_burst_defaults_to_a_minute)
{
    char why[512];

    cr_assert_eq(load("{\"calls\": {\"per_minute\": 600, \"burst\": 20},"
                      " \"new_operations\": {\"per_minute\": 30}}",
                      why, sizeof(why)),
                 0, "%s", why);
    cr_assert_str_eq(why, "calls 600/20 new 30/30");
    cr_assert_eq(load("{}", why, sizeof(why)), 0, "%s", why);
    cr_assert_str_eq(why, "calls 0/0 new 0/0");
}

Test(budget, every_refusal_of_a_budget_names_its_place)
{
    static const struct {
        const char *budget, *place;
    } cases[] = {
        {"[]", "/tenants/acme/budget: "},
        {"{\"calls\": {}}", "/tenants/acme/budget/calls/per_minute: is required"},
        {"{\"calls\": {\"per_minute\": 0}}", "/tenants/acme/budget/calls/per_minute"},
        {"{\"calls\": {\"per_minute\": 1.5}}", "/tenants/acme/budget/calls/per_minute"},
        {"{\"calls\": {\"per_minute\": 60, \"burst\": 0}}", "/tenants/acme/budget/calls/burst"},
        {"{\"new_operations\": {\"per_minute\": 60000001}}",
         "/tenants/acme/budget/new_operations/per_minute"},
        {"{\"new_operations\": {\"per_minute\": 6, \"rate\": 1}}",
         "/tenants/acme/budget/new_operations/rate"},
        {"{\"writes\": {}}", "/tenants/acme/budget/writes"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char why[512];

        cr_assert_neq(load(cases[i].budget, why, sizeof(why)), 0, "%s", cases[i].budget);
        cr_assert_not_null(strstr(why, cases[i].place), "%s: %s", cases[i].budget, why);
    }
}
