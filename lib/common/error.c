/* Errors at every step of the contract (error.h): an idem_error filled with code, field
 * and the server's own words behind our context; SQLSTATEs sorted into what the caller
 * can do about them (retry with the same key, fix the configuration, give up). */
#include <assert.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/connect.h"
#include "core/text.h"
#include "error.h"

#define IDEM__ERRNO_TEXT(name, value, text)                                                        \
    case IDEM_##name:                                                                              \
        return text;
#define IDEM__ERRNO_NAME(name, value, text)                                                        \
    case IDEM_##name:                                                                              \
        return #name;

const char *idem_strerror(int code)
{
    switch (code) {
    case IDEM_OK:
        return "success";
        IDEM_ERRNO_MAP(IDEM__ERRNO_TEXT)
    default:
        return "unknown error";
    }
}

const char *idem_err_name(int code)
{
    switch (code) {
    case IDEM_OK:
        return "OK";
        IDEM_ERRNO_MAP(IDEM__ERRNO_NAME)
    default:
        return "UNKNOWN";
    }
}

/* The bytes of @err's layout: its version's, or version 1's when it carries none this
 * library knows (common.h). Only version 1 exists; a later one adds a case here. */
static size_t error_layout_size(const idem_error *err)
{
    switch (err->version) {
    default:
        return sizeof(idem_error);
    }
}

int idem_error_init(idem_error *err, unsigned int version)
{
    static const idem_error empty = IDEM_ERROR_INIT;

    return idem__struct_init(err, &empty, sizeof(empty), version, IDEM_ERROR_VERSION);
}

void idem_error_clear(idem_error *err)
{
    const size_t start = offsetof(idem_error, code);

    if (err == NULL)
        return;
    memset((char *)err + start, 0, error_layout_size(err) - start);
}

void idem__error_copy(idem_error *dst, const idem_error *src)
{
    const size_t start = offsetof(idem_error, code);
    size_t size;

    if (dst == NULL || src == NULL || dst == src)
        return;
    size = error_layout_size(dst);
    if (error_layout_size(src) < size)
        size = error_layout_size(src);
    idem_error_clear(dst);
    memcpy((char *)dst + start, (const char *)src + start, size - start);
}

void idem_free(void *ptr)
{
    free(ptr);
}

static void error_vformat(idem_error *err, const char *fmt, va_list ap)
{
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
}

/* dst = "a: b", cut to fit; messages are allowed to be truncated. */
static void join_message(char *dst, size_t size, const char *a, const char *b)
{
    size_t used = 0;
    const char *parts[3] = {a, ": ", b};

    for (size_t i = 0; i < 3 && used + 1 < size; i++) {
        size_t n = strlen(parts[i]);
        if (n > size - 1 - used)
            n = size - 1 - used;
        memcpy(dst + used, parts[i], n);
        used += n;
    }
    dst[used] = '\0';
}

int idem__error_set(idem_error *err, int code, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL)
        return code;
    idem_error_clear(err);
    err->code = code;
    va_start(ap, fmt);
    error_vformat(err, fmt, ap);
    va_end(ap);
    return code;
}

int idem_error_set(idem_error *err, int code, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL)
        return code;
    idem_error_clear(err);
    err->code = code;
    if (fmt == NULL)
        return code;
    va_start(ap, fmt);
    error_vformat(err, fmt, ap);
    va_end(ap);
    return code;
}

int idem__error_field(idem_error *err, int code, const char *field, const char *fmt, ...)
{
    char reason[IDEM_ERROR_MESSAGE_MAX];
    va_list ap;

    assert(code < 0);
    if (code >= 0) /* a release build never reports an error as success */
        code = IDEM_EINVAL;
    if (err == NULL)
        return code;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    idem_error_clear(err);
    err->code = code;
    snprintf(err->field, sizeof(err->field), "%s", field);
    join_message(err->message, sizeof(err->message), field, reason);
    return code;
}

