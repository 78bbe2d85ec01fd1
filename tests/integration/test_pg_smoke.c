#include <criterion/criterion.h>
#include <stdlib.h>

#include "pgtest.h"

Test(pg_smoke, creates_table_writes_and_reads_back)
{
    char *ci = pgtest_new_database("smoke");
    PGconn *conn = pgtest_connect(ci);

    PQclear(pgtest_exec(conn, "CREATE TABLE t (id int PRIMARY KEY, v text NOT NULL)"));
    PQclear(pgtest_exec(conn, "INSERT INTO t VALUES (1, 'one'), (2, 'two')"));
    PGresult *res = pgtest_exec(conn, "SELECT v FROM t WHERE id = 2");
    cr_assert_eq(PQntuples(res), 1);
    cr_assert_str_eq(PQgetvalue(res, 0, 0), "two");
    PQclear(res);
    cr_assert_eq(pgtest_scalar(conn, "SELECT count(*) FROM t"), 2);
    PQfinish(conn);
    free(ci);
}
