/* Generations of the configuration and their reload. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "exit.h"
#include "live.h"
#include "upstream.h"

static void gen_free(gw_gen *gen)
{
    for (size_t i = 0; gen->cfg != NULL && i < gen->cfg->ntools; i++)
        gw_upstream_close(gen->cfg->tools[i].http);
    idem_store_free(gen->store);
    gw_config_free(gen->cfg);
    free(gen);
}

/* A generation of @cfg (taken: freed on failure) over @pool: its store and its http tools'
 * clients. NULL with @why, and the exit status in @code, when one cannot be made. */
static gw_gen *gen_new(gw_config *cfg, idem_pool *pool, idem_log_fn log, char *why, size_t size,
                       int *code)
{
    gw_gen *gen = calloc(1, sizeof(*gen));
    idem_error err = IDEM_ERROR_INIT;
    char inner[512];

    if (gen == NULL) {
        gw_config_free(cfg);
        snprintf(why, size, "out of memory");
        *code = EXIT_OSERR;
        return NULL;
    }
    atomic_init(&gen->refs, 1);
    gen->cfg = cfg;
    cfg->store.log = log;
    if (idem_store_new(&gen->store, pool, &cfg->store, &err) != 0) {
        snprintf(why, size, "cannot create the store: %s%s%s", err.field, err.field[0] ? ": " : "",
                 err.message);
        *code = cli_pool_exit(&err);
        gen_free(gen);
        return NULL;
    }
    for (size_t i = 0; i < cfg->ntools; i++) {
        if (cfg->tools[i].http != NULL && gw_upstream_open(cfg->tools[i].http, cfg->tools[i].name,
                                                           gen->store, inner, sizeof(inner)) != 0) {
            snprintf(why, size, "tool %s: %s", cfg->tools[i].name, inner);
            *code = EXIT_OSERR;
            gen_free(gen);
            return NULL;
        }
    }
    return gen;
}

int gw_live_open(gw_live *live, const char *path, idem_log_fn log, char *why, size_t size)
{
    idem_error err = IDEM_ERROR_INIT;
    gw_config *cfg = NULL;
    int rc;

    memset(live, 0, sizeof(*live));
    live->path = path;
    live->log = log;
    if ((rc = gw_config_load(&cfg, path, why, size)) != 0)
        return rc;
    cfg->pool.log = log;
    if (idem_pool_new(&live->pool, cfg->dsn, &cfg->pool, &err) != 0) {
        /* The library's message says "cannot create the pool" and why: said once. */
        idem_conninfo_redact(err.message, sizeof(err.message), cfg->dsn);
        snprintf(why, size, "%s", err.message);
        gw_config_free(cfg);
        return cli_pool_exit(&err);
    }
    live->boot = *cfg;
    live->boot_address = strdup(cfg->address);
    live->boot_dsn = strdup(cfg->dsn);
    rc = EXIT_OSERR;
    if (live->boot_address == NULL || live->boot_dsn == NULL ||
        (live->current = gen_new(cfg, live->pool, log, why, size, &rc)) == NULL) {
        free(live->boot_address);
        free(live->boot_dsn);
        idem_pool_free(live->pool);
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
    pthread_mutex_init(&live->lock, NULL);
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
    cfg->pool.log = live->log;
    if ((gen = gen_new(cfg, live->pool, live->log, why, size, &rc)) == NULL)
        return -1;
    pthread_mutex_lock(&live->lock);
    old = live->current;
    live->current = gen;
    pthread_mutex_unlock(&live->lock);
    restart_members(why, size, &live->boot, gen->cfg);
    gw_gen_release(old);
    return 0;
}

gw_gen *gw_live_acquire(gw_live *live)
{
    gw_gen *gen;

    pthread_mutex_lock(&live->lock);
    gen = live->current;
    atomic_fetch_add(&gen->refs, 1);
    pthread_mutex_unlock(&live->lock);
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
    pthread_mutex_destroy(&live->lock);
}
