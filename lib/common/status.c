/* The answer of the contract (include/idem/status.h): each status's name, the next step
 * it tells the caller (done, return to the caller, retry with the same key, reconcile), and
 * the status that an error code means. */
#include "idem/status.h"

/* One row per status: name and next step, in enum order. */
static const struct {
    const char *name;
    idem_next_step next;
} status_table[] = {
    [IDEM_STATUS_CREATED] = {"created", IDEM_NEXT_DONE},
    [IDEM_STATUS_REPLAYED] = {"replayed", IDEM_NEXT_DONE},
    [IDEM_STATUS_CONFLICT] = {"conflict", IDEM_NEXT_RETURN_TO_CALLER},
    [IDEM_STATUS_INVALID] = {"invalid", IDEM_NEXT_RETURN_TO_CALLER},
    [IDEM_STATUS_IN_PROGRESS] = {"in_progress", IDEM_NEXT_RETRY_SAME_KEY},
    [IDEM_STATUS_UNAVAILABLE] = {"unavailable", IDEM_NEXT_RETRY_SAME_KEY},
    [IDEM_STATUS_EXPIRED] = {"expired", IDEM_NEXT_RECONCILE},
    [IDEM_STATUS_OUTCOME_UNKNOWN] = {"outcome_unknown", IDEM_NEXT_RECONCILE},
    [IDEM_STATUS_EFFECT_FAILED] = {"effect_failed", IDEM_NEXT_RETURN_TO_CALLER},
    [IDEM_STATUS_REJECTED] = {"rejected", IDEM_NEXT_RETURN_TO_CALLER},
    [IDEM_STATUS_MISCONFIGURED] = {"misconfigured", IDEM_NEXT_RETURN_TO_CALLER},
};

#define STATUS_COUNT (sizeof(status_table) / sizeof(status_table[0]))

const char *idem_status_name(idem_status status)
{
    if ((unsigned)status >= STATUS_COUNT)
        return "unknown";
    return status_table[status].name;
}

idem_next_step idem_status_next_step(idem_status status)
{
    if ((unsigned)status >= STATUS_COUNT)
        return IDEM_NEXT_RETURN_TO_CALLER;
    return status_table[status].next;
}

const char *idem_next_step_name(idem_next_step step)
{
    switch (step) {
    case IDEM_NEXT_DONE:
        return "done";
    case IDEM_NEXT_RETURN_TO_CALLER:
        return "return_to_caller";
    case IDEM_NEXT_RETRY_SAME_KEY:
        return "retry_same_key";
    case IDEM_NEXT_RECONCILE:
        return "reconcile";
    }
    return "unknown";
}

idem_status idem_status_from_error(int code)
{
    switch (code) {
    case 0:
        return IDEM_STATUS_CREATED;
    case IDEM_ECONFLICT:
        return IDEM_STATUS_CONFLICT;
    case IDEM_EINVAL:
        return IDEM_STATUS_INVALID;
    case IDEM_EBUSY:
        return IDEM_STATUS_IN_PROGRESS;
    case IDEM_EEXPIRED:
        return IDEM_STATUS_EXPIRED;
    case IDEM_EUNKNOWN:
        return IDEM_STATUS_OUTCOME_UNKNOWN;
    case IDEM_EEFFECT:
        return IDEM_STATUS_EFFECT_FAILED;
    case IDEM_EREJECTED:
        return IDEM_STATUS_REJECTED;
    case IDEM_ESCHEMA:
    case IDEM_EPERM:
        return IDEM_STATUS_MISCONFIGURED;
    default:
        return IDEM_STATUS_UNAVAILABLE;
    }
}
