/* The reconciliation console's configuration (README.md in this folder, "The
 * reconciliation console"): the top-level member "console", absent for no console. Its
 * path prefix on the gateway's listener, its own database connection (a role with
 * idem_operator's rights and no more), its operators and their token digests (never a
 * tenant's), and how long a sign-in lasts. */
#ifndef IDEM_GATEWAY_CONSOLE_CONFIG_H
#define IDEM_GATEWAY_CONSOLE_CONFIG_H

#include <stddef.h>

#include "config.h"
#include "config_read.h"

/* Longest path prefix and operator name, in bytes: both go into the session cookie. */
#define GW_CONSOLE_PATH_MAX     64
#define GW_CONSOLE_OPERATOR_MAX 32

typedef struct gw_console_config {
    const char *path; /* "/console/" unless configured: starts and ends with '/'; borrowed */
    size_t path_len;
    const char *dsn;        /* the console's own connection string; borrowed */
    unsigned int session_s; /* how long a sign-in lasts */
    int secure_cookie;      /* the cookie says Secure (the console is served over TLS) */
    gw_tenant *operators;   /* name and token digests, as a tenant's; owned */
    size_t noperators;
} gw_console_config;

/* Read @console (the document's member, or NULL: no console) into @cfg->console, after the
 * tenants (an operator's digest must not be a tenant's). Returns 0 or GW_EXIT_DATAERR with
 * the place and reason in @r. */
int cfg_console(cfg_reader *r, gw_config *cfg, const json_t *console);

/* The operator whose token digest is @digest, or NULL. Compares every digest in constant
 * time. */
const gw_tenant *gw_console_operator_by_digest(const gw_console_config *cc,
                                               const unsigned char *digest);

/* The operator called @name, or NULL. */
const gw_tenant *gw_console_operator(const gw_console_config *cc, const char *name);

/* NULL is accepted. */
void gw_console_config_free(gw_console_config *cc);

#endif
