/* The exit status of every command-line tool (idem-migrate, idem-sweep, idem-reconcile,
 * idem-fingerprint, idem-gateway): one meaning per code across all of them, the table of
 * tools/README.md ("Exit status"). Failures take sysexits' codes (64 and up) where one
 * fits; the codes below 64 are answers only a tool's own command gives (a finding, not a
 * failure of the run). A tool returns these from main(); nothing else. */
#ifndef IDEM_TOOLS_EXIT_H
#define IDEM_TOOLS_EXIT_H

enum cli_exit {
    EXIT_OK = 0,                 /* done (idem-sweep: also when another sweep holds the lock) */
    EXIT_NOT_FOUND = 2,          /* idem-reconcile: nothing recorded, or nothing to resolve */
    EXIT_PENDING = 3,            /* idem-migrate status: migrations are pending */
    EXIT_DRIFT = 4,              /* idem-migrate: an applied file changed, or an order gap */
    EXIT_MIGRATION_FAILED = 5,   /* idem-migrate up: a migration failed, rolled back */
    EXIT_NO_SCHEMA = 7,          /* the schema is missing or older than the tool needs */
    EXIT_LEDGER = 8,             /* idem-migrate: the ledger lacks what exists */
    EXIT_NOT_APPLIED = 9,        /* idem-migrate baseline: a migration is not applied */
    EXIT_NOT_DISTRIBUTABLE = 10, /* idem-migrate distribute: not on Citus, or placed otherwise */
    EXIT_STILL_UNKNOWN = 11,     /* idem-reconcile probe: the outcome is still unknown */
    EXIT_NOT_ASKED = 12,         /* idem-reconcile probe: no resolver, or not outcome_unknown */
    EXIT_USAGE = 64,             /* EX_USAGE: the command line is wrong */
    EXIT_DATAERR = 65,           /* EX_DATAERR: an input is not valid */
    EXIT_NOINPUT = 66,           /* EX_NOINPUT: a file or folder named cannot be read */
    EXIT_DATABASE = 69,          /* EX_UNAVAILABLE: a database error a retry will not fix */
    EXIT_SOFTWARE = 70,          /* EX_SOFTWARE: an error the tool does not classify */
    EXIT_OSERR = 71,             /* EX_OSERR: out of memory, cannot listen */
    EXIT_IOERR = 74,             /* EX_IOERR: cannot read or write a stream or a file */
    EXIT_TEMPFAIL = 75,          /* EX_TEMPFAIL: a later try may work */
    EXIT_NOPERM = 77,            /* EX_NOPERM: the role lacks a privilege (GRANT) */
    EXIT_CONFIG = 78,            /* EX_CONFIG: connection settings that cannot work */
};

#endif
