/* Fuzz target: the migration file splitter, idem__sql_split() and
 * idem__sql_no_transaction() (lib/migrate/migrate_internal.h), on the input as a file's bytes.
 *
 * Aborts when a property of the splitter's contract fails:
 * - each statement is bytes [offset, offset + len) of the input, not empty, and
 *   idem__sql_line() gives its line (1 + the newlines before it);
 * - the statements are in order and do not overlap; each but the last ends with its ';',
 *   and the last ends with a ';' or at the end of the file;
 * - what lies between them (and before the first, after the last) is comments, blanks and
 *   ';' only: it splits into no statement ("comment-only stretches are not statements");
 * - a statement's text is one statement: split again, it gives itself whole;
 * - idem__sql_no_transaction() answers 0 or 1, and 1 only when the marker line comes
 *   before the first statement;
 * - idem__sql_alter_table() on each statement: when it answers 1, the name lies in the head,
 *   the actions (two or more) follow it in order without overlapping, inside the
 *   statement, each but the last followed by its ',' after blanks, and the head with any
 *   one action is one statement for the splitter.
 * Built with libFuzzer (-Dfuzzing=true, clang) or with standalone.c (any compiler). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "migrate_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define check(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            abort();                                                                               \
    } while (0)

static const char marker[] = "-- idem:no-transaction";

/* How many statements @len bytes at @sql split into; a single one is all of them. They
 * are split behind a blank, as they stood inside the file: bytes of a byte order mark
 * that begin them are not at the start of a file, where the splitter skips a mark. */
static size_t count_statements(const char *sql, size_t len)
{
    idem__sql_stmt *stmts = NULL;
    size_t count = 0;
    char *copy = malloc(len + 1); /* its exact size, for the sanitizers */

    check(copy != NULL);
    copy[0] = ' ';
    memcpy(copy + 1, sql, len);
    check(idem__sql_split(&stmts, &count, copy, len + 1) == 0);
    check(count == 0 || stmts != NULL);
    if (count == 1)
        check(stmts[0].offset == 1 && stmts[0].len == len);
    free(stmts);
    free(copy);
    return count;
}

static unsigned line_of(const char *sql, size_t offset)
{
    unsigned line = 1;
    const char *nl = sql;

    while ((nl = memchr(nl, '\n', offset - (size_t)(nl - sql))) != NULL) {
        line++;
        nl++;
    }
    return line;
}

/* The properties of idem__sql_alter_table() on the statement stmt (len bytes). */
static void check_alter(const char *stmt, size_t len)
{
    idem__alter_table t;
    int rc = idem__sql_alter_table(&t, stmt, len);
    size_t end;
    char *piece;

    check(rc == 0 || rc == 1);
    if (rc == 0)
        return;
    check(t.count >= 2 && t.actions != NULL);
    check(t.head_len > 0 && t.head_len <= len && t.name.len > 0 &&
          t.name.offset + t.name.len <= t.head_len);
    check(t.actions[0].offset == t.head_len);
    end = t.head_len;
    for (size_t i = 0; i < t.count; i++) {
        const idem__sql_stmt *a = &t.actions[i];
        size_t after = a->offset + a->len;

        check(a->offset >= end && after <= len);
        while (i + 1 < t.count && after < len && memchr(" \t\n\r\f\v", stmt[after], 6) != NULL)
            after++;
        check(i + 1 == t.count || (after < len && stmt[after] == ','));
        check((piece = malloc(t.head_len + a->len + 1)) != NULL);
        memcpy(piece, stmt, t.head_len);
        memcpy(piece + t.head_len, stmt + a->offset, a->len);
        check(count_statements(piece, t.head_len + a->len) == 1);
        free(piece);
        end = after;
    }
    free(t.actions);
}

static void check_statements(const char *sql, size_t size, const idem__sql_stmt *stmts,
                             size_t count)
{
    size_t end = idem__sql_bom_len(sql, size); /* of the previous statement; a byte order
                                                   mark at the start is none of them */

    for (size_t i = 0; i < count; i++) {
        const idem__sql_stmt *st = &stmts[i];

        check(st->len > 0 && st->offset >= end && st->offset <= size &&
              st->len <= size - st->offset);
        check(sql[st->offset + st->len - 1] == ';' ||
              (i == count - 1 && st->offset + st->len == size));
        check(idem__sql_line(sql, st->offset) == line_of(sql, st->offset));
        check(count_statements(sql + end, st->offset - end) == 0);
        check(count_statements(sql + st->offset, st->len) == 1);
        check_alter(sql + st->offset, st->len);
        end = st->offset + st->len;
    }
    check(count_statements(sql + end, size - end) == 0);
}

/* The marker as a line of its own (after blanks, before blanks) within sql[0, limit). */
static int marker_line_before(const char *sql, size_t limit)
{
    const size_t m = sizeof(marker) - 1, bom = idem__sql_bom_len(sql, limit);

    for (size_t i = 0; i + m <= limit; i++) {
        size_t j = i + m, k = i;

        if (memcmp(sql + i, marker, m) != 0)
            continue;
        while (k > bom && (sql[k - 1] == ' ' || sql[k - 1] == '\t'))
            k--;
        if (k > bom && sql[k - 1] != '\n') /* a line starts after a byte order mark too */
            continue;
        while (j < limit && (sql[j] == ' ' || sql[j] == '\t' || sql[j] == '\r'))
            j++;
        if (j == limit || sql[j] == '\n')
            return 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *sql = (const char *)data;
    idem__sql_stmt *stmts = NULL;
    size_t count = 0;
    int no_transaction;

    check(idem__sql_split(&stmts, &count, sql, size) == 0);
    check(count == 0 || stmts != NULL);
    check_statements(sql, size, stmts, count);
    no_transaction = idem__sql_no_transaction(sql, size);
    check(no_transaction == 0 || no_transaction == 1);
    if (no_transaction)
        check(marker_line_before(sql, count > 0 ? stmts[0].offset : size));
    free(stmts);
    return 0;
}
