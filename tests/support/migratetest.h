/* Test support for the migration tests: scratch folders of migration files, the data
 * folders, and looking at what a database holds. Helpers fail the test when what they do
 * fails. */
#ifndef IDEM_TESTS_MIGRATETEST_H
#define IDEM_TESTS_MIGRATETEST_H

#include <libpq-fe.h>

#include "idem/migrate.h"

/* tests/data/<name> (malloc'd, caller frees). */
char *migratetest_data_dir(const char *name);

/* Options that read the migrations of dir (borrowed). */
idem_migrate_options migratetest_dir_options(const char *dir);

/* A scratch folder for migration files (malloc'd); migratetest_remove_dir() removes it and
 * frees the name. */
char *migratetest_make_dir(void);
void migratetest_remove_dir(char *dir);

/* Write text as dir/name, or remove that file. */
void migratetest_write_file(const char *dir, const char *name, const char *text);
void migratetest_remove_file(const char *dir, const char *name);

/* 1 when to_regclass(name) finds a relation. */
int migratetest_relation_exists(PGconn *conn, const char *name);

/* Rows of idem.schema_migrations. */
long migratetest_ledger_count(PGconn *conn);

/* How many items of list are in state. */
size_t migratetest_count_state(const idem_migrate_list *list, idem_migration_state state);

#endif
