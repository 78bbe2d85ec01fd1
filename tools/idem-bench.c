/*
 * idem-bench — what idem costs beside the work it protects, as a ratio measured in one
 * run against the same machine doing the same work without idem.
 *
 * Usage: idem-bench [--mode create,replay,contention,growth,sweep,external,pooler,rls,
 *                   gateway|all] [--threads 1,4,16]
 *                   [--duration SECONDS] [--round SECONDS] [--large] [--json]
 *                   [--pool N] [--dsn CONNINFO] [--pgbouncer CONNINFO] [--existing]
 *                   [--statements] [--durability on|as-is]
 *
 * It creates a fresh database (idem_bench_<pid>, plus one per table size for growth) on
 * the server that --dsn or the PG* environment names, applies idem's migrations there,
 * and drops the databases at the end. The modes are described in bench/modes.c and
 * bench/contention.c; tools/run bench runs them all against a throwaway server.
 *
 * This file is the command line; bench/runner.c does the run and prints the report.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"

static const char usage[] =
    "usage: idem-bench [--mode create,replay,contention,growth,sweep,external,pooler,rls,\n"
    "                  gateway|all] [--threads 1,4,16]\n"
    "                  [--duration SECONDS] [--round SECONDS] [--large] [--json]\n"
    "                  [--pool N] [--dsn CONNINFO] [--pgbouncer CONNINFO] [--existing]\n"
    "                  [--statements] [--durability on|as-is] [--statement-timeout-ms N]\n"
    "  --mode      which measurements (default all); not in all: sweep (retention's\n"
    "              sweeper on a backlog of 1 M expired records, beside replays),\n"
    "              external (begin + complete of an external effect beside the local path)\n"
    "              pooler (the pooler-safe setting, directly and through --pgbouncer)\n"
    "              rls (row-level security on and off, as the application role)\n"
    "              and gateway (the in-process side of tools/bench/gateway.py: its\n"
    "              declared effect through the library, attempt 1 for new keys and 2 for\n"
    "              replays, as the gateway marks them)\n"
    "  --threads   client threads for create and replay (default 1,4,16; at most 64)\n"
    "  --duration  measured seconds per measurement, all sides together (default 10)\n"
    "  --round     seconds per round; the sides alternate round by round (default 0.5)\n"
    "  --large     growth also measures 10 M operation records (loads them: minutes)\n"
    "  --pool      connections per pool at most, for both sides (default: twice the CPUs)\n"
    "  --json      print JSON instead of the table\n"
    "  --dsn       server to use (default: the PG* environment); always direct\n"
    "  --pgbouncer PgBouncer in transaction mode in front of that server, for the pooler\n"
    "              mode's third side (conninfo without dbname; default: $IDEM_PGBOUNCER,\n"
    "              which tools/with-postgres --pgbouncer sets)\n"
    "  --existing  measure in the database --dsn names instead of creating one: it must\n"
    "              hold idem's schema at this version and idem_example.support_tasks; it\n"
    "              is neither migrated nor dropped. Rows of the tenants bench-* are the\n"
    "              bench's: it refuses to start when some exist, and deletes them at the\n"
    "              end (its table bench_article_ops too, if it made it). Modes create,\n"
    "              replay, contention, external, gateway (its rows, tenant gateway-bench,\n"
    "              stay); on Citus, against the coordinator\n"
    "  --statements  also print each side's statements: executions and the server's\n"
    "              execution time per operation, from pg_stat_statements (the server must\n"
    "              load it; tools/run bench --statements starts one that does)\n"
    "  --durability  on (default): the run flushes every commit as production does (fsync,\n"
    "              synchronous_commit, full_page_writes on); where the server has one off\n"
    "              (tools/with-postgres does), idem-bench turns them on with ALTER SYSTEM\n"
    "              for its run (a superuser's) and resets them at the end; as-is: the\n"
    "              server's settings (always so with --existing); the report says which\n"
    "  --statement-timeout-ms  every pool's statement_timeout_ms (include/idem/pool.h;\n"
    "              default 0: the server's, a declared create leaving its own on the\n"
    "              session for the next): below the store's deadline_ms (10000) by a\n"
    "              second or more, a declared create leaves that one to the session\n"
    "              (lib/README.md, \"Behind a connection pooler\")\n"
    "  -h, --help  print this help\n"
    "  -V, --version\n"
    "              print the version\n";

/* Whether a comma-separated list has an empty item ("1,,2", ",1", "1,"), which strtok()
 * would skip in silence: a typo, not a shorter list. */
