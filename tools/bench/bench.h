/*
 * idem-bench internals: a side (one way of doing an operation), the rounds that time
 * sides in alternation (rounds.c), the modes that build sides (modes.c, contention.c), the
 * databases they use (db.c), the runner that runs the modes a configuration asks for
 * (runner.c) and its report (report.c); what they say on stderr (say.c). idem-bench.c is
 * only the command line: it fills a bench_config and calls bench_main().
 */
#ifndef IDEM_BENCH_H
#define IDEM_BENCH_H

#include <idem/idem.h>
#include <idem/migrate.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define BENCH_MAX_THREADS  64
#define BENCH_MAX_SIDES    6
#define BENCH_MAX_ROUNDS   200
#define BENCH_MAX_RATIOS   8
#define BENCH_MAX_MEASURES 24

typedef struct bench_worker bench_worker;

/* One operation; 0 when it did what it should, else -1 with the reason in w->error. */
typedef int (*bench_op_fn)(bench_worker *w);

/* ---- rounds (rounds.c) --------------------------------------------------------------- */

/* One way of doing the operation being measured ("idem", "bare INSERT", ...). */
typedef struct bench_side {
    const char *name;
    bench_op_fn op;
    void *ctx;
} bench_side;

/* One thread in one round. */
struct bench_worker {
    const bench_side *side;
    int index;
    uint64_t rng;
    const atomic_int *stop;
    pthread_barrier_t *start;
    uint64_t *lat_ns; /* latency of each successful operation */
    size_t nlat, cap;
    long long errors;
    uint64_t cpu_ns; /* this thread's CPU time (user + system) in the round */
    char error[256]; /* the first error's message */
};

