/* The gateway's front: its own listening socket and accept thread, before libmicrohttpd.
 * Each connection admitted under http.max_connections (guard.h) gets a short-lived thread
 * that peeks (MSG_PEEK: nothing is consumed) at its first request's head until the head is
 * in, http.max_header_bytes are, or http.request_timeout_s passes (then the connection is
 * closed), and judges it (head.h): either the gateway answers it itself and closes the
 * connection, or libmicrohttpd takes the connection, bytes untouched (MHD_add_connection).
 * Later requests on a kept-alive connection are libmicrohttpd's to read. */
#ifndef IDEM_GATEWAY_FRONT_H
#define IDEM_GATEWAY_FRONT_H

#include <pthread.h>
#include <stddef.h>
#include <sys/socket.h>

#include "guard.h"
#include "reply.h"
#include "reqlog.h"

/* Hand the connection on socket @fd to the server; it owns @fd from then on, in every
 * case. Returns 0, or -1 when it could not take it (@fd is closed). */
typedef int (*gw_front_hand)(void *cls, int fd, const struct sockaddr *addr, socklen_t len);

/* The front answered @r itself (request ID @id, @seconds after the connection came): for
 * the request log and the metrics. */
typedef void (*gw_front_answered)(void *cls, const gw_reply *r, const char *id, double seconds);

typedef struct gw_front {
    int fd;      /* the listening socket; -1: none */
    int wake[2]; /* a pipe, written once: the accept thread and the sniffers stop */
    size_t max_head;
    unsigned int timeout_s; /* for a head, and for the front's own answer */
    gw_guard *guard;        /* borrowed: admits and records the connections */
    gw_front_hand hand;
    gw_front_answered answered;
    void *cls; /* for both */
    pthread_mutex_t lock;
    pthread_cond_t ended; /* a sniffer ended */
    unsigned int sniffers;
    pthread_t thread;
    int made, started, stopped; /* made: gw_front_start() began (0 in a zeroed struct) */
} gw_front;

/* Listen on @addr (@len bytes) and start accepting. @f's max_head, timeout_s, guard, hand,
 * answered and cls are set by the caller. Returns 0 with the port listened on in @port
 * (the one given for port 0), or -1 with @why (of @size bytes). */
int gw_front_start(gw_front *f, const struct sockaddr *addr, socklen_t len, unsigned int *port,
                   char *why, size_t size);

/* Stop accepting (the listening socket is closed at once), end the sniffers (their
 * connections closed unanswered) and wait for them. Idempotent; safe after a failed start. */
void gw_front_stop(gw_front *f);

#endif
