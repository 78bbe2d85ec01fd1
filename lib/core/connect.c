/* Connecting to PostgreSQL within a deadline, and telling settings that cannot work from a
 * server that cannot be reached: for the library's pool and the tools alike. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "connect.h"
#include "parse.h"

int idem__wait_socket(int fd, short events, long long deadline_ms)
{
    struct pollfd pfd = {.fd = fd, .events = events, .revents = 0};
    int n;

    if (fd < 0)
        return 1; /* nothing to wait for: let libpq say what is wrong */
    for (;;) {
        long long left = deadline_ms - (long long)idem__now_ms();
        int timeout = deadline_ms == LLONG_MAX ? -1
                      : left <= 0              ? 0
                      : left > INT_MAX         ? INT_MAX
                                               : (int)left;

        n = poll(&pfd, 1, timeout);
        if (n > 0)
            return 1;
        if (n == 0 && timeout >= 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return 1;
    }
}

/* What a server, or a pooler in front of it, answers when it refuses a connection's
 * settings for good (the message holds both words; "" matches any), and what to fix.
 * The one place idem reads a message's words, since nothing else tells these apart:
 * libpq 15 keeps a refused connection's SQLSTATE to itself (the server sends 28P01, 28000,
 * 3D000 or 42501 with its FATAL, but PQgetResult() of the failed connection carries no
 * PG_DIAG_SQLSTATE), and PQconnectionNeedsPassword() tells only a missing password. These
 * are the words in English, as libpq, PostgreSQL (its cluster's lc_messages in English: a
 * login is refused before a database's or a role's settings apply) and PgBouncer write
 * them; in another language the failure stays unavailable (IDEM_EUNAVAIL), without the
 * advice. The first entry that matches decides. */
static const struct {
    const char *says;
    const char *and_says;
    const char *advice;
} login_refusals[] = {
    {"password authentication failed", "",
     "check the role and its password in the connection string"},
    {"authentication failed", "",
     "check the role and how the server (pg_hba.conf) or pooler (its auth_file) authenticates it"},
    {"no pg_hba.conf entry", "",
     "pg_hba.conf has no entry for this host, role, database and SSL use"},
    {"not permitted to log in", "", "the role lacks LOGIN: connect as a login role"},
    {"permission denied for database", "", "grant the role CONNECT on the database"},
    {"does not exist", "database \"", "check the database (dbname) in the connection string"},
    {"does not exist", "role \"", "check the role (user) in the connection string"},
    {"does not exist", "", "check the connection string's settings"},
    {"no such database", "", "check the database (dbname) in the connection string"},
    {"no such user", "", "check the role (user) in the connection string"},
    {"does not support SSL", "", "the server takes no SSL connection: check sslmode"},
};

/* The advice for the refusal @message holds, or NULL. */
static const char *login_advice(const char *message)
{
    for (size_t i = 0; i < sizeof(login_refusals) / sizeof(login_refusals[0]); i++) {
        if (strstr(message, login_refusals[i].says) != NULL &&
            strstr(message, login_refusals[i].and_says) != NULL)
            return login_refusals[i].advice;
    }
    return NULL;
}

/* libpq's blocking connect takes a connect_timeout of 1 s as 2 s: a rounded-down second
 * could otherwise end the wait at once. */
#define LIBPQ_LEAST_CONNECT_TIMEOUT_MS 2000

int idem__pg_connect_timeout_ms(long long *ms, PGconn *conn, char *why, size_t size)
{
    PQconninfoOption *opts = PQconninfo(conn);
    int rc = 0, seconds = 0;

    for (PQconninfoOption *o = opts; o != NULL && o->keyword != NULL; o++) {
        if (strcmp(o->keyword, "connect_timeout") != 0 || o->val == NULL)
            continue;
        rc = idem__parse_libpq_int(&seconds, o->val);
        if (rc != 0 && why != NULL)
            snprintf(why, size,
                     "invalid integer value \"%s\" for connection option "
                     "\"connect_timeout\"",
                     o->val);
    }
    PQconninfoFree(opts);
    *ms = rc != 0 || seconds <= 0 ? 0
          : seconds < 2           ? LIBPQ_LEAST_CONNECT_TIMEOUT_MS
                                  : (long long)seconds * 1000;
    return rc;
}

const char *idem__pg_login_refusal(const PGconn *pg)
{
    if (PQconnectionNeedsPassword(pg))
        return "the server asks for a password: give it (password in the connection string, "
               "PGPASSWORD or the password file)";
    return login_advice(PQerrorMessage(pg));
}

