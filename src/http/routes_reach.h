/* http/routes_reach.h — the reach routes (docs/channels.md): GET and PUT /preferences, each the
 * caller's own preference set in their tenant, and the action-link pages GET and POST /a/{token}
 * (routes_links.c). */
#ifndef MISSIVE_HTTP_ROUTES_REACH_H
#define MISSIVE_HTTP_ROUTES_REACH_H

#include "http/routes_messages.h"
#include "missive/reach.h"

typedef struct mv_reach_routes {
    mv_store *store;       /* borrowed */
    const mv_reach *reach; /* borrowed; NULL = no named channels, no defaults, no links */
    mv_service *service;   /* borrowed: the link pages run actions through it */
} mv_reach_routes;

/* Registers GET /preferences, PUT /preferences and the link pages. routes must outlive the
 * router. */
mv_code mv_reach_routes_add(mv_router *router, mv_reach_routes *routes, mv_err *err);
/* Registers GET /a/{token} and POST /a/{token} (public: the token is the credential). */
mv_code mv_link_routes_add(mv_router *router, mv_reach_routes *routes, mv_err *err);

#endif
