/*
 * The external mode: what the external-effect protocol costs beside the local path, for a
 * new key, with the provider's call left out (it is another service's time).
 *
 * external  idem_external_begin() on a new key (a first attempt: the claim, its lease and
 *           its history row in one committed transaction), then idem_external_complete()
 *           with a reference and a response (the receipt, the history row and the record in
 *           one statement); against idem_store_execute() of the example effect on a new key
 *           (a first attempt too). Both sides share one pool.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "support_tasks.h"

typedef struct external_ctx {
    idem_pool *pool;
    idem_store *store;
    idem_external *ext;
} external_ctx;

static idem_request new_key(char op[IDEM_UUID_STRING_SIZE], const char *tool, const char *args)
{
    idem_request req = IDEM_REQUEST_INIT;
    idem_error err = IDEM_ERROR_INIT;

    idem_uuid_v7(op, &err);
    req.tenant = "bench-external";
    req.operation_id = op;
    req.tool = tool;
    req.payload_version = 1;
    req.arguments = args;
    req.arguments_len = strlen(args);
    req.attempt = 1;
    return req;
}

/* begin, a pretend dispatch, complete. */
static int external_side(bench_worker *w)
{
    const external_ctx *c = w->side->ctx;
    char op[IDEM_UUID_STRING_SIZE], ref[40];
    idem_request req = new_key(op, "send_email", BENCH_CREATE_ARGUMENTS);
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_external_attempt *a = NULL;
    json_t *response = NULL;
    int rc = idem_external_begin(&a, &out, c->ext, &req, &err);

    if (rc != 0 || a == NULL) {
        rc = bench_fail(w, "begin: %s: %s", idem_status_name(out.status), err.message);
        goto done;
    }
    snprintf(ref, sizeof(ref), "msg-%.30s", idem_external_attempt_downstream_key(a));
    response = json_pack("{s:s}", "message_id", ref);
    rc = idem_external_complete(&out, a, ref, response, &err);
    if (rc != 0 || out.status != IDEM_STATUS_CREATED)
        rc = bench_fail(w, "complete: %s: %s", idem_status_name(out.status), err.message);
done:
    json_decref(response);
    idem_external_attempt_free(a);
    idem_outcome_clear(&out);
    return rc;
}

static int local_side(bench_worker *w)
{
    const external_ctx *c = w->side->ctx;
    char op[IDEM_UUID_STRING_SIZE];
    idem_request req = new_key(op, EXAMPLE_TOOL_NAME, BENCH_CREATE_ARGUMENTS);
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    int rc = idem_store_execute(&out, c->store, &req, example_create_support_task, NULL, &err);

    if (rc != 0 || out.status != IDEM_STATUS_CREATED)
        rc = bench_fail(w, "%s: %s", idem_status_name(out.status), err.message);
    idem_outcome_clear(&out);
    return rc;
}

static void close_ctx(external_ctx *c)
{
    idem_external_free(c->ext);
    idem_store_free(c->store);
    idem_pool_free(c->pool);
}

static int external_at(bench_results *res, const bench_config *cfg, const char *conninfo,
                       int threads)
{
    external_ctx c = {NULL, NULL, NULL};
    const bench_side sides[2] = {{"external begin + complete", external_side, &c},
                                 {"local create", local_side, &c}};
    bench_plan plan = {sides, 2, threads, cfg->duration_s, cfg->round_s, cfg->round_s};
    bench_measure *m = bench_results_add(res, "external", threads,
                                         "new keys, first attempts; the provider's call left out;"
                                         " local = idem_store_execute() of the example effect");
    idem_error err = IDEM_ERROR_INIT;
    int rc = m != NULL ? bench_pool_open(&c.pool, conninfo, threads, cfg->pool_cap) : -1;

    if (rc == 0 && (idem_store_new(&c.store, c.pool, NULL, &err) != 0 ||
                    idem_external_new(&c.ext, c.store, NULL, &err) != 0))
        rc = bench_error("store", err.message);
    if (rc == 0) {
        bench_say("external, %d thread%s", threads, threads == 1 ? "" : "s");
        rc = bench_run(m, &plan);
        bench_ratio_throughput(m, 0, 1, "external begin + complete / local create", 0);
    }
    close_ctx(&c);
    return rc;
}

int bench_mode_external(bench_results *res, const bench_config *cfg, const char *conninfo)
{
    for (int i = 0; i < cfg->nthreads; i++) {
        if (external_at(res, cfg, conninfo, cfg->threads[i]) != 0)
            return -1;
    }
    return 0;
}
