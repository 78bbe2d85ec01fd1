/* The first step of a call: the request checked field by field, its arguments parsed and
 * fingerprinted, before a connection is taken; bad input is refused here, naming the
 * field, with nothing written. */
#include "idem/validate.h"
#include "idem/json.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arguments.h"
#include "error.h"
#include "exec.h"
#include "store_internal.h"

/* Turn a lower layer's EINVAL into one that names @field, keeping its message. */
static int blame_field(idem_error *err, int rc, const char *field)
{
    if (err == NULL || rc != IDEM_EINVAL)
        return rc;
    if (strcmp(err->field, field) != 0 && strncmp(err->message, field, strlen(field)) != 0)
        idem__error_context(err, "%s", field);
    snprintf(err->field, sizeof(err->field), "%s", field);
    return rc;
}

/* A tool with an identity policy: the fingerprint of its projection, and the digests of
 * its identity fields for the record (identity.h). */
static int fingerprint_identity(call *c)
{
    const idem_request *req = c->req;
    json_t *projection = NULL;
    int rc = idem__identity_project(&projection, c->identity, c->arguments, c->err);

    if (rc == 0)
        rc = idem__fingerprint_identity(&c->fp, req->tool, req->payload_version, projection,
                                        c->identity->declared, c->err);
    if (rc == 0)
        rc = idem__identity_digests(&c->digests, c->identity, projection, req->tenant,
                                    req->operation_id, c->err);
    json_decref(projection);
    return rc;
}

int idem__store_validate(call *c)
{
    const idem_request *req = c->req;
    int rc;

    if (req == NULL)
        return idem__error_field(c->err, IDEM_EINVAL, "request", "must not be NULL");
    if ((rc = idem__check_version(c->err, req->version, IDEM_REQUEST_VERSION, "request")) != 0)
        return rc;
    if ((rc = idem_validate_tenant(req->tenant, c->err)) != 0 ||
        (rc = idem_validate_operation_id(req->operation_id, c->err)) != 0 ||
        (rc = idem_validate_tool(req->tool, c->err)) != 0 ||
        (rc = idem_validate_payload_version(req->payload_version, c->err)) != 0 ||
        (rc = idem_validate_trace_id(req->trace_id, c->err)) != 0)
        return rc;
    if (req->arguments == NULL)
        return idem__error_field(c->err, IDEM_EINVAL, "arguments", "must not be NULL");
    if (req->arguments_len > c->store->opts.max_arguments_bytes)
        return idem__error_field(c->err, IDEM_EINVAL, "arguments",
                                 "%zu bytes exceed the limit of %zu", req->arguments_len,
                                 c->store->opts.max_arguments_bytes);
    if (req->version >= 3 && req->parsed != NULL &&
        (rc = idem__arguments_tree(&c->arguments, req->parsed, req->arguments, req->arguments_len,
                                   IDEM_JSON_MAX_DEPTH_DEFAULT)) < 0)
        return idem__error_field(c->err, IDEM_EINVAL, "parsed",
                                 "was parsed from other bytes than the request's arguments");
    c->identity = idem__store_identity(c->store, req->tool);
    /* The fingerprint from the arguments' text, in one pass, where their shape allows
     * (identity.h): a retry is mostly answered by the lookup and needs nothing else, and a
     * declared call whose parameters name top-level members binds them from that canonical
     * text, an object's; only an effect that runs needs the tree. */
    if (c->identity == NULL) {
        int keep =
            c->arguments == NULL && c->declared != NULL && idem__declared_binds_text(c->declared);

        /* A retry's lookup goes out before its fingerprint is needed: the text is hashed
         * while the lookup is on the wire (idem__store_lookup()). */
        if (c->defer_arguments)
            rc = idem__fingerprint_text_unhashed(&c->fp_text, req->tool, req->payload_version,
                                                 req->arguments, req->arguments_len,
                                                 keep ? &c->canonical : NULL, c->err);
        else
            rc = idem__fingerprint_text_kept(&c->fp, req->tool, req->payload_version,
                                             req->arguments, req->arguments_len,
                                             keep ? &c->canonical : NULL, c->err);
        if (rc == 1 && keep && c->canonical.data[0] != '{')
            idem__buf_free(&c->canonical); /* the tree's path refuses it in its words */
        if (rc == 1 && (c->defer_arguments || c->arguments != NULL || c->canonical.len > 0))
            return 0;
        if (rc == 1)
            return idem__store_arguments(c);
        if (rc != 0)
            return rc;
    }
    if ((rc = idem__store_arguments(c)) != 0)
        return rc;
    if (c->identity != NULL)
        rc = fingerprint_identity(c);
    else
        rc =
            idem_fingerprint_compute(&c->fp, req->tool, req->payload_version, c->arguments, c->err);
    if (rc != 0) {
        idem__store_call_clear(c);
        return blame_field(c->err, rc, "arguments");
    }
    return 0;
}

int idem__store_arguments(call *c)
{
    idem_json_options jopts = IDEM_JSON_OPTIONS_INIT;
    int rc;

    if (c->arguments != NULL || c->canonical.len > 0)
        return 0;
    jopts.max_bytes = c->store->opts.max_arguments_bytes;
    rc = idem_json_parse_arguments(&c->arguments, c->req->arguments, c->req->arguments_len, &jopts,
                                   c->err);
    return rc != 0 ? blame_field(c->err, rc, "arguments") : 0;
}

int idem__store_fingerprint(call *c)
{
    if (c->fp_text.data == NULL)
        return 0;
    return idem__fingerprint_hash_text(&c->fp, &c->fp_text, c->err);
}

void idem__store_fingerprint_while_waiting(void *c)
{
    (void)idem__store_fingerprint(c); /* a failure keeps the text: said again after */
}

void idem__store_call_clear(call *c)
{
    idem__buf_free(&c->fp_text);
    json_decref(c->arguments);
    c->arguments = NULL;
    idem__buf_free(&c->canonical);
    idem__buf_free(&c->digests);
}

int idem__store_no_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                          idem_error *err)
{
    (void)response;
    (void)tx;
    (void)arguments;
    (void)ctx;
    return idem__error_set(err, IDEM_EINVAL, "this call runs no local effect");
}
