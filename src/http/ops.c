/* ops.c — GET /livez, /readyz (= /healthz) and /metrics. A failing readiness check answers 503
 * store_unavailable with a fixed message: the reason (which may name a host or a path) goes to
 * the log only. Liveness never touches the store, so an orchestrator does not restart a healthy
 * process because its database is down. */
#include <stdlib.h>
#include <string.h>

#include "http/ops.h"
#include "http/request.h"

static void handle_live(mv_http_request *req, mv_http_response *res, void *app) {
    (void)req;
    (void)app;
    mv_http_json(res, 200, json_pack("{s:s}", "status", "ok"));
}

static void handle_ready(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_http_ops *ops = req->route_ctx;
    mv_err err = {0};
    if (ops->draining && atomic_load(ops->draining)) {
        mv_http_errorf(res, MV_DRAINING, "the daemon is shutting down");
        return;
    }
    if (ops->health && ops->health(ops->health_ctx, &err) != MV_OK) {
        mv_http_errorf(res, MV_STORE_UNAVAILABLE, "the store is not available");
        res->detail = mv_arena_strdup(res->arena, err.message);
        return;
    }
    mv_http_json(res, 200, json_pack("{s:s}", "status", "ok"));
}

static void handle_metrics(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_http_ops *ops = req->route_ctx;
    char *text = ops->metrics ? mv_metrics_render(ops->metrics) : strdup("");
    if (!text) {
        mv_http_errorf(res, MV_NO_MEMORY, "out of memory rendering metrics");
        return;
    }
    mv_http_text(res, 200, "text/plain; version=0.0.4; charset=utf-8", text, strlen(text));
    free(text);
}

mv_code mv_http_ops_routes(mv_router *router, mv_http_ops *ops, mv_err *err) {
    const mv_route routes[] = {
        {.method = "GET", .pattern = "/livez", .handler = handle_live},
        {.method = "GET", .pattern = "/readyz", .handler = handle_ready},
        {.method = "GET", .pattern = "/healthz", .handler = handle_ready},
        {.method = "GET", .pattern = "/metrics", .handler = handle_metrics},
    };
    mv_code rc = MV_OK;
    for (size_t i = 0; rc == MV_OK && i < sizeof routes / sizeof routes[0]; i++) {
        mv_route r = routes[i];
        r.public_route = true;
        r.ctx = ops;
        rc = mv_router_add(router, &r, err);
    }
    return rc;
}
