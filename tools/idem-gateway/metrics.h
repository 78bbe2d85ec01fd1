/* The gateway's Prometheus metrics (README.md in this folder, "Metrics"): one registry for
 * the process, which reloads of the configuration keep. Its names are fixed; the alert
 * rules are written against them. Safe to call from every thread. */
#ifndef IDEM_GATEWAY_METRICS_H
#define IDEM_GATEWAY_METRICS_H

#include <idem/idem.h>
#include <stddef.h>

/* The tool label of a request that names no configured tool, and of other paths. */
#define GW_METRICS_UNKNOWN_TOOL "(unknown)"
#define GW_METRICS_NO_TOOL      "(none)"

/* Note the process's start time (idem_gateway_start_time_seconds). */
void gw_metrics_started(void);

/* An answered HTTP request: its tool label, its status code, how long it took (negative:
 * unknown, counted without a duration). */
void gw_metrics_request(const char *tool, unsigned int code, double seconds);

/* A tool call that ended with idem status @status (its name). */
void gw_metrics_call(const char *tool, const char *status);

/* Calls under way: +1 when one starts, -1 when it ends. */
void gw_metrics_in_flight(int delta);

/* An http tool's upstream attempt or call: "sent", "timeout", "error" or "unknown". */
void gw_metrics_upstream(const char *tool, const char *outcome);

/* A reload of the configuration: @ok 1 or 0, at @when (seconds since the epoch). */
void gw_metrics_reload(int ok, double when);

/* The first configuration loaded at @when: no reload counted. */
void gw_metrics_config_loaded(double when);

/* Connections: +1 opened, -1 closed; one refused over the connection limit. */
void gw_metrics_connection(int delta);
void gw_metrics_refused(void);

/* The last readiness check's answer, 1 or 0. */
void gw_metrics_ready(int ready);

/* The exposition (text format 0.0.4), with the pool's @stats and @pool_size. Caller frees;
 * NULL when out of memory. */
char *gw_metrics_render(const idem_pool_stats *stats, unsigned int pool_size);

/* Free the registry's series (at exit). */
void gw_metrics_free(void);

#endif
