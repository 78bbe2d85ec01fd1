/* Citus, as idem meets it: the question whether a database has it, and the statement that
 * makes a transaction's SET LOCAL statements reach the workers (settings.h). Private to the
 * library. */
#ifndef IDEM_LIB_CITUS_H
#define IDEM_LIB_CITUS_H

/* Whether the database has the citus extension: one row, one boolean column ('t' or 'f').
 * The pool asks it once per connection (conn.h), the sweeper once per run. */
#define IDEM__SQL_HAS_CITUS                                                                        \
    "SELECT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'citus')"

/* The first statement after BEGIN in every transaction that sends SET LOCAL statements. */
#define IDEM__SET_PROPAGATE "SET LOCAL citus.propagate_set_commands = 'local'"

#endif
