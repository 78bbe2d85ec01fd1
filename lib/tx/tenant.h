/* The tenant of a transaction, as row-level security reads it (migration 0007): every
 * table of idem's that holds tenant data admits only the rows whose tenant equals
 * current_setting('idem.tenant'). Every statement the library sends on the application's
 * behalf runs in a transaction that has set it, local to the transaction (gone at its
 * end, so that a pooled session never carries one call's tenant into the next), in the
 * same round trip as the statement.
 *
 * The tenant travels with the call's timeouts, as settings.h builds them. On Citus they
 * are SET LOCAL statements behind IDEM__SET_PROPAGATE, which reach the workers that the
 * transaction's statements run on, where set_config() would stay on the coordinator. SET
 * LOCAL needs a transaction block (outside one PostgreSQL ignores it with a WARNING), so a
 * statement sent outside a transaction travels as [BEGIN; the settings; the statement; END
 * (COMMIT)], one pipeline.
 *
 * On plain PostgreSQL (a pooled connection whose database has no citus extension, found
 * when it was opened) they are one statement of set_config(..., true) calls: a statement
 * outside a transaction travels as [the settings; the statement] under one Sync, one
 * implicit transaction, or, where the statement has a form that sets the tenant itself
 * (idem__tenant_exec_either(): the store's lookup, a read), as that one statement, which
 * the call's deadline bounds on the client. The store's create path sets them inside its
 * own transaction (store_write.c: the claim sets them; store_declared.c: the settings
 * statement).
 *
 * This file decides the form (idem__tenant_form_for()); settings.h builds the settings. */
#ifndef IDEM_LIB_TENANT_H
#define IDEM_LIB_TENANT_H

#include <libpq-fe.h>
#include <stddef.h>

#include "exec.h"
#include "idem/common.h"
#include "settings.h"

/* How idem__tenant_wrap() sends the settings. */
enum idem__tenant_form {
    IDEM__TENANT_OWN_TX,   /* BEGIN, the settings as SET LOCAL statements, the commands,
                              END */
    IDEM__TENANT_IN_TX,    /* the tenant's SET LOCAL, the commands: in the caller's
                              transaction, whose opener set its timeouts */
    IDEM__TENANT_IMPLICIT, /* the settings' set_config() statement, the commands: one
                              implicit transaction, on a database without Citus */
};

/* The form for statements about to be sent on @conn. */
enum idem__tenant_form idem__tenant_form_for(idem_conn *conn);

/* The most commands idem__tenant_wrap() adds around the caller's. */
#define IDEM__TENANT_EXTRA (IDEM__SETTINGS_CMDS + 2)

/* Lay out in @all (room for @n + IDEM__TENANT_EXTRA commands) the pipeline that runs @cmds
 * (copied) with the settings @s (its tenant and timeouts; settings.h) in @form (inside the
 * caller's transaction the tenant lasts until that transaction ends). Returns the number of
 * commands; *first is the index of the first of @cmds in @all. */
size_t idem__tenant_wrap(idem__pipe_cmd *all, idem__tx_settings *s, enum idem__tenant_form form,
                         const idem__pipe_cmd *cmds, size_t n, size_t *first);

/* idem__conn_exec_prepared() of @stmt as @tenant (idem__tenant_wrap()), in one pipeline: one
 * round trip, with the call's timeouts (idem__tx_settings_for()). Same contract; *out is
 * @stmt's result. A transaction it opened and could not commit is rolled back. */
int idem__tenant_exec(PGresult **out, idem_conn *conn, const char *tenant, const idem__stmt *stmt,
                      const char *const *values, const int *lengths, const int *formats,
                      int result_format, idem_error *err);

/* The same for a statement that has a second form, @sets_tenant: the same statement with
 * the same parameters, $1 the tenant, that sets the tenant itself before it reads a row
 * (set_config('idem.tenant', $1, true) in a subquery that the rest joins to by tenant, so
 * that the join's other side is read after it). In IDEM__TENANT_IMPLICIT form that one
 * statement is sent alone, one statement where [set_config; @stmt] are two; in the other
 * forms @stmt is wrapped as above. Should the server ever read the row first, it reads it
 * under no tenant and finds nothing: the caller must treat "no row" as a miss it can
 * afford (the store's lookup does: the claim that follows finds the record). */
int idem__tenant_exec_either(PGresult **out, idem_conn *conn, const char *tenant,
                             const idem__stmt *stmt, const idem__stmt *sets_tenant,
                             const char *const *values, const int *lengths, const int *formats,
                             int result_format, idem_error *err);

/* idem__pg_exec() of @sql as @tenant (idem__tenant_wrap()) on a connection the caller lent
 * us, in one pipeline of libpq's (one round trip), with no timeouts (the connection is the
 * caller's: its own settings bound it). Inside the caller's own transaction the setting
 * lasts until that transaction ends; outside one, the statement gets a transaction of its
 * own, rolled back if it fails. Same contract as idem__pg_exec(). */
int idem__tenant_pg_exec(PGresult **out, PGconn *conn, const char *tenant, const char *sql,
                         int nparams, const char *const *values, const int *lengths,
                         const int *formats, int result_format, const char *what, idem_error *err);

#endif
