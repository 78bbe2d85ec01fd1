/* The outbox (external.h): an effect enqueues external work in its own transaction; workers
 * claim due items, each with a lease, and report them as any external attempt. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse.h"
#include "error.h"
#include "external_internal.h"
#include "idem/validate.h"
#include "idem/jcs.h"
#include "idem/outbox.h"

#define MAX_ITEM_ATTEMPTS 1000u
#define MAX_CLAIM         1000u

struct idem_outbox_batch {
    idem_external_attempt **items;
    size_t count;
};

int idem_enqueue_options_init(idem_enqueue_options *opts, unsigned int version)
{
    static const idem_enqueue_options defaults = IDEM_ENQUEUE_OPTIONS_INIT;

    return idem__struct_init(opts, &defaults, sizeof(defaults), version,
                             IDEM_ENQUEUE_OPTIONS_VERSION);
}

static int check_item(const char *tool, int payload_version, const json_t *arguments,
                      const idem_enqueue_options *opts, idem_error *err)
{
    int rc;

    if ((rc = idem__check_version(err, opts->version, IDEM_ENQUEUE_OPTIONS_VERSION, "options")) !=
        0)
        return rc;
    if (opts->max_attempts == 0 || opts->max_attempts > MAX_ITEM_ATTEMPTS)
        return idem__error_field(err, IDEM_EINVAL, "options.max_attempts",
                                 "must be 1 to %u, got %u", MAX_ITEM_ATTEMPTS, opts->max_attempts);
    if ((rc = idem_validate_tool(tool, err)) != 0 ||
        (rc = idem_validate_payload_version(payload_version, err)) != 0)
        return rc;
    if (arguments == NULL)
        return idem__error_field(err, IDEM_EINVAL, "arguments", "must not be NULL");
    return 0;
}

/* The item's canonical arguments and fingerprint (hex). */
static int describe(char **canonical, char hex[IDEM_FINGERPRINT_HEX_SIZE], const char *tool,
                    int payload_version, const json_t *arguments, idem_error *err)
{
    idem_fingerprint fp;
    size_t len;
    int rc = idem_fingerprint_compute(&fp, tool, payload_version, arguments, err);

    if (rc == 0)
        rc = idem_jcs_serialize(canonical, &len, arguments, err);
    if (rc != 0) {
        if (err != NULL && rc == IDEM_EINVAL)
            snprintf(err->field, sizeof(err->field), "arguments");
        return rc;
    }
    idem_fingerprint_hex(hex, &fp);
    return 0;
}

int idem_tx_enqueue(char out[IDEM_UUID_STRING_SIZE], idem_tx *tx, const char *tool,
                    int payload_version, const json_t *arguments, const idem_enqueue_options *opts,
                    idem_error *err)
{
    static const idem_enqueue_options defaults = IDEM_ENQUEUE_OPTIONS_INIT;
    char id[IDEM_UUID_STRING_SIZE], key[IDEM_UUID_STRING_SIZE], version[16], retention[24];
    char attempts[16], hex[IDEM_FINGERPRINT_HEX_SIZE], key_memory[24], *canonical = NULL;
    const char *values[11];
    unsigned int retention_s, key_memory_s;
    PGresult *res = NULL;
    int rc;

    if (tx == NULL)
        return idem__error_field(err, IDEM_EINVAL, "tx", "must not be NULL");
    if ((rc = check_item(tool, payload_version, arguments, opts != NULL ? opts : &defaults, err)) !=
            0 ||
        (rc = describe(&canonical, hex, tool, payload_version, arguments, err)) != 0 ||
        (rc = idem_uuid_v7(id, err)) != 0 || (rc = idem_uuid_v7(key, err)) != 0)
        goto done;
    snprintf(version, sizeof(version), "%d", payload_version);
    idem__store_windows(tx->c->store, tool, &retention_s, &key_memory_s);
    snprintf(retention, sizeof(retention), "%u", retention_s);
    snprintf(key_memory, sizeof(key_memory), "%u", key_memory_s);
    snprintf(attempts, sizeof(attempts), "%u",
             opts != NULL ? opts->max_attempts : defaults.max_attempts);
    values[0] = idem_tx_tenant(tx);
    values[1] = id;
    values[2] = tool;
    values[3] = version;
    values[4] = hex;
    values[5] = retention;
    values[6] = key;
    values[7] = idem_tx_operation_id(tx);
    values[8] = canonical;
    values[9] = attempts;
    values[10] = key_memory;
    rc = idem_tx_exec(&res, tx, idem__external_sql_enqueue, 11, values, err);
    PQclear(res);
    if (rc == 0 && out != NULL)
        memcpy(out, id, sizeof(id));
done:
    free(canonical);
    return rc;
}

