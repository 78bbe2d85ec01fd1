/* What a transaction sets (settings.c): the call's tenant, which row-level security reads
 * (tenant.h), and its two timeouts, lock_timeout and statement_timeout, from what is left
 * of the call's deadline (deadline.h), so that a lock wait or a long statement ends on the
 * server, with its SQLSTATE (55P03, 57014) and the connection kept, before the client gives
 * up on the reply: lock_timeout a margin before the deadline, statement_timeout half the
 * margin before it (a statement that waits for a lock ends as a lock wait), and no longer
 * than the pool's statement_timeout_ms. Every module that opens a transaction for a call (the
 * store's write and declared paths, the external claim, every statement run as a tenant,
 * tenant.h) takes them from here, in the form the connection needs:
 *
 *  - plain PostgreSQL, directly or behind a transaction pooler: one statement of
 *    set_config(..., true) calls after BEGIN, or in front of the statements of an implicit
 *    transaction (one Sync). The store's claim carries the same values in its own
 *    statement instead (store_sql.c, idem__store_stmt_reserve_as): one statement less.
 *  - Citus: IDEM__SET_PROPAGATE (citus.h), then one `SET LOCAL name = 'value'` statement per
 *    setting: a SET LOCAL on the coordinator reaches the workers that the transaction's
 *    statements run on, where set_config() changes the coordinator's session only. SET
 *    takes no parameters, so the value is formatted into the text, quoted. On plain
 *    PostgreSQL citus.propagate_set_commands is a custom setting that nothing reads.
 *
 * A claim waits less for another attempt's claim of the same key than the rest of its
 * transaction waits for locks (idem__tx_settings_claim_wait()): its lock_timeout is raised
 * once the claim has run.
 *
 * Setting them per transaction, not on the database (ALTER DATABASE ... SET), keeps them
 * off the application's own sessions: there, with Citus 13, a SET LOCAL followed by DDL in
 * one implicit transaction fails on the workers ("operation is not allowed on this node").
 * Private to the library. */
#ifndef IDEM_LIB_SETTINGS_H
#define IDEM_LIB_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "citus.h"
#include "idem/pool.h"

typedef struct idem__pipe_cmd idem__pipe_cmd; /* exec.h */

/* The margin is a quarter of what is left of the call's deadline, at least
 * IDEM__LOCK_MARGIN_MS and at most IDEM__LOCK_MARGIN_MAX_MS (when more than twice the
 * margin is left; with less, the lock wait gets all of it), so that the server's error has
 * time to come back (from a Citus worker through the coordinator) before the client gives
 * up on the reply. What is left counts as IDEM__MIN_WAIT_MS at least, as the client's
 * waits do (deadline.h). */
#define IDEM__LOCK_MARGIN_MS     50
#define IDEM__LOCK_MARGIN_MAX_MS 500

/* Big enough for any SET LOCAL statement idem writes with a value of at most 64 bytes. */
#define IDEM__SET_LOCAL_SIZE 160

/* How the settings travel. */
enum idem__settings_form {
    IDEM__SETTINGS_PLAIN,  /* one statement of set_config(..., true) calls */
    IDEM__SETTINGS_CITUS,  /* IDEM__SET_PROPAGATE, then a SET LOCAL statement for each */
    IDEM__SETTINGS_TENANT, /* IDEM__SET_PROPAGATE and the tenant's SET LOCAL alone: inside a
                              transaction that was opened with its settings */
};

/* The most commands idem__tx_settings_cmds() writes. */
#define IDEM__SETTINGS_CMDS 4

/* What one transaction sets; the caller owns it, and it must stay valid until the
 * pipeline that carries its commands ran. */
typedef struct idem__tx_settings {
    const char *tenant;    /* NULL: none (a statement across tenants) */
    int timed;             /* the call has a deadline: the timeouts are set */
    uint64_t lock_ms;      /* lock_timeout, in ms */
    char lock_timeout[24]; /* set_config() values, "<ms>ms" */
    char claim_wait[24];   /* lock_timeout until a claim has run; "" for none */
    char statement_timeout[24];
    uint64_t statement_ms;                  /* statement_timeout, in ms */
    unsigned int cap_ms;                    /* statement_timeout is the pool's cap, this; 0: not */
    char session_shown[24];                 /* idem__tx_settings_session()'s answer */
    const char *values[6];                  /* the plain form's parameters, or the keeping one's */
    unsigned int keep_ms;                   /* what idem__tx_settings_keep_cmd() offers to keep */
    char keep[24], pid[16], kept_shown[24]; /* its parameters */
    char set[4][IDEM__SET_LOCAL_SIZE];      /* the SET LOCAL statements */
} idem__tx_settings;

