/* The configuration the server runs with, reloadable (SIGHUP): a generation is one parsed
 * file (plain data, config.h) with its runtime (runtime.h: the store, the http tools'
 * clients and resolvers), over the process's one pool. A request
 * takes a reference to the current generation when it starts and keeps it to its end, so
 * that a call in flight finishes with the tools, tenants and tokens it started with; the
 * last reference frees a generation that a reload replaced. */
#ifndef IDEM_GATEWAY_LIVE_H
#define IDEM_GATEWAY_LIVE_H

#include <idem/idem.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "config.h"
#include "runtime.h"

typedef struct gw_gen {
    atomic_uint refs;
    gw_config *cfg; /* owned */
    gw_runtime *rt; /* owned; over the gw_live's pool */
} gw_gen;

typedef struct gw_live {
    pthread_rwlock_t lock;         /* every request reads current; a reload writes it */
    gw_gen *current;               /* one reference is the gw_live's */
    idem_pool *pool;               /* owned; made with the first generation's runtime */
    const char *path;              /* the configuration file; borrowed */
    gw_config boot;                /* what the server started with: its scalars, and these two: */
    char *boot_address, *boot_dsn; /* owned */
    idem_log_fn log;               /* the pool's and stores' log */
} gw_live;

/* Parse @path, make the first generation and its runtime, which makes the pool that every
 * generation uses. Returns 0, or the exit status
 * (tools/common/exit.h: the file's 65 or 66, 78 for settings the library refuses, 71, or as
 * cli_exit_for() classes the library's error) with @why (of @size bytes). On failure
 * nothing is left to free. */
int gw_live_open(gw_live *live, const char *path, idem_log_fn log, char *why, size_t size);

/* Parse the file again, make a new generation's runtime over the pool and make it current
 * (the old one goes with its last reference). Returns 0 with @why
 * naming the members that changed and take effect only at a restart ("" when none), or
 * -1 with @why saying why the file was refused: the current generation stays. */
int gw_live_reload(gw_live *live, char *why, size_t size);

/* The current generation, with a reference the caller drops with gw_gen_release(). */
gw_gen *gw_live_acquire(gw_live *live);

/* The exit status for a runtime that gw_runtime_open() could not make: EXIT_OSERR for a
 * client, else as cli_pool_exit() classes the library's @err. */
int gw_runtime_exit(gw_runtime_part part, const idem_error *err);

/* Drop a reference; the last frees the generation. NULL is accepted. */
void gw_gen_release(gw_gen *gen);

/* Drop the current generation and the pool (the requests are over). */
void gw_live_close(gw_live *live);

#endif