/* The options libpq reads as integers (parse_int_param()) only when it connects, failing
 * that first try; port is a list, one per host. */
static const char *const libpq_int_options[] = {
    "port",
    "connect_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
};

/* Whether @value (of option @keyword) is one libpq refuses to read as an integer. */
static int int_option_refused(const char *keyword, const char *value)
{
    char one[64];
    int n;

    if (value == NULL || value[0] == '\0')
        return 0;
    if (strcmp(keyword, "port") != 0)
        return idem__parse_libpq_int(&n, value) != 0;
    for (const char *p = value;; p++) {
        size_t len = strcspn(p, ",");

        if (len >= sizeof(one))
            return 1;
        memcpy(one, p, len);
        one[len] = '\0';
        if (len > 0 && idem__parse_libpq_int(&n, one) != 0)
            return 1;
        p += len;
        if (*p == '\0')
            return 0;
    }
}

/* libpq refused the settings of a failed connection: without trying (sslmode=bogus, a
 * conninfo that does not parse), which PQpingParams() tells without connecting
 * (PQPING_NO_ATTEMPT), or on its first try, for an integer option it cannot read (port=x),
 * which the options themselves tell (libpq's message says so only in words, translated by
 * the client's locale). */
static int settings_refused(PGconn *failed, const char *const *keys, const char *const *values)
{
    PQconninfoOption *opts = PQconninfo(failed);
    int refused = 0;

    for (PQconninfoOption *o = opts; o != NULL && o->keyword != NULL && !refused; o++) {
        for (size_t i = 0; i < sizeof(libpq_int_options) / sizeof(libpq_int_options[0]); i++) {
            if (strcmp(o->keyword, libpq_int_options[i]) == 0)
                refused = int_option_refused(o->keyword, o->val);
        }
    }
    PQconninfoFree(opts);
    return refused || PQpingParams(keys, values, 1) == PQPING_NO_ATTEMPT;
}

idem__connect_outcome idem__pg_connect_failure(PGconn *failed, const char *const *keys,
                                               const char *const *values, int before_waiting)
{
    if (before_waiting && settings_refused(failed, keys, values))
        return IDEM__CONNECT_SETTINGS;
    return idem__pg_login_refusal(failed) != NULL ? IDEM__CONNECT_REFUSED : IDEM__CONNECT_FAILED;
}

idem__connect_outcome idem__pg_connect_poll(PGconn *pg, long long deadline_ms)
{
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;

    /* The loop libpq documents for PQconnectPoll(), with a deadline around it. */
    while (st != PGRES_POLLING_OK) {
        if (st == PGRES_POLLING_FAILED || PQstatus(pg) == CONNECTION_BAD)
            return IDEM__CONNECT_FAILED;
        if (!idem__wait_socket(PQsocket(pg), st == PGRES_POLLING_READING ? POLLIN : POLLOUT,
                               deadline_ms))
            return IDEM__CONNECT_TIMEOUT;
        st = PQconnectPoll(pg);
    }
    return IDEM__CONNECT_OK;
}

/* The @i-th of the comma-separated @list into @out (@size bytes), "" past its end; a list
 * of one element gives it for every @i, as libpq applies a single port to every host. */
static void list_item(char *out, size_t size, const char *list, int i)
{
    const char *at = list != NULL ? list : "";
    size_t n;

    if (strchr(at, ',') != NULL)
        for (; i > 0 && at != NULL; i--)
            at = strchr(at, ',') != NULL ? strchr(at, ',') + 1 : NULL;
    n = at != NULL ? strcspn(at, ",") : 0;
    snprintf(out, size, "%.*s", (int)(n < size ? n : size - 1), at != NULL ? at : "");
}

/* How many elements the comma-separated @list has (0 for NULL or ""). */
static int list_count(const char *list)
{
    int n = list != NULL && list[0] != '\0';

    for (const char *c = list; n > 0 && *c != '\0'; c++)
        n += *c == ',';
    return n;
}

/* @list without its first @drop elements (a list of one element stays whole). */
static const char *list_rest(const char *list, int drop)
{
    if (list == NULL || strchr(list, ',') == NULL)
        return list;
    for (; drop > 0 && list != NULL; drop--)
        list = strchr(list, ',') != NULL ? strchr(list, ',') + 1 : NULL;
    return list != NULL ? list : "";
}

/* A connection's host list, as PQconninfo() gives it (borrowed from @opts). */
typedef struct host_list {
    const char *host, *hostaddr, *port;
    int count;
} host_list;

