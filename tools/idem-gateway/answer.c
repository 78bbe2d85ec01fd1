/* The answer table, and its templates filled in. */
#include <stdio.h>
#include <string.h>

#include "answer.h"
#include "mcp.h"

#define NEVER_NEW "never with a new one."
#define RECONCILE                                                                                  \
    "Do not retry under a new operation ID; a person must reconcile it (idem-reconcile show "      \
    "{tenant} {key})."

static const gw_answer table[GW_OUTCOME_COUNT] = {
    [GW_OUTCOME_CREATED] = {"created", "created", 201, NULL, NULL, 0, 0, 0, "done",
                            "Done: the tool ran once under operation ID {key}. Receipt: {receipt}"},
    [GW_OUTCOME_REPLAYED] = {"replayed", "replayed", 201, NULL, NULL, 0, 1, 0, "done",
                             "Already done: operation ID {key} ran before; nothing ran again. The "
                             "first receipt: {receipt}"},
    [GW_OUTCOME_KEY_MISSING] = {"no key", "operation_id_required", 400, "idempotency-key-missing",
                                "Idempotency-Key missing", 0, 0, 1, "send a key",
                                "Refused: this tool needs an operation ID and none was sent; "
                                "nothing ran. {how}"},
    [GW_OUTCOME_INVALID_KEY] = {"invalid key", "invalid", 400, "invalid-idempotency-key",
                                "Invalid Idempotency-Key", 0, 0, 1, "fix the key",
                                "Invalid operation ID: {detail}. Nothing ran. {how}"},
    [GW_OUTCOME_INVALID_ARGUMENTS] = {"invalid arguments", "invalid", 400, "invalid-arguments",
                                      "Invalid arguments", 0, 0, 1, "fix the arguments",
                                      "Invalid request, nothing ran under operation ID {key}: "
                                      "{detail}. Fix the arguments and call again with the same "
                                      "operation ID."},
    [GW_OUTCOME_CONFLICT] = {"conflict", "conflict", 422, "conflict",
                             "Key reused with a different request", 0, 0, 1,
                             "use a new key for a new request",
                             "Conflict, nothing ran: operation ID {key} was already used for a "
                             "different request ({field} changed). If this is the same action, "
                             "send exactly its original arguments; if it is a new action, "
                             "allocate a new operation ID for it."},
    [GW_OUTCOME_IN_PROGRESS] = {"in_progress", "in_progress", 409, "in-progress",
                                "Request in progress", 1, 0, 1, "retry later, same key",
                                "In progress: operation ID {key} is running in another attempt. "
                                "Retry in {retry} seconds with the same operation ID; " NEVER_NEW},
    [GW_OUTCOME_EXPIRED] = {"expired", "expired", 410, "expired", "Key expired", 0, 0, 1,
                            "reconcile; never a new key",
                            "Expired, nothing ran: operation ID {key} is older than the tool "
                            "remembers, so whether it ran cannot be told. " RECONCILE},
    [GW_OUTCOME_REJECTED] = {"rejected", "rejected", 422, NULL, NULL, 0, 1, 1, "report it",
                             "Refused, finally: operation ID {key} was refused and the refusal is "
                             "stored; every retry gets the same answer. Report it; do not retry "
                             "under a new operation ID. The refusal: {receipt}"},
    [GW_OUTCOME_EFFECT_FAILED] = {"effect_failed", "effect_failed", 500, "effect-failed",
                                  "The tool's effect failed; nothing was stored", 0, 0, 1,
                                  "report it; a retry runs it again",
                                  "Failed, nothing was stored under operation ID {key}: {detail}. "
                                  "A retry with the same operation ID runs it again; retry only "
                                  "once the cause is fixed."},
    [GW_OUTCOME_OUTCOME_UNKNOWN] = {"outcome_unknown", "outcome_unknown", 502, "outcome-unknown",
                                    "Outcome unknown: do not retry under a new key; it is being "
                                    "reconciled",
                                    0, 0, 1, "wait for reconciliation",
                                    "Outcome unknown: the effect of operation ID {key} may or may "
                                    "not have happened. " RECONCILE
                                    " Until then every retry gets this answer."},
    [GW_OUTCOME_UNAVAILABLE] = {"unavailable", "unavailable", 503, "unavailable",
                                "Service unavailable: retry later with the same key", 1, 0, 1,
                                "retry later, same key",
                                "Unavailable, nothing ran under operation ID {key}: {detail}. "
                                "Retry in {retry} seconds with the same operation ID; " NEVER_NEW},
    [GW_OUTCOME_MISCONFIGURED] = {"misconfigured", "misconfigured", 500, "misconfigured",
                                  "The gateway's deployment is misconfigured", 0, 0, 1,
                                  "an operator fixes the deployment",
                                  "The gateway's deployment is misconfigured; nothing ran under "
                                  "operation ID {key}. An operator must fix it (the gateway's "
                                  "log says what); retrying now cannot help."},
    [GW_OUTCOME_ALLOCATED] = {"allocated", "allocated", 0, NULL, NULL, 0, 0, 0,
                              "store it with the action",
                              "Allocated operation ID {key}. Nothing ran. Store it with the "
                              "approved action and send it as {channel} on every attempt of "
                              "this action, retries included; never allocate another for the "
                              "same action."},
    [GW_OUTCOME_RATE_LIMITED] = {"rate_limited", "rate_limited", 429, "rate-limited",
                                 "Too many requests: the tenant's budget is spent", 1, 0, 1,
                                 "retry later, same key",
                                 "Over budget, nothing ran under operation ID {key}: {detail}. "
                                 "Retry in {retry} seconds with the same operation ID; " NEVER_NEW},
};

