/* What idem-migrate prints about the migrations: status as a table or JSON, and the plan
 * of what up would run. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "migrate_report.h"

counts mr_count_states(const idem_migrate_list *list)
{
    counts n = {0, 0, 0, 0, 0};

    for (size_t i = 0; i < idem_migrate_list_count(list); i++) {
        switch (idem_migrate_list_at(list, i)->state) {
        case IDEM_MIGRATION_APPLIED:
            n.applied++;
            break;
        case IDEM_MIGRATION_PENDING:
            n.pending++;
            break;
        case IDEM_MIGRATION_DRIFTED:
            n.drifted++;
            break;
        case IDEM_MIGRATION_UNKNOWN:
            n.unknown++;
            break;
        case IDEM_MIGRATION_UNRECORDED:
            n.unrecorded++;
            break;
        }
    }
    return n;
}

static json_t *str_or_null(const char *s)
{
    return s != NULL && s[0] != '\0' ? json_string(s) : json_null();
}

static json_t *migration_json(const idem_migration *m)
{
    int applied = m->state != IDEM_MIGRATION_PENDING && m->state != IDEM_MIGRATION_UNRECORDED;

    return json_pack("{s:i, s:s, s:s, s:b, s:o, s:o, s:o, s:o, s:o, s:o}", "version", m->version,
                     "name", m->name, "state", idem_migrate_state_name(m->state), "no_transaction",
                     m->no_transaction, "checksum", str_or_null(m->checksum), "applied_name",
                     str_or_null(m->applied_name), "applied_checksum",
                     str_or_null(m->applied_checksum), "applied_at", str_or_null(m->applied_at),
                     "duration_ms", applied ? json_integer(m->duration_ms) : json_null(),
                     "applied_by", str_or_null(m->applied_by));
}

static json_t *status_json(const idem_migrate_list *list, PGconn *conn, const findings *f,
                           int up_to_date)
{
    json_t *items = json_array();

    for (size_t i = 0; items != NULL && i < idem_migrate_list_count(list); i++)
        json_array_append_new(items, migration_json(idem_migrate_list_at(list, i)));
    return json_pack(
        "{s:s, s:b, s:b, s:b, s:o, s:i, s:I, s:I, s:I, s:I, s:I, s:o}", "database", PQdb(conn),
        "ledger", idem_migrate_list_ledger_exists(list), "ledger_incomplete", f->ledger_incomplete,
        "up_to_date", up_to_date, "up_would_refuse", str_or_null(f->refusal), "schema_version",
        idem_migrate_latest_version(), "applied", (json_int_t)f->n.applied, "pending",
        (json_int_t)f->n.pending, "drifted", (json_int_t)f->n.drifted, "unknown",
        (json_int_t)f->n.unknown, "unrecorded", (json_int_t)f->n.unrecorded, "migrations", items);
}

/* Where the tables stand on Citus (NULL when the schema is not there to look at). */
static json_t *distribution_json(const idem_distribution *d)
{
    json_t *tables = NULL;

    if (d == NULL)
        return json_null();
    tables = json_array();
    for (size_t i = 0; tables != NULL && i < idem_distribution_count(d); i++) {
        const idem_distributed_table *t = idem_distribution_at(d, i);

        json_array_append_new(tables, json_pack("{s:s, s:b, s:s, s:b}", "name", t->name, "tenant",
                                                t->tenant, "placement",
                                                idem_table_placement_name(t->placement), "wanted",
                                                t->wanted));
    }
    return json_pack("{s:b, s:b, s:o}", "installed", idem_distribution_citus(d), "distributed",
                     idem_distribution_complete(d), "tables", tables);
}

int mr_print_status_json(const idem_migrate_list *list, PGconn *conn, const findings *f,
                         int up_to_date)
{
    json_t *doc = status_json(list, conn, f, up_to_date);

    if (doc != NULL)
        json_object_set_new(doc, "citus", distribution_json(f->distribution));
    return cli_print_json(doc);
}

