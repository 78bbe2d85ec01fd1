/* What a transaction sets (settings.h): the values, fixed once from the call's deadline, and
 * the commands that set them in each form. */
#include <assert.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "deadline.h"
#include "exec.h"
#include "settings.h"

static int name_ok(const char *name)
{
    if (name == NULL || name[0] == '\0')
        return 0;
    for (const char *p = name; *p != '\0'; p++) {
        if (!(*p >= 'a' && *p <= 'z') && !(*p >= '0' && *p <= '9') && *p != '_' && *p != '.')
            return 0;
    }
    return 1;
}

int idem__set_local(char *buf, size_t size, const char *name, const char *value)
{
    int len;
    size_t at;

    if (buf == NULL || size == 0)
        return -1;
    buf[0] = '\0';
    if (!name_ok(name) || value == NULL)
        return -1;
    len = snprintf(buf, size, "SET LOCAL %s = '", name);
    if (len < 0 || (size_t)len >= size)
        goto overflow;
    at = (size_t)len;
    for (const char *p = value; *p != '\0'; p++) {
        if (at + (*p == '\'' ? 2 : 1) + 2 > size)
            goto overflow;
        if (*p == '\'')
            buf[at++] = '\'';
        buf[at++] = *p;
    }
    buf[at++] = '\'';
    buf[at] = '\0';
    return 0;
overflow:
    buf[0] = '\0';
    return -1;
}

/* The timeouts for what is left of a call until @deadline_ms (settings.h). */
static void timeouts(uint64_t deadline_ms, uint64_t *lock_ms, uint64_t *statement_ms)
{
    uint64_t left = (uint64_t)(idem__deadline_wait_until(deadline_ms) - (long long)idem__now_ms());
    uint64_t margin = left / 4 < IDEM__LOCK_MARGIN_MS       ? IDEM__LOCK_MARGIN_MS
                      : left / 4 > IDEM__LOCK_MARGIN_MAX_MS ? IDEM__LOCK_MARGIN_MAX_MS
                                                            : left / 4;

    *lock_ms = left > 2 * margin ? left - margin : left;
    *statement_ms = left - (left - *lock_ms) / 2;
}

/* @ms as a set_config() value: "<ms>ms", 0 raised to 1 (0 would mean "no timeout"). Two
 * per transaction: written by hand, not by snprintf(). */
static void ms_value(char out[24], uint64_t ms)
{
    char digits[21];
    size_t at = sizeof(digits), n;

    if (ms == 0)
        ms = 1;
    do
        digits[--at] = (char)('0' + ms % 10);
    while ((ms /= 10) > 0);
    n = sizeof(digits) - at;
    memcpy(out, digits + at, n);
    memcpy(out + n, "ms", 3);
}

void idem__tx_settings_init(idem__tx_settings *s, const char *tenant, uint64_t deadline_ms,
                            unsigned int statement_cap_ms)
{
    uint64_t lock = 0, statement = 0;

    memset(s, 0, sizeof(*s));
    s->tenant = tenant;
    s->timed = deadline_ms != 0;
    if (s->timed)
        timeouts(deadline_ms, &lock, &statement);
    s->lock_ms = lock;
    ms_value(s->lock_timeout, lock);
    s->cap_ms =
        s->timed && statement_cap_ms > 0 && statement_cap_ms < statement ? statement_cap_ms : 0;
    s->statement_ms = s->cap_ms > 0 ? s->cap_ms : statement;
    ms_value(s->statement_timeout, s->statement_ms);
}

/* @ms (> 0) as the server shows a setting in ms: in the largest unit that divides it. */
static void shown_ms(char out[24], uint64_t ms)
{
    static const struct {
        uint64_t ms;
        const char *unit;
    } units[] = {{86400000, "d"}, {3600000, "h"}, {60000, "min"}, {1000, "s"}, {1, "ms"}};
    size_t i = 0, n;

    while (ms % units[i].ms != 0) /* the last row divides every value */
        i++;
    ms_value(out, ms / units[i].ms);
    n = strlen(out) - 2; /* "ms" off */
    memcpy(out + n, units[i].unit, strlen(units[i].unit) + 1);
}

const char *idem__tx_settings_session(idem__tx_settings *s, idem_conn *conn)
{
    unsigned int held = idem__conn_session_statement_timeout_ms(conn);

    if (s->cap_ms == 0 || held != s->cap_ms) {
        /* Else a value kept there (idem__tx_settings_keep_cmd()): no longer than the
         * transaction's own, and longer than its lock_timeout. */
        held = idem__conn_kept_timeout_ms(conn);
        if (!s->timed || s->cap_ms != 0 || held <= s->lock_ms || held > s->statement_ms)
            return NULL;
    }
    shown_ms(s->session_shown, held);
    return s->session_shown;
}

void idem__tx_settings_for(idem__tx_settings *s, idem_conn *conn, const char *tenant)
{
    idem__tx_settings_init(s, tenant, idem__conn_deadline(conn),
                           idem__conn_statement_timeout_ms(conn));
}

void idem__tx_settings_claim_wait(idem__tx_settings *s, uint64_t wait_ms)
{
    ms_value(s->claim_wait, s->timed && s->lock_ms < wait_ms ? s->lock_ms : wait_ms);
}

/* The plain form's statements: with and without a tenant, with and without timeouts. One
 * column whatever they set (num_nulls() evaluates every argument): the server looks up each
 * result column's output function on every run, about 1,700 instructions a column. */
static const idem__stmt set_all = {"idem_settings_set",
                                   "SELECT num_nulls(set_config('idem.tenant', $1, true),"
                                   " set_config('lock_timeout', $2, true),"
                                   " set_config('statement_timeout', $3, true))",
                                   3};
