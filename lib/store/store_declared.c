/* Declared effects: one SQL statement of the tool's, run inside a statement of the store's
 * that also writes the record, so that a new key costs one round trip. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/jcs.h"

#include "core/clock.h"
#include "error.h"
#include "exec.h"
#include "json_pointer.h"
#include "store_internal.h"
#include "tenant.h"

/* The store's parameters follow the tool's: $n+1 tenant, operation ID, tool, payload
 * version, fingerprint (binary), trace ID, claim token, retention and key memory in
 * seconds, the span of the database's clock in which the key may claim (binary
 * timestamptz, store_claim.c: for a UUIDv7 operation ID, its time less the clock skew
 * allowance to its time plus the key memory and the allowance; unbounded for other IDs),
 * and max_response_bytes. The tool's SQL ends its line: a trailing -- comment must not
 * swallow what follows.
 *
 * One aggregate over the tool's rows gives their count and receipt in one row, whatever
 * they are, and the record is written from it, completed, if the key is free and within
 * its window: with the receipt as written, or with a marker instead, a byte 0 (never the
 * first byte of JSON text) followed by 'n' and the count when the statement did not return
 * exactly one row, else by the receipt's size in decimal for a receipt over the limit, or
 * by nothing for SQL NULL. The last SELECT returns the receipt the record was written
 * with; otherwise it calls idem.declared_outcome_marker() (migration 0018), which reads the
 * marker and raises through idem.declared_outcome() (0014, 0016), so that COMMIT, later in
 * the same pipeline, is never carried out: IDEM1 when no record was written (NULL; the key
 * has a record, or is outside its window: the lookup that follows answers, a key dated
 * ahead before anything else, whatever the tool's rows), IDEM2 for a marker (the count it
 * holds, or a refused receipt: refused_receipt()). Reading the marker in the statement
 * instead cost every call some 8,000 instructions of the server's, for an expression
 * evaluated only on failure. A first attempt whose statement returns no row or several on
 * a key that has a record is thus answered from the record, as its retry would be.
 *
 * The server prepares every part of the statement each time it runs it, evaluated or not,
 * so the success path is kept to what it needs: the tool's rows read once, by the
 * aggregate, the receipt made into text once, and the record's RETURNING read once; what
 * only a failure needs is in the function and in the ELSE arms, which are not evaluated on
 * success. The record's RETURNING is joined to one row, so that a key that wrote no record
 * still gets one (all NULL: the function's IDEM1); the windows are the seconds given as
 * interval text (a bare number is seconds), not make_interval()'s seven arguments.
 *
 * Where the session's own statement_timeout serves the call (settings.h,
 * idem__tx_settings_session(): the pool's cap, or one that an earlier declared create on the
 * connection kept there, idem__tx_settings_keep_cmd()), the statement makes the
 * transaction's other settings itself instead of a statement of their own before it, in
 * its checked form: $n+13 the lock_timeout, $n+14 the statement_timeout as the server
 * shows it. The one row the answer
 * is joined to makes them: the join has no condition a hash or merge join could use, so it
 * is a nested loop whose outer side is that row, read before the inner side, the record's
 * RETURNING, and so before the record or the tool's SQL runs (tests tx_settings and
 * store_declared: the tool's SQL sees the call's tenant and lock_timeout). The row checks
 * that the session's statement_timeout, the one this statement runs under, is the one
 * given, then sets idem.tenant (which row-level security reads) and lock_timeout for the
 * rest of the transaction; a session found with another fails the statement before anything
 * of it ran (IDEM__DECLARED_SESSION_CHANGED), and the attempt is made again with the
 * settings' own statement. The same in a condition of the main query (an InitPlan) costs
 * the server some 9,000 instructions more a call, for the subplan's parts. Where the
 * settings' statement runs before it, the statement goes in its plain form, with an empty
 * row. For a tool with an identity policy each form has a second one that writes the
 * fields' digests too, the parameter after the store's own (identity.h). */
