/* routes_admin.c — the operator's views (routes_admin.h): every message of the tenant with
 * filters and a title search, the tenant's outbox deliveries and timers, and the timeline of one
 * message or saga. Each handler checks the request and makes one library call.
 *
 * Order of checks as every route: authentication (router) → feature configured (404) → query and
 * path parameters (400: an unknown name, a bad filter, limit or cursor — checked here, before any
 * store work, with the library's own words) → permission (403: the admin permission) → store
 * work. The tenant always comes from the principal, never from the query: another tenant's
 * message or saga is 404, as if it did not exist. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "http/auth.h"
#include "http/request.h"
#include "http/routes_admin.h"
#include "missive/operations.h"
#include "missive/timers.h"

static const char *tenant_of(const mv_http_request *req) {
    return req->principal->tenant ? req->principal->tenant : "default";
}

/* 400 unless every query parameter is one of allowed (NULL-terminated) and given once. */
static mv_code known_params(const mv_http_request *req, const char *const *allowed, mv_err *err) {
    for (size_t i = 0; i < req->nquery; i++) {
        const char *const *a = allowed;
        while (*a && strcmp(*a, req->query[i].name) != 0)
            a++;
        if (!*a)
            return mv_err_set(err, MV_INVALID_ARGUMENT, "unknown query parameter \"%.100s\"",
                              req->query[i].name);
        for (size_t j = 0; j < i; j++)
            if (strcmp(req->query[j].name, req->query[i].name) == 0)
                return mv_err_set(err, MV_INVALID_ARGUMENT,
                                  "query parameter \"%.100s\" is repeated", req->query[i].name);
    }
    return MV_OK;
}

static mv_code need_admin(const mv_http_request *req, mv_err *err) {
    const mv_list_routes *r = req->route_ctx;
    if (!mv_principal_has_permission(req->principal, mv_http_list_admin_permission(r)))
        return mv_err_set(err, MV_FORBIDDEN, "admin routes need the admin permission \"%s\"",
                          mv_http_list_admin_permission(r));
    return MV_OK;
}

/* ---- the queries, built the same way by the check and the handler --------------------------- */

static mv_message_admin_query messages_query(const mv_http_request *req) {
    mv_message_admin_query q = {.tenant_id = tenant_of(req),
                                .state = mv_http_query_get(req, "state"),
                                .template_cd = mv_http_query_get(req, "templateCd"),
                                .sender = mv_http_query_get(req, "sender"),
                                .recipient = mv_http_query_get(req, "recipient"),
                                .text = mv_http_query_get(req, "q"),
                                .cursor = mv_http_query_get(req, "cursor")};
    mv_http_list_limit(req, &q.limit, NULL);
    return q;
}

static mv_outbox_admin_query outbox_query(const mv_http_request *req) {
    mv_outbox_admin_query q = {.tenant_id = tenant_of(req),
                               .state = mv_http_query_get(req, "state"),
                               .channel = mv_http_query_get(req, "channel"),
                               .cursor = mv_http_query_get(req, "cursor")};
    mv_http_list_limit(req, &q.limit, NULL);
    return q;
}

static mv_timers_filter timers_query(const mv_http_request *req) {
    mv_timers_filter f = {.tenant_id = tenant_of(req),
                          .state = mv_http_query_get(req, "state"),
                          .kind = mv_http_query_get(req, "kind"),
                          .cursor = mv_http_query_get(req, "cursor")};
    mv_http_list_limit(req, &f.limit, NULL);
    return f;
}

/* ---- checks -----------------------------------------------------------------------------------
 */

static mv_code check_list(const mv_http_request *req, const char *const *allowed, mv_err *err) {
    int limit;
    mv_code rc;
    if ((rc = known_params(req, allowed, err)) || (rc = mv_http_list_limit(req, &limit, err)))
        return rc;
    const char *cursor = mv_http_query_get(req, "cursor");
    if (cursor && !*cursor) return mv_err_set(err, MV_INVALID_PAGINATION, "cursor is empty");
    return need_admin(req, err);
}

