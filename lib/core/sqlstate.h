/* The core's SQLSTATE classes (core/sqlstate.c), for the library and the tools. No state. */
#ifndef IDEM_CORE_SQLSTATE_H
#define IDEM_CORE_SQLSTATE_H

/* SQLSTATE classes. NULL or "" is neither. */
int idem__sqlstate_is_disconnect(const char *sqlstate); /* class 08, 57P01..57P03 */
int idem__sqlstate_is_retryable(const char *sqlstate);  /* 40001, 40P01 */
int idem__sqlstate_is_timeout(const char *sqlstate);    /* 55P03 lock, 57014 statement */

#endif
