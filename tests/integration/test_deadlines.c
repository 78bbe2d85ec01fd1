/* Deadlines hold when the server stops answering: a backend stopped with SIGSTOP (its
 * kernel still acknowledges every packet, so only the client's own clock can notice), and
 * a listener that accepts connections and never says a word. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "checkout.h"
#include "core/clock.h"
#include "conn.h"
#include "exec.h"
#include "idem/idem.h"
#include "pgtest.h"
#include "stalltest.h"

/* The deadline of a statement, and of a call (long enough for the retry after it to be
 * served on a loaded machine: PGTEST_LOAD_SLACK_MS). */
#define EXEC_DEADLINE_MS 500
#define CALL_DEADLINE_MS PGTEST_LOAD_SLACK_MS

/* The tools' default connect timeout (tools/common/cli.h), which libpq counts in whole seconds. */
#define TOOL_CONNECT_TIMEOUT_MS 10000
static idem_pool *pool;
static idem_store *store;
static char *conninfo;

static void cleanup(void)
{
    stalltest_resume();
    idem_store_free(store);
    idem_pool_free(pool);
    free(conninfo);
    store = NULL;
    pool = NULL;
    conninfo = NULL;
}

TestSuite(deadlines, .fini = cleanup);

static void open_pool(const char *dsn)
{
    idem_pool_options opts = IDEM_POOL_OPTIONS_INIT;
    idem_error err = IDEM_ERROR_INIT;

    opts.max_size = 1;
    opts.min_idle = 1;
    cr_assert_eq(idem_pool_new(&pool, dsn, &opts, &err), 0, "%s", err.message);
}

/* Stop the backend of the pool's one connection, once it waits for its client. */
static void stop_backend(void)
{
    stalltest_stop(stalltest_pooled_backend(pool), conninfo);
}

/* The ways a statement goes through the execution layer. */
enum path {
    PATH_SIMPLE,     /* idem__conn_exec() */
    PATH_PARAMS,     /* idem__conn_exec_params() */
    PATH_PREPARE,    /* idem__conn_exec_prepared(), the statement not yet prepared */
    PATH_PREPARED,   /* idem__conn_exec_prepared(), already prepared */
    PATH_PIPELINE,   /* idem__conn_pipeline() */
    PATH_LARGE_SEND, /* a 16 MiB parameter: the send itself cannot complete */
};

static const idem__stmt stmt_echo = {"idem_deadlinetest_echo", "SELECT length($1)", 1};
static const idem__stmt stmt_unused = {"idem_deadlinetest_unused", "SELECT $1::text", 1};

static int run_path(enum path path, idem_conn *conn, idem_error *err)
{
    static char large[16 << 20];
    const char *values[1] = {"x"};
    idem__pipe_cmd cmds[2] = {{NULL, "SELECT 1", 0, NULL, NULL, NULL, 0, NULL},
                              {&stmt_echo, NULL, 0, values, NULL, NULL, 0, NULL}};
    PGresult *res = NULL;
    size_t failed_at;
    int rc;

    switch (path) {
    case PATH_SIMPLE:
        rc = idem__conn_exec(&res, conn, "SELECT 1", err);
        break;
    case PATH_PARAMS:
        rc = idem__conn_exec_params(&res, conn, "SELECT $1::text", 1, values, err);
        break;
    case PATH_PREPARE:
        rc = idem__conn_exec_prepared(&res, conn, &stmt_unused, values, NULL, NULL, 0, err);
        break;
    case PATH_PIPELINE:
        rc = idem__conn_pipeline(conn, cmds, 2, &failed_at, err);
        PQclear(cmds[0].result);
        PQclear(cmds[1].result);
        break;
    case PATH_LARGE_SEND:
        memset(large, 'x', sizeof(large) - 1);
        values[0] = large;
        /* fall through */
    default:
        rc = idem__conn_exec_prepared(&res, conn, &stmt_echo, values, NULL, NULL, 0, err);
        break;
    }
    PQclear(res);
    return rc;
}

struct path_case {
    enum path path;
};

