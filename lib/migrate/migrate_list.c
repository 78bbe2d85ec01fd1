/* The list of migrations: files and ledger rows merged, and what callers read of it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "migrate_embedded.h"
#include "migrate_internal.h"

void idem_migrate_list_free(idem_migrate_list *list)
{
    if (list == NULL)
        return;
    idem__migration_set_clear(&list->set);
    idem__ledger_clear(&list->ledger);
    free(list->items);
    free(list->files);
    free(list->evidence);
    free(list);
}

size_t idem_migrate_list_count(const idem_migrate_list *list)
{
    return list != NULL ? list->count : 0;
}

const idem_migration *idem_migrate_list_at(const idem_migrate_list *list, size_t i)
{
    return list != NULL && i < list->count ? &list->items[i] : NULL;
}

int idem_migrate_list_ledger_exists(const idem_migrate_list *list)
{
    return list != NULL && list->ledger.exists;
}

/* The newest UNRECORDED item, or NULL; *count gets how many there are. */
const idem_migration *idem__migrate_newest_unrecorded(const idem_migrate_list *list, size_t *count,
                                                      size_t *index)
{
    const idem_migration *newest = NULL;

    *count = 0;
    for (size_t i = 0; i < list->count; i++) {
        if (list->items[i].state != IDEM_MIGRATION_UNRECORDED)
            continue;
        newest = &list->items[i];
        *index = i;
        (*count)++;
    }
    return newest;
}

int idem_migrate_list_ledger_incomplete(const idem_migrate_list *list)
{
    size_t count = 0, index = 0;

    if (list == NULL)
        return 0;
    if (!list->ledger.exists && list->ledger.schema_objects > 0)
        return 1;
    return idem__migrate_newest_unrecorded(list, &count, &index) != NULL;
}

int idem_migrate_latest_version(void)
{
    size_t n = idem__embedded_migrations_count;

    return n > 0 ? idem__embedded_migrations[n - 1].version : 0;
}

const char *idem_migrate_state_name(idem_migration_state state)
{
    switch (state) {
    case IDEM_MIGRATION_APPLIED:
        return "applied";
    case IDEM_MIGRATION_PENDING:
        return "pending";
    case IDEM_MIGRATION_DRIFTED:
        return "drifted";
    case IDEM_MIGRATION_UNKNOWN:
        return "unknown";
    case IDEM_MIGRATION_UNRECORDED:
        return "unrecorded";
    }
    return "invalid";
}

static void item_from_file(idem_migration *m, const idem__migration_file *f)
{
    m->version = f->version;
    m->name = f->name;
    m->state = IDEM_MIGRATION_PENDING;
    m->no_transaction = f->no_transaction;
    m->sql = f->sql;
    m->sql_len = f->len;
    memcpy(m->checksum, f->checksum_hex, sizeof(m->checksum));
    m->duration_ms = -1;
}

static void item_add_row(idem_migration *m, const idem__ledger_row *r)
{
    if (m->name == NULL) {
        m->version = r->version;
        m->name = r->name;
        m->state = IDEM_MIGRATION_UNKNOWN;
    } else if (strcmp(m->checksum, r->checksum_hex) == 0 && strcmp(m->name, r->name) == 0) {
        m->state = IDEM_MIGRATION_APPLIED;
    } else {
        m->state = IDEM_MIGRATION_DRIFTED;
    }
    snprintf(m->applied_name, sizeof(m->applied_name), "%s", r->name);
    memcpy(m->applied_checksum, r->checksum_hex, sizeof(m->applied_checksum));
    memcpy(m->applied_at, r->applied_at, sizeof(m->applied_at));
    m->duration_ms = r->duration_ms;
    memcpy(m->applied_by, r->applied_by, sizeof(m->applied_by));
}

/* items = files and ledger rows joined on version (both sorted). */
int idem__migrate_list_merge(idem_migrate_list *list, idem_error *err)
{
    const idem__migration_set *set = &list->set;
    const idem__ledger *ledger = &list->ledger;
    size_t cap = set->count + ledger->count + 1, i = 0, j = 0, n = 0;

    free(list->items);
    free(list->files);
    free(list->evidence);
    list->items = calloc(cap, sizeof(*list->items));
    list->files = calloc(cap, sizeof(*list->files));
    list->evidence = calloc(cap, sizeof(*list->evidence));
    if (list->items == NULL || list->files == NULL || list->evidence == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "out of memory listing migrations");
    while (i < set->count || j < ledger->count) {
        int take_file = i < set->count &&
                        (j == ledger->count || set->files[i].version <= ledger->rows[j].version);
        int take_row = j < ledger->count &&
                       (i == set->count || ledger->rows[j].version <= set->files[i].version);
        if (take_file) {
            list->files[n] = &set->files[i];
            item_from_file(&list->items[n], &set->files[i++]);
        }
        if (take_row)
            item_add_row(&list->items[n], &ledger->rows[j++]);
        n++;
    }
    list->count = n;
    return 0;
}

int idem__migrate_list_new(idem_migrate_list **out, const char *dir, idem_error *err)
{
    idem_migrate_list *list = calloc(1, sizeof(*list));
    int rc;

    if (list == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "out of memory listing migrations");
    rc = idem__migration_set_load(&list->set, dir, err);
    if (rc != 0) {
        idem_migrate_list_free(list);
        return rc;
    }
    *out = list;
    return 0;
}
