/*
 * Sides that call idem_store_execute() with the example tool, each through a pool and a
 * store of its own: the replay mode's calls, and the pooler and rls modes' sides.
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "support_tasks.h"

int bench_execute(bench_worker *w, idem_store *store, const char *tenant, const char *op,
                  const char *args, unsigned int attempt, idem_status expected)
{
    idem_request req = IDEM_REQUEST_INIT;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    int rc;

    req.tenant = tenant;
    req.operation_id = op;
    req.tool = EXAMPLE_TOOL_NAME;
    req.payload_version = EXAMPLE_TOOL_VERSION;
    req.arguments = args;
    req.arguments_len = strlen(args);
    req.attempt = attempt;
    rc = idem_store_execute(&out, store, &req, example_create_support_task, NULL, &err);
    if (rc == 0 && out.status != expected)
        rc = bench_fail(w, "%s: expected %s", idem_status_name(out.status),
                        idem_status_name(expected));
    else if (rc != 0)
        rc = bench_fail(w, "%s: %s", idem_status_name(out.status), err.message);
    idem_outcome_clear(&out);
    return rc;
}

int bench_store_new_key(bench_worker *w)
{
    const bench_store_side *s = w->side->ctx;
    char op[IDEM_UUID_STRING_SIZE];

    if (idem_uuid_v7(op, NULL) != 0)
        return bench_fail(w, "no operation ID");
    return bench_execute(w, s->store, s->create_tenant, op, BENCH_CREATE_ARGUMENTS, 1,
                         IDEM_STATUS_CREATED);
}

int bench_store_replay(bench_worker *w)
{
    const bench_store_side *s = w->side->ctx;
    char op[24];

    bench_loaded_key(op, sizeof(op), bench_random(w, s->replay_keys));
    return bench_execute(w, s->store, s->replay_tenant, op, BENCH_REPLAY_ARGUMENTS, 2,
                         IDEM_STATUS_REPLAYED);
}

int bench_store_side_open(bench_store_side *s, const char *conninfo, idem_pooler pooler,
                          int threads, int cap)
{
    idem_error err = IDEM_ERROR_INIT;

    if (bench_pool_open_pooler(&s->pool, conninfo, threads, cap, pooler) != 0)
        return -1;
    if (idem_store_new(&s->store, s->pool, NULL, &err) != 0)
        return bench_error("store", err.message);
    return 0;
}

void bench_store_sides_close(bench_store_side *s, int n)
{
    for (int i = 0; i < n; i++) {
        idem_store_free(s[i].store);
        idem_pool_free(s[i].pool);
        s[i].store = NULL;
        s[i].pool = NULL;
    }
}
