/* daemon_routes.c — the daemon's route table, in one place: a reader sees every route the daemon
 * answers here. */
#include "cmd/daemon.h"
#include "cmd/ui_assets.h"
#include "http/openapi.h"
#include "http/routes_admin.h"
#include "http/routes_inbox.h"
#include "http/routes_time.h"

mv_code mv_daemon_routes(mv_router *router, mv_daemon *d, mv_err *err) {
    mv_router_set_auth(router, d->auth);
    mv_router_set_metrics(router, d->metrics);
    mv_code rc = mv_http_ops_routes(router, &d->ops, err);
    if (rc == MV_OK) rc = mv_message_routes_add(router, &d->message_routes, err);
    if (rc == MV_OK) rc = mv_inbox_routes_add(router, &d->message_routes, err);
    if (rc == MV_OK) rc = mv_time_routes_add(router, &d->message_routes, err);
    if (rc == MV_OK) rc = mv_reach_routes_add(router, &d->reach_routes, err);
    if (rc == MV_OK) rc = mv_stream_routes_add(router, d->streams, err);
    if (rc == MV_OK && d->cfg)
        rc = mv_router_set_cors(router, (const char *const *)d->cfg->cors.origins,
                                d->cfg->cors.n_origins, d->cfg->cors.max_age_s, err);
    if (rc == MV_OK) rc = mv_durable_routes_add(router, &d->durable_routes, err);
    if (rc == MV_OK) rc = mv_list_routes_add(router, &d->list_routes, err);
    if (rc == MV_OK) rc = mv_admin_routes_add(router, &d->list_routes, err);
    if (rc == MV_OK) rc = mv_http_openapi_routes(router, err);
    /* always registered, answering 404 while "ui.enabled" is false: a reload may switch it on */
    d->ui_routes = (mv_ui_routes){.assets = mv_ui_assets,
                                  .index = "index.html",
                                  .enabled = d->cfg ? &d->ui_enabled : NULL,
                                  .oidc_issuer = d->cfg ? d->cfg->ui.oidc_issuer : NULL,
                                  .oidc_client_id = d->cfg ? d->cfg->ui.oidc_client_id : NULL};
    if (rc == MV_OK) rc = mv_ui_routes_add(router, &d->ui_routes, err);
    return rc;
}