static int has_empty_item(const char *list)
{
    size_t n = strlen(list);

    return n == 0 || list[0] == ',' || list[n - 1] == ',' || strstr(list, ",,") != NULL;
}

static int parse_threads(bench_config *cfg, const char *list)
{
    char *copy = strdup(list), *save = NULL;
    int rc = 0;

    if (copy == NULL || has_empty_item(list)) {
        free(copy);
        return -1;
    }
    cfg->nthreads = 0;
    for (char *t = strtok_r(copy, ",", &save); t != NULL && rc == 0;
         t = strtok_r(NULL, ",", &save)) {
        char *end;
        long n = strtol(t, &end, 10);

        if (*end != '\0' || n < 1 || n > BENCH_MAX_THREADS || cfg->nthreads == 8)
            rc = -1;
        else
            cfg->threads[cfg->nthreads++] = (int)n;
    }
    free(copy);
    return rc == 0 && cfg->nthreads > 0 ? 0 : -1;
}

static int parse_modes(bench_config *cfg, const char *list)
{
    static const char *const names[] = {"create", "replay",   "contention", "growth", "all",
                                        "sweep",  "external", "pooler",     "rls",    "gateway"};
    static const int bits[] = {BENCH_MODE_CREATE,   BENCH_MODE_REPLAY, BENCH_MODE_CONTENTION,
                               BENCH_MODE_GROWTH,   BENCH_MODE_ALL,    BENCH_MODE_SWEEP,
                               BENCH_MODE_EXTERNAL, BENCH_MODE_POOLER, BENCH_MODE_RLS,
                               BENCH_MODE_GATEWAY};
    char *copy = strdup(list), *save = NULL;
    int rc = 0;

    if (copy == NULL || has_empty_item(list)) {
        free(copy);
        return -1;
    }
    cfg->modes = 0;
    for (char *t = strtok_r(copy, ",", &save); t != NULL && rc == 0;
         t = strtok_r(NULL, ",", &save)) {
        int found = 0;

        for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++) {
            if (strcmp(t, names[i]) == 0) {
                cfg->modes |= bits[i];
                found = 1;
            }
        }
        rc = found ? 0 : -1;
    }
    free(copy);
    return rc == 0 && cfg->modes != 0 ? 0 : -1;
}

static int parse_seconds(double *out, const char *text, double min)
{
    char *end;
    double v = strtod(text, &end);

    if (*end != '\0' || !(v >= min) || v > 86400)
        return -1;
    *out = v;
    return 0;
}