static const idem__stmt set_timeouts = {"idem_settings_set_timeouts",
                                        "SELECT num_nulls(set_config('lock_timeout', $1, true),"
                                        " set_config('statement_timeout', $2, true))",
                                        2};
static const idem__stmt set_tenant = {"idem_settings_set_tenant",
                                      "SELECT set_config('idem.tenant', $1, true)", 1};

/* The plain form's statement that keeps statement_timeout on the session where it may
 * (idem__tx_settings_keep_cmd()): whether it may is read once, in a subquery that is not
 * pulled up (OFFSET 0), before the settings are made. */
static const idem__stmt set_keep = {
    "idem_settings_keep",
    "SELECT k.keep, num_nulls(set_config('idem.tenant', $1, true),"
    " set_config('lock_timeout', $2, true),"
    " set_config('statement_timeout', CASE WHEN k.keep THEN $3 ELSE $4 END, NOT k.keep))"
    " FROM (SELECT pg_backend_pid() = $5::int4"
    " AND current_setting('statement_timeout') IN ('0', $6) AS keep OFFSET 0) AS k",
    6};

static idem__pipe_cmd text_cmd(const char *sql)
{
    return (idem__pipe_cmd){NULL, sql, 0, NULL, NULL, NULL, 0, NULL};
}

/* The lock_timeout in force until the claim, if there is one. */
static const char *first_lock_timeout(const idem__tx_settings *s)
{
    return s->claim_wait[0] != '\0' ? s->claim_wait : s->lock_timeout;
}

static size_t plain_cmds(idem__pipe_cmd *out, idem__tx_settings *s)
{
    s->values[0] = s->tenant != NULL ? s->tenant : first_lock_timeout(s);
    s->values[1] = s->tenant != NULL ? first_lock_timeout(s) : s->statement_timeout;
    s->values[2] = s->statement_timeout;
    if (s->timed)
        out[0] = idem__pipe_stmt(s->tenant != NULL ? &set_all : &set_timeouts, s->values);
    else if (s->tenant != NULL)
        out[0] = idem__pipe_stmt(&set_tenant, s->values);
    else
        return 0;
    return 1;
}

/* SET LOCAL of the tenant into s->set[0]; a tenant that does not fit (never a valid one)
 * sets the tenant '', which no row has. */
static idem__pipe_cmd set_local_tenant(idem__tx_settings *s)
{
    if (idem__set_local(s->set[0], sizeof(s->set[0]), "idem.tenant", s->tenant) != 0) {
        int rc = idem__set_local(s->set[0], sizeof(s->set[0]), "idem.tenant", "");

        assert(rc == 0);
        (void)rc;
    }
    return text_cmd(s->set[0]);
}

/* SET LOCAL of @name to @value into s->set[@slot]. */
static idem__pipe_cmd set_local(idem__tx_settings *s, int slot, const char *name, const char *value)
{
    int rc = idem__set_local(s->set[slot], sizeof(s->set[slot]), name, value);

    assert(rc == 0);
    (void)rc;
    return text_cmd(s->set[slot]);
}

size_t idem__tx_settings_cmds(idem__pipe_cmd *out, idem__tx_settings *s,
                              enum idem__settings_form form)
{
    size_t n = 0;

    if (form == IDEM__SETTINGS_PLAIN)
        return plain_cmds(out, s);
    if (s->tenant == NULL && (form == IDEM__SETTINGS_TENANT || !s->timed))
        return 0;
    out[n++] = text_cmd(IDEM__SET_PROPAGATE);
    if (s->tenant != NULL)
        out[n++] = set_local_tenant(s);
    if (form == IDEM__SETTINGS_CITUS && s->timed) {
        out[n++] = set_local(s, 1, "lock_timeout", first_lock_timeout(s));
        out[n++] = set_local(s, 2, "statement_timeout", s->statement_timeout);
    }
    return n;
}

size_t idem__tx_settings_keep_cmd(idem__pipe_cmd *out, idem__tx_settings *s, idem_conn *conn)
{
    unsigned int kept = idem__conn_kept_timeout_ms(conn);

    if (!s->timed || s->tenant == NULL || s->cap_ms != 0 || s->statement_ms < s->lock_ms + 2 ||
        s->statement_ms > UINT_MAX || !idem__conn_may_keep_timeout(conn))
        return 0;
    s->keep_ms = (unsigned int)(s->statement_ms - (s->statement_ms - s->lock_ms) / 2);
    ms_value(s->keep, s->keep_ms);
    snprintf(s->pid, sizeof(s->pid), "%d", PQbackendPID(idem_conn_pg(conn)));
    if (kept != 0)
        shown_ms(s->kept_shown, kept);
    else
        memcpy(s->kept_shown, "0", 2);
    s->values[0] = s->tenant;
    s->values[1] = first_lock_timeout(s);
    s->values[2] = s->keep;
    s->values[3] = s->statement_timeout;
    s->values[4] = s->pid;
    s->values[5] = s->kept_shown;
    *out = idem__pipe_stmt(&set_keep, s->values);
    return 1;
}

void idem__tx_settings_kept(const idem__tx_settings *s, idem_conn *conn, const PGresult *res)
{
    int kept = res != NULL && PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;

    idem__conn_timeout_kept(conn, kept ? s->keep_ms : 0);
}

void idem__tx_settings_after_claim(idem__pipe_cmd *out, idem__tx_settings *s)
{
    *out = set_local(s, 3, "lock_timeout", s->lock_timeout);
}
