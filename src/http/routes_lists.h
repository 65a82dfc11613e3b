/* http/routes_lists.h — the operator lists: GET /sagas (admins) and GET /approvals (approvers
 * and admins of the tenant see the tenant's; everyone else sees their own). */
#ifndef MISSIVE_HTTP_ROUTES_LISTS_H
#define MISSIVE_HTTP_ROUTES_LISTS_H

#include <stdbool.h>

#include "http/router.h"
#include "missive/durable.h"
#include "missive/store.h"

typedef struct mv_list_routes {
    mv_store *store;              /* borrowed */
    mv_saga_engine *engine;       /* borrowed; reads each listed saga's record. NULL → GET /sagas
                                     answers 404 not_found */
    bool approvals;               /* false → GET /approvals answers 404 not_found */
    const char *admin_permission; /* NULL → "is.admin" */
    int default_limit;            /* 0 → 50 */
    int max_limit;                /* 0 → 100 */
} mv_list_routes;

/* Registers GET /sagas?state=&definition=&limit=&cursor= and
 * GET /approvals?state=&limit=&cursor= (state defaults to pending), each answering
 * {"sagas"|"approvals": [...], "nextCursor": "…"|null} — every saga as GET /sagas/{id} shows it,
 * every approval as GET /approvals/{id}. routes must outlive the router. */
mv_code mv_list_routes_add(mv_router *router, mv_list_routes *routes, mv_err *err);

/* The permission the operator routes need (routes->admin_permission, default "is.admin"). */
const char *mv_http_list_admin_permission(const mv_list_routes *routes);

/* A list route's page size from ?limit: absent → the default, an integer → clamped to 1..max,
 * anything else → 400 invalid_pagination. */
mv_code mv_http_list_limit(const mv_http_request *req, int *out, mv_err *err);

#endif
