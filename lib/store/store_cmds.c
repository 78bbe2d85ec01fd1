/* The commands of the callback path's two pipelines (store_write.c): BEGIN with the
 * reservation (plain PostgreSQL) or the claim and its settings (Citus), and the statement
 * that writes or finishes the record, each with its parameters. The write path costs two
 * round trips (after a lookup only for a retry): BEGIN, the reservation or claim with its
 * settings and the effect's first statement travel in one pipeline; the record's statement
 * and COMMIT in another. */
#include <string.h>

#include "exec.h"
#include "store_internal.h"
#include "tenant.h"

static idem__pipe_cmd cmd_claim(const call *c, const idem__stmt *stmt)
{
    return (idem__pipe_cmd){stmt, NULL, 0, c->cp.values, c->cp.lengths, c->cp.formats, 1, NULL};
}

/* A tool with an identity policy: its fields' digests as the claim's parameter @at
 * (binary; SQL NULL when no field is present), for @stmt. */
static const idem__stmt *with_digests(call *c, size_t at, const idem__stmt *stmt)
{
    claim_params *p = &c->cp;

    p->values[at] = c->digests.len > 0 ? c->digests.data : NULL;
    p->lengths[at] = (int)c->digests.len;
    p->formats[at] = 1;
    return stmt;
}

/* The reservation's parameters (stmt_reserve_as), from the claim's and the settings. */
static idem__pipe_cmd cmd_reserve(call *c, const idem__tx_settings *s)
{
    claim_params *p = &c->cp;

    p->reserve[0] = c->req->tenant;
    p->reserve[1] = c->req->operation_id;
    p->reserve[2] = p->not_before;
    p->reserve[3] = p->not_after;
    p->reserve[4] = s->claim_wait;
    p->reserve[5] = s->lock_timeout;
    p->reserve[6] = s->statement_timeout;
    memset(p->reserve_lengths, 0, sizeof(p->reserve_lengths));
    memset(p->reserve_formats, 0, sizeof(p->reserve_formats));
    p->reserve_lengths[2] = p->reserve_lengths[3] = 8;
    p->reserve_formats[2] = p->reserve_formats[3] = 1;
    return (idem__pipe_cmd){&idem__store_stmt_reserve_as, NULL, 0,   p->reserve, p->reserve_lengths,
                            p->reserve_formats,           1,    NULL};
}

/* On plain PostgreSQL BEGIN and the reservation, which makes the settings itself and
 * writes no row: the record is written once, finished, with COMMIT (cmd_finish()).
 * Elsewhere (Citus) the settings go as SET LOCAL statements of their own (settings.h:
 * they reach the worker that holds the key's shard), in the same pipeline, and the claim
 * writes the pending record that the finishing UPDATE completes: a transaction-scoped
 * advisory lock would be taken on one node only. No round trip more either way. */
size_t idem__store_begin_cmds(call *c, idem_conn *conn, idem__pipe_cmd *cmds)
{
    idem__tx_settings *s = &c->settings;
    size_t n = 1;

    idem__tx_settings_for(s, conn, c->req->tenant);
    idem__tx_settings_claim_wait(s, IDEM__CLAIM_WAIT_MS);
    cmds[0] = idem__pipe_stmt(&idem__stmt_begin_serializable, NULL);
    if (idem__tenant_form_for(conn) == IDEM__TENANT_IMPLICIT) {
        c->reserved = 1;
        c->claim_at = 1;
        cmds[1] = cmd_reserve(c, s);
        return 2;
    }
    c->reserved = 0;
    n += idem__tx_settings_cmds(cmds + n, s, IDEM__SETTINGS_CITUS);
    c->claim_at = n;
    cmds[n++] = cmd_claim(c, c->identity != NULL ? with_digests(c, 11, &idem__store_stmt_claim_id)
                                                 : &idem__store_stmt_claim);
    idem__tx_settings_after_claim(&cmds[n++], s);
    return n;
}

void idem__store_pipe_clear(idem__pipe_cmd *cmds, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        PQclear(cmds[i].result);
        cmds[i].result = NULL;
    }
}

/* The record of a reserved key, whole (stmt_record_as): the claim's parameters $1..$9, the
 * state and the receipt, and a tool's identity digests. */
static idem__pipe_cmd cmd_record(finish_params *p, const call *c, const char *state,
                                 const char *receipt, size_t len)
{
    const claim_params *cp = &c->cp;
    int n = 11;

    memcpy(p->values, cp->values, 9 * sizeof(p->values[0]));
    memcpy(p->lengths, cp->lengths, 9 * sizeof(p->lengths[0]));
    memcpy(p->formats, cp->formats, 9 * sizeof(p->formats[0]));
    p->values[9] = state;
    p->lengths[9] = p->formats[9] = 0;
    p->values[10] = receipt;
    p->lengths[10] = (int)len;
    p->formats[10] = 1;
    if (c->identity != NULL) {
        p->values[11] = c->digests.len > 0 ? c->digests.data : NULL;
        p->lengths[11] = (int)c->digests.len;
        p->formats[11] = 1;
        n = 12;
    }
    return (idem__pipe_cmd){n == 12 ? &idem__store_stmt_record_as_id : &idem__store_stmt_record_as,
                            NULL,
                            0,
                            p->values,
                            p->lengths,
                            p->formats,
                            0,
                            NULL};
}

idem__pipe_cmd idem__store_cmd_finish(finish_params *p, const call *c, const char *receipt,
                                      size_t len, int failed)
{
    const char *state = failed ? "failed" : "completed";

    if (c->reserved)
        return cmd_record(p, c, state, receipt, len);
    p->values[0] = c->req->tenant;
    p->values[1] = c->req->operation_id;
    p->values[2] = state;
    p->values[3] = receipt;
    p->values[4] = c->claim;
    memset(p->lengths, 0, sizeof(p->lengths));
    memset(p->formats, 0, sizeof(p->formats));
    p->lengths[3] = (int)len;
    p->formats[3] = 1;
    return (idem__pipe_cmd){
        &idem__store_stmt_finish, NULL, 0, p->values, p->lengths, p->formats, 0, NULL};
}
