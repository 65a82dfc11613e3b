/* http/routes_time.h — the routes of durable time that act on one viewer's inbox: snooze and
 * unsnooze, and the cancel of a scheduled send. */
#ifndef MISSIVE_HTTP_ROUTES_TIME_H
#define MISSIVE_HTTP_ROUTES_TIME_H

#include "http/routes_messages.h"

/* Registers POST /messages/{id}/snooze, POST /messages/{id}/unsnooze and (scheduled send)
 * POST /messages/{id}/cancel. routes must outlive the router. */
mv_code mv_time_routes_add(mv_router *router, mv_message_routes *routes, mv_err *err);
/* GET /messages' `scheduled` parameter ("true" / "false"; absent: false). */
mv_code mv_http_scheduled_param(mv_http_request *req, bool *scheduled, mv_err *err);

#endif
