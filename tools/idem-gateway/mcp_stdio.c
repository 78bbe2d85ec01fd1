/* MCP over stdio: a reader, one thread per message, one writer lock. */
#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "call.h"
#include "mcp.h"
#include "mcp_stdio.h"

typedef struct stdio_server {
    gw_mcp mcp;
    const gw_config *cfg;
    FILE *out;
    pthread_mutex_t lock; /* guards out, running and ended */
    pthread_cond_t done;  /* a call ended */
    unsigned int running;
    pthread_t *ended; /* threads that have answered, to be joined; owned */
    size_t nended, capended;
} stdio_server;

/* The signal that stops the reader (SIGTERM, SIGINT), or 0. */
static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    stop_signal = sig;
}

/* SIGTERM and SIGINT stop reading as the end of input does: the handler is installed
 * without SA_RESTART, so that the reader's read() returns. */
static void stop_on_signals(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
}

typedef struct message {
    stdio_server *s;
    char *text; /* owned */
    size_t len;
    int threaded; /* answered in a thread of its own (else by the reader) */
} message;

static void write_line(stdio_server *s, const char *text)
{
    pthread_mutex_lock(&s->lock);
    fputs(text, s->out);
    fputc('\n', s->out);
    fflush(s->out);
    pthread_mutex_unlock(&s->lock);
}

/* The calling thread has answered: it is joined by reap(), so that it has ended (its
 * thread-local state freed) before the server returns. Under @s->lock. */
static void ended(stdio_server *s)
{
    if (s->nended == s->capended) {
        size_t cap = s->capended == 0 ? 16 : 2 * s->capended;
        pthread_t *grown = realloc(s->ended, cap * sizeof(*grown));

        if (grown == NULL) {
            pthread_detach(pthread_self()); /* it ends unjoined */
            return;
        }
        s->ended = grown;
        s->capended = cap;
    }
    s->ended[s->nended++] = pthread_self();
}

/* Join the threads that have answered. */
static void reap(stdio_server *s)
{
    pthread_t *threads;
    size_t n;

    pthread_mutex_lock(&s->lock);
    threads = s->ended;
    n = s->nended;
    s->ended = NULL;
    s->nended = s->capended = 0;
    pthread_mutex_unlock(&s->lock);
    for (size_t i = 0; i < n; i++)
        pthread_join(threads[i], NULL);
    free(threads);
}

