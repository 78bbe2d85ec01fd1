/* The listening socket, the accept thread, and a sniffer thread per new connection. */
#define _GNU_SOURCE /* POLLRDHUP: the client closed its side, its data still unread */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "front.h"
#include "head.h"
#include "server.h"

/* How long a refused client may take to stop sending after its answer, at most. */
#define LINGER_MS 2000U
/* Out of descriptors or memory, the accept loop pauses this long before it tries again. */
#define ACCEPT_PAUSE_MS 100U

/* One connection being sniffed. */
typedef struct sniff {
    gw_front *f;
    int fd;
    gw_conn *conn; /* its record (guard.h) */
    struct sockaddr_storage addr;
    socklen_t len;
    uint64_t started_ms, deadline_ms;
} sniff;

/* poll()'s timeout until @deadline_ms; UINT64_MAX: none. */
static int poll_ms(uint64_t deadline_ms, uint64_t now)
{
    if (deadline_ms == UINT64_MAX)
        return -1;
    return deadline_ms - now > INT_MAX ? INT_MAX : (int)(deadline_ms - now);
}

/* Wait until @fd has @events, up to @deadline_ms. Returns the events it has (> 0), 0 at
 * the deadline, -1 when the front stops (and @stoppable). */
static int wait_for(const gw_front *f, int fd, short events, uint64_t deadline_ms, int stoppable)
{
    for (;;) {
        struct pollfd p[2] = {{fd, events, 0}, {f->wake[0], POLLIN, 0}};
        uint64_t now = idem__now_ms();
        int n;

        if (now >= deadline_ms)
            return 0;
        n = poll(p, stoppable ? 2 : 1, poll_ms(deadline_ms, now));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (stoppable && p[1].revents != 0)
            return -1;
        if (n > 0)
            return p[0].revents;
    }
}

/* What the client sent so far into @buf (@cap bytes), consumed not; *@eof when it closed
 * its side. Returns the length, or -1 on an error. */
static ssize_t peek(int fd, char *buf, size_t cap, int *eof)
{
    ssize_t n;

    do
        n = recv(fd, buf, cap, MSG_PEEK | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    *eof = n == 0;
    return n;
}

/* Until the client sends more than @have bytes: the kernel wakes poll() only then
 * (SO_RCVLOWAT); 1 undoes it. */
static void low_water(int fd, size_t have)
{
    int at = have + 1 > INT_MAX ? INT_MAX : (int)have + 1;

    setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &at, sizeof(at));
}

/* Peek until the head can be judged; the verdict, with @r and @id on GW_HEAD_REFUSE. A
 * client that sends nothing judgeable by the deadline, or closes first, or a front that
 * stops: GW_HEAD_CLOSE. */
