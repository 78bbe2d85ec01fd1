/* The migrate module's public face: status, plan, up, check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "error.h"
#include "migrate_embedded.h"
#include "migrate_internal.h"

int idem__migrate_options_get(idem_migrate_options *out, const idem_migrate_options *opts,
                              idem_error *err)
{
    idem_migrate_options defaults = IDEM_MIGRATE_OPTIONS_INIT;

    int rc;

    *out = defaults;
    if (opts == NULL)
        return 0;
    if ((rc = idem__check_version(err, opts->version, IDEM_MIGRATE_OPTIONS_VERSION, "opts")) != 0)
        return rc;
    *out = *opts;
    return 0;
}

int idem_migrate_options_init(idem_migrate_options *opts, unsigned int version)
{
    static const idem_migrate_options defaults = IDEM_MIGRATE_OPTIONS_INIT;

    return idem__struct_init(opts, &defaults, sizeof(defaults), version,
                             IDEM_MIGRATE_OPTIONS_VERSION);
}

int idem__migrate_conn_check(PGconn *conn, idem_error *err)
{
    if (conn == NULL)
        return idem__error_field(err, IDEM_EINVAL, "conn", "is NULL");
    if (PQstatus(conn) != CONNECTION_OK)
        return idem__error_pg(err, conn, NULL, "conn");
    return 0;
}

int idem__migrate_conn_idle(PGconn *conn, idem_error *err)
{
    int rc = idem__migrate_conn_check(conn, err);

    if (rc == 0 && PQtransactionStatus(conn) != PQTRANS_IDLE)
        rc = idem__error_field(err, IDEM_EINVAL, "conn",
                               "is inside a transaction; migrations need an "
                               "idle connection");
    return rc;
}

static void evidence_add(char *buf, const idem__object *o)
{
    size_t used = strlen(buf);

    snprintf(buf + used, EVIDENCE_MAX - used, "%s%s.%s", used > 0 ? ", " : "", o->schema, o->name);
}

/* A pending file whose objects already exist: every object it creates without IF NOT
 * EXISTS (or OR REPLACE) is there, so running it would fail on the first. It looks
 * applied, its ledger row lost. 1 then (evidence names them), 0 when not, or an error. */
static int appears_applied(char *evidence, PGconn *conn, const idem__migration_file *f,
                           idem_error *err)
{
    idem__object *objects = NULL;
    size_t count = 0, strict = 0;
    int rc = idem__migration_objects(&objects, &count, f), found = 1;

    if (rc != 0)
        return idem__error_set(err, rc, "%s: out of memory", f->name);
    for (size_t i = 0; i < count && found == 1; i++) {
        if (objects[i].if_not_exists)
            continue;
        strict++;
        found = idem__object_check(conn, &objects[i], NULL, err);
        if (found == 1)
            evidence_add(evidence, &objects[i]);
    }
    free(objects);
    return found < 0 ? found : found == 1 && strict > 0;
}

/* Mark UNRECORDED the pending files that appear applied. Not on a database where nothing
 * of idem's exists: there a file's objects outside schema idem are someone else's. */
static int list_probe(idem_migrate_list *list, PGconn *conn, idem_error *err)
{
    if (!list->ledger.exists && list->ledger.schema_objects == 0)
        return 0;
    for (size_t i = 0; i < list->count; i++) {
        int rc;
        if (list->items[i].state != IDEM_MIGRATION_PENDING)
            continue;
        list->evidence[i][0] = '\0';
        rc = appears_applied(list->evidence[i], conn, list->files[i], err);
        if (rc < 0)
            return rc;
        if (rc == 1)
            list->items[i].state = IDEM_MIGRATION_UNRECORDED;
    }
    return 0;
}

/* Join the files with the ledger just read, and find the files that appear applied. */
static int list_join(idem_migrate_list *list, PGconn *conn, idem_error *err)
{
    int rc = idem__migrate_list_merge(list, err);

    return rc != 0 ? rc : list_probe(list, conn, err);
}