static mv_code check_messages(const mv_http_request *req, mv_err *err) {
    static const char *const allowed[] = {"state", "templateCd", "sender", "recipient",
                                          "q",     "limit",      "cursor", NULL};
    return check_list(req, allowed, err);
}

static mv_code check_outbox(const mv_http_request *req, mv_err *err) {
    static const char *const allowed[] = {"state", "channel", "limit", "cursor", NULL};
    return check_list(req, allowed, err);
}

static mv_code check_timers(const mv_http_request *req, mv_err *err) {
    static const char *const allowed[] = {"state", "kind", "limit", "cursor", NULL};
    return check_list(req, allowed, err);
}

static mv_code check_message_timeline(const mv_http_request *req, mv_err *err) {
    if (req->nquery) return known_params(req, (const char *const[]){NULL}, err);
    if (!mv_valid_message_id(mv_http_param(req, "id")))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "message id must be 24 hex characters");
    return need_admin(req, err);
}

static mv_code check_saga_timeline(const mv_http_request *req, mv_err *err) {
    const mv_list_routes *r = req->route_ctx;
    if (!r->engine) return mv_err_set(err, MV_NOT_FOUND, "sagas are not configured");
    if (req->nquery) return known_params(req, (const char *const[]){NULL}, err);
    if (!mv_valid_token(mv_http_param(req, "id"), 128))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "saga id must be 1 to 128 printable characters without spaces");
    return need_admin(req, err);
}

/* ---- handlers ---------------------------------------------------------------------------------
 */

static void list_messages(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_list_routes *r = req->route_ctx;
    mv_message_admin_query q = messages_query(req);
    json_t *items = NULL;
    char *next = NULL;
    mv_err err = {0};
    mv_code rc = mv_message_admin_list(r->store, &q, &items, &next, &err);
    mv_http_json_page(res, rc, "messages", items, next, &err);
}

static void list_outbox(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_list_routes *r = req->route_ctx;
    mv_outbox_admin_query q = outbox_query(req);
    json_t *items = NULL;
    char *next = NULL;
    mv_err err = {0};
    mv_code rc = mv_outbox_admin_list(r->store, &q, &items, &next, &err);
    mv_http_json_page(res, rc, "outbox", items, next, &err);
}

static void list_timers(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_list_routes *r = req->route_ctx;
    mv_timers_filter f = timers_query(req);
    json_t *page = NULL;
    mv_err err = {0};
    if (mv_timers_list(r->store, &f, &page, &err) != MV_OK) {
        mv_http_error(res, &err);
        return;
    }
    /* the tenant is the caller's: every row carries it, the page need not */
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(page, "timers"), i, t) json_object_del(t, "tenantId");
    if (!json_object_get(page, "nextCursor")) json_object_set_new(page, "nextCursor", json_null());
    mv_http_json(res, 200, page);
}

static void message_timeline(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_list_routes *r = req->route_ctx;
    json_t *out = NULL;
    mv_err err = {0};
    if (mv_message_timeline(r->store, tenant_of(req), mv_http_param(req, "id"), &out, &err) !=
        MV_OK) {
        mv_http_error(res, &err);
        return;
    }
    mv_http_json(res, 200, out);
}

static void saga_timeline(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_list_routes *r = req->route_ctx;
    json_t *out = NULL;
    mv_err err = {0};
    if (mv_saga_timeline(r->store, tenant_of(req), mv_http_param(req, "id"), &out, &err) != MV_OK) {
        mv_http_error(res, &err);
        return;
    }
    mv_http_json(res, 200, out);
}

mv_code mv_admin_routes_add(mv_router *router, mv_list_routes *routes, mv_err *err) {
    const mv_route table[] = {
        {"GET", "/admin/messages", list_messages, false, false, check_messages, routes},
        {"GET", "/admin/messages/{id}/timeline", message_timeline, false, false,
         check_message_timeline, routes},
        {"GET", "/admin/outbox", list_outbox, false, false, check_outbox, routes},
        {"GET", "/admin/timers", list_timers, false, false, check_timers, routes},
        {"GET", "/admin/sagas/{id}/timeline", saga_timeline, false, false, check_saga_timeline,
         routes},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        mv_code rc = mv_router_add(router, &table[i], err);
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}
