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
 * libpq keeps a refused connection's SQLSTATE to itself: these are the words in English,
 * as libpq, PostgreSQL (with lc_messages in English) and PgBouncer write them. The first
 * entry that matches decides. */
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

const char *idem__login_advice(const char *message)
{
    for (size_t i = 0; i < sizeof(login_refusals) / sizeof(login_refusals[0]); i++) {
        if (strstr(message, login_refusals[i].says) != NULL &&
            strstr(message, login_refusals[i].and_says) != NULL)
            return login_refusals[i].advice;
    }
    return NULL;
}

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
    /* As libpq's blocking connect: a rounded-down second could end the wait at once. */
    *ms = rc != 0 || seconds <= 0 ? 0 : seconds < 2 ? 2000 : (long long)seconds * 1000;
    return rc;
}