/* Read the ledger and join it with the files. */
static int list_read(idem_migrate_list *list, PGconn *conn, idem_error *err)
{
    int rc = idem__ledger_read(&list->ledger, conn, err);

    return rc != 0 ? rc : list_join(list, conn, err);
}

static int status_list(idem_migrate_list **out, PGconn *conn, const idem_migrate_options *opts,
                       idem_error *err)
{
    idem_migrate_list *list = NULL;
    int rc = idem__migrate_list_new(&list, opts->dir, err);

    if (rc == 0)
        rc = list_read(list, conn, err);
    if (rc != 0) {
        idem_migrate_list_free(list);
        return rc;
    }
    *out = list;
    return 0;
}

int idem_migrate_status(idem_migrate_list **out, PGconn *conn, const idem_migrate_options *opts,
                        idem_error *err)
{
    idem_migrate_options o;
    int rc = idem__migrate_options_get(&o, opts, err);

    if (rc == 0 && out == NULL)
        rc = idem__error_field(err, IDEM_EINVAL, "out", "is NULL");
    if (rc == 0)
        rc = idem__migrate_conn_check(conn, err);
    return rc != 0 ? rc : status_list(out, conn, &o, err);
}

static int drift_error(const idem_migration *m, idem_error *err)
{
    if (m->state == IDEM_MIGRATION_DRIFTED && strcmp(m->name, m->applied_name) != 0)
        return idem__error_set(err, IDEM_ESCHEMA,
                               "%s: version %04d was applied as %s; an applied migration must "
                               "not be renamed or replaced",
                               m->name, m->version, m->applied_name);
    return idem__error_set(err, IDEM_ESCHEMA,
                           "%s: changed since it was applied (sha256 applied %.16s..., file "
                           "%.16s...); an applied migration must not be edited: put the change "
                           "in a new migration",
                           m->name, m->applied_checksum, m->checksum);
}

/* idem's objects exist that the ledger does not record: say so, and what to do. */
static int ledger_gap_error(const idem_migrate_list *list, idem_error *err)
{
    size_t count = 0, index = 0;
    const idem_migration *m = idem__migrate_newest_unrecorded(list, &count, &index);
    char to[16] = "N";

    if (m != NULL)
        snprintf(to, sizeof(to), "%d", m->version);
    if (!list->ledger.exists)
        return idem__error_set(
            err, IDEM_ESCHEMA,
            "the ledger idem.schema_migrations is missing, but schema idem "
            "holds %ld object%s (%s%s): the ledger was dropped or lost. "
            "Nothing was run. Restore idem.schema_migrations from a backup, or "
            "record the migrations that are applied with idem-migrate "
            "baseline --to %s (it checks that their objects exist)",
            list->ledger.schema_objects, list->ledger.schema_objects == 1 ? "" : "s",
            list->ledger.schema_example, list->ledger.schema_objects > 3 ? ", ..." : "", to);
    if (count > 1)
        return idem__error_set(err, IDEM_ESCHEMA,
                               "%zu migrations up to %s are not recorded in the ledger "
                               "idem.schema_migrations, but what they create exists (%s, ...): "
                               "their ledger rows were deleted or lost. Nothing was run. Restore "
                               "the ledger from a backup, or record them with idem-migrate "
                               "baseline --to %s (it checks that their objects exist)",
                               count, m->name, list->evidence[index], to);
    return idem__error_set(err, IDEM_ESCHEMA,
                           "%s is not recorded in the ledger idem.schema_migrations, but what it "
                           "creates exists (%s): its ledger row was deleted or lost. Nothing was "
                           "run. Restore the ledger from a backup, or record it with idem-migrate "
                           "baseline --to %s (it checks that its objects exist)",
                           m->name, list->evidence[index], to);
}

int idem__migrate_to_beyond(int to_version, const idem__migration_set *set, idem_error *err)
{
    const idem__migration_file *newest = set->count > 0 ? &set->files[set->count - 1] : NULL;

    if (to_version <= 0 || (newest != NULL && to_version <= newest->version))
        return 0;
    if (newest == NULL)
        return idem__error_field(err, IDEM_EINVAL, "to_version", "%d: there are no migrations",
                                 to_version);
    return idem__error_field(err, IDEM_EINVAL, "to_version",
                             "%d is beyond the newest migration, %s (version %d)", to_version,
                             newest->name, newest->version);
}