ParameterizedTestParameters(deadlines, a_statement_on_a_stalled_backend_gives_up_at_the_deadline)
{
    static struct path_case cases[] = {
        {PATH_SIMPLE},   {PATH_PARAMS},   {PATH_PREPARE},
        {PATH_PREPARED}, {PATH_PIPELINE}, {PATH_LARGE_SEND},
    };

    return cr_make_param_array(struct path_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct path_case *pc, deadlines,
                  a_statement_on_a_stalled_backend_gives_up_at_the_deadline)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_conn *conn = NULL;
    idem_pool_stats st = IDEM_POOL_STATS_INIT;
    uint64_t start, elapsed;
    int rc;

    conninfo = pgtest_new_database("deadline_exec");
    open_pool(conninfo);
    cr_assert_eq(idem_pool_acquire(&conn, pool, &err), 0, "%s", err.message);
    cr_assert_eq(run_path(PATH_PREPARED, conn, &err), 0, "%s", err.message); /* prepares */
    idem_pool_release(conn);
    stop_backend();
    start = idem__now_ms();
    cr_assert_eq(idem__pool_checkout(&conn, pool, start + EXEC_DEADLINE_MS, &err), 0, "%s",
                 err.message);
    rc = run_path(pc->path, conn, &err);
    elapsed = idem__now_ms() - start;
    cr_assert_eq(rc, IDEM_EUNAVAIL, "path %d: %s: %s", (int)pc->path, idem_err_name(rc),
                 err.message);
    cr_assert(elapsed >= EXEC_DEADLINE_MS - 50 &&
                  elapsed < (uint64_t)pgtest_late_ms(EXEC_DEADLINE_MS),
              "path %d gave up after %llu ms", (int)pc->path, (unsigned long long)elapsed);
    cr_assert_not_null(strstr(err.message, "deadline passed"), "%s", err.message);
    cr_assert(idem__conn_failed(conn), "the connection is not marked for discard");
    idem_pool_release(conn);
    cr_assert_eq(idem_pool_stats_get(&st, pool), 0);
    cr_assert_eq(st.closed_broken, 1);
    cr_assert_eq(st.size, 0);
}

/* A statement sent at the deadline still gets a short grace: a healthy server answers it,
 * a stalled one is given up on soon after. */
Test(deadlines, a_statement_sent_past_the_deadline_gets_a_short_grace)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_conn *conn = NULL;
    uint64_t start, elapsed;

    conninfo = pgtest_new_database("deadline_grace");
    open_pool(conninfo);
    cr_assert_eq(idem__pool_checkout(&conn, pool, idem__now_ms() - 1, &err), 0, "%s", err.message);
    cr_assert_eq(run_path(PATH_PIPELINE, conn, &err), 0, "%s", err.message);
    stalltest_stop(PQbackendPID(idem_conn_pg(conn)), conninfo);
    start = idem__now_ms();
    cr_assert_eq(run_path(PATH_SIMPLE, conn, &err), IDEM_EUNAVAIL);
    elapsed = idem__now_ms() - start;
    cr_assert(elapsed >= IDEM__MIN_WAIT_MS - 5 &&
                  elapsed < (uint64_t)pgtest_late_ms(IDEM__MIN_WAIT_MS),
              "gave up after %llu ms", (unsigned long long)elapsed);
    cr_assert_not_null(strstr(err.message, "deadline passed"), "%s", err.message);
    idem_pool_release(conn);
}

Test(deadlines, release_clears_the_deadline)
{
    idem_error err = IDEM_ERROR_INIT;
    idem_conn *conn = NULL, *again = NULL;

    conninfo = pgtest_new_database("deadline_release");
    open_pool(conninfo);
    cr_assert_eq(idem__pool_checkout(&conn, pool, idem__now_ms() + 60000, &err), 0, "%s",
                 err.message);
    cr_assert_neq(conn->deadline_ms, 0, "the checkout stamps the call's deadline");
    idem_pool_release(conn);
    cr_assert_eq(idem_pool_acquire(&again, pool, &err), 0, "%s", err.message);
    cr_assert_eq(again, conn, "the pool's one connection");
    cr_assert_eq(again->deadline_ms, 0);
    idem_pool_release(again);
}

/* A tiny effect: one statement, one receipt. */
static int tiny_effect(json_t **response, idem_tx *tx, const json_t *arguments, void *ctx,
                       idem_error *err)
{
    PGresult *res = NULL;
    int rc = idem_tx_exec(&res, tx, "SELECT 1", 0, NULL, err);

    (void)arguments, (void)ctx;
    if (rc != 0)
        return rc;
    PQclear(res);
    *response = json_pack("{s:b}", "done", 1);
    return IDEM_EFFECT_OK;
}

