/* The core's SQLSTATE classes (core/sqlstate.c), for the library and the tools: the one
 * place that says what a PostgreSQL error code means for whoever met it. No state. */
#ifndef IDEM_CORE_SQLSTATE_H
#define IDEM_CORE_SQLSTATE_H

/* What a failure's SQLSTATE says. */
typedef enum idem__sqlstate_class {
    IDEM__SQLSTATE_OTHER,      /* none of the below (NULL and "" too): a database error */
    IDEM__SQLSTATE_DISCONNECT, /* class 08, 57P01..57P03, 57P05: the connection is lost, the
                                  server is shutting down or not up yet, or it closed an idle
                                  session */
    IDEM__SQLSTATE_RESOURCES,  /* class 53: the server is out of resources (disk full, out of
                                  memory, too many connections): a later try may pass */
    IDEM__SQLSTATE_RETRYABLE,  /* 40001, 40P01: a serialization failure or a deadlock */
    IDEM__SQLSTATE_TIMEOUT,    /* 55P03 lock timeout, 57014 statement timeout */
    IDEM__SQLSTATE_SCHEMA,     /* 42P01, 42703, 42883, 3F000: idem's schema is missing or
                                  out of date (misconfigured) */
    IDEM__SQLSTATE_ACCESS,     /* 42501, 3D000, 28000, 28P01: a privilege, the database or
                                  the login is wrong (misconfigured) */
} idem__sqlstate_class;

/* The class of @sqlstate; anything not listed above is IDEM__SQLSTATE_OTHER. */
idem__sqlstate_class idem__sqlstate_classify(const char *sqlstate);

/* For a misconfigured SQLSTATE (IDEM__SQLSTATE_SCHEMA, IDEM__SQLSTATE_ACCESS): what to fix,
 * one sentence; else NULL. */
const char *idem__sqlstate_advice(const char *sqlstate);

/* Whether idem__sqlstate_classify() says so. */
int idem__sqlstate_is_disconnect(const char *sqlstate);
int idem__sqlstate_is_retryable(const char *sqlstate);
int idem__sqlstate_is_timeout(const char *sqlstate);

/* Whether a failure with @sqlstate may pass when tried again later: DISCONNECT, RESOURCES,
 * RETRYABLE or TIMEOUT (the library answers each unavailable, "retry later"). Any other is
 * not (a missing privilege or schema needs an operator). */
int idem__sqlstate_is_transient(const char *sqlstate);

#endif
