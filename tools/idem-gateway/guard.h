/* The client connections (README.md in this folder, "Limits"): at most max_connections at
 * once (one more is refused and counted), and none held for ever by a slow client. Each
 * connection is in one phase; a watchdog thread cuts (shutdown(2)) a connection that stays
 * in a phase longer than it may:
 *
 *   waiting  from the connection's start or its previous answer until a request's headers
 *            are in: idle_timeout_s (an idle client and one trickling its headers alike)
 *   body     from the headers until the body is in: request_timeout_s
 *   call     the call runs: no limit here (the store's deadline bounds it)
 *   answer   from the answer queued until it is sent: request_timeout_s
 *
 * It also counts the requests under way (body, call, answer), for a shutdown that waits
 * for them. Safe to call from every thread. */
#ifndef IDEM_GATEWAY_GUARD_H
#define IDEM_GATEWAY_GUARD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef enum gw_phase { GW_WAITING, GW_BODY, GW_CALL, GW_ANSWER } gw_phase;

typedef struct gw_conn {
    struct gw_conn *prev, *next;
    int fd;
    /* The phase and when it began (idem__coarse_ms()) in one word, since_ms << 2 | phase:
     * its connection's thread writes it without the lock, the watchdog reads both at once. */
    _Atomic uint64_t state;
    int cut;     /* the watchdog shut it down */
    void *spare; /* the server's, for its connection's next request (server.c); freed by it
                    before gw_guard_closed() */
} gw_conn;

typedef struct gw_guard {
    pthread_mutex_t lock;
    pthread_cond_t wake;    /* the watchdog's tick, and the end of a request */
    gw_conn *head;          /* the open connections */
    unsigned int open, max; /* open now; the limit */
    atomic_uint active;     /* requests under way: counted without the lock */
    atomic_int draining;    /* a drain waits on wake for active to reach 0 */
    unsigned int handed;    /* counted open, handed to the server, not yet taken */
    unsigned int idle_s, request_s;
    int stop;
    int started;
    pthread_t thread;
} gw_guard;

/* Start the watchdog. Returns 0, or -1 (no thread). */
int gw_guard_start(gw_guard *g, unsigned int max, unsigned int idle_s, unsigned int request_s);

/* Stop the watchdog (the connections are closed by then). */
void gw_guard_stop(gw_guard *g);

/* Whether a new connection may be taken (1), or is refused over the limit (0). */
int gw_guard_admit(gw_guard *g);

/* A connection on socket @fd opened: its record (NULL when out of memory: not watched). */
gw_conn *gw_guard_opened(gw_guard *g, int fd);

/* The connection of @c (NULL is accepted) is handed to the server, which takes it with
 * gw_guard_taken(), or gives it up with gw_guard_lost(); it stays counted open meanwhile.
 * @c is freed. */
void gw_guard_handed(gw_guard *g, gw_conn *c);

/* The server took a connection on socket @fd: its record, as gw_guard_opened(). */
gw_conn *gw_guard_taken(gw_guard *g, int fd);

/* The server could not take a handed connection (it is closed). */
void gw_guard_lost(gw_guard *g);

/* It closed; NULL is accepted. */
void gw_guard_closed(gw_guard *g, gw_conn *c);

/* It entered @phase; NULL is accepted. */
void gw_guard_phase(gw_guard *g, gw_conn *c, gw_phase phase);

/* Wait until no request is under way or @deadline_ms (an idem__now_ms() time) passes. Returns
 * the requests still under way. */
unsigned int gw_guard_drain(gw_guard *g, uint64_t deadline_ms);

#endif
