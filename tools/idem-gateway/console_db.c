/* The console's database connection: its own role, checked on every connection to hold
 * idem_operator's rights (every tenant's items, reading and resolving them) and no more: a
 * superuser, a BYPASSRLS role, or a member of idem_app or idem_sweeper is refused, so that
 * a console taken over cannot run effects or delete records. */
#include <stdio.h>
#include <string.h>

#include "console_int.h"

#define CONNECT_TIMEOUT_S "10"

/* One row: the role, whether it is superuser or BYPASSRLS, whether it has idem_operator's
 * rights, and the group roles beyond them that it has. */
static const char role_sql[] =
    "SELECT current_user, r.rolsuper OR r.rolbypassrls,"
    " EXISTS (SELECT 1 FROM pg_roles g WHERE g.rolname = 'idem_operator'"
    "  AND pg_has_role(current_user, g.oid, 'USAGE')),"
    " coalesce((SELECT string_agg(g.rolname, ', ' ORDER BY g.rolname) FROM pg_roles g"
    "  WHERE g.rolname IN ('idem_app', 'idem_sweeper')"
    "  AND pg_has_role(current_user, g.oid, 'USAGE')), '')"
    " FROM pg_roles r WHERE r.rolname = current_user";

/* 0 when the role fits, else -1 with @why. */
static int check_role(PGconn *conn, char *why, size_t size)
{
    PGresult *res = PQexecParams(conn, role_sql, 0, NULL, NULL, NULL, NULL, 0);
    int rc = -1;

    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
        snprintf(why, size, "console.dsn: cannot read the role's rights: %s", PQerrorMessage(conn));
    else if (strcmp(PQgetvalue(res, 0, 1), "t") == 0)
        snprintf(why, size,
                 "console.dsn: role \"%s\" is a superuser or BYPASSRLS; the console needs a "
                 "role with idem_operator's rights and no more",
                 PQgetvalue(res, 0, 0));
    else if (strcmp(PQgetvalue(res, 0, 2), "t") != 0)
        snprintf(why, size,
                 "console.dsn: role \"%s\" lacks idem_operator's rights (GRANT idem_operator "
                 "TO \"%s\")",
                 PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 0));
    else if (PQgetvalue(res, 0, 3)[0] != '\0')
        snprintf(why, size,
                 "console.dsn: role \"%s\" has rights beyond idem_operator's (it is in %s); "
                 "the console needs a role with idem_operator's rights and no more",
                 PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 3));
    else
        rc = 0;
    PQclear(res);
    return rc;
}

PGconn *gw_console_connect(const gw_console_config *cc, unsigned int *status, char *why,
                           size_t size)
{
    const char *const keys[] = {"dbname", "connect_timeout", "application_name", NULL};
    const char *const values[] = {cc->dsn, CONNECT_TIMEOUT_S, "idem-gateway console", NULL};
    PGconn *conn = PQconnectdbParams(keys, values, 1);

    if (conn == NULL || PQstatus(conn) != CONNECTION_OK) {
        snprintf(why, size, "console.dsn: cannot connect: %s",
                 conn != NULL ? PQerrorMessage(conn) : "out of memory");
        *status = 503;
        PQfinish(conn);
        return NULL;
    }
    if (check_role(conn, why, size) != 0) {
        *status = 500;
        PQfinish(conn);
        return NULL;
    }
    return conn;
}
