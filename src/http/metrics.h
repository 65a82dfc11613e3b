/* http/metrics.h — a small thread-safe registry of counters, gauges and histograms, rendered in
 * the Prometheus text format for GET /metrics.
 *
 * A series is a metric name plus a label set given as a NULL-terminated list of name/value
 * pairs ({"route", "/messages", "method", "GET", NULL}). Values the daemon cannot count as they
 * happen (outbox depth, reservations by state) come from a collector callback run just before
 * each rendering. One mutex guards the registry: updates are a lookup and an add. */
#ifndef MISSIVE_HTTP_METRICS_H
#define MISSIVE_HTTP_METRICS_H

#include <stddef.h>

#include "missive/error.h"

typedef struct mv_metrics mv_metrics;

/* Called at the start of mv_metrics_render (without the registry lock held) to set gauges. */
typedef void (*mv_metrics_collector)(mv_metrics *m, void *ctx);

mv_metrics *mv_metrics_new(void);
void mv_metrics_free(mv_metrics *m);

/* Declares a metric's help text and type ("counter", "gauge", "histogram") ahead of its first
 * sample, so it is listed even at zero. Optional. */
void mv_metrics_describe(mv_metrics *m, const char *name, const char *type, const char *help);
/* counter += v (v >= 0). */
void mv_metrics_counter_add(mv_metrics *m, const char *name, const char *const *labels, double v);
/* gauge = v. */
void mv_metrics_gauge_set(mv_metrics *m, const char *name, const char *const *labels, double v);
/* One observation of a histogram with the default duration buckets (seconds:
 * 0.005 … 10). */
void mv_metrics_observe(mv_metrics *m, const char *name, const char *const *labels, double v);
/* Creates a histogram series with no observations (so it is listed at zero). */
void mv_metrics_histogram_declare(mv_metrics *m, const char *name, const char *const *labels);
/* The value of a counter or gauge series (0 when absent) — for tests. */
double mv_metrics_value(mv_metrics *m, const char *name, const char *const *labels);

void mv_metrics_set_collector(mv_metrics *m, mv_metrics_collector fn, void *ctx);

/* Prometheus text exposition (version 0.0.4). Caller frees; NULL when out of memory. */
char *mv_metrics_render(mv_metrics *m);

#endif
