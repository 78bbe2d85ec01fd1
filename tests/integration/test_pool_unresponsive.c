/* A server that stops answering: the health round trip and the ROLLBACK on release give
 * up at connect_timeout_ms instead of waiting for TCP. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pooltest.h"

TestSuite(pool_unresponsive, .init = pooltest_init, .fini = pooltest_fini);

/* What the pool waits for a silent server, and for the new connection that replaces its
 * connection: long enough to open one on a loaded machine. */
#define CONNECT_TIMEOUT_MS PGTEST_LOAD_SLACK_MS

/* Freeze a backend (as if the network dropped its packets, the socket staying open). */
static void freeze_backend(long pid, int frozen)
{
    cr_assert_eq(kill((pid_t)pid, frozen ? SIGSTOP : SIGCONT), 0, "kill(%ld): %s", pid,
                 strerror(errno));
}

/* The pool closed its side: thawed, the backend sees that and exits by itself. */
static void end_frozen_backend(long pid)
{
    freeze_backend(pid, 0);
}

Test(pool_unresponsive, health_round_trip_to_a_silent_server_gives_up_at_connect_timeout,
     .timeout = 60)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.max_size = 1;
    o.health_check_idle_ms = 0;
    o.connect_timeout_ms = CONNECT_TIMEOUT_MS;
    idem_pool *pool = pooltest_open(&o);
    idem_conn *conn = pooltest_acquire(pool);
    long pid = pooltest_backend_pid(conn);

    idem_pool_release(conn);
    freeze_backend(pid, 1);
    pgtest_sleep_ms(20);
    /* Without a bound this acquire would wait for the kernel's TCP timeout. */
    conn = pooltest_acquire(pool);
    cr_assert_neq(pooltest_backend_pid(conn), pid);
    idem_pool_release(conn);
    end_frozen_backend(pid);
    cr_assert_eq(pooltest_stats(pool).closed_health, 1);
}

Test(pool_unresponsive, rollback_on_release_to_a_silent_server_gives_up_and_closes, .timeout = 60)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;

    o.max_size = 1;
    o.connect_timeout_ms = CONNECT_TIMEOUT_MS;
    idem_pool *pool = pooltest_open(&o);
    idem_conn *conn = pooltest_acquire(pool);
    long pid = pooltest_backend_pid(conn);

    free(pooltest_query(conn, "BEGIN"));
    freeze_backend(pid, 1);
    idem_pool_release(conn); /* must return: the ROLLBACK is bounded */
    end_frozen_backend(pid);
    idem_pool_stats st = pooltest_stats(pool);
    cr_assert_eq(st.closed_broken, 1);
    cr_assert_eq(st.size, 0);
    conn = pooltest_acquire(pool);
    cr_assert_neq(pooltest_backend_pid(conn), pid);
    idem_pool_release(conn);
}

/* A port on 127.0.0.1 that accepts connections and never answers (a server that hangs): a
 * listening socket nobody accepts from; the kernel completes the handshake. */
static int silent_port(int *fd)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    socklen_t len = sizeof(a);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    *fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(*fd, 0, "socket: %s", strerror(errno));
    cr_assert_eq(bind(*fd, (struct sockaddr *)&a, sizeof(a)), 0, "bind: %s", strerror(errno));
    cr_assert_eq(listen(*fd, 16), 0, "listen: %s", strerror(errno));
    cr_assert_eq(getsockname(*fd, (struct sockaddr *)&a, &len), 0, "%s", strerror(errno));
    return ntohs(a.sin_port);
}

/* host=a,b with a silent first host: the pool gives it its share of connect_timeout_ms and
 * connects to the second, as libpq's blocking connect does with connect_timeout. */
Test(pool_unresponsive, a_silent_first_host_of_several_gives_way_to_the_next, .timeout = 60)
{
    idem_pool_options o = IDEM_POOL_OPTIONS_INIT;
    const char *port = getenv("PGPORT");
    char conninfo[1024];
    int fd, silent = silent_port(&fd);

    cr_assert_not_null(port, "PGPORT (tools/with-postgres)");
    snprintf(conninfo, sizeof(conninfo), "%s host=127.0.0.1,127.0.0.1 port=%d,%s",
             pooltest_conninfo(), silent, port);
    o.max_size = 1;
    o.min_idle = 0;
    o.connect_timeout_ms = 2 * CONNECT_TIMEOUT_MS;
    idem_pool *pool = pooltest_open_at(conninfo, &o);
    idem_conn *conn = pooltest_acquire(pool);

    cr_assert_gt(pooltest_backend_pid(conn), 0);
    idem_pool_release(conn);
    close(fd);
}