#define OWN_PARAMS   14 /* in the checked form; the plain form takes the first 12 */
#define PLAIN_PARAMS 12
static const char declared_sql[] =
    "WITH effect(receipt) AS (%s\n),"
    " ins AS (INSERT INTO idem.operations (tenant, operation_id, tool, payload_version,"
    " fingerprint, state, response, receipt_canonical, trace_id, claim_token, expires_at,"
    " completed_at, forget_at%s)"
    " SELECT $%zu, $%zu, $%zu, $%zu::int4, $%zu, 'completed',"
    " CASE WHEN e.n <> 1 THEN E'\\\\x006e'::bytea || convert_to(e.n::text, 'UTF8')"
    " WHEN octet_length(e.body) <= $%zu::int8 THEN e.body"
    " ELSE E'\\\\x00'::bytea || coalesce(convert_to(octet_length(e.body)::text, 'UTF8'), '') END,"
    " true, $%zu, $%zu::uuid,"
    " now() + $%zu::interval, now(), now() + $%zu::interval%s"
    " FROM (SELECT count(*) AS n, convert_to(max(receipt::json::text), 'UTF8') AS body"
    " FROM effect) e"
    " WHERE now() BETWEEN $%zu::timestamptz AND $%zu::timestamptz"
    " ON CONFLICT (tenant, operation_id) DO NOTHING RETURNING response)"
    " SELECT CASE WHEN i.response >= E'\\\\x01'::bytea THEN i.response"
    " ELSE idem.declared_outcome_marker(i.response, $%zu::timestamptz) END"
    " FROM %s AS one LEFT JOIN ins i ON true";

/* The row of the plain form, and the checked form's, which makes the settings. */
static const char plain_row_sql[] = "(SELECT)";
static const char session_row_sql[] =
    "(SELECT CASE WHEN current_setting('statement_timeout') = $%zu::text"
    " THEN num_nulls(set_config('idem.tenant', $%zu, true), set_config('lock_timeout', $%zu, true))"
    " ELSE num_nulls(set_config('statement_timeout', '" IDEM__DECLARED_SESSION_CHANGED
    "', true)) END AS settings)";

/* The statement's four forms: [with the identity's field digests][checked]. */
struct idem_declared {
    idem__stmt stmt[2][2];
    char name[2][2][48];
    char *sql[2][2];
    char **params;
    size_t nparams;
    int binds_text; /* no parameter is a JSON Pointer: idem__declared_binds_text() */
};

static atomic_uint declared_serial;

void idem_declared_free(idem_declared *d)
{
    if (d == NULL)
        return;
    for (size_t i = 0; i < d->nparams; i++)
        free(d->params[i]);
    free(d->params);
    for (int id = 0; id < 2; id++)
        for (int checked = 0; checked < 2; checked++)
            free(d->sql[id][checked]);
    free(d);
}

static int check_declaration(const char *sql, const char *const *params, size_t nparams,
                             idem_error *err)
{
    const char *why = NULL;

    if (sql == NULL || sql[0] == '\0')
        return idem__error_field(err, IDEM_EINVAL, "sql", "must be one SQL statement");
    if (nparams > 0 && params == NULL)
        return idem__error_field(err, IDEM_EINVAL, "params", "NULL with %zu parameters", nparams);
    if (nparams > 1000)
        return idem__error_field(err, IDEM_EINVAL, "params", "%zu parameters; at most 1000",
                                 nparams);
    for (size_t i = 0; i < nparams; i++) {
        if (params[i] == NULL || params[i][0] == '\0')
            return idem__error_field(err, IDEM_EINVAL, "params", "parameter $%zu has no name",
                                     i + 1);
        if (params[i][0] == '/' && idem__json_pointer_check(params[i], &why) != 0)
            return idem__error_field(err, IDEM_EINVAL, "params",
                                     "parameter $%zu is \"%s\", not a JSON Pointer: %s", i + 1,
                                     params[i], why);
        /* Else taken for a member of the arguments, which a misspelling would bind NULL. */
        if (params[i][0] == '$' && strcmp(params[i], "$tenant") != 0 &&
            strcmp(params[i], "$operation_id") != 0)
            return idem__error_field(err, IDEM_EINVAL, "params",
                                     "parameter $%zu is \"%s\": names starting with '$' are "
                                     "reserved for the key's parts ($tenant, $operation_id)",
                                     i + 1, params[i]);
    }
    return idem__declared_check_sql(sql, nparams, NULL, err);
}

/* The parameter of the record's field digests in the form [@id][@checked]; 0 for none. */
static size_t digests_param(size_t n, int id, int checked)
{
    return id ? n + (checked ? OWN_PARAMS : PLAIN_PARAMS) + 1 : 0;
}