/* A uniform random number in [0, n). */
uint64_t bench_random(bench_worker *w, uint64_t n);
/* Record a failure: count it, keep the first message. Returns -1. */
int bench_fail(bench_worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One statement of a side, from pg_stat_statements (--statements, statements.c): its
 * executions and their time over the side's rounds. */
typedef struct bench_stmt {
    char queryid[24];
    char query[4096]; /* at most 1,000 characters of the statement */
    double calls, ms;
} bench_stmt;

typedef struct bench_stmts {
    bench_stmt *items; /* owned; bench_statements_free() */
    int n, cap;
} bench_stmts;

/* What one side did over all its rounds. */
typedef struct bench_side_result {
    char name[64];
    long long ops, errors;
    double seconds;
    double ops_per_s;
    double p50_ms, p99_ms, p999_ms;
    double cpu_ns;           /* client CPU time, all threads */
    double cpu_us_per_op;    /* client CPU per successful operation */
    double server_ns;        /* the server's CPU time: postmaster and backends (0: unknown) */
    double server_us_per_op; /* the server's CPU per successful operation */
    int nrounds;
    double round_ops_per_s[BENCH_MAX_ROUNDS];
    double round_p50_ms[BENCH_MAX_ROUNDS];
    char first_error[256];
    bench_stmts stmts; /* with --statements: its statements, most time first */
} bench_side_result;

/* a / b per round, summarized. */
typedef struct bench_ratio {
    char label[96];
    const char *what; /* "throughput" or "p50 latency" */
    double median, min, max;
    double target; /* 0: none */
    int at_least;  /* 1: the ratio should be >= target, 0: <= target */
    double a, b;   /* the two sides' absolute numbers over all rounds (ops/s or p50 ms) */
} bench_ratio;

/* The contention mode's end-of-run check. */
typedef struct bench_invariant {
    int present;
    long long tasks, operations, distinct_keys, created, replayed, retried, twice_created;
    long long serialization_retries, claim_races; /* the store's own counters */
    int pass;
} bench_invariant;

/* One measurement: some sides at one thread count. */
typedef struct bench_measure {
    const char *mode;
    const char *note; /* what the sides are, for the table's reader */
    int threads;
    int nsides;
    bench_side_result side[BENCH_MAX_SIDES];
    int nratios;
    bench_ratio ratio[BENCH_MAX_RATIOS];
    bench_invariant invariant;
    double load_start, load_end; /* the machine's 1-minute load average around it */
} bench_measure;

/* How to run a measurement. */
typedef struct bench_plan {
    const bench_side *sides;
    int nsides;
    int threads;
    double seconds; /* measured time, all sides together */
    double round_s;
    double warmup_s; /* per side, before measuring */
} bench_plan;

/* Run the plan: warm each side up, then cycle through the sides in rounds (A B A B ...).
 * Fills out->side[]; returns 0 (exits if the threads cannot start). */
int bench_run(bench_measure *out, const bench_plan *plan);

/* Count the CPU time of the server whose data directory is @data_dir (its postmaster and
 * every backend, read from /proc) in each side's results; a server elsewhere counts 0. */
void bench_watch_server(const char *data_dir);

/* The statement profile (statements.c). bench_statements_open() connects to @conninfo
 * (a superuser's: it creates the extension pg_stat_statements there), or says why not;
 * while it is open, every round adds its side's statements to the side's result. */
int bench_statements_open(const char *conninfo);
void bench_statements_close(void);
int bench_statements_active(void);
/* The view's rows now (NULL when no profile is open); bench_statements_add() takes two of
 * them, before and after a round, adds the difference to @list and frees both. */
PGresult *bench_statements_snapshot(void);
void bench_statements_add(bench_stmts *list, PGresult *before, PGresult *after);
void bench_statements_sort(bench_stmts *list);
void bench_statements_free(bench_stmts *list);

/* Add the ratio side a / side b to m: of throughput (per round), or of p50 latency. */
void bench_ratio_throughput(bench_measure *m, int a, int b, const char *label, double target);
void bench_ratio_p50(bench_measure *m, int a, int b, const char *label, double target);

/* Everything measured, for the report. */
typedef struct bench_results {
    int nmeasures;
    bench_measure measure[BENCH_MAX_MEASURES];
    char server_version[64];
    char durability[128];      /* "fsync on, synchronous_commit on, full_page_writes on" */
    char durability_note[160]; /* whose settings those are (durability.c) */
    char data_dir[256];        /* the server's data directory ... */
    char data_fs[512];         /* ... and the file system it is on: "/dev/vda (ext4) on /" */
    char cpu_model[128];
    long cpus;
    double total_s;
} bench_results;

/* Reserve the next measurement slot; NULL when full. */
bench_measure *bench_results_add(bench_results *res, const char *mode, int threads,
                                 const char *note);

/* ---- messages (say.c) ---------------------------------------------------------------- */

/* Progress on stderr. */
void bench_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Mask @dsn's password in every message bench_error() prints from now on. */
void bench_mask_dsn(const char *dsn);
/* Print a failure to stderr (the run's DSN password masked); returns -1. */
int bench_error(const char *what, const char *detail);

/* ---- the run (runner.c) -------------------------------------------------------------- */

/* The settings of a run (from the command line). */
typedef struct bench_config {
    const char *dsn; /* "" = the PG* environment */
    double duration_s;
    double round_s;
    int threads[8];
    int nthreads;
    int modes; /* BENCH_MODE_* bits */
    int large;
    int json;
    int pool_cap;          /* connections per pool at most (--pool): a pool for N threads has
                              min(N, pool_cap); both sides of a measurement share it */
    const char *pgbouncer; /* the pooler mode's PgBouncer (conninfo without dbname), or
                              NULL/"" for its direct sides only (--pgbouncer) */
    int existing;          /* --existing: measure in the database dsn names (existing.c) */
    int statements;        /* --statements: the statement profile (statements.c) */
    int keep_durability;   /* --durability as-is: measure with the server's settings */
    unsigned int statement_timeout_ms; /* every pool's statement_timeout_ms
                                          (--statement-timeout-ms; 0: the server's) */
} bench_config;

/* ---- durability (durability.c) ------------------------------------------------------- */

/* Make sure the server flushes every commit (fsync, synchronous_commit, full_page_writes
 * on): unless @keep, turn them on with ALTER SYSTEM and wait until @admin's session reads
 * them. Says in @note whose settings the run has. Returns 1 when it changed them (then
 * call bench_durability_reset() at the end), 0 when not, -1 when it could not (said). */
int bench_durability_ensure(PGconn *admin, int keep, char *note, size_t size);
void bench_durability_reset(PGconn *admin);

/* ---- the ratios side by side (summary.c) --------------------------------------------- */

/* The create and replay modes' headline ratios, a column per thread count, each with the
 * two sides' ops/s and the load average around its measurement; nothing when neither
 * mode ran. */
void bench_print_summary(const bench_results *res);

enum {
    BENCH_MODE_CREATE = 1,
    BENCH_MODE_REPLAY = 2,
    BENCH_MODE_CONTENTION = 4,
    BENCH_MODE_GROWTH = 8,
    BENCH_MODE_ALL = 15,      /* the four above */
    BENCH_MODE_SWEEP = 16,    /* not part of all: it loads 1 M records (about a minute) */
    BENCH_MODE_EXTERNAL = 32, /* not part of all: external effects beside the local path */
    BENCH_MODE_POOLER = 64,   /* not part of all: the pooler-safe setting, and PgBouncer */
    BENCH_MODE_RLS = 128,     /* not part of all: row-level security on and off */
    BENCH_MODE_GATEWAY = 256, /* not part of all: the gateway bench's in-process side */
};

/* Run what cfg asks for in a fresh database on cfg->dsn's server (dropped at the end),
 * then print the report on stdout; progress goes to stderr. Returns the exit status: 0;
 * 1 a measurement could not run; 2 the contention invariant failed; 69 no server. */
int bench_main(const bench_config *cfg);

/* ---- databases (db.c) ---------------------------------------------------------------- */

/* The conninfo @dsn with its database replaced by @dbname; caller frees. */
char *bench_conninfo(const char *dsn, const char *dbname);
/* Create database @name (dropping an old one of that name) and apply idem's migrations. */
int bench_db_create(PGconn *admin, const char *dsn, const char *name);
void bench_db_drop(PGconn *admin, const char *name);

/* --existing (existing.c): check that the database @admin is connected to holds idem's
 * schema at this version and, unless @modes is the gateway mode alone, the example's
 * table; and no rows of the bench's tenants; make bench_article_ops if missing (distributed
 * by tenant on Citus; *made set). Returns 0 or -1 (said on stderr). */
int bench_existing_check(PGconn *admin, int modes, int *made);
/* After a check that passed (@checked): delete the rows of the bench's tenants (bench-*),
 * and bench_article_ops if it was made; nothing when @modes is the gateway mode alone. */
void bench_existing_clean(PGconn *admin, int modes, int made, int checked);
/* The lean table of the create mode's sides without idem (create.c), the user's own: the
 * article's operations table, its four columns (tenant, operation ID, the arguments'
 * digest in hex, the response) and its key, the primary key; no other column or index. */
#define BENCH_HAND_TABLE                                                                           \
    "public.bench_article_ops (tenant text NOT NULL, operation_id text NOT NULL,"                  \
    " digest text NOT NULL, response text NOT NULL, PRIMARY KEY (tenant, operation_id))"

/* The application role: idem_bench_app, a login in idem_app (row-level security applies),
 * created when missing (the --dsn role must be a superuser or have CREATEROLE; it stays in
 * the cluster), granted the example's table on @conninfo's database. 0 or -1 (said). */
int bench_app_role_setup(const char *conninfo);
/* @conninfo as the application role; with @tenant, idem.tenant = @tenant is the session's
 * setting from its start (options=-c), so that a bare read sees that tenant's rows under
 * row-level security. Caller frees; NULL when out of memory. */
char *bench_app_conninfo(const char *conninfo, const char *tenant);

/* The statement_timeout_ms of every pool opened from now on (bench_config). */
void bench_pool_set_statement_timeout(unsigned int ms);

/* A pool of min(threads, cap) connections, all opened now (cap: bench_config.pool_cap). */
int bench_pool_open(idem_pool **out, const char *conninfo, int threads, int cap);
/* The same, with @pooler as idem_pool_options.pooler. */
int bench_pool_open_pooler(idem_pool **out, const char *conninfo, int threads, int cap,
                           idem_pooler pooler);
/* Add completed operation records k<from>..k<to-1> for @tenant, every one replayable with
 * the replay arguments (bench_replay_arguments); then VACUUM ANALYZE. */
int bench_load_operations(const char *conninfo, const char *tenant, long from, long to);
/* The same without VACUUM ANALYZE, autovacuum off on idem.operations first: a table that
 * is never analyzed during the run (a fresh database). */
int bench_load_operations_fresh(const char *conninfo, const char *tenant, long from, long to);
/* The operation ID of loaded key @i, into out (at least 16 bytes). */
void bench_loaded_key(char *out, size_t size, uint64_t i);
/* count(*) of @table (support_tasks or operations) rows of @tenant; -1 on failure. */
long long bench_count_rows(const char *conninfo, const char *table, const char *tenant);

#define BENCH_REPLAY_ARGUMENTS "{\"subject\":\"Benchmark replay\"}"
#define BENCH_CREATE_ARGUMENTS "{\"subject\":\"Benchmark task\"}"

/* ---- modes (create.c, modes.c, contention.c, pooler.c) ------------------------------ */

/* ---- sides through idem_store_execute() (store_side.c) ------------------------------- */

/* The example tool through @store as @tenant: attempt @attempt of key @op with @args,
 * which must end @expected. 0, or -1 with the reason recorded (bench_fail()). */
int bench_execute(bench_worker *w, idem_store *store, const char *tenant, const char *op,
                  const char *args, unsigned int attempt, idem_status expected);

/* A side's own pool and store (its bench_side.ctx), and the tenants it works in. */
typedef struct bench_store_side {
    idem_pool *pool;
    idem_store *store;
    const char *create_tenant; /* bench_store_new_key() */
    const char *replay_tenant; /* bench_store_replay(): keys loaded by bench_load_operations() */
    uint64_t replay_keys;      /* ... k0..k<replay_keys-1> */
} bench_store_side;

/* Operations of a bench_store_side: a new key (a first attempt, created), and a replay of a
 * loaded key (a retry, replayed). */
int bench_store_new_key(bench_worker *w);
int bench_store_replay(bench_worker *w);
/* Open @s's pool (bench_pool_open_pooler()) and store; bench_store_sides_close() frees them. */
int bench_store_side_open(bench_store_side *s, const char *conninfo, idem_pooler pooler,
                          int threads, int cap);
void bench_store_sides_close(bench_store_side *s, int n);

int bench_mode_create(bench_results *res, const bench_config *cfg, const char *conninfo);
/* The replay mode: in database @db (warm), then in a fresh one beside it (dropped after). */
int bench_mode_replay(bench_results *res, const bench_config *cfg, PGconn *admin, const char *db);
int bench_mode_contention(bench_results *res, const bench_config *cfg, const char *conninfo);
int bench_mode_growth(bench_results *res, const bench_config *cfg, PGconn *admin,
                      const char *dbprefix);
/* sweep.c */
int bench_mode_sweep(bench_results *res, const bench_config *cfg, PGconn *admin,
                     const char *dbprefix);
/* external.c */
int bench_mode_external(bench_results *res, const bench_config *cfg, const char *conninfo);
/* The pooler mode (pooler.c): @conninfo is database @db on the --dsn server. */
int bench_mode_pooler(bench_results *res, const bench_config *cfg, const char *conninfo,
                      const char *db);

/* The rls mode (rls.c): database @db and a second one like it without row-level security. */
int bench_mode_rls(bench_results *res, const bench_config *cfg, PGconn *admin, const char *db);

/* The gateway mode (gateway.c): the in-process side of tools/bench/gateway.py, in the
 * database @conninfo names; its table public.bench_gateway_tasks, made when missing, and
 * its rows stay. gateway.py configures idem-gateway with the same tenant, tool, statement
 * and arguments (BENCH_CREATE_ARGUMENTS). */
int bench_mode_gateway(bench_results *res, const bench_config *cfg, const char *conninfo);
#define BENCH_GATEWAY_TENANT "gateway-bench" /* not bench-*: --existing leaves its rows */
#define BENCH_GATEWAY_TOOL   "create_bench_task"
#define BENCH_GATEWAY_SQL                                                                          \
    "INSERT INTO public.bench_gateway_tasks (tenant, subject, operation_id) VALUES ($1, $2, $3)"   \
    " RETURNING json_build_object('status', 'created', 'task_id', task_id)"
#define BENCH_GATEWAY_REPLAY_KEYS 1000
/* Replay key @i (gateway-replay-<i>), into out (at least 32 bytes). */
void bench_gateway_replay_key(char *out, size_t size, uint64_t i);

/* ---- report (report.c) --------------------------------------------------------------- */

void bench_print_table(const bench_results *res, const bench_config *cfg);
int bench_print_json(const bench_results *res, const bench_config *cfg);

#endif
