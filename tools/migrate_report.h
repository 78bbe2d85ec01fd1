/* idem-migrate's reports (migrate_report.c): the state of each migration, as status
 * prints it (a table, or JSON) and as plan prints what up would run. */
#ifndef IDEM_TOOLS_MIGRATE_REPORT_H
#define IDEM_TOOLS_MIGRATE_REPORT_H

#include <libpq-fe.h>
#include <stddef.h>

#include "idem/idem.h"

typedef struct counts {
    size_t applied, pending, drifted, unknown, unrecorded;
} counts;

/* What status found, for its output and exit status. */
typedef struct findings {
    counts n;
    int ledger_incomplete;
    char refusal[IDEM_ERROR_MESSAGE_MAX]; /* why up would refuse now, "" when it would not */
    idem_distribution *distribution;      /* where the tables stand on Citus; NULL without
                                             the schema */
} findings;

/* How many migrations of @list are in each state. */
counts mr_count_states(const idem_migrate_list *list);

/* status --json: 0, or -1 out of memory. */
int mr_print_status_json(const idem_migrate_list *list, PGconn *conn, const findings *f,
                         int up_to_date);
/* status as a table, its summary and where the tables stand on Citus. */
void mr_print_status_text(const idem_migrate_list *list, PGconn *conn, const findings *f);

/* One migration as plan prints it: a comment line, its SQL, an end line. */
void mr_print_plan_item(const idem_migration *m);

#endif
