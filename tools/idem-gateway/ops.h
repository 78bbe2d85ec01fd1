/* The operator's endpoints (README.md in this folder, "Operations"), without a token:
 * GET /healthz (the process answers), GET /readyz (PostgreSQL is reachable through the
 * pool and its schema is idem's, as idem-migrate verify checks it), GET /metrics
 * (Prometheus text, metrics.h). */
#ifndef IDEM_GATEWAY_OPS_H
#define IDEM_GATEWAY_OPS_H

#include <idem/idem.h>

#include "reply.h"

#define GW_HEALTHZ_PATH "/healthz"
#define GW_READYZ_PATH  "/readyz"
#define GW_METRICS_PATH "/metrics"

/* 200 "ok". */
void gw_ops_healthz(gw_reply *r);

/* 200 "ready", or 503 "not ready" (the log says why, once per change). A check takes a
 * connection of @pool (waiting at most the pool's acquire and connect timeouts) and
 * verifies the schema; checks do not overlap, and one younger than a second is reused. */
void gw_ops_readyz(gw_reply *r, idem_pool *pool);

/* The metrics, with @pool's statistics and its configured @pool_size. */
void gw_ops_metrics(gw_reply *r, idem_pool *pool, unsigned int pool_size);

#endif
