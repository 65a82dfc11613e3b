/* http/ops.h — the two operational routes: GET /healthz and GET /metrics.
 *
 * Both are public (no authentication) and know nothing of the domain: health asks a callback
 * (the daemon passes the store ping through the service), metrics renders the registry (whose
 * collector adds the application's gauges). */
#ifndef MISSIVE_HTTP_OPS_H
#define MISSIVE_HTTP_OPS_H

#include "http/metrics.h"
#include "http/router.h"

/* Returns MV_OK when the daemon can serve (store reachable, schema current). */
typedef mv_code (*mv_health_fn)(void *ctx, mv_err *err);

typedef struct mv_http_ops {
    mv_health_fn health; /* NULL → always healthy */
    void *health_ctx;
    mv_metrics *metrics; /* NULL → /metrics answers an empty exposition */
} mv_http_ops;

/* Registers GET /healthz (200 {"status":"ok"}, or 503 store_unavailable with the real reason
 * only in the log) and GET /metrics (200, text/plain; version=0.0.4). ops must outlive router. */
mv_code mv_http_ops_routes(mv_router *router, mv_http_ops *ops, mv_err *err);

#endif