const gw_answer *gw_answer_of(gw_outcome o)
{
    return (unsigned int)o < GW_OUTCOME_COUNT ? &table[o] : &table[GW_OUTCOME_UNAVAILABLE];
}

/* Append @n bytes of @s to @out (@size bytes; *@len used), cut to fit. */
static void put(char *out, size_t size, size_t *len, const char *s, size_t n)
{
    if (n > size - 1 - *len)
        n = size - 1 - *len;
    memcpy(out + *len, s, n);
    *len += n;
}

/* The value of placeholder @name (@n bytes) into @buf; its bytes, or NULL when unknown. */
static const char *value(char *buf, size_t size, const char *name, size_t n,
                         const gw_answer_vars *v, size_t *len)
{
    static const struct {
        const char *name;
        size_t max;
    } caps[] = {{"key", 0},        {"tenant", 0}, {"detail", 1000}, {"field", 0},
                {"receipt", 1500}, {"how", 0},    {"channel", 0}};
    const char *values[] = {v->key, v->tenant, v->detail, v->field, v->receipt, v->how, v->channel};

    if (n == 5 && memcmp(name, "retry", 5) == 0) {
        *len = (size_t)snprintf(buf, size, "%u", v->retry);
        return buf;
    }
    for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
        if (strlen(caps[i].name) == n && memcmp(caps[i].name, name, n) == 0) {
            const char *s = values[i] != NULL ? values[i] : "";

            *len = strlen(s);
            if (caps[i].max > 0 && *len > caps[i].max)
                *len = caps[i].max;
            return s;
        }
    }
    return NULL;
}

void gw_answer_text(char *out, size_t size, const gw_answer *a, const gw_answer_vars *v)
{
    const char *p = a->text;
    size_t len = 0;

    /* The status first, in the text itself: a host that turns an error result into an
     * exception keeps the text alone. */
    put(out, size, &len, "[", 1);
    put(out, size, &len, a->status, strlen(a->status));
    put(out, size, &len, "] ", 2);

    while (*p != '\0' && len < size - 1) {
        const char *close = *p == '{' ? strchr(p, '}') : NULL;
        char buf[16];
        size_t n = 0;
        const char *s =
            close != NULL ? value(buf, sizeof(buf), p + 1, (size_t)(close - p - 1), v, &n) : NULL;

        if (s != NULL) {
            put(out, size, &len, s, n);
            p = close + 1;
        } else {
            put(out, size, &len, p, 1);
            p++;
        }
    }
    out[len] = '\0';
}

json_t *gw_answer_table(void)
{
    json_t *rows = json_array();

    for (int o = 0; rows != NULL && o < GW_OUTCOME_COUNT; o++) {
        const gw_answer *a = &table[o];

        if (json_array_append_new(
                rows,
                json_pack("{s:s, s:s, s:i, s:s?, s:s?, s:b, s:b, s:b, s:s, s:s}", "name", a->name,
                          "status", a->status, "http", (int)a->http, "problem", a->problem, "title",
                          a->title, "retry_after", a->retry_after, "replayed", a->replayed,
                          "is_error", a->is_error, "next", a->next, "text", a->text)) != 0) {
            json_decref(rows);
            return NULL;
        }
    }
    return rows;
}
