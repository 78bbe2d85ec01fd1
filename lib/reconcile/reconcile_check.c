/* The checks of the reconciliation calls' arguments (reconcile_check.h). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "idem/validate.h"
#include "jcs.h"
#include "reconcile_check.h"
#include "reconcile_internal.h"
/* The kinds of item idem records: a filter or resolution naming another would find
 * nothing, so it is refused as a typo. */
static const char *const known_kinds[] = {IDEM_RECONCILE_KINDS};

static int kind_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

int idem__reconcile_check_kind(const char *field, const char *kind, idem_error *err)
{
    size_t i;

    for (i = 0; kind[i] != '\0'; i++) {
        if (i == IDEM_RECONCILE_KIND_MAX)
            return idem__error_field(err, IDEM_EINVAL, field, "is longer than %d bytes",
                                     IDEM_RECONCILE_KIND_MAX);
        if (!kind_byte((unsigned char)kind[i]))
            return idem__error_field(
                err, IDEM_EINVAL, field,
                "byte 0x%02x at offset %zu is not allowed (allowed: a-z 0-9 _)",
                (unsigned char)kind[i], i);
    }
    if (i == 0)
        return idem__error_field(err, IDEM_EINVAL, field, "must not be empty");
    for (i = 0; i < sizeof(known_kinds) / sizeof(known_kinds[0]); i++)
        if (strcmp(kind, known_kinds[i]) == 0)
            return 0;
    return idem__error_field(
        err, IDEM_EINVAL, field,
        "\"%s\" is not a kind of item idem records (" IDEM__RECONCILE_KINDS_TEXT ")", kind);
}

/* UTF-8 text of 1 to @max bytes without control characters (but for tab and newline when
 * @multiline). */
int idem__reconcile_check_text(const char *field, const char *s, size_t max, int multiline,
                               idem_error *err)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strnlen(s, max + 1), i = 0, at;
    uint32_t cp;

    if (n == 0)
        return idem__error_field(err, IDEM_EINVAL, field, "must not be empty");
    if (n > max)
        return idem__error_field(err, IDEM_EINVAL, field, "is longer than %zu bytes", max);
    while (i < n) {
        at = i;
        if (idem__utf8_next(u, n, &i, &cp) != 0)
            return idem__error_field(err, IDEM_EINVAL, field,
                                     "is not valid UTF-8 (byte 0x%02x at offset %zu)", u[at], at);
        if ((cp < 0x20 && !(multiline && (cp == '\n' || cp == '\t'))) || cp == 0x7f)
            return idem__error_field(err, IDEM_EINVAL, field,
                                     "control character 0x%02x at offset %zu is not allowed",
                                     (unsigned)cp, at);
    }
    return 0;
}

/* Turn a validator's "tenant" into "filter.tenant". */
static int prefixed(int rc, const char *field, idem_error *err)
{
    if (rc != 0 && err != NULL)
        snprintf(err->field, sizeof(err->field), "%s", field);
    return rc;
}

int idem__reconcile_check_filter(const idem_reconcile_filter *f, idem_error *err)
{
    if (idem__check_version(err, f->version, IDEM_RECONCILE_FILTER_VERSION, "filter") != 0)
        return IDEM_EINVAL;
    if (f->tenant != NULL && idem_validate_tenant(f->tenant, err) != 0)
        return prefixed(IDEM_EINVAL, "filter.tenant", err);
    if (f->operation_id != NULL && idem_validate_operation_id(f->operation_id, err) != 0)
        return prefixed(IDEM_EINVAL, "filter.operation_id", err);
    if (f->kind != NULL && idem__reconcile_check_kind("filter.kind", f->kind, err) != 0)
        return IDEM_EINVAL;
    if (f->state != IDEM_RECONCILE_ANY && f->state != IDEM_RECONCILE_OPEN &&
        f->state != IDEM_RECONCILE_RESOLVED)
        return idem__error_field(err, IDEM_EINVAL, "filter.state",
                                 "must be ANY, OPEN or RESOLVED, got %d", (int)f->state);
    if (f->since < 0)
        return idem__error_field(err, IDEM_EINVAL, "filter.since", "must not be negative");
    return 0;
}

int idem__reconcile_check_conn(PGconn *conn, idem_error *err)
{
    if (conn == NULL || PQstatus(conn) != CONNECTION_OK)
        return idem__error_field(err, IDEM_EINVAL, "conn", "must be an open connection");
    if (PQtransactionStatus(conn) != PQTRANS_IDLE)
        return idem__error_field(err, IDEM_EINVAL, "conn",
                                 "must be idle (not inside a transaction)");
    return 0;
}