/* The settings of a transaction run as @tenant (NULL for none; a valid tenant,
 * idem_validate_tenant(), otherwise) for a call that must be done by @deadline_ms (an
 * idem__now_ms() time; 0 = none: no timeouts, as on a connection the caller lent us),
 * statement_timeout no longer than @statement_cap_ms (the pool's statement_timeout_ms; 0 =
 * none). The timeouts are fixed now. */
void idem__tx_settings_init(idem__tx_settings *s, const char *tenant, uint64_t deadline_ms,
                            unsigned int statement_cap_ms);

/* idem__tx_settings_init() for a transaction on @conn: its call's deadline and its pool's
 * statement timeout, as the checkout stamped them on it (exec.h). */
void idem__tx_settings_for(idem__tx_settings *s, idem_conn *conn, const char *tenant);

/* Whether the transaction may leave statement_timeout to the session: @s is timed, its
 * statement timeout is the pool's cap, and @conn's session holds that cap as its own
 * (exec.h, idem__conn_session_statement_timeout_ms()); or the pool has no cap and the
 * session holds a value a store's transaction kept there, between @s's lock_timeout and
 * its statement_timeout (idem__tx_settings_keep_cmd()). Then returns the value as
 * current_setting() shows it ("5s", "1500ms", "2min": the largest unit that divides it), kept
 * in @s, for a statement to check against the session before it relies on it; else NULL. */
const char *idem__tx_settings_session(idem__tx_settings *s, idem_conn *conn);

/* Where the pool has no statement_timeout_ms, a transaction that has to set its own (none
 * kept on @conn's session fits it) may leave it on the session for the next ones instead:
 * writes into @out the plain form's statement that does so (returns 1), or nothing (0)
 * where it may not (exec.h, idem__conn_may_keep_timeout(); @s untimed, without a tenant,
 * under the pool's cap, or with no room between its two timeouts). The statement sets the
 * tenant and lock_timeout for the transaction, as the plain form's, and statement_timeout
 * for the session, halfway between the transaction's lock_timeout and its own
 * statement_timeout, where the session is PostgreSQL's own (its backend is the one the
 * connection was opened to: no pooler in between) and holds no statement_timeout but one
 * idem kept there (none at all, or that one); elsewhere it sets the transaction's, as the
 * plain form does. It returns whether it kept it, for idem__tx_settings_kept().
 *
 * A later transaction then leaves statement_timeout to the session where the kept value
 * lies between its own lock_timeout (excluded) and statement_timeout
 * (idem__tx_settings_session()): its statement ends no later than its own would, and still
 * after a lock wait would, sooner by half the margin at most (250 ms). Calls of one store
 * that start with their whole deadline all fit. The session holds that setting between
 * the store's calls only: the pool puts the session's own back before it hands the
 * connection out for anything else (idem_pool_acquire(), a call without a deadline). */
size_t idem__tx_settings_keep_cmd(idem__pipe_cmd *out, idem__tx_settings *s, idem_conn *conn);

/* The transaction that ran idem__tx_settings_keep_cmd()'s statement committed, which
 * answered @res: remember on @conn what the session now holds (exec.h,
 * idem__conn_timeout_kept()). */
void idem__tx_settings_kept(const idem__tx_settings *s, idem_conn *conn, const PGresult *res);

/* Until a claim has run, lock_timeout is @wait_ms (no longer than the call's): the wait for
 * another attempt's uncommitted claim of the same key. */
void idem__tx_settings_claim_wait(idem__tx_settings *s, uint64_t wait_ms);

/* Write into @out the commands that set @s in @form (at most IDEM__SETTINGS_CMDS; none for
 * a transaction with neither tenant nor timeouts). Returns how many. */
size_t idem__tx_settings_cmds(idem__pipe_cmd *out, idem__tx_settings *s,
                              enum idem__settings_form form);

/* On Citus, after the claim (idem__tx_settings_claim_wait()): the SET LOCAL that gives the
 * rest of the transaction the call's lock_timeout. */
void idem__tx_settings_after_claim(idem__pipe_cmd *out, idem__tx_settings *s);

/* Write `SET LOCAL <name> = '<value>'` into @buf (@size bytes), the value's quotes doubled.
 * @name is a setting name of idem's own (letters, digits, '_' and '.'). Returns 0, or -1
 * when @name is not such a name or the statement does not fit (@buf then holds ""). */
int idem__set_local(char *buf, size_t size, const char *name, const char *value);

#endif