static void fingerprint_from_hex(idem_fingerprint *fp, const char *hex)
{
    if (idem__hex_decode(fp->bytes, IDEM_FINGERPRINT_SIZE, hex) != 0)
        memset(fp->bytes, 0, IDEM_FINGERPRINT_SIZE); /* never: the database wrote it */
}

/* Row @i of the claim: operation_id, token, attempt, downstream key, lease end, fingerprint
 * (hex), tool, payload_version, arguments. */
static idem_external_attempt *item_from_row(idem_external *ext, const char *tenant,
                                            const PGresult *res, int i)
{
    idem_fingerprint fp;
    idem_external_attempt *a;

    memset(&fp, 0, sizeof(fp));
    fingerprint_from_hex(&fp, PQgetvalue(res, i, 5));
    a = idem__external_attempt_new(ext, tenant, PQgetvalue(res, i, 0), PQgetvalue(res, i, 6),
                                   (int)strtol(PQgetvalue(res, i, 7), NULL, 10), &fp,
                                   PQgetvalue(res, i, 3));
    if (a == NULL)
        return NULL;
    snprintf(a->token, sizeof(a->token), "%s", PQgetvalue(res, i, 1));
    a->number = (int)strtol(PQgetvalue(res, i, 2), NULL, 10);
    a->lease_expires_at = idem__external_cell_us(res, i, 4);
    a->arguments = strdup(PQgetvalue(res, i, 8));
    if (a->arguments == NULL) {
        idem_external_attempt_free(a);
        return NULL;
    }
    return a;
}

/* Take the claimed rows into a batch. Items that cannot be built (out of memory) keep their
 * lease until it lapses, and are claimed again then. */
static int batch_from_result(idem_outbox_batch **out, idem_external *ext, const char *tenant,
                             const PGresult *res, idem_error *err)
{
    idem_outbox_batch *b = calloc(1, sizeof(*b));
    size_t n = (size_t)PQntuples(res);

    if (b == NULL || (n > 0 && (b->items = calloc(n, sizeof(*b->items))) == NULL)) {
        free(b);
        return idem__error_set(err, IDEM_ENOMEM, "outbox: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        if ((b->items[b->count] = item_from_row(ext, tenant, res, (int)i)) == NULL) {
            idem_outbox_batch_free(b);
            return idem__error_set(err, IDEM_ENOMEM, "outbox: out of memory");
        }
        b->count++;
    }
    *out = b;
    return 0;
}

static int check_claim(idem_outbox_batch **out, idem_external *ext, const char *tenant,
                       const char *tool, unsigned int limit, idem_error *err)
{
    int rc;

    if (out == NULL || ext == NULL)
        return idem__error_field(err, IDEM_EINVAL, out == NULL ? "out" : "ext", "must not be NULL");
    if ((rc = idem_validate_tenant(tenant, err)) != 0)
        return rc;
    if (tool != NULL && (rc = idem_validate_tool(tool, err)) != 0)
        return rc;
    if (limit == 0 || limit > MAX_CLAIM)
        return idem__error_field(err, IDEM_EINVAL, "limit", "must be 1 to %u, got %u", MAX_CLAIM,
                                 limit);
    return 0;
}

int idem_outbox_claim(idem_outbox_batch **out, idem_external *ext, const char *tenant,
                      const char *tool, unsigned int limit, idem_error *err)
{
    char n[16], token[IDEM_UUID_STRING_SIZE];
    const char *values[5] = {tenant, tool, n, NULL, token};
    idem_conn *conn = NULL;
    PGresult *res = NULL;
    int rc;

    if ((rc = check_claim(out, ext, tenant, tool, limit, err)) != 0 ||
        (rc = idem_uuid_v7(token, err)) != 0)
        return rc;
    snprintf(n, sizeof(n), "%u", limit);
    values[3] = ext->lease_ms;
    rc = idem__pool_checkout(&conn, ext->store->pool, idem__store_deadline(ext->store), err);
    if (rc == 0)
        rc = idem__tenant_exec(&res, conn, tenant, &idem__external_stmt_outbox_claim, values, NULL,
                               NULL, 0, err);
    idem_pool_release(conn);
    if (rc != 0)
        return idem__error_misconfigured(err, rc);
    rc = batch_from_result(out, ext, tenant, res, err);
    PQclear(res);
    return rc;
}

size_t idem_outbox_batch_count(const idem_outbox_batch *b)
{
    return b != NULL ? b->count : 0;
}

idem_external_attempt *idem_outbox_batch_at(const idem_outbox_batch *b, size_t i)
{
    return b != NULL && i < b->count ? b->items[i] : NULL;
}

void idem_outbox_batch_free(idem_outbox_batch *b)
{
    if (b == NULL)
        return;
    for (size_t i = 0; i < b->count; i++)
        idem_external_attempt_free(b->items[i]);
    free(b->items);
    free(b);
}