static host_list hosts_of(const PQconninfoOption *opts)
{
    host_list h = {NULL, NULL, NULL, 0};

    for (const PQconninfoOption *o = opts; o != NULL && o->keyword != NULL; o++) {
        h.host = strcmp(o->keyword, "host") == 0 ? o->val : h.host;
        h.hostaddr = strcmp(o->keyword, "hostaddr") == 0 ? o->val : h.hostaddr;
        h.port = strcmp(o->keyword, "port") == 0 ? o->val : h.port;
    }
    h.count =
        list_count(h.host) > list_count(h.hostaddr) ? list_count(h.host) : list_count(h.hostaddr);
    return h;
}

/* Where in @h the host @pg is trying now is, or -1. */
static int current_host(PGconn *pg, const host_list *h)
{
    const char *now_host = PQhost(pg), *now_port = PQport(pg);
    char name[256], addr[256], port[32];

    for (int i = 0; i < h->count && now_host != NULL; i++) {
        list_item(name, sizeof(name), h->host, i);
        list_item(addr, sizeof(addr), h->hostaddr, i);
        list_item(port, sizeof(port), h->port, i);
        if (strcmp(name[0] != '\0' ? name : addr, now_host) == 0 &&
            (now_port == NULL || port[0] == '\0' || strcmp(port, now_port) == 0))
            return i;
    }
    return -1;
}

/* A new attempt with @pg's settings but the hosts after the one it is trying now; NULL when
 * it tries the last one, or its place in the list cannot be told. */
static PGconn *next_hosts(PGconn *pg)
{
    PQconninfoOption *opts = PQconninfo(pg);
    host_list h = hosts_of(opts);
    const char *keys[64], *values[64];
    int at = current_host(pg, &h), n = 0;
    PGconn *next = NULL;

    for (PQconninfoOption *o = opts;
         at >= 0 && at + 1 < h.count && o != NULL && o->keyword != NULL && n < 63; o++) {
        if (o->val == NULL)
            continue;
        keys[n] = o->keyword;
        values[n++] = o->val == h.host || o->val == h.hostaddr || o->val == h.port
                          ? list_rest(o->val, at + 1)
                          : o->val;
    }
    keys[n] = values[n] = NULL;
    if (at >= 0 && at + 1 < h.count)
        next = PQconnectStartParams(keys, values, 0);
    PQconninfoFree(opts);
    return next;
}

int idem__pg_hosts_left(PGconn *pg)
{
    PQconninfoOption *opts = PQconninfo(pg);
    host_list h = hosts_of(opts);
    int at = h.count > 1 ? current_host(pg, &h) : 0;

    PQconninfoFree(opts);
    return at >= 0 && h.count > at ? h.count - at : 1;
}

idem__connect_outcome idem__pg_connect_hosts(PGconn **pg, long long deadline_ms,
                                             long long per_host_ms, PQnoticeProcessor notices,
                                             void *notices_arg)
{
    for (;;) {
        long long now = (long long)idem__now_ms(), until = deadline_ms;
        int left = idem__pg_hosts_left(*pg);
        idem__connect_outcome got;
        PGconn *next;

        if (left > 1 && deadline_ms != LLONG_MAX && deadline_ms > now)
            until = now + (deadline_ms - now) / left;
        if (left > 1 && per_host_ms > 0 && (until == LLONG_MAX || now + per_host_ms < until))
            until = now + per_host_ms;
        got = idem__pg_connect_poll(*pg, until);
        if (got != IDEM__CONNECT_TIMEOUT || until >= deadline_ms ||
            (next = next_hosts(*pg)) == NULL)
            return got;
        PQfinish(*pg);
        *pg = next;
        if (notices != NULL)
            PQsetNoticeProcessor(next, notices, notices_arg);
        if (PQstatus(next) == CONNECTION_BAD)
            return IDEM__CONNECT_FAILED;
    }
}

idem__connect_outcome idem__pg_connect_wait(PGconn **pg, const char *const *keys,
                                            const char *const *values, long long deadline_ms,
                                            long long per_host_ms, PQnoticeProcessor notices,
                                            void *notices_arg)
{
    idem__connect_outcome got;

    /* Failed at once, before anything was waited for: libpq may have refused the settings.
     * Otherwise every host failed at once too (no socket there, a name that does not
     * resolve): the ping's attempt fails as fast, and the failure is the connection's. */
    if (PQstatus(*pg) == CONNECTION_BAD)
        return idem__pg_connect_failure(*pg, keys, values, 1);
    got = idem__pg_connect_hosts(pg, deadline_ms, per_host_ms, notices, notices_arg);
    return got == IDEM__CONNECT_FAILED ? idem__pg_connect_failure(*pg, keys, values, 0) : got;
}