static void *answer(void *arg)
{
    message *msg = arg;
    stdio_server *s = msg->s;
    gw_mcp m = s->mcp;
    gw_call_ctx ctx;
    char *reply = NULL;
    int refused, threaded = msg->threaded;

    /* Each message its own trace context: its _meta's traceparent, else a new trace, sent
     * to the upstream of an http tool. */
    memset(&ctx, 0, sizeof(ctx));
    gw_trace_begin(&ctx.trace, NULL, NULL);
    m.ctx = &ctx;
    if (gw_mcp_handle(&reply, &refused, &m, s->cfg->stdio_tenant, msg->text, msg->len) != 0)
        fprintf(stderr, "idem-gateway: stdio: out of memory answering a message\n");
    if (reply != NULL)
        write_line(s, reply);
    free(reply);
    free(msg->text);
    free(msg);
    pthread_mutex_lock(&s->lock);
    if (threaded)
        ended(s);
    s->running--;
    pthread_cond_broadcast(&s->done);
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* Answer @text (@len bytes, stolen) in a thread of its own, once fewer than
 * max_connections are running. */
static void dispatch(stdio_server *s, char *text, size_t len)
{
    message *msg = malloc(sizeof(*msg));
    pthread_t t;
    sigset_t stop, old;

    if (msg == NULL) {
        free(text);
        fprintf(stderr, "idem-gateway: stdio: out of memory; a message is dropped\n");
        return;
    }
    *msg = (message){s, text, len, 1};
    reap(s);
    pthread_mutex_lock(&s->lock);
    while (s->running >= s->cfg->max_connections)
        pthread_cond_wait(&s->done, &s->lock);
    s->running++;
    pthread_mutex_unlock(&s->lock);
    /* The signals go to the reader only: the answering threads block them. */
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, &old);
    if (pthread_create(&t, NULL, answer, msg) != 0) {
        msg->threaded = 0;
        answer(msg); /* no thread to be had: answer it here */
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Append @ch to *buf (*n bytes of *cap), growing it. 0, or -1 when out of memory. */
static int push(char **buf, size_t *cap, size_t *n, int ch)
{
    if (*n == *cap) {
        size_t grown_cap = *cap == 0 ? 4096 : 2 * *cap;
        char *grown = realloc(*buf, grown_cap);

        if (grown == NULL)
            return -1;
        *buf = grown;
        *cap = grown_cap;
    }
    (*buf)[(*n)++] = (char)ch;
    return 0;
}

/* One line of @in into a new buffer (*text, *len bytes; a trailing CR dropped): 1, or 0 at
 * the end of input. A line longer than @max (or than memory allows) is read to its end and
 * dropped: *text NULL. */
static int read_line(FILE *in, size_t max, char **text, size_t *len)
{
    size_t cap = 0, n = 0;
    char *buf = NULL;
    int ch, over = 0;

    while ((ch = getc(in)) != EOF && ch != '\n') {
        if (!over && (n >= max || push(&buf, &cap, &n, ch) != 0)) {
            over = 1;
            free(buf);
            buf = NULL;
        }
    }
    if (ch == EOF && n == 0 && !over)
        return 0;
    if (buf != NULL && n > 0 && buf[n - 1] == '\r')
        n--;
    *text = buf;
    *len = over ? max + 1 : n;
    return 1;
}

static void too_long(stdio_server *s)
{
    char why[128], *text;

    snprintf(why, sizeof(why), "message too large: longer than %zu bytes (max_body_bytes)",
             s->cfg->max_body_bytes);
    if ((text = gw_mcp_error_text(GW_RPC_INVALID_REQUEST, why)) != NULL)
        write_line(s, text);
    free(text);
}

static int blank(const char *text, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (text[i] != ' ' && text[i] != '\t')
            return 0;
    }
    return 1;
}

/* Wait for the calls under way, until @grace_s have passed. Returns how many remain. */
static unsigned int drain(stdio_server *s, unsigned int grace_s)
{
    struct timespec until;
    unsigned int left;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += grace_s;
    pthread_mutex_lock(&s->lock);
    while (s->running > 0 && pthread_cond_timedwait(&s->done, &s->lock, &until) != ETIMEDOUT)
        ;
    left = s->running;
    pthread_mutex_unlock(&s->lock);
    if (left == 0)
        reap(s);
    return left;
}

int gw_mcp_stdio_serve(const gw_config *cfg, const gw_runtime *rt, FILE *in, FILE *out)
{
    stdio_server s = {{cfg, rt, NULL, NULL, NULL},
                      cfg,
                      out,
                      PTHREAD_MUTEX_INITIALIZER,
                      PTHREAD_COND_INITIALIZER,
                      0,
                      NULL,
                      0,
                      0};
    char *text = NULL;
    size_t len = 0;
    unsigned int left;

    stop_on_signals();
    while (!stop_signal && read_line(in, cfg->max_body_bytes, &text, &len)) {
        if (stop_signal)
            free(text); /* a line cut short by the signal */
        else if (text == NULL && len > 0)
            too_long(&s);
        else if (text != NULL && !blank(text, len))
            dispatch(&s, text, len);
        else
            free(text);
    }
    if (stop_signal)
        fprintf(stderr, "idem-gateway: %s: stopping after the calls under way\n",
                stop_signal == SIGINT ? "SIGINT" : "SIGTERM");
    left = drain(&s, cfg->stdio_grace_s);
    if (left > 0) {
        fprintf(stderr,
                "idem-gateway: stdio: %u call%s still running after the grace period "
                "(mcp.stdio_grace_s); exiting without them: each commits or rolls back whole, "
                "and its retry replays or runs it\n",
                left, left == 1 ? " is" : "s are");
        return 1;
    }
    pthread_mutex_destroy(&s.lock);
    pthread_cond_destroy(&s.done);
    return 0;
}
