/* SQLSTATE classes: what a PostgreSQL error code says about a failure, for the library and
 * the tools alike. The one list of the codes idem classifies. */
#include <string.h>

#include "sqlstate.h"

#define MIGRATE "run `idem-migrate up` against this database"

/* Every SQLSTATE with a class of its own, besides class 08 (connection exceptions, all
 * IDEM__SQLSTATE_DISCONNECT) and class 53 (IDEM__SQLSTATE_RESOURCES), and for the misconfigured
 * ones what to fix. */
static const struct {
    const char *sqlstate;
    idem__sqlstate_class kind;
    const char *advice;
} states[] = {
    {"57P01", IDEM__SQLSTATE_DISCONNECT, NULL}, /* admin_shutdown */
    {"57P02", IDEM__SQLSTATE_DISCONNECT, NULL}, /* crash_shutdown */
    {"57P03", IDEM__SQLSTATE_DISCONNECT, NULL}, /* cannot_connect_now: starting up */
    {"57P05", IDEM__SQLSTATE_DISCONNECT, NULL}, /* idle_session_timeout: the session closed */
    {"40001", IDEM__SQLSTATE_RETRYABLE, NULL},  /* serialization_failure */
    {"40P01", IDEM__SQLSTATE_RETRYABLE, NULL},  /* deadlock_detected */
    {"55P03", IDEM__SQLSTATE_TIMEOUT, NULL},    /* lock_not_available: lock_timeout */
    {"57014", IDEM__SQLSTATE_TIMEOUT, NULL},    /* query_canceled: statement_timeout */
    {"42P01", IDEM__SQLSTATE_SCHEMA, MIGRATE},  /* no table */
    {"42703", IDEM__SQLSTATE_SCHEMA, MIGRATE},  /* no column */
    {"42883", IDEM__SQLSTATE_SCHEMA, MIGRATE},  /* no function */
    {"3F000", IDEM__SQLSTATE_SCHEMA, MIGRATE},  /* no schema */
    {"42501", IDEM__SQLSTATE_ACCESS,
     "grant the connecting role idem_app (the application: GRANT idem_app TO <role>), "
     "idem_sweeper or idem_operator, as its work needs (migrations/README.md, \"Security\")"},
    {"3D000", IDEM__SQLSTATE_ACCESS, "check the database name in the connection string"},
    {"28000", IDEM__SQLSTATE_ACCESS,
     "check the role and its authentication in the connection string"},
    {"28P01", IDEM__SQLSTATE_ACCESS, "check the role and its password in the connection string"},
};

/* The entry for @s, or -1. */
static int find(const char *s)
{
    for (size_t i = 0; s != NULL && i < sizeof(states) / sizeof(states[0]); i++) {
        if (strcmp(s, states[i].sqlstate) == 0)
            return (int)i;
    }
    return -1;
}

idem__sqlstate_class idem__sqlstate_classify(const char *s)
{
    int i;

    if (s == NULL || s[0] == '\0')
        return IDEM__SQLSTATE_OTHER;
    if (strncmp(s, "08", 2) == 0)
        return IDEM__SQLSTATE_DISCONNECT;
    if (strncmp(s, "53", 2) == 0)
        return IDEM__SQLSTATE_RESOURCES;
    i = find(s);
    return i >= 0 ? states[i].kind : IDEM__SQLSTATE_OTHER;
}

const char *idem__sqlstate_advice(const char *s)
{
    int i = find(s);

    return i >= 0 ? states[i].advice : NULL;
}

int idem__sqlstate_is_disconnect(const char *s)
{
    return idem__sqlstate_classify(s) == IDEM__SQLSTATE_DISCONNECT;
}

int idem__sqlstate_is_retryable(const char *s)
{
    return idem__sqlstate_classify(s) == IDEM__SQLSTATE_RETRYABLE;
}

int idem__sqlstate_is_timeout(const char *s)
{
    return idem__sqlstate_classify(s) == IDEM__SQLSTATE_TIMEOUT;
}

int idem__sqlstate_is_transient(const char *s)
{
    idem__sqlstate_class kind = idem__sqlstate_classify(s);

    return kind == IDEM__SQLSTATE_DISCONNECT || kind == IDEM__SQLSTATE_RESOURCES ||
           kind == IDEM__SQLSTATE_RETRYABLE || kind == IDEM__SQLSTATE_TIMEOUT;
}
