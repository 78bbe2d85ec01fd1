/* A named statement (idem__stmt): defined by the modules that own SQL, run by the execution
 * layer (exec.h), remembered by the connection it was prepared on (conn.h). Private to the
 * library. */
#ifndef IDEM_CORE_STMT_H
#define IDEM_CORE_STMT_H

/* A named, parameterized statement. Define them as static const objects in the module
 * that owns the SQL; the execution layer prepares each lazily, once per connection,
 * recognising it by its address (and name, which must be unique across the library:
 * "idem_<module>_<x>"). On the server it is named "<name>_<hash of its SQL>" (at most 40
 * characters of name): a session found holding that name holds that SQL. */
typedef struct idem__stmt {
    const char *name;
    const char *sql;
    int nparams;
} idem__stmt;

#endif
