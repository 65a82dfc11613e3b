/* http/routes_admin.h — the operator's views behind the console (admins of the caller's tenant):
 *   GET /admin/messages?state=&templateCd=&sender=&recipient=&q=&limit=&cursor=
 *   GET /admin/messages/{id}/timeline
 *   GET /admin/outbox?state=&channel=&limit=&cursor=
 *   GET /admin/timers?state=&kind=&limit=&cursor=
 *   GET /admin/sagas/{id}/timeline
 * Lists answer {"messages"|"outbox"|"timers": [...], "nextCursor": "…"|null}; timelines
 * {…, "entries": [{"at", "event", "actor", "attempt", "step", "outcome", "detail"}]}. */
#ifndef MISSIVE_HTTP_ROUTES_ADMIN_H
#define MISSIVE_HTTP_ROUTES_ADMIN_H

#include "http/router.h"
#include "http/routes_lists.h"

/* routes: the operator lists' settings (store, saga engine, admin permission, page limits); must
 * outlive the router. Without a saga engine the saga timeline answers 404 not_found. */
mv_code mv_admin_routes_add(mv_router *router, mv_list_routes *routes, mv_err *err);

#endif
