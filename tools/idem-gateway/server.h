/* The HTTP server: the gateway's front (front.h) accepts each connection and judges its
 * first request head, then libmicrohttpd serves it with a thread per connection, so that a
 * call waiting on PostgreSQL holds only its own connection's thread and never the thread
 * that accepts and reads the others. Routes: GET /v1/tools, POST /v1/tools/{tool}, POST /mcp
 * (mcp_http.h), GET /healthz, /readyz, /metrics (ops.h), and with a console the pages under
 * its prefix (console.h). Each request runs with the configuration generation current when
 * it started (live.h), is logged in one line (reqlog.h) and counted (metrics.h); the
 * connections are watched (guard.h). */
#ifndef IDEM_GATEWAY_SERVER_H
#define IDEM_GATEWAY_SERVER_H

#include <idem/idem.h>
#include <stdatomic.h>
#include <stddef.h>

#include "config.h"
#include "front.h"
#include "guard.h"
#include "live.h"

/* A connection thread's stack: a call needs far less; the default (8 MiB) would reserve
 * 8 GiB of address space for 1,000 connections. */
#define GW_THREAD_STACK_BYTES (512U * 1024U)

typedef struct gw_server {
    gw_live *live; /* borrowed; outlives the server */
    gw_guard guard;
    gw_front front;            /* accepts, and answers a malformed first head itself */
    struct MHD_Daemon *daemon; /* takes the connections the front hands over */
    unsigned int port;   /* the port it listens on (the configured one, or the one given for 0) */
    int log_format;      /* -1: the configuration's log.format; else 1 JSON, 0 plain */
    atomic_int stopping; /* answers say Connection: close */
} gw_server;

/* Start serving on the address the first configuration of @live names. Returns 0, or -1
 * with @why (of @size bytes). */
int gw_server_start(gw_server *s, gw_live *live, int log_format, char *why, size_t size);

/* Stop accepting (the listening socket is closed, the front's sniffers end), then wait at
 * most @grace_s seconds for the requests under way to be answered. Returns how many were
 * still under way. */
unsigned int gw_server_drain(gw_server *s, unsigned int grace_s);

/* Close every connection and stop; waits for the connection threads. */
void gw_server_stop(gw_server *s);

#endif
