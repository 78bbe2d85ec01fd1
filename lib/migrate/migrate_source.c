/* Migration files: the embedded ones, or a folder's, with their SHA-256. */
#include <dirent.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "migrate_embedded.h"
#include "migrate_internal.h"

void idem__migration_set_clear(idem__migration_set *set)
{
    if (set == NULL)
        return;
    for (size_t i = 0; i < set->count; i++) {
        free(set->files[i].name);
        free(set->files[i].sql);
    }
    free(set->files);
    set->files = NULL;
    set->count = 0;
}

/* "NNNN_description.sql", description [a-z0-9_]+, the same rule as the build's embedder.
 * Returns the version, or 0 when the name does not follow the rule. */
static int name_version(const char *name)
{
    size_t len = strlen(name);
    int version = 0;

    if (len < 10 || len > IDEM__MIGRATION_NAME_MAX || strcmp(name + len - 4, ".sql") != 0)
        return 0;
    for (size_t i = 0; i < 4; i++) {
        if (name[i] < '0' || name[i] > '9')
            return 0;
        version = version * 10 + (name[i] - '0');
    }
    if (name[4] != '_')
        return 0;
    for (size_t i = 5; i < len - 4; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
            return 0;
    }
    return version;
}

static int is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return 0;
    return 1;
}

int idem__sql_no_transaction(const char *sql, size_t len)
{
    static const char marker[] = "-- idem:no-transaction";
    size_t pos = idem__sql_bom_len(sql, len);

    while (pos < len) {
        const char *nl = memchr(sql + pos, '\n', len - pos);
        size_t end = nl != NULL ? (size_t)(nl - sql) : len;
        size_t start = pos;

        while (start < end && (sql[start] == ' ' || sql[start] == '\t'))
            start++;
        if (end - start >= 2 && sql[start] == '-' && sql[start + 1] == '-') {
            size_t m = sizeof(marker) - 1;
            if (end - start >= m && memcmp(sql + start, marker, m) == 0 &&
                is_blank(sql + start + m, end - start - m))
                return 1;
        } else if (!is_blank(sql + start, end - start)) {
            return 0; /* the first statement: the marker must come before it */
        }
        pos = end + 1;
    }
    return 0;
}

static void hex_encode(char *out, const unsigned char *bytes, size_t n)
{
    static const char digits[] = "0123456789abcdef";

    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 0xf];
    }
    out[2 * n] = '\0';
}

/* Fill f from a file's name and bytes; takes ownership of sql (a malloc'd buffer of
 * len + 1 bytes, NUL-terminated) whatever happens. */
static int file_init(idem__migration_file *f, int version, const char *name, char *sql, size_t len,
                     idem_error *err)
{
    unsigned int md_len = 0;

    memset(f, 0, sizeof(*f));
    f->sql = sql;
    f->len = len;
    f->version = version;
    f->name = strdup(name);
    if (f->name == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "out of memory loading migration %s", name);
    if (memchr(sql, '\0', len) != NULL)
        return idem__error_field(err, IDEM_EINVAL, "dir", "%s: contains a NUL byte", name);
    if (EVP_Digest(sql, len, f->checksum, &md_len, EVP_sha256(), NULL) != 1 || md_len != 32)
        return idem__error_set(err, IDEM_ENOMEM, "%s: SHA-256 failed", name);
    hex_encode(f->checksum_hex, f->checksum, sizeof(f->checksum));
    f->no_transaction = idem__sql_no_transaction(sql, len);
    return 0;
}

