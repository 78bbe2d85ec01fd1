/* Transaction-local settings as SET LOCAL statements (settings.c).
 *
 * On a database with Citus every setting idem gives one transaction (the tenant, the lock
 * timeouts of the store and of external effects) is sent as its own `SET LOCAL name =
 * 'value'` statement in the transaction's pipeline, not through set_config(): a SET LOCAL
 * on the coordinator reaches the workers that the transaction's statements run on once the
 * transaction has said IDEM__SET_PROPAGATE first, while set_config() changes the
 * coordinator's session only. On plain PostgreSQL citus.propagate_set_commands is a custom
 * setting that nothing reads, and the store's create path sets the same values with
 * set_config(..., true) inside its own statements instead (tenant.h): fewer statements,
 * the same effect. SET takes no parameters, so the value is formatted into the text,
 * quoted.
 *
 * Setting it per transaction, not on the database (ALTER DATABASE ... SET), keeps it off
 * the application's own sessions: there, with Citus 13, a SET LOCAL followed by DDL in one
 * implicit transaction fails on the workers ("operation is not allowed on this node"). */
#ifndef IDEM_LIB_SETTINGS_H
#define IDEM_LIB_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

/* Whether the database has the citus extension: one row, one boolean column ('t' or 'f').
 * The pool asks it once per connection (tenant.h), the sweeper once per run. */
#define IDEM__SQL_HAS_CITUS                                                                        \
    "SELECT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'citus')"

/* The first statement after BEGIN in every transaction that sends SET LOCAL statements. */
#define IDEM__SET_PROPAGATE "SET LOCAL citus.propagate_set_commands = 'local'"

/* Big enough for any statement below with a value of at most 64 bytes. */
#define IDEM__SET_LOCAL_SIZE 160

/* Write `SET LOCAL <name> = '<value>'` into @buf (@size bytes), the value's quotes doubled.
 * @name is a setting name of idem's own (letters, digits, '_' and '.'). Returns 0, or -1
 * when @name is not such a name or the statement does not fit (@buf then holds ""). */
int idem__set_local(char *buf, size_t size, const char *name, const char *value);

/* The same for a timeout in milliseconds: `SET LOCAL <name> = '<ms>ms'`; 0 is raised to 1
 * (0 would mean "no timeout"). */
int idem__set_local_ms(char *buf, size_t size, const char *name, uint64_t ms);

#endif