static void print_status_row(const idem_migration *m)
{
    char ms[24] = "";

    if (m->duration_ms >= 0)
        snprintf(ms, sizeof(ms), "%lld", m->duration_ms);
    printf("%04d     %-10s %-25s %-12s %7s  %s", m->version, idem_migrate_state_name(m->state),
           m->applied_at, m->applied_by, ms, m->name);
    if (m->state == IDEM_MIGRATION_DRIFTED && strcmp(m->name, m->applied_name) != 0)
        printf("  (applied as %s)", m->applied_name);
    else if (m->state == IDEM_MIGRATION_DRIFTED)
        printf("  (changed since applied: sha256 applied %.16s..., file %.16s...)",
               m->applied_checksum, m->checksum);
    if (m->state == IDEM_MIGRATION_UNKNOWN)
        printf("  (applied, but not among these migrations: a newer schema, or a removed file)");
    if (m->state == IDEM_MIGRATION_UNRECORDED)
        printf("  (not in the ledger, but what it creates exists: applied, its row lost?)");
    putchar('\n');
}

static void print_status_summary(const idem_migrate_list *list, const findings *f)
{
    const counts *n = &f->n;

    if (f->ledger_incomplete && !idem_migrate_list_ledger_exists(list))
        printf("LEDGER MISSING: idem's objects exist, but not the ledger idem.schema_migrations "
               "that records which migrations made them\n");
    else if (f->ledger_incomplete)
        printf("LEDGER INCOMPLETE: %zu migration%s not recorded in idem.schema_migrations, "
               "but what %s creates exists\n",
               n->unrecorded, n->unrecorded == 1 ? "" : "s", n->unrecorded == 1 ? "it" : "each");
    else if (n->drifted > 0)
        printf("DRIFT: %zu applied migration%s changed since applied; see idem-migrate verify\n",
               n->drifted, n->drifted == 1 ? "" : "s");
    else if (n->pending > 0 && f->refusal[0] == '\0')
        printf("%zu applied, %zu pending: run idem-migrate up\n", n->applied, n->pending);
    else if (n->pending > 0)
        printf("%zu applied, %zu pending\n", n->applied, n->pending);
    else
        printf("up to date: %zu applied\n", n->applied);
    if (f->refusal[0] != '\0')
        printf("up would refuse: %s\n", f->refusal);
}

static void print_distribution(const idem_distribution *d)
{
    size_t flagged = 0;

    if (d == NULL || !idem_distribution_citus(d)) {
        if (d != NULL)
            printf("Citus: not installed in this database (one server; nothing to distribute)\n");
        return;
    }
    for (size_t i = 0; i < idem_distribution_count(d); i++) {
        const idem_distributed_table *t = idem_distribution_at(d, i);

        if (t->wanted)
            continue;
        flagged++;
        printf("NOT DISTRIBUTED: %s is %s; %s\n", t->name, idem_table_placement_name(t->placement),
               t->tenant ? "it holds tenant data and belongs distributed by tenant, co-located "
                           "with idem.operations"
                         : "it belongs as a reference table");
    }
    if (idem_distribution_complete(d))
        printf("Citus: distributed (%zu tables, by tenant co-located with idem.operations, or "
               "reference tables)\n",
               idem_distribution_count(d));
    else
        printf("Citus: not distributed (%zu table%s flagged): run idem-migrate distribute\n",
               flagged, flagged == 1 ? "" : "s");
}

void mr_print_status_text(const idem_migrate_list *list, PGconn *conn, const findings *f)
{
    printf("database \"%s\" on %s:%s, ledger idem.schema_migrations %s\n", PQdb(conn), PQhost(conn),
           PQport(conn), idem_migrate_list_ledger_exists(list) ? "present" : "absent");
    printf("%-8s %-10s %-25s %-12s %7s  %s\n", "VERSION", "STATE", "APPLIED AT (UTC)", "BY", "MS",
           "NAME");
    for (size_t i = 0; i < idem_migrate_list_count(list); i++)
        print_status_row(idem_migrate_list_at(list, i));
    print_status_summary(list, f);
    print_distribution(f->distribution);
}

void mr_print_plan_item(const idem_migration *m)
{
    printf("-- ---- %s (version %04d, sha256 %s), %s\n", m->name, m->version, m->checksum,
           m->no_transaction ? "statement by statement, outside a transaction"
                             : "in one transaction with its ledger row");
    fwrite(m->sql, 1, m->sql_len, stdout);
    if (m->sql_len > 0 && m->sql[m->sql_len - 1] != '\n')
        putchar('\n');
    printf("-- ---- end of %s\n\n", m->name);
}
