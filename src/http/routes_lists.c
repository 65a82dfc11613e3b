/* routes_lists.c — GET /sagas and GET /approvals: check the request, make one list call.
 *
 * Order of checks as every route: authentication (router) → feature configured (404) → query
 * parameters (400: an unknown name, a bad limit or cursor) → permission (403 for /sagas; for
 * /approvals the permission decides the scope instead: approvers and admins list the tenant's
 * approvals, anyone else only their own, so a stranger gets an empty page, never another's
 * approval) → store work. The tenant always comes from the principal, never from the query. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "http/auth.h"
#include "http/request.h"
#include "http/routes_durable.h"
#include "http/routes_lists.h"
#include "missive/operations.h"

const char *mv_http_list_admin_permission(const mv_list_routes *r) {
    return r->admin_permission ? r->admin_permission : "is.admin";
}

/* 400 unless every query parameter is one of allowed (NULL-terminated). */
static mv_code known_params(const mv_http_request *req, const char *const *allowed, mv_err *err) {
    for (size_t i = 0; i < req->nquery; i++) {
        const char *const *a = allowed;
        while (*a && strcmp(*a, req->query[i].name) != 0)
            a++;
        if (!*a)
            return mv_err_set(err, MV_INVALID_ARGUMENT, "unknown query parameter \"%.100s\"",
                              req->query[i].name);
    }
    return MV_OK;
}

/* limit: absent → default; an integer → clamped to 1..max; anything else → 400. */
mv_code mv_http_list_limit(const mv_http_request *req, int *out, mv_err *err) {
    const mv_list_routes *r = req->route_ctx;
    int max = r->max_limit > 0 ? r->max_limit : 100;
    const char *v = mv_http_query_get(req, "limit");
    *out = r->default_limit > 0 ? r->default_limit : 50;
    if (*out > max) *out = max;
    if (!v) return MV_OK;
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (!*v || *end || errno || !isfinite(d) || d != floor(d))
        return mv_err_set(err, MV_INVALID_PAGINATION, "limit must be a finite integer");
    *out = d < 1 ? 1 : d > max ? max : (int)d;
    return MV_OK;
}

static mv_code check_sagas(const mv_http_request *req, mv_err *err) {
    const mv_list_routes *r = req->route_ctx;
    static const char *const allowed[] = {"state", "definition", "limit", "cursor", NULL};
    int limit;
    mv_code rc;
    if (!r->engine) return mv_err_set(err, MV_NOT_FOUND, "sagas are not configured");
    if ((rc = known_params(req, allowed, err)) || (rc = mv_http_list_limit(req, &limit, err)))
        return rc;
    if (!mv_principal_has_permission(req->principal, mv_http_list_admin_permission(r)))
        return mv_err_set(err, MV_FORBIDDEN, "saga routes need the admin permission \"%s\"",
                          mv_http_list_admin_permission(r));
    return MV_OK;
}

static mv_code check_approvals(const mv_http_request *req, mv_err *err) {
    const mv_list_routes *r = req->route_ctx;
    static const char *const allowed[] = {"state", "limit", "cursor", NULL};
    int limit;
    mv_code rc;
    if (!r->approvals) return mv_err_set(err, MV_NOT_FOUND, "approvals are not configured");
    if ((rc = known_params(req, allowed, err)) || (rc = mv_http_list_limit(req, &limit, err)))
        return rc;
    return MV_OK;
}

static void list_sagas(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_list_routes *r = req->route_ctx;
    mv_saga_list_query q = {.tenant_id =
                                req->principal->tenant ? req->principal->tenant : "default",
                            .state = mv_http_query_get(req, "state"),
                            .definition = mv_http_query_get(req, "definition"),
                            .cursor = mv_http_query_get(req, "cursor")};
    mv_err err = {0};
    mv_http_list_limit(req, &q.limit, &err); /* checked before */
    json_t *page = NULL, *sagas = json_array();
    char *next = NULL;
    mv_code rc = sagas ? mv_saga_list(r->store, &q, &page, &next, &err)
                       : mv_err_set(&err, MV_NO_MEMORY, "out of memory");
    /* the page found the ids by index; each item is the saga's full record (decrypted input,
     * steps), read by id: limit reads at most, whatever the depth */
    size_t i;
    json_t *row;
    json_array_foreach(page, i, row) {
        json_t *record = NULL;
        mv_err gerr = {0};
        mv_code grc = mv_saga_get(r->engine, mv_json_str(row, "sagaId"), &record, &gerr);
        if (grc == MV_OK)
            json_array_append_new(sagas, record);
        else if (grc != MV_SAGA_NOT_FOUND && rc == MV_OK)
            rc = mv_err_copy(&err, &gerr);
    }
    json_decref(page);
    if (rc != MV_OK) {
        json_decref(sagas);
        sagas = NULL;
    }
    mv_http_json_page(res, rc, "sagas", sagas, next, &err);
}

static void list_approvals(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_list_routes *r = req->route_ctx;
    const mv_principal *p = req->principal;
    bool everyone = mv_principal_has_permission(p, mv_http_list_admin_permission(r)) ||
                    mv_principal_has_permission(p, MV_APPROVALS_DECIDE_PERMISSION);
    mv_approval_list_query q = {.tenant_id = p->tenant ? p->tenant : "default",
                                .principal_id = everyone ? NULL : p->user_id,
                                .state = mv_http_query_get(req, "state"),
                                .now = mv_now_ms(),
                                .cursor = mv_http_query_get(req, "cursor")};
    mv_err err = {0};
    mv_http_list_limit(req, &q.limit, &err);
    json_t *approvals = NULL;
    char *next = NULL;
    mv_code rc = mv_approval_list(r->store, &q, &approvals, &next, &err);
    mv_http_json_page(res, rc, "approvals", approvals, next, &err);
}

mv_code mv_list_routes_add(mv_router *router, mv_list_routes *routes, mv_err *err) {
    const mv_route table[] = {
        {"GET", "/sagas", list_sagas, false, false, check_sagas, routes},
        {"GET", "/approvals", list_approvals, false, false, check_approvals, routes},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        mv_code rc = mv_router_add(router, &table[i], err);
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}
