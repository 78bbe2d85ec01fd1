/* Internal error helpers: filling an idem_error, classifying PostgreSQL failures. */
#ifndef IDEM_LIB_ERROR_H
#define IDEM_LIB_ERROR_H

#include <libpq-fe.h>

#include "idem/common.h"

#include "core/sqlstate.h"

/* Copy @src's detail into @dst, the members of both their layouts (their versions, see
 * common.h); @dst keeps its version. NULL @dst or @src is fine. */
void idem__error_copy(idem_error *dst, const idem_error *src);

/* Record a fresh error: code, no field, formatted message. Returns code. NULL err is fine. */
int idem__error_set(idem_error *err, int code, const char *fmt, ...) IDEM_PRINTF(3, 4);

/* Record a bad-input error naming the field; the message reads "<field>: <reason>".
 * Returns code: IDEM_EINVAL for invalid input (every check spells it so), or another
 * IDEM_E* code that names a field (IDEM_ECONFLICT, IDEM_EEFFECT). Never 0. */
int idem__error_field(idem_error *err, int code, const char *field, const char *fmt, ...)
    IDEM_PRINTF(4, 5);

/* Check a caller-allocated struct's version: every version from 1 to @current is
 * accepted. Otherwise IDEM_EINVAL naming "<field>.version". */
int idem__check_version(idem_error *err, unsigned int version, unsigned int current,
                        const char *field);

/* Check a retention window or key memory of @s seconds, the member @field, against the
 * bounds the store, the sweeper and idem-sweep share (IDEM_WINDOW_MIN_S..IDEM_WINDOW_MAX_S,
 * validate.h). Returns 0 or IDEM_EINVAL naming @field (validate.c). */
int idem__check_window(const char *field, unsigned int s, idem_error *err);

/* Fill a caller-allocated versioned struct (its first member is `unsigned int version`)
 * with @defaults, @size bytes of them (the size of @version's layout), and set its
 * version. Returns 0, or IDEM_EINVAL for NULL or a version outside 1..@current. */
int idem__struct_init(void *dst, const void *defaults, size_t size, unsigned int version,
                      unsigned int current);

/* Mask @conninfo's password in every text of @err (redact.c, idem_conninfo_redact()). */
void idem__error_redact(idem_error *err, const char *conninfo);

/* Add context in front of the message already recorded ("context: lower message").
 * Returns the recorded code (IDEM_EINVAL... ) or 0 when err is NULL. */
int idem__error_context(idem_error *err, const char *fmt, ...) IDEM_PRINTF(2, 3);

/* Record a PostgreSQL failure. The code is IDEM_EUNAVAIL when the connection is gone
 * or the SQLSTATE says so, otherwise IDEM_EDB; the SQLSTATE and the server's primary
 * message are kept, with the formatted context in front. res and conn may be NULL. */
int idem__error_pg(idem_error *err, const PGconn *conn, const PGresult *res, const char *fmt, ...)
    IDEM_PRINTF(4, 5);

/* A database error whose SQLSTATE says the deployment is wrong (schema missing or out of
 * date, privilege missing): turn IDEM_EDB into IDEM_ESCHEMA or IDEM_EPERM, with advice on
 * what to fix in front of the message and in err->hint. Other codes pass unchanged.
 * Returns the code. */
int idem__error_misconfigured(idem_error *err, int rc);

/* A connection that failed (@rc IDEM_EUNAVAIL, @pg CONNECTION_BAD) because the server, or a
 * pooler in front of it, refused its settings for good: a wrong or missing password, an
 * authentication that failed, no pg_hba.conf entry, a role that may not log in, a role or
 * database that does not exist, no CONNECT privilege, SSL demanded of a server without it.
 * Then IDEM_EPERM, with advice on what to fix in front of the message and in err->hint.
 * Told by idem__pg_login_refusal() (core/connect.h), by the words in English (libpq gives
 * no SQLSTATE for a refused connection): any other failure, a refusal in another language
 * included, keeps @rc. Returns the code. */
int idem__error_login_refused(idem_error *err, const PGconn *pg, int rc);

/* A statement refused for want of a privilege: err->code IDEM_EDB and SQLSTATE 42501,
 * not row-level security's (idem__error_row_security()). Then IDEM_EPERM, with the GRANT
 * advice for @role in front of the message and in err->hint (the object is the one the
 * server names in its message, which idem does not read; nor does the server say which
 * privilege). Row-level security's refusal keeps its code. Returns the code. */
int idem__error_privilege(idem_error *err, const char *role);

/* Row-level security's refusals, as idem__error_pg() names them in err->constraint (the
 * server sets none for them): a row a policy refuses (new row violates row-level security
 * policy), and a statement a policy would affect while row_security is off. Told by the
 * server function that raised them (PG_DIAG_SOURCE_FUNCTION), never by the message. */
#define IDEM__ROW_SECURITY_POLICY "row_security_policy"
#define IDEM__ROW_SECURITY_OFF    "row_security_off"

/* Whether @err is row-level security's refusal (SQLSTATE 42501 and one of the two). */
int idem__error_row_security(const idem_error *err);

#endif