/* One form of the store's statement around @inner (the tool's @n parameters first). */
static char *wrap_sql(const char *inner, size_t n, int id, int checked)
{
    char column[24] = "", value[24] = "", row[sizeof(session_row_sql) + 3 * 24];
    size_t digests_at = digests_param(n, id, checked);
    size_t size = sizeof(declared_sql) + sizeof(row) + strlen(inner) + 24 * 24;
    char *out = malloc(size);

    if (out == NULL)
        return NULL;
    if (digests_at > 0) {
        snprintf(column, sizeof(column), ", identity_digests");
        snprintf(value, sizeof(value), ", $%zu", digests_at);
    }
    if (checked)
        snprintf(row, sizeof(row), session_row_sql, n + 14, n + 1, n + 13);
    snprintf(out, size, declared_sql, inner, column, n + 1, n + 2, n + 3, n + 4, n + 5, n + 12,
             n + 6, n + 7, n + 8, n + 9, value, n + 10, n + 11, n + 10,
             checked ? row : plain_row_sql);
    return out;
}

/* The store's statement around the caller's, cut after its last token of code (blanks,
 * comments and a trailing ';' would break what follows it), in its four forms. */
static int build_sql(idem_declared *d, const char *sql)
{
    size_t code_len = strlen(sql);
    int rc = 0;
    char *inner = idem__declared_check_sql(sql, d->nparams, &code_len, NULL) == 0
                      ? strndup(sql, code_len)
                      : NULL;

    if (inner == NULL)
        return IDEM_ENOMEM;
    for (int id = 0; id < 2; id++)
        for (int checked = 0; checked < 2; checked++)
            if ((d->sql[id][checked] = wrap_sql(inner, d->nparams, id, checked)) == NULL)
                rc = IDEM_ENOMEM;
    free(inner);
    return rc;
}

int idem_declared_new(idem_declared **out, const char *sql, const char *const *params,
                      size_t nparams, idem_error *err)
{
    idem_declared *d = NULL;
    unsigned int serial;
    int rc;

    if (out == NULL)
        return idem__error_field(err, IDEM_EINVAL, "out", "must not be NULL");
    if ((rc = check_declaration(sql, params, nparams, err)) != 0)
        return rc;
    d = calloc(1, sizeof(*d));
    if (d == NULL || (nparams > 0 && (d->params = calloc(nparams, sizeof(char *))) == NULL))
        goto nomem;
    d->binds_text = 1;
    for (d->nparams = 0; d->nparams < nparams; d->nparams++) {
        if ((d->params[d->nparams] = strdup(params[d->nparams])) == NULL)
            goto nomem;
        if (params[d->nparams][0] == '/')
            d->binds_text = 0;
    }
    if (build_sql(d, sql) != 0)
        goto nomem;
    serial = atomic_fetch_add(&declared_serial, 1);
    for (int id = 0; id < 2; id++) {
        for (int checked = 0; checked < 2; checked++) {
            char *name = d->name[id][checked];

            snprintf(name, sizeof(d->name[id][checked]), "idem_declared_%u%s%s", serial,
                     id ? "_id" : "", checked ? "_checked" : "");
            d->stmt[id][checked] =
                (idem__stmt){name, d->sql[id][checked],
                             (int)(nparams + (checked ? OWN_PARAMS : PLAIN_PARAMS) + (id ? 1 : 0))};
        }
    }
    *out = d;
    return 0;
nomem:
    idem_declared_free(d);
    return idem__error_set(err, IDEM_ENOMEM, "declared effect: out of memory");
}

/* *out = the value parameter @name takes from @args: the member of that name, or what a
 * JSON Pointer names; NULL for none. */
static int param_value(const json_t **out, const json_t *args, const char *name, idem_error *err)
{
    if (name[0] != '/') {
        *out = json_object_get(args, name);
        return 0;
    }
    if (idem__json_pointer_get(out, args, name) != 0)
        return idem__error_set(err, IDEM_ENOMEM, "declared effect: out of memory");
    return 0;
}

int idem__declared_binds_text(const idem_declared *d)
{
    return d->binds_text;
}

