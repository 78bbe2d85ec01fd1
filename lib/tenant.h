/* The tenant of a transaction, as row-level security reads it (migration 0007): every
 * table of idem's that holds tenant data admits only the rows whose tenant equals
 * current_setting('idem.tenant'). Every statement the library sends on the application's
 * behalf is preceded, in the same pipeline (no extra round trip), by the one command
 * below, which sets it with set_config(..., true): local to the transaction, gone at its
 * end, so that a pooled session never carries one call's tenant into the next.
 *
 * This file is the one place that decides how the setting is sent. */
#ifndef IDEM_LIB_TENANT_H
#define IDEM_LIB_TENANT_H

#include <libpq-fe.h>

#include "exec.h"
#include "idem/common.h"

/* The statement: $1 the tenant. */
extern const idem__stmt idem__tenant_stmt;

/* A pipeline command that sets the transaction's tenant to *tenant. Put it after BEGIN and
 * before the first statement that touches idem's tables; outside a transaction, in front of
 * the statement, in the same pipeline (PostgreSQL runs a pipeline up to its Sync as one
 * implicit transaction). @tenant is borrowed: it must stay valid until the pipeline ran. */
idem__pipe_cmd idem__tenant_cmd(const char *const *tenant);

/* idem__conn_exec_prepared() of @stmt behind the tenant's command, in one pipeline: one
 * round trip. Same contract; *out is @stmt's result. */
int idem__tenant_exec(PGresult **out, idem_conn *conn, const char *tenant, const idem__stmt *stmt,
                      const char *const *values, const int *lengths, const int *formats,
                      int result_format, idem_error *err);

/* idem__pg_exec() of @sql behind the tenant's command, on a connection the caller lent us,
 * in one pipeline of libpq's (one round trip). Inside the caller's own transaction the
 * setting lasts until that transaction ends; outside one, the two statements are one
 * implicit transaction. Same contract as idem__pg_exec(). */
int idem__tenant_pg_exec(PGresult **out, PGconn *conn, const char *tenant, const char *sql,
                         int nparams, const char *const *values, const int *lengths,
                         const int *formats, int result_format, const char *what, idem_error *err);

#endif