static int load_embedded(idem__migration_set *set, idem_error *err)
{
    size_t n = idem__embedded_migrations_count;

    set->files = calloc(n > 0 ? n : 1, sizeof(*set->files));
    if (set->files == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "out of memory loading migrations");
    for (size_t i = 0; i < n; i++) {
        const idem__embedded_migration *m = &idem__embedded_migrations[i];
        char *sql = malloc(m->len + 1);
        int rc;

        if (sql == NULL)
            return idem__error_set(err, IDEM_ENOMEM, "out of memory loading migrations");
        memcpy(sql, m->sql, m->len + 1);
        set->count++;
        rc = file_init(&set->files[i], m->version, m->name, sql, m->len, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Read a whole file; *out is malloc'd, NUL-terminated. */
static int read_file(char **out, size_t *out_len, const char *path, idem_error *err)
{
    FILE *fp = fopen(path, "rb");
    char *buf = NULL, *grown;
    size_t len = 0, cap = 0, got;
    int rc = 0;

    if (fp == NULL)
        return idem__error_set(err, IDEM_EIO, "dir: cannot open %s: %s", path, strerror(errno));
    do {
        if (cap - len < 4096) {
            cap = cap == 0 ? 8192 : cap * 2;
            grown = realloc(buf, cap + 1);
            if (grown == NULL) {
                rc = idem__error_set(err, IDEM_ENOMEM, "out of memory reading %s", path);
                goto done;
            }
            buf = grown;
        }
        got = fread(buf + len, 1, cap - len, fp);
        len += got;
    } while (got > 0);
    if (ferror(fp)) {
        rc = idem__error_set(err, IDEM_EIO, "dir: cannot read %s", path);
        goto done;
    }
    buf[len] = '\0';
    *out = buf;
    *out_len = len;
    buf = NULL;
done:
    free(buf);
    fclose(fp);
    return rc;
}

static int add_dir_file(idem__migration_set *set, size_t *cap, const char *dir, const char *name,
                        idem_error *err)
{
    int version = name_version(name);
    char *path = NULL, *sql = NULL;
    size_t len = 0, path_len = strlen(dir) + strlen(name) + 2;
    int rc;

    if (version == 0)
        return idem__error_field(err, IDEM_EINVAL, "dir",
                                 "%s: a migration is named NNNN_description.sql (NNNN >= 0001, "
                                 "description in a-z, 0-9 and _)",
                                 name);
    if (set->count == *cap) {
        size_t grown_cap = *cap == 0 ? 16 : *cap * 2;
        idem__migration_file *grown = realloc(set->files, grown_cap * sizeof(*grown));
        if (grown == NULL)
            return idem__error_set(err, IDEM_ENOMEM, "out of memory loading migrations");
        set->files = grown;
        *cap = grown_cap;
    }
    path = malloc(path_len);
    if (path == NULL)
        return idem__error_set(err, IDEM_ENOMEM, "out of memory loading migrations");
    snprintf(path, path_len, "%s/%s", dir, name);
    rc = read_file(&sql, &len, path, err);
    free(path);
    if (rc != 0)
        return rc;
    set->count++;
    return file_init(&set->files[set->count - 1], version, name, sql, len, err);
}

static int by_version(const void *a, const void *b)
{
    const idem__migration_file *x = a, *y = b;

    return (x->version > y->version) - (x->version < y->version);
}

static int load_dir(idem__migration_set *set, const char *dir, idem_error *err)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t cap = 0;
    int rc = 0;

    if (d == NULL)
        return idem__error_set(err, IDEM_EIO, "dir: cannot open %s: %s", dir, strerror(errno));
    while (rc == 0 && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (e->d_name[0] == '.' || n < 4 || strcmp(e->d_name + n - 4, ".sql") != 0)
            continue; /* README, editor files: not migrations */
        rc = add_dir_file(set, &cap, dir, e->d_name, err);
    }
    closedir(d);
    if (rc != 0)
        return rc;
    if (set->count == 0)
        return idem__error_field(err, IDEM_EINVAL, "dir",
                                 "%s: no migration files in it (NNNN_description.sql); is this "
                                 "the right folder?",
                                 dir);
    qsort(set->files, set->count, sizeof(*set->files), by_version);
    for (size_t i = 1; i < set->count; i++)
        if (set->files[i].version == set->files[i - 1].version)
            return idem__error_field(err, IDEM_EINVAL, "dir", "%s and %s share version %04d",
                                     set->files[i - 1].name, set->files[i].name,
                                     set->files[i].version);
    return 0;
}

int idem__migration_set_load(idem__migration_set *out, const char *dir, idem_error *err)
{
    idem__migration_set set = {NULL, 0};
    int rc = dir != NULL ? load_dir(&set, dir, err) : load_embedded(&set, err);

    if (rc != 0) {
        idem__migration_set_clear(&set);
        return rc;
    }
    *out = set;
    return 0;
}
