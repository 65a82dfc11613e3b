/* http/routes_time.h — the routes of durable time that act on one viewer's inbox: snooze and
 * unsnooze (DESIGN part three, "Durable time"). */
#ifndef MISSIVE_HTTP_ROUTES_TIME_H
#define MISSIVE_HTTP_ROUTES_TIME_H

#include "http/routes_messages.h"

/* Registers POST /messages/{id}/snooze and POST /messages/{id}/unsnooze. routes must outlive the
 * router. */
mv_code mv_time_routes_add(mv_router *router, mv_message_routes *routes, mv_err *err);

#endif
