/* What a logical call may end with, checked the moment it ends: statuses legitimate under
 * faults, at most one `created` per key, and every receipt of a key byte-equal to the
 * first. (What the database holds is fault_check.c's part.) */
#include <stdlib.h>
#include <string.h>

#include "fault.h"

/* A receipt names its key and its effect row. Returns the effect row's n, or -1 (a
 * violation recorded). */
static long long receipt_effect(fault_run *run, const fault_op *op, const char *receipt, size_t len)
{
    json_t *j = json_loadb(receipt, len, 0, NULL);
    json_int_t n = json_integer_value(json_object_get(j, "effect"));
    const char *tenant = json_string_value(json_object_get(j, "tenant"));
    const char *id = json_string_value(json_object_get(j, "op"));
    long long effect = -1;

    if (j == NULL || n <= 0 || tenant == NULL || id == NULL)
        fault_violation(run, "%s/%s: malformed receipt %.*s", op->tenant, op->id, (int)len,
                        receipt);
    else if (strcmp(tenant, op->tenant) != 0 || strcmp(id, op->id) != 0)
        fault_violation(run, "%s/%s: the receipt of another key: %.*s", op->tenant, op->id,
                        (int)len, receipt);
    else
        effect = (long long)n;
    json_decref(j);
    return effect;
}

/* A created or replayed answer for the key's own arguments. Lock held. */
static void judge_success(fault_run *run, fault_op *op, const idem_outcome *out)
{
    if (out->status == IDEM_STATUS_CREATED && ++op->created > 1)
        fault_violation(run, "%s/%s: %u calls were told created", op->tenant, op->id, op->created);
    if (out->receipt == NULL) {
        fault_violation(run, "%s/%s: %s without a receipt", op->tenant, op->id,
                        idem_status_name(out->status));
        return;
    }
    if (op->receipt != NULL) {
        if (op->receipt_len != out->receipt_len ||
            memcmp(op->receipt, out->receipt, out->receipt_len) != 0)
            fault_violation(run, "%s/%s: %s receipt %.*s differs from the first %.*s", op->tenant,
                            op->id, idem_status_name(out->status), (int)out->receipt_len,
                            out->receipt, (int)op->receipt_len, op->receipt);
        return;
    }
    op->effect_n = receipt_effect(run, op, out->receipt, out->receipt_len);
    op->receipt = malloc(out->receipt_len + 1);
    if (op->receipt == NULL)
        abort();
    memcpy(op->receipt, out->receipt, out->receipt_len + 1);
    op->receipt_len = out->receipt_len;
}

/* The same arguments as the key's first call. Lock held. */
static void judge_same(fault_run *run, fault_op *op, const idem_outcome *out, const idem_error *err)
{
    switch (out->status) {
    case IDEM_STATUS_CREATED:
    case IDEM_STATUS_REPLAYED:
        judge_success(run, op, out);
        return;
    case IDEM_STATUS_IN_PROGRESS:
    case IDEM_STATUS_UNAVAILABLE:
        return; /* retried within the budget; the key is settled later */
    default:    /* the suite's effect never fails by itself: a timeout is unavailable */
        break;
    }
    fault_violation(run, "%s/%s: same arguments ended %s: %s [%s]", op->tenant, op->id,
                    idem_status_name(out->status), err->message, err->sqlstate);
}

/* Other arguments under a key that has a record: a conflict, or no answer. Lock held. */
static void judge_changed(fault_run *run, fault_op *op, const idem_outcome *out,
                          const idem_error *err)
{
    if (out->status == IDEM_STATUS_CONFLICT || out->status == IDEM_STATUS_UNAVAILABLE ||
        out->status == IDEM_STATUS_IN_PROGRESS)
        return;
    fault_violation(run, "%s/%s: changed arguments ended %s (expected conflict): %s%.*s",
                    op->tenant, op->id, idem_status_name(out->status), err->message,
                    out->receipt != NULL ? (int)out->receipt_len : 0,
                    out->receipt != NULL ? out->receipt : "");
}

void fault_judge(fault_run *run, fault_op *op, int changed, const idem_outcome *out,
                 const idem_error *err)
{
    if (out->status <= IDEM_STATUS_MISCONFIGURED)
        atomic_fetch_add(&run->counts.final_status[out->status], 1);
    pthread_mutex_lock(&run->lock);
    if (changed)
        judge_changed(run, op, out, err);
    else
        judge_same(run, op, out, err);
    pthread_mutex_unlock(&run->lock);
}