/* 0, 1 for --help, 2 for --version, -1 for a bad command line. */
static int parse_options(bench_config *cfg, int argc, char **argv)
{
    static const struct option longs[] = {{"mode", required_argument, NULL, 'm'},
                                          {"threads", required_argument, NULL, 't'},
                                          {"duration", required_argument, NULL, 'd'},
                                          {"round", required_argument, NULL, 'r'},
                                          {"large", no_argument, NULL, 'L'},
                                          {"json", no_argument, NULL, 'j'},
                                          {"dsn", required_argument, NULL, 'D'},
                                          {"pool", required_argument, NULL, 'p'},
                                          {"pgbouncer", required_argument, NULL, 'B'},
                                          {"help", no_argument, NULL, 'h'},
                                          {"existing", no_argument, NULL, 'E'},
                                          {"statements", no_argument, NULL, 'S'},
                                          {"version", no_argument, NULL, 'V'},
                                          {"durability", required_argument, NULL, 'U'},
                                          {"statement-timeout-ms", required_argument, NULL, 'T'},
                                          {NULL, 0, NULL, 0}};
    int c, at = 0, rc = 0;

    while (rc == 0 && (c = getopt_long(argc, argv, "hV", longs, &at)) != -1) {
        switch (c) {
        case 'm':
            rc = parse_modes(cfg, optarg);
            break;
        case 't':
            rc = parse_threads(cfg, optarg);
            break;
        case 'd':
            rc = parse_seconds(&cfg->duration_s, optarg, 1);
            break;
        case 'r':
            rc = parse_seconds(&cfg->round_s, optarg, 0.05);
            break;
        case 'L':
            cfg->large = 1;
            break;
        case 'S':
            cfg->statements = 1;
            break;
        case 'j':
            cfg->json = 1;
            break;
        case 'D':
            cfg->dsn = optarg;
            break;
        case 'B':
            cfg->pgbouncer = optarg;
            break;
        case 'p':
            cfg->pool_cap = atoi(optarg);
            rc = cfg->pool_cap >= 1 && cfg->pool_cap <= BENCH_MAX_THREADS ? 0 : -1;
            break;
        case 'E':
            cfg->existing = 1;
            break;
        case 'U':
            cfg->keep_durability = strcmp(optarg, "as-is") == 0;
            rc = cfg->keep_durability || strcmp(optarg, "on") == 0 ? 0 : -1;
            break;
        case 'T': {
            char *end;
            unsigned long ms = strtoul(optarg, &end, 10);

            rc = *end == '\0' && optarg[0] >= '0' && optarg[0] <= '9' && ms <= 3600000 ? 0 : -1;
            cfg->statement_timeout_ms = (unsigned int)ms;
            break;
        }
        case 'h':
            return 1;
        case 'V':
            return 2;
        default:
            rc = -1;
        }
    }
    if (rc < 0 && optarg != NULL)
        fprintf(stderr, "idem-bench: bad value for --%s: %s%s\n", longs[at].name, optarg,
                (c == 't' || c == 'm') && has_empty_item(optarg) ? " (an empty item)" : "");
    if (rc == 0 && cfg->existing &&
        (cfg->modes & (BENCH_MODE_GROWTH | BENCH_MODE_SWEEP | BENCH_MODE_POOLER)) != 0) {
        fprintf(stderr,
                "idem-bench: --existing measures create, replay, contention, external and gateway "
                "only (growth, sweep and pooler make databases of their own): give "
                "--mode\n");
        rc = -1;
    }
    return rc == 0 && optind == argc ? 0 : -1;
}

/* Twice the CPUs: the usual pool size for a database on the same machine. */
static int default_pool_cap(void)
{
    long cap = 2 * sysconf(_SC_NPROCESSORS_ONLN);

    return cap >= 1 && cap <= BENCH_MAX_THREADS ? (int)cap : 16;
}

int main(int argc, char **argv)
{
    bench_config cfg = {"",
                        10,
                        0.5,
                        {1, 4, 16},
                        3,
                        BENCH_MODE_ALL,
                        0,
                        0,
                        default_pool_cap(),
                        getenv("IDEM_PGBOUNCER"),
                        0,
                        0,
                        0,
                        0};
    int rc = parse_options(&cfg, argc, argv);

    if (rc == 2) {
        printf("idem-bench %s\n", idem_version());
        return 0;
    }
    if (rc != 0) {
        fputs(usage, rc > 0 ? stdout : stderr);
        return rc > 0 ? 0 : 64;
    }
    bench_pool_set_statement_timeout(cfg.statement_timeout_ms);
    return bench_main(&cfg);
}