/* Keep only what up would apply, in order; refuse (ESCHEMA) what up must not do. */
static int plan_filter(idem_migrate_list *list, int to_version, idem_error *err)
{
    const char *newest = NULL; /* the newest applied migration (names outlive items) */
    int newest_version = 0;
    size_t n = 0;

    if (idem__migrate_to_beyond(to_version, &list->set, err) != 0)
        return IDEM_EINVAL;
    if (idem_migrate_list_ledger_incomplete(list))
        return ledger_gap_error(list, err);
    for (size_t i = 0; i < list->count; i++) {
        const idem_migration *m = &list->items[i];
        if (m->state == IDEM_MIGRATION_DRIFTED)
            return drift_error(m, err);
        if (m->state != IDEM_MIGRATION_PENDING) {
            newest = m->name;
            newest_version = m->version;
        }
    }
    for (size_t i = 0; i < list->count; i++) {
        const idem_migration *m = &list->items[i];
        if (m->state != IDEM_MIGRATION_PENDING || (to_version > 0 && m->version > to_version))
            continue;
        if (newest != NULL && m->version < newest_version)
            return idem__error_set(err, IDEM_ESCHEMA,
                                   "%s is pending but the newer %s is already applied; "
                                   "migrations apply in version order: renumber it",
                                   m->name, newest);
        list->items[n] = *m;
        list->files[n++] = list->files[i];
    }
    list->count = n;
    return 0;
}

int idem_migrate_plan(idem_migrate_list **out, PGconn *conn, int to_version,
                      const idem_migrate_options *opts, idem_error *err)
{
    idem_migrate_list *list = NULL;
    idem_migrate_options o;
    int rc = idem__migrate_options_get(&o, opts, err);

    if (rc == 0 && out == NULL)
        rc = idem__error_field(err, IDEM_EINVAL, "out", "is NULL");
    if (rc == 0 && to_version < 0)
        rc = idem__error_field(err, IDEM_EINVAL, "to_version", "is %d; 0 (all) or a version",
                               to_version);
    if (rc == 0)
        rc = idem__migrate_conn_check(conn, err);
    if (rc == 0)
        rc = status_list(&list, conn, &o, err);
    if (rc == 0)
        rc = plan_filter(list, to_version, err);
    if (rc != 0) {
        idem_migrate_list_free(list);
        return rc;
    }
    *out = list;
    return 0;
}

static void progress(const idem_migrate_options *o, idem_migrate_event event,
                     const idem_migration *m)
{
    if (o->progress != NULL)
        o->progress(o->progress_ctx, event, m);
}

static int apply_one(PGconn *conn, idem_migration *m, const idem__migration_file *f,
                     const idem_migrate_options *o, idem_error *err)
{
    long long duration_ms = 0;
    int rc;

    idem__log(o->log, o->log_ctx, IDEM_LOG_INFO, "applying %s%s", m->name,
              m->no_transaction ? " (no transaction)" : "");
    progress(o, IDEM_MIGRATE_STARTING, m);
    rc = idem__migration_apply(&duration_ms, conn, f, err);
    if (rc != 0) {
        progress(o, IDEM_MIGRATE_FAILED, m);
        return rc;
    }
    m->state = IDEM_MIGRATION_APPLIED;
    m->duration_ms = duration_ms;
    memcpy(m->applied_checksum, m->checksum, sizeof(m->applied_checksum));
    snprintf(m->applied_name, sizeof(m->applied_name), "%s", m->name);
    idem__log(o->log, o->log_ctx, IDEM_LOG_INFO, "applied %s in %lld ms", m->name, duration_ms);
    progress(o, IDEM_MIGRATE_APPLIED, m);
    return 0;
}

/* Under the lock: create the ledger if missing, re-read it (another run may have just
 * applied everything), then apply what is still pending. */
