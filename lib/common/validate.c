/* Checks of the fields that identify a request (see include/idem/validate.h). */
#include <stddef.h>

#include "error.h"
#include "idem/sys/sweep.h"
#include "idem/validate.h"

/* One string field: its name, longest length, and accepted bytes. */
struct rule {
    const char *field;
    size_t max;
    int (*allowed)(unsigned char c);
    const char *charset; /* for the message */
};

static int is_alnum(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static int tenant_byte(unsigned char c)
{
    return is_alnum(c) || c == '.' || c == '_' || c == ':' || c == '@' || c == '-';
}

static int printable_byte(unsigned char c)
{
    return c >= 0x21 && c <= 0x7e;
}

static int tool_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

static const struct rule tenant_rule = {"tenant", IDEM_TENANT_MAX, tenant_byte,
                                        "A-Z a-z 0-9 . _ : @ -"};
static const struct rule operation_id_rule = {"operation_id", IDEM_OPERATION_ID_MAX, printable_byte,
                                              "printable ASCII 0x21-0x7e"};
static const struct rule tool_rule = {"tool", IDEM_TOOL_MAX, tool_byte, "a-z 0-9 _ . -"};
static const struct rule trace_id_rule = {"trace_id", IDEM_TRACE_ID_MAX, printable_byte,
                                          "printable ASCII 0x21-0x7e"};

static int bad_byte(const struct rule *r, unsigned char c, size_t at, idem_error *err)
{
    if (c >= 0x20 && c <= 0x7e)
        return idem__error_field(err, IDEM_EINVAL, r->field,
                                 "character '%c' at offset %zu is not allowed (allowed: %s)", c, at,
                                 r->charset);
    return idem__error_field(err, IDEM_EINVAL, r->field,
                             "byte 0x%02x at offset %zu is not allowed (allowed: %s)", (unsigned)c,
                             at, r->charset);
}

/* Reads at most r->max + 1 bytes of s. */
static int check_string(const struct rule *r, const char *s, idem_error *err)
{
    size_t i;

    if (s == NULL)
        return idem__error_field(err, IDEM_EINVAL, r->field, "is missing (NULL)");
    for (i = 0; s[i] != '\0'; i++) {
        if (i == r->max)
            return idem__error_field(err, IDEM_EINVAL, r->field, "is longer than %zu bytes",
                                     r->max);
        if (!r->allowed((unsigned char)s[i]))
            return bad_byte(r, (unsigned char)s[i], i, err);
    }
    if (i == 0)
        return idem__error_field(err, IDEM_EINVAL, r->field, "must not be empty");
    return 0;
}

int idem_validate_tenant(const char *tenant, idem_error *err)
{
    return check_string(&tenant_rule, tenant, err);
}

int idem_validate_operation_id(const char *operation_id, idem_error *err)
{
    return check_string(&operation_id_rule, operation_id, err);
}

int idem_validate_tool(const char *tool, idem_error *err)
{
    return check_string(&tool_rule, tool, err);
}

int idem_validate_payload_version(int payload_version, idem_error *err)
{
    if (payload_version < 1)
        return idem__error_field(err, IDEM_EINVAL, "payload_version", "must be at least 1, got %d",
                                 payload_version);
    return 0;
}

int idem_validate_trace_id(const char *trace_id, idem_error *err)
{
    if (trace_id == NULL)
        return 0;
    return check_string(&trace_id_rule, trace_id, err);
}

int idem__check_window(const char *field, unsigned int s, idem_error *err)
{
    if (s < IDEM_WINDOW_MIN_S)
        return idem__error_field(err, IDEM_EINVAL, field, "%u s is below the shortest window, %u s",
                                 s, IDEM_WINDOW_MIN_S);
    if (s > IDEM_WINDOW_MAX_S)
        return idem__error_field(err, IDEM_EINVAL, field,
                                 "%u s is beyond the longest window, %u days", s,
                                 IDEM_WINDOW_MAX_S / 86400);
    return 0;
}
