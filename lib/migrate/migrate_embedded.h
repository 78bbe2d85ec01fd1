/* The migrations compiled into the library (generated from migrations/ at build time). */
#ifndef IDEM_LIB_MIGRATE_EMBEDDED_H
#define IDEM_LIB_MIGRATE_EMBEDDED_H

#include <stddef.h>

typedef struct idem__embedded_migration {
    int version;      /* NNNN of the file name */
    const char *name; /* file name, "0001_operations.sql" */
    const char *sql;  /* exact file bytes, NUL-terminated */
    size_t len;       /* byte count, terminator excluded */
} idem__embedded_migration;

/* Sorted by version; ends with an all-zero entry. */
extern const idem__embedded_migration idem__embedded_migrations[];
extern const size_t idem__embedded_migrations_count;

#endif
