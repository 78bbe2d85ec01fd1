/* Generations of the configuration and their reload. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "exit.h"
#include "live.h"

static void gen_free(gw_gen *gen)
{
    gw_runtime_close(gen->rt);
    gw_config_free(gen->cfg);
    free(gen);
}

/* The exit status for a runtime that could not be made (tools/common/exit.h). */
int gw_runtime_exit(gw_runtime_part part, const idem_error *err)
{
    return part == GW_RUNTIME_CLIENT ? EXIT_OSERR : cli_pool_exit(err);
}

/* A generation of @cfg (taken: freed on failure) with its runtime, over @pool (NULL: the
 * runtime makes one). NULL with @why, and the exit status in @code, when one cannot be made. */
static gw_gen *gen_new(gw_config *cfg, idem_pool *pool, idem_log_fn log, char *why, size_t size,
                       int *code)
{
    gw_runtime_options opts = {0};
    gw_runtime_part part;
    idem_error err = IDEM_ERROR_INIT;
    gw_gen *gen = calloc(1, sizeof(*gen));

    if (gen == NULL) {
        gw_config_free(cfg);
        snprintf(why, size, "out of memory");
        *code = EXIT_OSERR;
        return NULL;
    }
    atomic_init(&gen->refs, 1);
    gen->cfg = cfg;
    opts.pool = pool;
    opts.dsn = cfg->dsn;
    opts.log = log;
    if (gw_runtime_open(&gen->rt, cfg, &opts, &part, &err, why, size) != 0) {
        *code = gw_runtime_exit(part, &err);
        gen_free(gen);
        return NULL;
    }
    return gen;
}

int gw_live_open(gw_live *live, const char *path, idem_log_fn log, char *why, size_t size)
{
    gw_config *cfg = NULL;
    int rc;

    memset(live, 0, sizeof(*live));
    live->path = path;
    live->log = log;
    if ((rc = gw_config_load(&cfg, path, why, size)) != 0)
        return rc;
    live->boot = *cfg;
    live->boot_address = strdup(cfg->address);
    live->boot_dsn = strdup(cfg->dsn);
    rc = EXIT_OSERR;
    if (live->boot_address == NULL || live->boot_dsn == NULL) {
        snprintf(why, size, "out of memory");
        gw_config_free(cfg);
    } else if ((live->current = gen_new(cfg, NULL, log, why, size, &rc)) != NULL) {
        live->pool = gw_runtime_take_pool(live->current->rt);
        rc = 0;
    }
    if (rc != 0) {
        free(live->boot_address);
        free(live->boot_dsn);
        return rc;
    }
    live->boot.address = live->boot_address;
    live->boot.dsn = live->boot_dsn;
    live->boot.doc = NULL; /* the rest is the generation's, which a reload frees */
    live->boot.tenants = NULL;
    live->boot.tools = NULL;
    live->boot.windows = NULL;
    live->boot.mcp_origins = NULL;
    live->boot.stdio_tenant = NULL;
    pthread_rwlock_init(&live->lock, NULL);
    return 0;
}

/* Append @name to @out when @changed: the members a reload cannot apply. */
static void note(char *out, size_t size, int changed, const char *name)
{
    size_t n = strlen(out);

    if (changed && n < size)
        snprintf(out + n, size - n, "%s%s", n > 0 ? ", " : "", name);
}

static void restart_members(char *out, size_t size, const gw_config *a, const gw_config *b)
{
    out[0] = '\0';
    note(out, size, strcmp(a->address, b->address) != 0, "http.address");
    note(out, size, a->port != b->port, "http.port");
    note(out, size, a->max_connections != b->max_connections, "http.max_connections");
    note(out, size, a->idle_timeout_s != b->idle_timeout_s, "http.idle_timeout_s");
    note(out, size, a->max_header_bytes != b->max_header_bytes, "http.max_header_bytes");
    note(out, size, a->request_timeout_s != b->request_timeout_s, "http.request_timeout_s");
    note(out, size, strcmp(a->dsn, b->dsn) != 0, "database.dsn");
    note(out, size, a->pool.pooler != b->pool.pooler, "database.pooler");
    note(out, size, a->pool.max_size != b->pool.max_size, "database.pool_size");
    note(out, size, a->pool.acquire_timeout_ms != b->pool.acquire_timeout_ms,
         "database.acquire_timeout_ms");
    note(out, size, a->pool.connect_timeout_ms != b->pool.connect_timeout_ms,
         "database.connect_timeout_ms");
    note(out, size, a->pool.statement_timeout_ms != b->pool.statement_timeout_ms,
         "database.statement_timeout_ms");
}

int gw_live_reload(gw_live *live, char *why, size_t size)
{
    gw_config *cfg = NULL;
    gw_gen *gen, *old;
    int rc;

    if (gw_config_load(&cfg, live->path, why, size) != 0)
        return -1;
    if ((gen = gen_new(cfg, live->pool, live->log, why, size, &rc)) == NULL)
        return -1;
    pthread_rwlock_wrlock(&live->lock);
    old = live->current;
    live->current = gen;
    pthread_rwlock_unlock(&live->lock);
    restart_members(why, size, &live->boot, gen->cfg);
    gw_gen_release(old);
    return 0;
}

gw_gen *gw_live_acquire(gw_live *live)
{
    gw_gen *gen;

    /* Readers do not wait for each other: the requests of every thread take it. */
    pthread_rwlock_rdlock(&live->lock);
    gen = live->current;
    atomic_fetch_add(&gen->refs, 1);
    pthread_rwlock_unlock(&live->lock);
    return gen;
}

void gw_gen_release(gw_gen *gen)
{
    if (gen != NULL && atomic_fetch_sub(&gen->refs, 1) == 1)
        gen_free(gen);
}

void gw_live_close(gw_live *live)
{
    gw_gen_release(live->current);
    live->current = NULL;
    idem_pool_free(live->pool);
    live->pool = NULL;
    free(live->boot_address);
    free(live->boot_dsn);
    pthread_rwlock_destroy(&live->lock);
}
