/* A tool's published policy (idem_store_tool_policy()): what the store applies to its
 * calls, as one JSON document for applications that publish their tools. */
#include <jansson.h>

#include "error.h"
#include "idem/validate.h"
#include "store_internal.h"

/* Final refusals are stored and replayed (rejected); after these nothing is stored. */
static json_t *unstored_failures(void)
{
    return json_pack(
        "[s,s,s,s,s,s]", idem_status_name(IDEM_STATUS_INVALID),
        idem_status_name(IDEM_STATUS_CONFLICT), idem_status_name(IDEM_STATUS_IN_PROGRESS),
        idem_status_name(IDEM_STATUS_EFFECT_FAILED), idem_status_name(IDEM_STATUS_UNAVAILABLE),
        idem_status_name(IDEM_STATUS_MISCONFIGURED));
}

static json_t *identity(const idem__identity *id)
{
    json_t *fields;

    if (id == NULL)
        return json_pack("{s:s}", "mode", idem_identity_mode_name(IDEM_IDENTITY_ALL));
    fields = json_object_get(id->declared, idem_identity_mode_name(id->mode));
    return json_pack("{s:s, s:O}", "mode", idem_identity_mode_name(id->mode), "fields", fields);
}

int idem_store_tool_policy(json_t **out, const idem_store *store, const char *tool, idem_error *err)
{
    unsigned int retention_s, key_memory_s;
    json_t *doc;
    int rc;

    if (out == NULL || store == NULL)
        return idem__error_field(err, IDEM_EINVAL, out == NULL ? "out" : "store",
                                 "must not be NULL");
    if ((rc = idem_validate_tool(tool, err)) != 0)
        return rc;
    idem__store_windows(store, tool, &retention_s, &key_memory_s);
    doc = json_pack("{s:i, s:s, s:I, s:I, s:[s], s:o*, s:o*}", "version", IDEM_TOOL_POLICY_VERSION,
                    "tool", tool, "retention_s", (json_int_t)retention_s, "key_memory_s",
                    (json_int_t)key_memory_s, "stored_failures",
                    idem_status_name(IDEM_STATUS_REJECTED), "unstored_failures",
                    unstored_failures(), "identity", identity(idem__store_identity(store, tool)));
    if (doc == NULL || json_object_size(doc) != 7) {
        json_decref(doc);
        return idem__error_set(err, IDEM_ENOMEM, "tool policy: out of memory");
    }
    *out = doc;
    return 0;
}
