/* routes_reach.c — HTTP in front of the preference store (message/preferences.c): the caller
 * reads and replaces their own set; no rules here beyond the JSON shape, which
 * mv_preferences_put checks field by field before anything is written. And a message, or a
 * list's page, in the reader's language. */
#include <stdlib.h>

#include "http/request.h"
#include "http/routes_reach.h"

static void get_preferences(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_reach_routes *r = req->route_ctx;
    mv_user user;
    mv_http_user(req, &user);
    json_t *prefs = NULL;
    mv_err err = {0};
    if (mv_preferences_get(r->store, &user, &prefs, &err) != MV_OK) {
        mv_http_error(res, &err);
        return;
    }
    mv_http_json(res, 200, prefs);
}

static void put_preferences(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_reach_routes *r = req->route_ctx;
    mv_user user;
    mv_http_user(req, &user);
    json_t *prefs = NULL;
    mv_err err = {0};
    if (mv_preferences_put(r->store, mv_service_reach(r->service), &user, req->json, &prefs,
                           &err) != MV_OK) {
        mv_http_error(res, &err);
        return;
    }
    mv_http_json(res, 200, prefs);
}

const char *mv_http_reader_locale(mv_http_request *req, const char *claim_path) {
    const char *v = mv_http_header_get(req, "Accept-Language");
    if (v && *v) return v;
    const json_t *claims = req->principal ? req->principal->identity : NULL;
    if (claims && claim_path) { /* jwt: an exact member first, as every claim, else the path */
        const json_t *c = json_object_get(claims, claim_path);
        v = json_string_value(c ? c : mv_json_path(claims, claim_path));
        return v && *v ? v : NULL;
    }
    v = claims ? NULL : mv_http_header_get(req, "X-User-Locale");
    return v && *v ? v : NULL;
}

void mv_http_localized_message(mv_http_request *req, mv_http_response *res, mv_service *svc,
                               const mv_user *user, const char *claim_path) {
    json_t *msg = NULL;
    mv_err err = {0};
    if (mv_message_get(svc, mv_http_param(req, "id"), user, &msg, &err) != MV_OK ||
        mv_message_localize(svc, msg, mv_http_reader_locale(req, claim_path), &err) != MV_OK) {
        json_decref(msg);
        mv_http_error(res, &err);
        return;
    }
    mv_http_json(res, 200, msg);
}

void mv_http_localized_list(mv_http_request *req, mv_http_response *res, mv_service *svc,
                            const mv_list_request *lr, const char *claim_path) {
    json_t *page = NULL;
    char *next = NULL;
    mv_err err = {0};
    if (mv_message_list(svc, lr, &page, &next, &err) != MV_OK ||
        mv_messages_localize(svc, page, mv_http_reader_locale(req, claim_path), &err) != MV_OK) {
        json_decref(page);
        free(next);
        mv_http_error(res, &err);
        return;
    }
    json_t *body = json_pack("{s:o,s:s?}", "messages", page, "nextCursor", next);
    free(next);
    mv_http_json(res, 200, body);
}

mv_code mv_reach_routes_add(mv_router *router, mv_reach_routes *routes, mv_err *err) {
    const mv_route table[] = {
        {"GET", "/preferences", get_preferences, false, false, NULL, routes},
        {"PUT", "/preferences", put_preferences, false, true, NULL, routes},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        mv_code rc = mv_router_add(router, &table[i], err);
        if (rc != MV_OK) return rc;
    }
    return mv_link_routes_add(router, routes, err);
}
