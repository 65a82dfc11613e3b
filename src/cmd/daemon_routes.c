/* daemon_routes.c — the daemon's route table, in one place: a reader sees every route the daemon
 * answers here. The message, approval and saga routes join the operational ones as their
 * services land. */
#include "cmd/daemon.h"

mv_code mv_daemon_routes(mv_router *router, mv_daemon *d, mv_err *err) {
    mv_router_set_auth(router, d->auth);
    mv_router_set_metrics(router, d->metrics);
    return mv_http_ops_routes(router, &d->ops, err);
}
