/* http/ops.h — the operational routes: GET /livez, GET /readyz (and /healthz, its old name) and
 * GET /metrics.
 *
 * All are public (no authentication) and know nothing of the domain: readiness asks a callback
 * (the daemon passes the store check through the service), metrics renders the registry (whose
 * collector adds the application's gauges). Liveness touches nothing but the process. */
#ifndef MISSIVE_HTTP_OPS_H
#define MISSIVE_HTTP_OPS_H

#include <stdatomic.h>

#include "http/metrics.h"
#include "http/router.h"

/* Returns MV_OK when the daemon can serve (store reachable and writable, schema current). */
typedef mv_code (*mv_health_fn)(void *ctx, mv_err *err);

typedef struct mv_http_ops {
    mv_health_fn health; /* NULL → always ready */
    void *health_ctx;
    mv_metrics *metrics;         /* NULL → /metrics answers an empty exposition */
    const atomic_bool *draining; /* NULL → never; true → /readyz answers 503 draining */
} mv_http_ops;

/* Registers GET /livez (200 {"status":"ok"}, no store access), GET /readyz and GET /healthz
 * (200 {"status":"ok"}; 503 draining while the daemon stops; 503 store_unavailable with the real
 * reason only in the log) and GET /metrics (200, text/plain; version=0.0.4). ops must outlive
 * router. */
mv_code mv_http_ops_routes(mv_router *router, mv_http_ops *ops, mv_err *err);

#endif
