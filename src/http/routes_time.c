/* routes_time.c — HTTP in front of per-viewer snooze: the body's `until`, the caller, the answer.
 * No rules here: who may snooze, the timer and the change log live in message/snooze.c. */
#include <string.h>

#include "http/request.h"
#include "http/routes_time.h"
#include "missive/inbox.h"

static mv_code check_id(const mv_http_request *req, mv_err *err) {
    if (!mv_valid_message_id(mv_http_param(req, "id")))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "id must be a 24-character hex ObjectId");
    return MV_OK;
}

static void answer(mv_http_response *res, mv_code rc, const mv_err *err, json_t *msg) {
    if (rc != MV_OK)
        mv_http_error(res, err);
    else
        mv_http_json(res, 200, msg);
}

static void snooze(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_message_routes *r = req->route_ctx;
    const char *key;
    json_t *v;
    if (!json_is_object(req->json)) {
        mv_http_errorf(res, MV_INVALID_ARGUMENT, "body must be a JSON object");
        return;
    }
    json_object_foreach(req->json, key, v) {
        if (strcmp(key, "until") != 0) {
            mv_http_errorf(res, MV_INVALID_ARGUMENT,
                           "unknown body field \"%.64s\" (allowed: until)", key);
            return;
        }
    }
    v = json_object_get(req->json, "until");
    if (!json_is_integer(v)) {
        mv_http_errorf(res, MV_INVALID_ARGUMENT,
                       "until must be a time in milliseconds since the epoch, in the future and "
                       "at most 365 days ahead");
        return;
    }
    mv_user user;
    mv_http_user(req, &user);
    json_t *msg = NULL;
    mv_err err = {0};
    mv_code rc = mv_message_snooze(r->service, mv_http_param(req, "id"), &user,
                                   (int64_t)json_integer_value(v), &msg, &err);
    answer(res, rc, &err, msg);
}

static void unsnooze(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_message_routes *r = req->route_ctx;
    mv_user user;
    mv_http_user(req, &user);
    json_t *msg = NULL;
    mv_err err = {0};
    mv_code rc = mv_message_unsnooze(r->service, mv_http_param(req, "id"), &user, &msg, &err);
    answer(res, rc, &err, msg);
}

/* POST /messages/{id}/cancel: the sender's scheduled message, before its sendAt (schedule.c). */
static void cancel(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_message_routes *r = req->route_ctx;
    mv_user user;
    mv_http_user(req, &user);
    json_t *msg = NULL;
    mv_err err = {0};
    mv_code rc = mv_message_cancel(r->service, mv_http_param(req, "id"), &user, &msg, &err);
    answer(res, rc, &err, msg);
}

mv_code mv_http_scheduled_param(mv_http_request *req, bool *scheduled, mv_err *err) {
    const char *v = mv_http_query_get(req, "scheduled");
    *scheduled = v && strcmp(v, "true") == 0;
    if (v && !*scheduled && strcmp(v, "false") != 0)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "scheduled must be \"true\" or \"false\"");
    return MV_OK;
}

mv_code mv_time_routes_add(mv_router *router, mv_message_routes *routes, mv_err *err) {
    const mv_route table[] = {
        {"POST", "/messages/{id}/snooze", snooze, false, true, check_id, routes},
        {"POST", "/messages/{id}/unsnooze", unsnooze, false, true, check_id, routes},
        {"POST", "/messages/{id}/cancel", cancel, false, true, check_id, routes},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        mv_code rc = mv_router_add(router, &table[i], err);
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}
