/* ops.c — GET /healthz and GET /metrics. A failing health check answers 503 store_unavailable
 * with a fixed message: the reason (which may name a host or a path) goes to the log only. */
#include <stdlib.h>
#include <string.h>

#include "http/ops.h"
#include "http/request.h"

static void handle_health(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_http_ops *ops = req->route_ctx;
    mv_err err = {0};
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
    mv_route health = {.method = "GET", .pattern = "/healthz", .handler = handle_health,
                       .public_route = true, .ctx = ops};
    mv_route metrics = {.method = "GET", .pattern = "/metrics", .handler = handle_metrics,
                        .public_route = true, .ctx = ops};
    mv_code rc = mv_router_add(router, &health, err);
    return rc != MV_OK ? rc : mv_router_add(router, &metrics, err);
}