Test(deadlines, a_call_whose_backend_stalls_ends_unavailable_at_its_deadline)
{
    idem_store_options sopts = IDEM_STORE_OPTIONS_INIT;
    idem_request req = IDEM_REQUEST_INIT;
    idem_outcome out = IDEM_OUTCOME_INIT;
    idem_error err = IDEM_ERROR_INIT;
    idem_pool_stats st = IDEM_POOL_STATS_INIT;
    uint64_t start, elapsed;
    int rc;

    conninfo = pgtest_new_migrated_database("deadline_store");
    open_pool(conninfo);
    sopts.deadline_ms = CALL_DEADLINE_MS;
    cr_assert_eq(idem_store_new(&store, pool, &sopts, &err), 0, "%s", err.message);
    req.tenant = "acme";
    req.operation_id = "op-stalled";
    req.tool = "tiny";
    req.arguments = "{}";
    req.arguments_len = 2;
    stop_backend();
    start = idem__now_ms();
    rc = idem_store_execute(&out, store, &req, tiny_effect, NULL, &err);
    elapsed = idem__now_ms() - start;
    cr_assert_eq(out.status, IDEM_STATUS_UNAVAILABLE, "%s after %llu ms: %s",
                 idem_status_name(out.status), (unsigned long long)elapsed, err.message);
    cr_assert_eq(rc, IDEM_EUNAVAIL, "%s", idem_err_name(rc));
    cr_assert(elapsed >= CALL_DEADLINE_MS - 100 &&
                  elapsed < (uint64_t)pgtest_late_ms(CALL_DEADLINE_MS),
              "returned after %llu ms", (unsigned long long)elapsed);
    cr_assert_not_null(strstr(err.message, "deadline"), "%s", err.message);
    cr_assert_eq(idem_pool_stats_get(&st, pool), 0);
    cr_assert_eq(st.closed_broken, 1, "the stalled connection was not discarded");
    stalltest_resume();
    /* The pool serves the retry on a fresh connection: the key is still free. */
    rc = idem_store_execute(&out, store, &req, tiny_effect, NULL, &err);
    cr_assert_eq(rc, 0, "%s: %s", idem_err_name(rc), err.message);
    cr_assert_eq(out.status, IDEM_STATUS_CREATED);
    idem_outcome_clear(&out);
}

/* A listener on 127.0.0.1 that accepts connections and never answers. */
struct silent_server {
    int fd;
    int port;
    pthread_t thread;
};

static void *accept_and_hold(void *arg)
{
    struct silent_server *s = arg;
    int held[16], n = 0, fd;

    while (n < 16 && (fd = accept(s->fd, NULL, NULL)) >= 0)
        held[n++] = fd;
    /* accept() fails once the test shuts the listener down: close what was held. */
    while (n > 0)
        close(held[--n]);
    return NULL;
}

static void silent_server_start(struct silent_server *s)
{
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    socklen_t len = sizeof(addr);

    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(s->fd, 0);
    cr_assert_eq(bind(s->fd, (struct sockaddr *)&addr, sizeof(addr)), 0, "%s", strerror(errno));
    cr_assert_eq(listen(s->fd, 16), 0);
    cr_assert_eq(getsockname(s->fd, (struct sockaddr *)&addr, &len), 0);
    s->port = ntohs(addr.sin_port);
    cr_assert_eq(pthread_create(&s->thread, NULL, accept_and_hold, s), 0);
}

static void silent_server_stop(struct silent_server *s)
{
    shutdown(s->fd, SHUT_RDWR);
    pthread_join(s->thread, NULL);
    close(s->fd);
}

/* Read fd into buf until its end or the time is up; 1 at its end. */
static int read_until(int fd, uint64_t until, char *buf, size_t size)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN, .revents = 0};
    size_t used = 0;
    ssize_t got = 1;

    while (got > 0 && idem__now_ms() < until) {
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        got = read(fd, buf + used, size - 1 - used);
        used += got > 0 ? (size_t)got : 0;
    }
    buf[used] = '\0';
    return got <= 0;
}

/* Run a tool with PGCONNECT_TIMEOUT unset (its default applies), up to limit_s seconds;
 * its stderr goes to errbuf. Returns its exit status, or -1 when it had to be killed. */