int idem__check_version(idem_error *err, unsigned int version, unsigned int current,
                        const char *field)
{
    char name[IDEM_ERROR_FIELD_MAX];

    if (version >= 1 && version <= current)
        return 0;
    snprintf(name, sizeof(name), "%s.version", field);
    return idem__error_field(err, IDEM_EINVAL, name,
                             "is %u; this library accepts 1 to %u (use the *_INIT macro or "
                             "the *_init() function)",
                             version, current);
}

int idem__struct_init(void *dst, const void *defaults, size_t size, unsigned int version,
                      unsigned int current)
{
    if (dst == NULL || idem__check_version(NULL, version, current, "") != 0)
        return IDEM_EINVAL;
    memcpy(dst, defaults, size);
    memcpy(dst, &version, sizeof(version));
    return 0;
}

int idem__error_context(idem_error *err, const char *fmt, ...)
{
    char context[IDEM_ERROR_MESSAGE_MAX];
    char lower[IDEM_ERROR_MESSAGE_MAX];
    va_list ap;

    if (err == NULL)
        return 0;
    va_start(ap, fmt);
    vsnprintf(context, sizeof(context), fmt, ap);
    va_end(ap);
    memcpy(lower, err->message, sizeof(lower));
    if (lower[0] != '\0')
        join_message(err->message, sizeof(err->message), context, lower);
    else
        snprintf(err->message, sizeof(err->message), "%s", context);
    return err->code;
}

/* The server's primary message, or libpq's connection message, without the trailing
 * newline libpq adds. */
static void pg_message(char *buf, size_t size, const PGconn *conn, const PGresult *res)
{
    const char *msg = NULL;

    if (res != NULL)
        msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    if ((msg == NULL || msg[0] == '\0') && res != NULL)
        msg = PQresultErrorMessage(res);
    if ((msg == NULL || msg[0] == '\0') && conn != NULL)
        msg = PQerrorMessage(conn);
    if (msg == NULL || msg[0] == '\0')
        msg = "no detail from the server";
    snprintf(buf, size, "%s", msg);
    idem__chomp(buf);
}

static void copy_field(char *dst, size_t size, const PGresult *res, int field)
{
    const char *v = res != NULL ? PQresultErrorField(res, field) : NULL;

    snprintf(dst, size, "%s", v != NULL ? v : "");
}

/* @buf (of @size bytes) was cut to fit: end it with "..." instead of the last characters
 * (whole ones: no UTF-8 sequence is left broken), so that it does not read as whole. */
static void mark_cut(char *buf, size_t size)
{
    size_t at = size - 4;

    while (at > 0 && ((unsigned char)buf[at] & 0xC0) == 0x80)
        at--;
    memcpy(buf + at, "...", 4);
}

/* The server functions that raise row-level security's refusals (42501, which a missing
 * privilege raises too): a row a policy refuses, and a query a policy would affect while
 * row_security is off. PostgreSQL names them in every error (PG_DIAG_SOURCE_FUNCTION), in
 * every language; the policy's table it names only in the message's words. */
static const struct {
    const char *function;
    const char *constraint;
} row_security_sources[] = {
    {"ExecWithCheckOptions", IDEM__ROW_SECURITY_POLICY},
    {"check_enable_rls", IDEM__ROW_SECURITY_OFF},
};

/* A refusal of row-level security gets its name in err->constraint, where the server sets
 * none, so that callers that see only @err tell it from a missing privilege. */
static void mark_row_security(idem_error *err, const PGresult *res)
{
    const char *where = PQresultErrorField(res, PG_DIAG_SOURCE_FUNCTION);

    if (where == NULL || strcmp(err->sqlstate, "42501") != 0 || err->constraint[0] != '\0')
        return;
    for (size_t i = 0; i < sizeof(row_security_sources) / sizeof(row_security_sources[0]); i++) {
        if (strcmp(where, row_security_sources[i].function) == 0)
            snprintf(err->constraint, sizeof(err->constraint), "%s",
                     row_security_sources[i].constraint);
    }
}

