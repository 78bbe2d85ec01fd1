#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "migratetest.h"
#include "pgtest.h"

char *migratetest_data_dir(const char *name)
{
    const char *root = getenv("IDEM_TEST_DATA");
    char *path;

    cr_assert_not_null(root, "IDEM_TEST_DATA is not set (run through meson test)");
    path = malloc(strlen(root) + strlen(name) + 2);
    cr_assert_not_null(path);
    sprintf(path, "%s/%s", root, name);
    return path;
}

idem_migrate_options migratetest_dir_options(const char *dir)
{
    idem_migrate_options o = IDEM_MIGRATE_OPTIONS_INIT;

    o.dir = dir;
    return o;
}

char *migratetest_make_dir(void)
{
    char *dir = strdup("/tmp/idem-migrate-test.XXXXXX");

    cr_assert_not_null(dir);
    cr_assert_not_null(mkdtemp(dir));
    return dir;
}

void migratetest_write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    FILE *fp;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    fp = fopen(path, "wb");
    cr_assert_not_null(fp, "%s", path);
    fputs(text, fp);
    fclose(fp);
}

void migratetest_remove_file(const char *dir, const char *name)
{
    char path[512];

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    unlink(path);
}

void migratetest_remove_dir(char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;

    while (d != NULL && (e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            migratetest_remove_file(dir, e->d_name);
    if (d != NULL)
        closedir(d);
    rmdir(dir);
    free(dir);
}

int migratetest_relation_exists(PGconn *conn, const char *name)
{
    const char *values[1] = {name};
    PGresult *res =
        PQexecParams(conn, "SELECT to_regclass($1) IS NOT NULL", 1, NULL, values, NULL, NULL, 0);
    int exists;

    cr_assert_eq(PQresultStatus(res), PGRES_TUPLES_OK, "%s", PQresultErrorMessage(res));
    exists = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return exists;
}

long migratetest_ledger_count(PGconn *conn)
{
    return pgtest_scalar(conn, "SELECT count(*) FROM idem.schema_migrations");
}

size_t migratetest_count_state(const idem_migrate_list *list, idem_migration_state state)
{
    size_t n = 0;

    for (size_t i = 0; i < idem_migrate_list_count(list); i++)
        n += idem_migrate_list_at(list, i)->state == state;
    return n;
}