static gw_head_verdict read_head(sniff *j, char *buf, gw_reply *r, char id[GW_REQUEST_ID_MAX + 1])
{
    size_t cap = j->f->max_head, have = 0;
    gw_head_verdict v = GW_HEAD_MORE;
    int eof = 0;

    while (v == GW_HEAD_MORE) {
        int events = wait_for(j->f, j->fd, POLLIN | POLLRDHUP, j->deadline_ms, 1);
        ssize_t n;

        if (events <= 0)
            return GW_HEAD_CLOSE;
        if ((n = peek(j->fd, buf, cap, &eof)) < 0)
            return GW_HEAD_CLOSE;
        eof = eof || (events & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
        if (eof && n == 0)
            return GW_HEAD_CLOSE;        /* it closed without a byte */
        if (!eof && (size_t)n == have) { /* no news: the low water mark was not kept */
            struct timespec pause = {0, 10 * 1000000L};

            nanosleep(&pause, NULL);
            continue;
        }
        have = (size_t)n;
        v = gw_head_judge(r, id, buf, have,
                          have >= cap ? GW_HEAD_LIMIT
                          : eof       ? GW_HEAD_CLOSED
                                      : GW_HEAD_OPEN);
        low_water(j->fd, have);
    }
    low_water(j->fd, 0);
    return v;
}

/* Write all of @data, up to the deadline. Returns 0 or -1. */
static int write_all(sniff *j, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = send(j->fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);

        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            if (wait_for(j->f, j->fd, POLLOUT, j->deadline_ms, 0) <= 0)
                return -1;
            continue;
        }
        if (n <= 0)
            return -1;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Append to the head being built in @head (@size bytes, @n used); past the end, *@n says
 * so (>= @size) and nothing more is written. */
static void put(char *head, size_t size, size_t *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void put(char *head, size_t size, size_t *n, const char *fmt, ...)
{
    va_list ap;
    int k;

    if (*n >= size)
        return;
    va_start(ap, fmt);
    k = vsnprintf(head + *n, size - *n, fmt, ap);
    va_end(ap);
    *n = k < 0 ? size : *n + (size_t)k;
}

/* @r as HTTP/1.1 on the wire: its head, then its body. */
static int send_answer(sniff *j, const gw_reply *r, const char *id)
{
    char head[2048], date[64];
    time_t now = time(NULL);
    struct tm tm;
    size_t n = 0;

    strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", gmtime_r(&now, &tm));
    put(head, sizeof(head), &n, "HTTP/1.1 %u %s\r\nDate: %s\r\n", r->status,
        MHD_get_reason_phrase_for(r->status), date);
    if (r->content_type != NULL)
        put(head, sizeof(head), &n, "Content-Type: %s\r\n", r->content_type);
    for (size_t i = 0; i < r->nheaders; i++)
        put(head, sizeof(head), &n, "%s: %s\r\n", r->headers[i].name, r->headers[i].value);
    put(head, sizeof(head), &n, "X-Request-Id: %s\r\nContent-Length: %zu\r\n\r\n", id, r->len);
    if (n >= sizeof(head) || write_all(j, head, n) != 0)
        return -1;
    return write_all(j, r->body != NULL ? r->body : "", r->len);
}

/* After an answer: say so (FIN), and read what the client still sends until it closes
 * (briefly), so that unread bytes do not turn the close into a reset that could destroy
 * the answer before the client reads it. */
static void linger(sniff *j)
{
    uint64_t until = idem__now_ms() + LINGER_MS;
    char sink[4096];

    shutdown(j->fd, SHUT_WR);
    if (until > j->deadline_ms)
        until = j->deadline_ms;
    while (wait_for(j->f, j->fd, POLLIN, until, 0) > 0) {
        ssize_t n = recv(j->fd, sink, sizeof(sink), MSG_DONTWAIT);

        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            break;
    }
}

static void refuse(sniff *j, gw_reply *r, const char *id)
{
    int sent = send_answer(j, r, id) == 0;

    j->f->answered(j->f->cls, r, id, (double)(idem__now_ms() - j->started_ms) / 1000.0);
    if (sent)
        linger(j);
    gw_reply_clear(r);
}

/* The sniffer ended: one fewer for gw_front_stop() to wait for. */
static void ended(gw_front *f)
{
    pthread_mutex_lock(&f->lock);
    if (--f->sniffers == 0)
        pthread_cond_broadcast(&f->ended);
    pthread_mutex_unlock(&f->lock);
}

static void *sniffer(void *arg)
{
    sniff *j = arg;
    gw_front *f = j->f;
    char *buf = malloc(f->max_head), id[GW_REQUEST_ID_MAX + 1];
    gw_reply r = {0};
    gw_head_verdict v = buf != NULL ? read_head(j, buf, &r, id) : GW_HEAD_PASS;

    free(buf);
    if (v == GW_HEAD_REFUSE)
        refuse(j, &r, id);
    if (v == GW_HEAD_PASS) {
        gw_guard_handed(f->guard, j->conn);
        if (f->hand(f->cls, j->fd, (const struct sockaddr *)&j->addr, j->len) != 0)
            gw_guard_lost(f->guard);
    } else {
        gw_guard_closed(f->guard, j->conn);
        close(j->fd);
    }
    free(j);
    ended(f);
    return NULL;
}

/* A sniffer for the connection on @fd, or the connection closed. */
static void start_sniffer(gw_front *f, int fd, const struct sockaddr_storage *addr, socklen_t len)
{
    sniff *j = calloc(1, sizeof(*j));
    pthread_attr_t attr;
    pthread_t t;
    int rc = -1;

    if (j != NULL) {
        *j = (sniff){f, fd, gw_guard_opened(f->guard, fd), *addr, len, idem__now_ms(), 0};
        j->deadline_ms = j->started_ms + (uint64_t)f->timeout_s * 1000U;
        pthread_mutex_lock(&f->lock);
        f->sniffers++;
        pthread_mutex_unlock(&f->lock);
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, GW_THREAD_STACK_BYTES);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        rc = pthread_create(&t, &attr, sniffer, j);
        pthread_attr_destroy(&attr);
    }
    if (rc == 0)
        return;
    if (j != NULL) {
        gw_guard_closed(f->guard, j->conn);
        ended(f);
        free(j);
    }
    close(fd);
}

/* Out of descriptors or memory: a pause rather than a loop on the same error. */
static void accept_failed(gw_front *f)
{
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        wait_for(f, f->wake[0], POLLIN, idem__now_ms() + ACCEPT_PAUSE_MS, 1);
}

static void *accepter(void *arg)
{
    gw_front *f = arg;

    while (wait_for(f, f->fd, POLLIN, UINT64_MAX, 1) > 0) {
        struct sockaddr_storage addr;
        socklen_t len = sizeof(addr);
        int fd = accept(f->fd, (struct sockaddr *)&addr, &len);

        if (fd < 0)
            accept_failed(f);
        else if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 || fcntl(fd, F_SETFL, O_NONBLOCK) != 0)
            close(fd);
        else if (!gw_guard_admit(f->guard))
            close(fd); /* over http.max_connections: counted by the guard */
        else
            start_sniffer(f, fd, &addr, len);
    }
    return NULL;
}

