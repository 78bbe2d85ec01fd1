/* Requests the store refuses before touching the database: each names the field at fault
 * and writes nothing. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>

#include "params.h"
#include "storetest.h"

TestSuite(store_validate, .init = storetest_init, .fini = storetest_fini, .timeout = 240);

#define OK_ARGS "{\"subject\":\"s\"}"
#define T       EXAMPLE_TOOL_NAME

/* Room for the arguments this suite's store accepts. */
static idem_store_options small_limit(void)
{
    idem_store_options opts = IDEM_STORE_OPTIONS_INIT;

    opts.max_arguments_bytes = 4096;
    return opts;
}

struct bad_input {
    const char *tenant, *op, *tool;
    int version;
    const char *args;
    size_t args_len; /* 0: strlen */
    const char *trace;
    const char *field;
};

/* One case of the table, its strings in Criterion's shared memory. */
struct bad_case {
    size_t index;
    struct bad_input in;
};

static void free_cases(struct criterion_test_params *params)
{
    struct bad_case *cases = params->params;

    for (size_t i = 0; i < params->length; i++) {
        cr_free((char *)cases[i].in.tenant);
        cr_free((char *)cases[i].in.op);
        cr_free((char *)cases[i].in.tool);
        cr_free((char *)cases[i].in.args);
        cr_free((char *)cases[i].in.trace);
        cr_free((char *)cases[i].in.field);
    }
    cr_free(cases);
}

static struct bad_case shared_case(size_t index, const struct bad_input *in)
{
    size_t args_len = in->args_len ? in->args_len : (in->args ? strlen(in->args) : 0);
    struct bad_case c = {index, *in};

    c.in.tenant = params_strdup(in->tenant);
    c.in.op = params_strdup(in->op);
    c.in.tool = params_strdup(in->tool);
    c.in.args = params_strndup(in->args, args_len);
    c.in.trace = params_strdup(in->trace);
    c.in.field = params_strdup(in->field);
    return c;
}

ParameterizedTestParameters(store_validate, invalid_input_names_the_field_and_writes_nothing)
{
    static char long_tenant[66], long_op[130], long_tool[66], long_trace[258];
    static const struct bad_input cases[] = {
        {NULL, "op", T, 1, OK_ARGS, 0, NULL, "tenant"},
        {"", "op", T, 1, OK_ARGS, 0, NULL, "tenant"},
        {long_tenant, "op", T, 1, OK_ARGS, 0, NULL, "tenant"},
        {"acme corp", "op", T, 1, OK_ARGS, 0, NULL, "tenant"},
        {"acm\xc3\xa9", "op", T, 1, OK_ARGS, 0, NULL, "tenant"},
        {"acme\xff", "op", T, 1, OK_ARGS, 0, NULL, "tenant"},
        {"acme", NULL, T, 1, OK_ARGS, 0, NULL, "operation_id"},
        {"acme", "", T, 1, OK_ARGS, 0, NULL, "operation_id"},
        {"acme", "op 1", T, 1, OK_ARGS, 0, NULL, "operation_id"},
        {"acme", long_op, T, 1, OK_ARGS, 0, NULL, "operation_id"},
        {"acme", "op\n", T, 1, OK_ARGS, 0, NULL, "operation_id"},
        {"acme", "op", NULL, 1, OK_ARGS, 0, NULL, "tool"},
        {"acme", "op", "", 1, OK_ARGS, 0, NULL, "tool"},
        {"acme", "op", "Create", 1, OK_ARGS, 0, NULL, "tool"},
        {"acme", "op", long_tool, 1, OK_ARGS, 0, NULL, "tool"},
        {"acme", "op", T, 0, OK_ARGS, 0, NULL, "payload_version"},
        {"acme", "op", T, -3, OK_ARGS, 0, NULL, "payload_version"},
        {"acme", "op", T, 1, NULL, 0, NULL, "arguments"},
        {"acme", "op", T, 1, "", 0, NULL, "arguments"},
        {"acme", "op", T, 1, "{", 0, NULL, "arguments"},
        {"acme", "op", T, 1, "not json", 0, NULL, "arguments"},
        {"acme", "op", T, 1, "{\"subject\":\"s\"} trailing", 0, NULL, "arguments"},
        {"acme", "op", T, 1, "{\"a\":1,\"a\":2}", 0, NULL, "arguments"},
        {"acme", "op", T, 1, "{\"a\":NaN}", 0, NULL, "arguments"},
        {"acme", "op", T, 1, "{\"a\":1e999}", 0, NULL, "arguments"},
        {"acme", "op", T, 1, "{\"a\":\"\xff\"}", 0, NULL, "arguments"},
        {"acme", "op", T, 1, "{\"a\":\"\\ud800\"}", 0, NULL, "arguments"},
        {"acme", "op", T, 1, "{\"a\":\"x\"}\0{}", 12, NULL, "arguments"},
        {"acme", "op", T, 1, OK_ARGS, 0, long_trace, "trace_id"},
        {"acme", "op", T, 1, OK_ARGS, 0, "", "trace_id"},
    };
    size_t n = sizeof(cases) / sizeof(cases[0]);
    struct bad_case *shared = cr_malloc(n * sizeof(*shared));

    memset(long_tenant, 't', 65);
    memset(long_op, 'o', 129);
    memset(long_tool, 'x', 65);
    memset(long_trace, 'r', 257);
    for (size_t i = 0; shared != NULL && i < n; i++)
        shared[i] = shared_case(i, &cases[i]);
    return cr_make_param_array(struct bad_case, shared, shared != NULL ? n : 0, free_cases);
}

