/* Transaction-local settings as SET LOCAL statements (settings.c).
 *
 * Every setting idem gives one transaction (the lock timeouts of the store and of external
 * effects) is sent as its own `SET LOCAL name = 'value'` statement in the transaction's
 * pipeline, not through set_config(): on Citus a SET LOCAL on the coordinator reaches the
 * workers that the transaction's statements run on (with citus.propagate_set_commands =
 * 'local', which idem-migrate distribute sets on the database), while set_config()
 * changes the coordinator's session only. On plain PostgreSQL both do the same. SET takes
 * no parameters, so the value is formatted into the text, quoted. */
#ifndef IDEM_LIB_SETTINGS_H
#define IDEM_LIB_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

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