/* A parameter's value from the arguments' canonical text: a string's contents (no escape
 * in it, so no NUL), true or false, NULL for null or a missing member, else the value's
 * canonical text; as the tree's path binds them. */
static int param_text(const char **value, char **owned, const call *c, const char *name)
{
    size_t at, len;

    *value = NULL;
    if (!idem__jcs_canonical_member(c->canonical.data, name, &at, &len) ||
        (len == 4 && memcmp(c->canonical.data + at, "null", 4) == 0))
        return 0;
    if (len == 4 && memcmp(c->canonical.data + at, "true", 4) == 0) {
        *value = "true";
        return 0;
    }
    if (len == 5 && memcmp(c->canonical.data + at, "false", 5) == 0) {
        *value = "false";
        return 0;
    }
    if (c->canonical.data[at] == '"')
        at++, len -= 2;
    if ((*owned = strndup(c->canonical.data + at, len)) == NULL)
        return IDEM_ENOMEM;
    *value = *owned;
    return 0;
}

/* The statement's parameter values for this call, from the arguments' tree or, where it
 * was kept instead, their canonical text; strings it made go to @owned. */
static int bind_params(call *c, const char **values, char **owned, idem_error *err)
{
    const idem_declared *d = c->declared;
    int rc;

    if (c->canonical.len == 0 && !json_is_object(c->arguments))
        return idem__error_field(err, IDEM_EINVAL, "arguments",
                                 "a declared effect takes a JSON object");
    for (size_t i = 0; i < d->nparams; i++) {
        const json_t *v = NULL;
        size_t len;

        owned[i] = NULL;
        if (strcmp(d->params[i], "$tenant") == 0) {
            values[i] = c->req->tenant;
            continue;
        }
        if (strcmp(d->params[i], "$operation_id") == 0) {
            values[i] = c->req->operation_id;
            continue;
        }
        if (c->canonical.len > 0) {
            if (param_text(&values[i], &owned[i], c, d->params[i]) != 0)
                return idem__error_set(err, IDEM_ENOMEM, "declared effect: out of memory");
            continue;
        }
        if ((rc = param_value(&v, c->arguments, d->params[i], err)) != 0)
            return rc;
        if (v == NULL || json_is_null(v))
            values[i] = NULL;
        else if (json_is_string(v) && strlen(json_string_value(v)) != json_string_length(v))
            return idem__error_field(err, IDEM_EINVAL, "arguments",
                                     "%s: holds a NUL character (\\u0000), which a statement's "
                                     "text parameter cannot carry",
                                     d->params[i]);
        else if (json_is_string(v))
            values[i] = json_string_value(v);
        else if (json_is_true(v) || json_is_false(v))
            values[i] = json_is_true(v) ? "true" : "false";
        else if (idem_jcs_serialize(&owned[i], &len, v, err) != 0)
            return idem__error_field(err, IDEM_EINVAL, "arguments", "%s: cannot be bound",
                                     d->params[i]);
        else
            values[i] = owned[i];
    }
    return 0;
}

/* The pipeline's commands: BEGIN, the settings in the form tenant.h chooses for @conn (on
 * plain PostgreSQL one statement, or none when the session's statement_timeout serves and
 * the statement's checked form makes the others itself: above; on Citus IDEM__SET_PROPAGATE
 * and SET LOCAL statements: settings.h), the statement, COMMIT. Returns how many; *at is the
 * statement's index, *checked whether it went in its checked form, *keep_at the index of
 * the settings' statement where it offers to keep statement_timeout on the session
 * (settings.h, idem__tx_settings_keep_cmd()), else left as it is. */