ParameterizedTest(struct bad_case *c, store_validate,
                  invalid_input_names_the_field_and_writes_nothing)
{
    const struct bad_input *in = &c->in;
    size_t i = c->index;
    idem_store_options opts = small_limit();
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = IDEM_REQUEST_INIT;
    idem_store_stats st = IDEM_STORE_STATS_INIT;
    storetest_open(&opts, 1);

    req.tenant = in->tenant;
    req.operation_id = in->op;
    req.tool = in->tool;
    req.payload_version = in->version;
    req.arguments = in->args;
    req.arguments_len = in->args_len ? in->args_len : (in->args ? strlen(in->args) : 0);
    req.trace_id = in->trace;
    int rc = idem_store_execute(&out, fx.store, &req, example_create_support_task, NULL, &err);
    cr_assert_eq(rc, IDEM_EINVAL, "case %zu: rc %d (%s)", i, rc, err.message);
    cr_assert_eq(out.status, IDEM_STATUS_INVALID, "case %zu", i);
    cr_assert_str_eq(err.field, in->field, "case %zu: field '%s' (%s)", i, err.field, err.message);
    cr_assert(strncmp(err.message, in->field, strlen(in->field)) == 0,
              "case %zu: message should start with the field: %s", i, err.message);
    cr_assert_null(out.receipt);
    cr_assert_eq(storetest_tasks(), 0);
    cr_assert_eq(storetest_operations(), 0);
    idem_store_stats_get(&st, fx.store);
    cr_assert_geq(st.invalid, 1);
}

Test(store_validate, huge_arguments_are_refused_before_parsing_naming_the_limit)
{
    idem_store_options opts = small_limit();
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    char *huge = malloc(8192);
    storetest_open(&opts, 1);

    memset(huge, ' ', 8191);
    huge[0] = '[';
    huge[8190] = ']';
    huge[8191] = '\0';
    cr_assert_eq(storetest_create_task(&out, "acme", "op", huge, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "arguments");
    cr_assert(strstr(err.message, "limit") != NULL, "%s", err.message);
    free(huge);
    cr_assert_eq(storetest_tasks(), 0);
    cr_assert_eq(storetest_operations(), 0);
}

Test(store_validate, missing_out_request_or_effect_is_einval_naming_the_field)
{
    idem_store_options opts = small_limit();
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_request req = storetest_request("acme", "op", OK_ARGS);
    storetest_open(&opts, 1);

    cr_assert_eq(idem_store_execute(NULL, fx.store, &req, example_create_support_task, NULL, NULL),
                 IDEM_EINVAL);
    cr_assert_eq(idem_store_execute(&out, fx.store, NULL, example_create_support_task, NULL, &err),
                 IDEM_EINVAL);
    cr_assert_str_eq(err.field, "request");
    cr_assert_eq(idem_store_execute(&out, fx.store, &req, NULL, NULL, &err), IDEM_EINVAL);
    cr_assert_str_eq(err.field, "effect");
    cr_assert_eq(storetest_tasks(), 0);
    cr_assert_eq(storetest_operations(), 0);
}