static int listen_on(gw_front *f, const struct sockaddr *addr, socklen_t len, char *why,
                     size_t size)
{
    int on = 1;

    if ((f->fd = socket(addr->sa_family, SOCK_STREAM, 0)) < 0 ||
        fcntl(f->fd, F_SETFD, FD_CLOEXEC) != 0 || fcntl(f->fd, F_SETFL, O_NONBLOCK) != 0 ||
        setsockopt(f->fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0 ||
        (addr->sa_family == AF_INET6 &&
         setsockopt(f->fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on)) != 0) ||
        bind(f->fd, addr, len) != 0 || listen(f->fd, SOMAXCONN) != 0) {
        snprintf(why, size, "%s", strerror(errno));
        return -1;
    }
    return 0;
}

static unsigned int bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);

    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return 0;
    return ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                    : ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

int gw_front_start(gw_front *f, const struct sockaddr *addr, socklen_t len, unsigned int *port,
                   char *why, size_t size)
{
    f->fd = f->wake[0] = f->wake[1] = -1;
    f->sniffers = 0;
    f->started = f->stopped = 0;
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->ended, NULL);
    f->made = 1;
    if (pipe(f->wake) != 0 || fcntl(f->wake[0], F_SETFD, FD_CLOEXEC) != 0 ||
        fcntl(f->wake[1], F_SETFD, FD_CLOEXEC) != 0) {
        snprintf(why, size, "cannot make a pipe: %s", strerror(errno));
        return -1;
    }
    if (listen_on(f, addr, len, why, size) != 0)
        return -1;
    *port = bound_port(f->fd);
    if (pthread_create(&f->thread, NULL, accepter, f) != 0) {
        snprintf(why, size, "cannot start the accepting thread");
        return -1;
    }
    f->started = 1;
    return 0;
}

void gw_front_stop(gw_front *f)
{
    if (!f->made || f->stopped)
        return;
    f->stopped = 1;
    if (f->wake[1] >= 0 && write(f->wake[1], "x", 1) < 0)
        perror("idem-gateway: the front's pipe");
    if (f->started)
        pthread_join(f->thread, NULL);
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    pthread_mutex_lock(&f->lock);
    while (f->sniffers > 0)
        pthread_cond_wait(&f->ended, &f->lock);
    pthread_mutex_unlock(&f->lock);
    for (int i = 0; i < 2; i++)
        if (f->wake[i] >= 0)
            close(f->wake[i]);
    f->wake[0] = f->wake[1] = -1;
}
