/* The server's durability for the run: idem's cost is measured as production runs, with
 * every commit flushed (fsync, synchronous_commit and full_page_writes on). A throwaway
 * server started for the tests runs them off (tools/with-postgres); unless told to keep
 * what the server has (--durability as-is) or measuring in an existing database, the bench
 * turns them on for its run with ALTER SYSTEM and resets them at the end. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "bench.h"

static const char *const settings[] = {"fsync", "synchronous_commit", "full_page_writes"};
#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

static int exec_ok(PGconn *admin, const char *sql)
{
    PGresult *res = PQexec(admin, sql);
    ExecStatusType st = PQresultStatus(res);

    PQclear(res);
    return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? 0 : -1;
}

/* Whether every setting reads "on" on @admin's session. */
static int all_on(PGconn *admin)
{
    PGresult *res = PQexec(admin, "SELECT current_setting('fsync') = 'on'"
                                  " AND current_setting('synchronous_commit') = 'on'"
                                  " AND current_setting('full_page_writes') = 'on'");
    int on = PQresultStatus(res) == PGRES_TUPLES_OK && PQgetvalue(res, 0, 0)[0] == 't';

    PQclear(res);
    return on;
}

/* After pg_reload_conf(): the session reads the new values once its backend has taken the
 * signal; wait for that state (bounded: 10 s), not for a fixed time. */
static int wait_all_on(PGconn *admin)
{
    const struct timespec pause = {0, 20 * 1000 * 1000};

    for (int i = 0; i < 500; i++) {
        if (all_on(admin))
            return 0;
        nanosleep(&pause, NULL);
    }
    return -1;
}

static int alter_all(PGconn *admin, const char *verb, const char *tail)
{
    char sql[96];
    int rc = 0;

    for (size_t i = 0; i < NSETTINGS; i++) {
        snprintf(sql, sizeof(sql), "ALTER SYSTEM %s %s%s", verb, settings[i], tail);
        rc |= exec_ok(admin, sql);
    }
    return rc | exec_ok(admin, "SELECT pg_reload_conf()");
}

int bench_durability_ensure(PGconn *admin, int keep, char *note, size_t size)
{
    if (all_on(admin)) {
        snprintf(note, size, "the server's own");
        return 0;
    }
    if (keep) {
        snprintf(note, size, "the server's own, kept (--durability as-is or --existing)");
        return 0;
    }
    if (alter_all(admin, "SET", " = on") != 0 || wait_all_on(admin) != 0) {
        alter_all(admin, "RESET", "");
        return bench_error("turning fsync, synchronous_commit and full_page_writes on "
                           "(ALTER SYSTEM: a superuser's; or give --durability as-is)",
                           PQerrorMessage(admin));
    }
    snprintf(note, size,
             "turned on for this run by idem-bench (ALTER SYSTEM, reset at the end;"
             " the server ran with some off)");
    bench_say("durability: fsync, synchronous_commit and full_page_writes on for this run");
    return 1;
}

void bench_durability_reset(PGconn *admin)
{
    if (alter_all(admin, "RESET", "") != 0)
        bench_error("resetting fsync, synchronous_commit and full_page_writes (ALTER SYSTEM RESET)",
                    PQerrorMessage(admin));
}