int idem__error_row_security(const idem_error *err)
{
    return err != NULL && strcmp(err->sqlstate, "42501") == 0 &&
           (strcmp(err->constraint, IDEM__ROW_SECURITY_POLICY) == 0 ||
            strcmp(err->constraint, IDEM__ROW_SECURITY_OFF) == 0);
}

int idem__error_pg(idem_error *err, const PGconn *conn, const PGresult *res, const char *fmt, ...)
{
    char context[IDEM_ERROR_MESSAGE_MAX / 2];
    char lower[IDEM_ERROR_MESSAGE_MAX];
    const char *state = res != NULL ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    int code = IDEM_EDB;
    va_list ap;

    if (idem__sqlstate_is_disconnect(state) || (conn != NULL && PQstatus(conn) != CONNECTION_OK))
        code = IDEM_EUNAVAIL;
    if (err == NULL)
        return code;
    va_start(ap, fmt);
    if (vsnprintf(context, sizeof(context), fmt, ap) >= (int)sizeof(context))
        mark_cut(context, sizeof(context));
    va_end(ap);
    pg_message(lower, sizeof(lower), conn, res);
    idem_error_clear(err);
    err->code = code;
    if (state != NULL)
        snprintf(err->sqlstate, sizeof(err->sqlstate), "%s", state);
    join_message(err->message, sizeof(err->message), context, lower);
    copy_field(err->detail, sizeof(err->detail), res, PG_DIAG_MESSAGE_DETAIL);
    copy_field(err->hint, sizeof(err->hint), res, PG_DIAG_MESSAGE_HINT);
    copy_field(err->constraint, sizeof(err->constraint), res, PG_DIAG_CONSTRAINT_NAME);
    mark_row_security(err, res);
    return code;
}

int idem__error_login_refused(idem_error *err, const PGconn *pg, int rc)
{
    const char *advice;

    if (rc != IDEM_EUNAVAIL || pg == NULL)
        return rc;
    advice = idem__pg_login_refusal(pg);
    if (advice == NULL)
        return rc;
    if (err == NULL)
        return IDEM_EPERM;
    err->code = IDEM_EPERM;
    if (err->hint[0] == '\0')
        snprintf(err->hint, sizeof(err->hint), "%s", advice);
    return idem__error_context(err, "misconfigured (%s)", advice);
}

int idem__error_misconfigured(idem_error *err, int rc)
{
    idem__sqlstate_class kind;
    const char *advice;

    if (err == NULL || rc != IDEM_EDB)
        return rc;
    kind = idem__sqlstate_classify(err->sqlstate);
    if (kind != IDEM__SQLSTATE_SCHEMA && kind != IDEM__SQLSTATE_ACCESS)
        return rc;
    advice = idem__sqlstate_advice(err->sqlstate);
    err->code = kind == IDEM__SQLSTATE_SCHEMA ? IDEM_ESCHEMA : IDEM_EPERM;
    if (err->hint[0] == '\0')
        snprintf(err->hint, sizeof(err->hint), "%s", advice);
    return idem__error_context(err, "misconfigured (%s)", advice);
}

int idem__error_privilege(idem_error *err, const char *role)
{
    char who[IDEM_ERROR_FIELD_MAX * 2];
    char advice[IDEM_ERROR_DETAIL_MAX];

    if (err == NULL || err->code != IDEM_EDB || strcmp(err->sqlstate, "42501") != 0 ||
        idem__error_row_security(err))
        return err != NULL ? err->code : 0;
    idem__quote_ident(who, sizeof(who), role != NULL && role[0] != '\0' ? role : "<role>");
    snprintf(advice, sizeof(advice),
             "GRANT the privilege the statement needs, on the object the server names, TO %s", who);
    err->code = IDEM_EPERM;
    if (err->hint[0] == '\0')
        snprintf(err->hint, sizeof(err->hint), "%s", advice);
    return idem__error_context(err, "misconfigured (%s)", advice);
}
