/* idem_migrate_baseline(): record migrations as applied without running them, for a
 * schema whose ledger lost their rows. Each is checked first: what it leaves behind
 * (idem__migration_objects()) must be there: every object it creates, every table it
 * isolates with row-level security enabled, forced and policy tenant_isolation, every
 * table privilege it grants (idem__object_check(), migrate_object_check.c). */
#include <stdio.h>
#include <stdlib.h>

#include "error.h"
#include "log.h"
#include "migrate_internal.h"

static int in_ledger(const idem__ledger *ledger, int version)
{
    for (size_t i = 0; i < ledger->count; i++)
        if (ledger->rows[i].version == version)
            return 1;
    return 0;
}

/* What to do instead, when f is not applied: prev is the version of the file before it
 * (0 when none). */
static void instead(char *buf, size_t size, int prev)
{
    if (prev > 0)
        snprintf(buf, size,
                 "record only up to the version before it (baseline --to %d), then "
                 "apply the rest with idem-migrate up",
                 prev);
    else
        snprintf(buf, size,
                 "nothing before it can be recorded; if schema idem holds objects of "
                 "its own, look at them before running idem-migrate up");
}

/* The advice of a refusal: put a missing guarantee back and run baseline again (gap has
 * the SQL), or else what instead() says. */
static void advice_for(char *buf, size_t size, const idem__object_gap *gap, int prev)
{
    if (gap->restore[0] != '\0')
        snprintf(buf, size,
                 "if the rest of it is there, restore this as the owner of schema idem (%s) "
                 "and run baseline again",
                 gap->restore);
    else
        instead(buf, size, prev);
}

static int not_applied(idem_error *err, const idem__migration_file *f, const idem__object_gap *gap,
                       int prev)
{
    char advice[512];

    advice_for(advice, sizeof(advice), gap, prev);
    return idem__error_set(err, IDEM_ESCHEMA, "%s is not applied: %s. Nothing was recorded: %s",
                           f->name, gap->missing, advice);
}

/* Whether f looks applied: it leaves something to look for, and all of it is there. 0, or
 * ESCHEMA naming what is missing (or that nothing can be checked), or another error. */
static int check_applied(PGconn *conn, const idem__migration_file *f, int prev, idem_error *err)
{
    idem__object *objects = NULL;
    idem__object_gap gap;
    size_t count = 0;
    char advice[160];
    int rc = idem__migration_objects(&objects, &count, f), found = 1;

    if (rc != 0)
        return idem__error_set(err, rc, "%s: out of memory", f->name);
    instead(advice, sizeof(advice), prev);
    if (count == 0)
        rc = idem__error_set(err, IDEM_ESCHEMA,
                             "%s creates no table, index, view, sequence, type or routine, "
                             "isolates no table and grants no table privilege that baseline "
                             "could look for, so it cannot tell whether it is applied. Nothing "
                             "was recorded: %s",
                             f->name, advice);
    for (size_t i = 0; rc == 0 && i < count; i++) {
        found = idem__object_check(conn, &objects[i], &gap, err);
        if (found < 0)
            rc = found;
        else if (found == 0)
            rc = not_applied(err, f, &gap, prev);
    }
    free(objects);
    return rc;
}

static int exec_command(PGconn *conn, const char *sql, idem_error *err)
{
    PGresult *res = PQexec(conn, sql);
    int rc = 0;

    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        rc = idem__error_pg(err, conn, res, "baseline: %s", sql);
    PQclear(res);
    return rc;
}

/* Check and record the n files in todo, in one transaction that a refusal rolls back.
 * A missing ledger is created in it first: what a file grants on the ledger (0009) is
 * checked on the ledger that baseline leaves behind, and the bootstrap grants it. */
static int record_all(PGconn *conn, const idem__migration_file *const *todo, const int *prev,
                      size_t n, int bootstrap, const idem_migrate_options *o, idem_error *err)
{
    idem_migrate_options quiet = *o;
    int rc = exec_command(conn, "BEGIN", err);

    quiet.log = NULL; /* "created the ledger" only once it is committed */
    if (rc == 0 && bootstrap)
        rc = idem__ledger_bootstrap(conn, &quiet, err);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = check_applied(conn, todo[i], prev[i], err);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = idem__ledger_record(conn, todo[i], 0, err);
    if (rc == 0)
        rc = exec_command(conn, "COMMIT", err);
    if (rc != 0 && PQtransactionStatus(conn) != PQTRANS_IDLE)
        PQclear(PQexec(conn, "ROLLBACK"));
    if (rc == 0 && bootstrap)
        idem__log(o->log, o->log_ctx, IDEM_LOG_INFO, "created the ledger idem.schema_migrations");
    for (size_t i = 0; rc == 0 && i < n; i++)
        idem__log(o->log, o->log_ctx, IDEM_LOG_INFO,
                  "recorded %s as applied, without running it (its objects exist)", todo[i]->name);
    return rc;
}

static int baseline_locked(PGconn *conn, const idem__migration_set *set, int to_version,
                           const idem_migrate_options *o, idem_error *err)
{
    const idem__migration_file **todo = calloc(set->count + 1, sizeof(*todo));
    int *prev = calloc(set->count + 1, sizeof(*prev));
    idem__ledger ledger = {0, NULL, 0, 0, ""};
    size_t n = 0;
    int rc = todo != NULL && prev != NULL ? idem__ledger_read(&ledger, conn, err)
                                          : idem__error_set(err, IDEM_ENOMEM, "out of memory");

    for (size_t i = 0; rc == 0 && i < set->count && set->files[i].version <= to_version; i++) {
        if (in_ledger(&ledger, set->files[i].version))
            continue;
        prev[n] = i > 0 ? set->files[i - 1].version : 0;
        todo[n++] = &set->files[i];
    }
    if (rc == 0 && n == 0)
        idem__log(o->log, o->log_ctx, IDEM_LOG_INFO,
                  "nothing to record: the ledger has every migration up to %04d", to_version);
    if (rc == 0 && n > 0)
        rc = record_all(conn, todo, prev, n, !ledger.exists, o, err);
    idem__ledger_clear(&ledger);
    free(prev);
    free(todo);
    return rc;
}

int idem_migrate_baseline(PGconn *conn, int to_version, const idem_migrate_options *opts,
                          idem_error *err)
{
    idem__migration_set set = {NULL, 0};
    idem_migrate_options o;
    int rc = idem__migrate_options_get(&o, opts, err);

    if (rc == 0 && to_version < 1)
        rc = idem__error_field(err, IDEM_EINVAL, "to_version",
                               "is %d; baseline needs the last version applied (>= 1)", to_version);
    if (rc == 0)
        rc = idem__migrate_conn_idle(conn, err);
    if (rc == 0)
        rc = idem__migration_set_load(&set, o.dir, err);
    if (rc == 0)
        rc = idem__migrate_to_beyond(to_version, &set, err);
    if (rc == 0)
        rc = idem__migrate_lock(conn, &o, err);
    if (rc == 0) {
        rc = baseline_locked(conn, &set, to_version, &o, err);
        idem__migrate_unlock(conn);
    }
    idem__migration_set_clear(&set);
    return rc;
}