static int run_tool(char **argv, int limit_s, char *errbuf, size_t errsize)
{
    int pipefd[2], status = 0, ended;
    pid_t child;

    cr_assert_eq(pipe(pipefd), 0);
    child = fork();
    cr_assert_neq(child, -1);
    if (child == 0) {
        dup2(pipefd[1], 2);
        close(pipefd[0]);
        unsetenv("PGCONNECT_TIMEOUT");
        execv(argv[0], argv);
        _exit(127);
    }
    close(pipefd[1]);
    ended = read_until(pipefd[0], idem__now_ms() + (uint64_t)limit_s * 1000, errbuf, errsize);
    close(pipefd[0]);
    if (!ended)
        kill(child, SIGKILL);
    waitpid(child, &status, 0);
    if (!ended)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Test(deadlines, a_tool_gives_up_on_a_server_that_accepts_and_never_answers)
{
    struct silent_server server;
    char dsn[128], errbuf[2048];
    char *argv[] = {getenv("IDEM_MIGRATE"), "--dsn", dsn, "status", NULL};
    uint64_t start, elapsed;
    int code;

    cr_assert_not_null(argv[0], "IDEM_MIGRATE (the idem-migrate program) is not set");
    silent_server_start(&server);
    snprintf(dsn, sizeof(dsn), "host=127.0.0.1 port=%d dbname=nobody user=nobody", server.port);
    start = idem__now_ms();
    code = run_tool(argv, 30, errbuf, sizeof(errbuf));
    elapsed = idem__now_ms() - start;
    silent_server_stop(&server);
    cr_assert_neq(code, -1, "idem-migrate still connecting after 30 s; stderr: %s", errbuf);
    cr_assert_neq(code, 0, "idem-migrate succeeded against a silent server");
    cr_assert(elapsed >= TOOL_CONNECT_TIMEOUT_MS - 1000 &&
                  elapsed < (uint64_t)pgtest_late_ms(TOOL_CONNECT_TIMEOUT_MS),
              "idem-migrate gave up after %llu ms", (unsigned long long)elapsed);
    cr_assert_not_null(strstr(errbuf, "cannot connect"), "%s", errbuf);
    cr_assert_not_null(strstr(errbuf, "timeout"), "%s", errbuf);
}

/* The pool's TCP connections notice a vanished peer: keepalives and tcp_user_timeout
 * are on by default, and the conninfo can change them. */
static int sockopt(PGconn *pg, int level, int name)
{
    int value = -1;
    socklen_t len = sizeof(value);

    cr_assert_eq(getsockopt(PQsocket(pg), level, name, &value, &len), 0, "%s", strerror(errno));
    return value;
}

Test(deadlines, pooled_tcp_connections_have_keepalives_the_conninfo_can_override)
{
    const char *tcp = getenv("IDEM_PG_TCP");
    char dsn[512];
    idem_error err = IDEM_ERROR_INIT;
    idem_conn *conn = NULL;
    PGconn *pg;

    cr_assert_not_null(tcp, "IDEM_PG_TCP is not set (tools/with-postgres sets it)");
    open_pool(tcp);
    cr_assert_eq(idem_pool_acquire(&conn, pool, &err), 0, "%s", err.message);
    pg = idem_conn_pg(conn);
    cr_assert_eq(sockopt(pg, SOL_SOCKET, SO_KEEPALIVE), 1);
    cr_assert_eq(sockopt(pg, IPPROTO_TCP, TCP_KEEPIDLE), 30);
    cr_assert_eq(sockopt(pg, IPPROTO_TCP, TCP_USER_TIMEOUT), 30000);
    idem_pool_release(conn);
    idem_pool_free(pool);
    pool = NULL;
    snprintf(dsn, sizeof(dsn), "%s keepalives_idle=7 tcp_user_timeout=9000", tcp);
    open_pool(dsn);
    cr_assert_eq(idem_pool_acquire(&conn, pool, &err), 0, "%s", err.message);
    pg = idem_conn_pg(conn);
    cr_assert_eq(sockopt(pg, IPPROTO_TCP, TCP_KEEPIDLE), 7);
    cr_assert_eq(sockopt(pg, IPPROTO_TCP, TCP_USER_TIMEOUT), 9000);
    idem_pool_release(conn);
}