#define DECLARED_CMDS (IDEM__SETTINGS_CMDS + 3)
static size_t declared_cmds(call *c, idem_conn *conn, idem__pipe_cmd *cmds, const char **values,
                            int *lengths, int *formats, size_t *at, int *checked, size_t *keep_at)
{
    size_t n = c->declared->nparams, k = 0, digests_at;
    const char *session;
    int plain, id = c->identity != NULL;

    /* The claim's first eleven: the key to the window (store_claim.c). */
    for (size_t i = 0; i < 11; i++) {
        values[n + i] = c->cp.values[i];
        lengths[n + i] = c->cp.lengths[i];
        formats[n + i] = c->cp.formats[i];
    }
    idem__u64_text(c->cp.max_response, c->store->opts.max_response_bytes, "");
    values[n + 11] = c->cp.max_response;
    memset(lengths, 0, n * sizeof(int));
    memset(formats, 0, n * sizeof(int));
    lengths[n + 11] = lengths[n + 12] = lengths[n + 13] = 0;
    formats[n + 11] = formats[n + 12] = formats[n + 13] = 0;
    cmds[k++] = idem__pipe_stmt(&idem__stmt_begin_serializable, NULL);
    idem__tx_settings_for(&c->settings, conn, c->req->tenant);
    plain = idem__tenant_form_for(conn) == IDEM__TENANT_IMPLICIT;
    session = plain ? idem__tx_settings_session(&c->settings, conn) : NULL;
    *checked = session != NULL;
    if (*checked) {
        values[n + 12] = c->settings.lock_timeout;
        values[n + 13] = session;
    } else if (plain && idem__tx_settings_keep_cmd(cmds + k, &c->settings, conn) == 1) {
        *keep_at = k++;
    } else {
        k += idem__tx_settings_cmds(cmds + k, &c->settings,
                                    plain ? IDEM__SETTINGS_PLAIN : IDEM__SETTINGS_CITUS);
    }
    if ((digests_at = digests_param(n, id, *checked)) > 0) {
        values[digests_at - 1] = c->digests.len > 0 ? c->digests.data : NULL;
        lengths[digests_at - 1] = (int)c->digests.len;
        formats[digests_at - 1] = 1;
    }
    *at = k;
    cmds[k++] = (idem__pipe_cmd){
        &c->declared->stmt[id][*checked], NULL, 0, values, lengths, formats, 1, NULL};
    cmds[k++] = idem__pipe_stmt(&idem__stmt_commit, NULL);
    return k;
}

/* The receipt the statement returned goes out canonical, as its replays do: its record is
 * marked so (receipt_canonical). */
static enum step declared_done(call *c, const PGresult *res, int *out_rc)
{
    if (idem__store_receipt_out(c->out, PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0), 1,
                                c->err) != 0) {
        *out_rc = IDEM_ENOMEM;
        return STEP_DONE;
    }
    c->out->status = IDEM_STATUS_CREATED;
    COUNT(c->store, created);
    *out_rc = 0;
    return STEP_DONE;
}

enum step idem__store_declared_attempt(call *c, idem_conn *conn, int *out_rc)
{
    size_t n = c->declared->nparams, failed_at, at = 0, ncmds = 0, slots = n + OWN_PARAMS + 1,
           keep_at = SIZE_MAX;
    int checked = 0;
    /* The statement's values, the copies bound_params() makes, their lengths and formats:
     * one allocation, pointers first. */
    void *block = calloc(1, (slots + n + 1) * sizeof(char *) + 2 * slots * sizeof(int));
    const char **values = block;
    char **owned = block != NULL ? (char **)(values + slots) : NULL;
    int *lengths = block != NULL ? (int *)(owned + n + 1) : NULL;
    int *formats = block != NULL ? lengths + slots : NULL;
    idem__pipe_cmd cmds[DECLARED_CMDS];
    enum step step = STEP_DONE;
    int rc;

    idem_error_clear(c->err);
    if (block == NULL) {
        *out_rc = idem__error_set(c->err, IDEM_ENOMEM, "declared effect: out of memory");
        goto done;
    }
    if ((rc = bind_params(c, values, owned, c->err)) != 0) {
        c->out->status = idem_status_from_error(rc);
        *out_rc = rc;
        goto done;
    }
    ncmds = declared_cmds(c, conn, cmds, values, lengths, formats, &at, &checked, &keep_at);
    rc = idem__conn_pipeline(conn, cmds, ncmds, &failed_at, c->err);
    if (rc == 0 && keep_at != SIZE_MAX)
        idem__tx_settings_kept(&c->settings, conn, cmds[keep_at].result);
    if (rc == 0)
        step = declared_done(c, cmds[at].result, out_rc);
    else
        step = idem__store_declared_failure(c, conn, rc, failed_at, at, checked, out_rc);
    idem__store_pipe_clear(cmds, ncmds);
done:
    for (size_t i = 0; owned != NULL && i < n; i++)
        free(owned[i]);
    free(block);
    return step;
}