static int up_locked(PGconn *conn, idem_migrate_list *list, int to_version,
                     const idem_migrate_options *o, idem_error *err)
{
    int rc = idem__ledger_read(&list->ledger, conn, err);

    /* A schema idem that holds objects without a ledger is refused below, untouched. */
    if (rc == 0 && !list->ledger.exists && list->ledger.schema_objects == 0) {
        idem__ledger_clear(&list->ledger);
        rc = idem__ledger_bootstrap(conn, o, err);
        if (rc == 0)
            rc = idem__ledger_read(&list->ledger, conn, err);
    }
    if (rc == 0)
        rc = list_join(list, conn, err);
    if (rc == 0)
        rc = plan_filter(list, to_version, err);
    if (rc == 0 && list->count == 0)
        idem__log(o->log, o->log_ctx, IDEM_LOG_INFO, "nothing to apply: the schema is up to date");
    for (size_t i = 0; rc == 0 && i < list->count; i++)
        rc = apply_one(conn, &list->items[i], list->files[i], o, err);
    return rc;
}

int idem_migrate_up(PGconn *conn, int to_version, const idem_migrate_options *opts, idem_error *err)
{
    idem_migrate_list *list = NULL;
    idem_migrate_options o;
    int rc = idem__migrate_options_get(&o, opts, err);

    if (rc == 0 && to_version < 0)
        rc = idem__error_field(err, IDEM_EINVAL, "to_version", "is %d; 0 (all) or a version",
                               to_version);
    if (rc == 0)
        rc = idem__migrate_conn_idle(conn, err);
    if (rc == 0)
        rc = idem__migrate_list_new(&list, o.dir,
                                    err); /* a bad file fails before any lock is taken */
    if (rc == 0)
        rc = idem__migrate_to_beyond(to_version, &list->set, err); /* before the ledger */
    if (rc == 0)
        rc = idem__migrate_lock(conn, &o, err);
    if (rc != 0)
        goto done;
    rc = up_locked(conn, list, to_version, &o, err);
    idem__migrate_unlock(conn);
done:
    idem_migrate_list_free(list);
    return rc;
}

/* "a.sql, b.sql, ..." of the first pending migrations. */
static void pending_names(char *buf, size_t size, const idem_migrate_list *list, size_t *count)
{
    size_t used = 0;

    buf[0] = '\0';
    *count = 0;
    for (size_t i = 0; i < list->count; i++) {
        if (list->items[i].state != IDEM_MIGRATION_PENDING)
            continue;
        if (*count < 3 && used < size)
            used += (size_t)snprintf(buf + used, size - used, "%s%s", *count ? ", " : "",
                                     list->items[i].name);
        else if (*count == 3 && used < size)
            used += (size_t)snprintf(buf + used, size - used, ", ...");
        (*count)++;
    }
}

static int check_list(const idem_migrate_list *list, idem_error *err)
{
    char names[256];
    size_t pending;

    if (idem_migrate_list_ledger_incomplete(list))
        return ledger_gap_error(list, err);
    if (!list->ledger.exists)
        return idem__error_set(err, IDEM_ESCHEMA,
                               "the idem schema is not installed in this database (no table "
                               "idem.schema_migrations): run idem-migrate up");
    for (size_t i = 0; i < list->count; i++)
        if (list->items[i].state == IDEM_MIGRATION_DRIFTED)
            return drift_error(&list->items[i], err);
    pending_names(names, sizeof(names), list, &pending);
    if (pending > 0)
        return idem__error_set(err, IDEM_ESCHEMA,
                               "the idem schema is outdated: %zu migration%s pending (%s): run "
                               "idem-migrate up",
                               pending, pending == 1 ? "" : "s", names);
    return 0;
}

int idem_migrate_check(PGconn *conn, idem_error *err)
{
    idem_migrate_options o = IDEM_MIGRATE_OPTIONS_INIT;
    idem_migrate_list *list = NULL;
    int rc = idem__migrate_conn_check(conn, err);

    if (rc == 0)
        rc = status_list(&list, conn, &o, err);
    if (rc == 0)
        rc = check_list(list, err);
    idem_migrate_list_free(list);
    return rc;
}
