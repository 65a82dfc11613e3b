/* routes_messages.c — HTTP in front of the message service. Each handler translates the request
 * into one service call and the result (or error) into JSON; there are no business rules here.
 * Route parameters are checked before the body (the router enforces the order), with the
 * reference's messages. */
#include <stdlib.h>
#include <string.h>

#include "http/auth.h"
#include "http/request.h"
#include "http/routes_inbox.h"
#include "http/routes_messages.h"
#include "http/routes_reach.h"
#include "message/action_async.h"
#include "message/create_async.h"

void mv_http_user(mv_http_request *req, mv_user *out) {
    const mv_principal *p = req->principal;
    *out = (mv_user){0};
    if (!p) return;
    out->id = p->user_id;
    out->roles = (const char *const *)p->roles;
    out->nroles = p->nroles;
    out->permissions = p->permissions;
    out->tenant = p->tenant;
    out->identity = p->identity; /* headers mode: NULL, see mv_http_user_identity */
}

void mv_http_user_identity(mv_http_request *req, mv_user *out) {
    mv_http_user(req, out);
    if (req->principal) out->identity = mv_principal_identity(req->principal, req->arena);
}

/* ---- parameter checks ------------------------------------------------------------------- */

static mv_code check_template_cd(const mv_http_request *req, mv_err *err) {
    if (!mv_valid_template_cd(mv_http_param(req, "templateCd")))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "templateCd must be a non-empty string of at most 128 letters, digits, "
                          "dots, underscores, and hyphens");
    return MV_OK;
}

static mv_code check_id(const mv_http_request *req, mv_err *err) {
    if (!mv_valid_message_id(mv_http_param(req, "id")))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "id must be a 24-character hex ObjectId");
    return MV_OK;
}

static mv_code check_usertype(const mv_http_request *req, mv_err *err) {
    mv_code rc = check_id(req, err);
    if (rc != MV_OK) return rc;
    const char *u = mv_http_param(req, "usertype");
    if (!u || (strcmp(u, "sender") != 0 && strcmp(u, "receiver") != 0))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "usertype must be \"sender\" or \"receiver\"");
    return MV_OK;
}

static mv_code check_action(const mv_http_request *req, mv_err *err) {
    mv_code rc = check_id(req, err);
    if (rc != MV_OK) return rc;
    if (!mv_valid_action_cd(mv_http_param(req, "actionCd")))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "actionCd must be a non-empty string of at most 128 letters, digits, "
                          "underscores, and hyphens");
    return MV_OK;
}

/* ---- handlers ----------------------------------------------------------------------------- */

/* A create in flight: what its completion needs, in the request's arena (the request lives until
 * it is answered; while it is suspended nobody else uses the arena). */
typedef struct create_call {
    mv_http_later_rounds rounds; /* its rounds on the write pool; rounds.later the answer */
    mv_user user;
    mv_create_request cr;
    mv_arena *arena;
    mv_code rc; /* the outcome, for create_render */
    json_t *messages;
    bool replayed;
    mv_err *err;
} create_call;

static void answer_create(mv_http_response *res, mv_code rc, json_t *messages, bool replayed,
                          const mv_err *err) {
    if (rc != MV_OK) {
        mv_http_error(res, err);
        return;
    }
    if (replayed) mv_http_set_header(res, "Idempotent-Replayed", "true");
    mv_http_json(res, 201, json_pack("{s:o}", "messages", messages));
}

/* On the connection's I/O thread, once resumed: the answer from what create_done kept. */
static void create_render(mv_http_request *req, mv_http_response *res, void *ctx) {
    (void)req;
    create_call *c = ctx;
    if (c->rc == MV_OK && !c->messages) {
        mv_http_errorf(res, MV_NO_MEMORY, "out of memory");
        return;
    }
    answer_create(res, c->rc, json_incref(c->messages), c->replayed, c->err);
}

/* Wherever the create ended (the store's committing thread, a round on the write pool, or the
 * handler's own thread for a request that failed its checks): keeps the outcome in the arena —
 * a client gone before the render leaks nothing — and resumes the connection. Never blocks. */
static void create_done(void *ctx, mv_code rc, json_t *messages, bool replayed, const mv_err *err) {
    create_call *c = ctx;
    c->rc = rc;
    c->replayed = replayed;
    c->messages = messages ? mv_arena_json(c->arena, messages) : NULL;
    if (rc != MV_OK && (c->err = mv_arena_alloc(c->arena, sizeof *c->err)))
        mv_err_copy(c->err, err);
    if (rc != MV_OK && !c->err) c->rc = MV_OK; /* rendered as out of memory */
    mv_http_later_done_io(c->rounds.later, create_render, c);
}

static void create_message(mv_http_request *req, mv_http_response *res, void *app) {
    mv_message_routes *r = req->route_ctx;
    (void)app;
    mv_err err = {0};
    if (!json_is_object(req->json)) {
        mv_http_errorf(res, MV_INVALID_ARGUMENT, "body must be a JSON object");
        return;
    }
    json_t *payload = mv_arena_json(req->arena, json_copy(req->json));
    json_t *body_id = json_object_get(req->json, "clientRequestId");
    const char *header = mv_http_header_get(req, "Idempotency-Key");
    json_t *header_id = header ? mv_arena_json(req->arena, json_string(header)) : NULL;
    if (header && !header_id) {
        mv_http_errorf(res, MV_INVALID_CLIENT_REQUEST_ID, "Idempotency-Key must be UTF-8");
        return;
    }
    if (body_id) {
        char a[129], b[129];
        if (mv_client_request_id_normalize(body_id, a, &err) != MV_OK ||
            (header_id && mv_client_request_id_normalize(header_id, b, &err) != MV_OK)) {
            mv_http_error(res, &err);
            return;
        }
        if (header_id && strcmp(a, b) != 0) {
            mv_http_errorf(res, MV_INVALID_CLIENT_REQUEST_ID,
                           "clientRequestId in the body and the Idempotency-Key header differ");
            return;
        }
        json_object_del(payload, "clientRequestId");
    }
    create_call *c = mv_arena_alloc(req->arena, sizeof *c);
    if (!c) {
        mv_http_errorf(res, MV_NO_MEMORY, "out of memory");
        return;
    }
    memset(c, 0, sizeof *c);
    c->arena = req->arena;
    mv_http_user_identity(req, &c->user);
    c->cr = (mv_create_request){.template_cd = mv_http_param(req, "templateCd"),
                                .user = &c->user,
                                .payload = payload,
                                .client_request_id = body_id ? body_id : header_id};
    /* taken before the start: the create may end before it returns; nothing here touches req or
     * res once it started */
    if (!(c->rounds.later = mv_http_answer_later(req))) { /* no server: answered now */
        json_t *messages = NULL;
        bool replayed = false;
        mv_code rc = mv_message_create(r->service, &c->cr, &messages, &replayed, &err);
        answer_create(res, rc, messages, replayed, &err);
        return;
    }
    mv__create_env env = {mv_http_later_submit, &c->rounds, NULL, create_done, c, true};
    mv__create_begin(r->service, &c->cr, &env);
}

static void get_message(mv_http_request *req, mv_http_response *res, void *app) {
    mv_message_routes *r = req->route_ctx;
    (void)app;
    mv_user user;
    mv_http_user(req, &user);
    char *m = NULL;
    size_t len = 0;
    mv_err err = {0};
    if (mv_http_reader_locale(req, r->locale_claim)) { /* a language is named: routes_reach.c */
        mv_http_localized_message(req, res, r->service, &user, r->locale_claim);
        return;
    }
    if (mv_message_get_text(r->service, mv_http_param(req, "id"), &user, &m, &len, &err) != MV_OK) {
        mv_http_error(res, &err);
        return;
    }
    mv_http_adopt(res, 200, "application/json", m, len);
}

static void get_actions(mv_http_request *req, mv_http_response *res, void *app) {
    mv_message_routes *r = req->route_ctx;
    (void)app;
    mv_user user;
    mv_http_user(req, &user);
    mv_usertype t = strcmp(mv_http_param(req, "usertype"), "sender") == 0 ? MV_SENDER : MV_RECEIVER;
    bool admin = mv_principal_has_permission(req->principal, r->admin_permission);
    json_t *out = NULL;
    mv_err err = {0};
    if (mv_message_actions(r->service, mv_http_param(req, "id"), t, &user, admin, &out, &err) !=
        MV_OK) {
        mv_http_error(res, &err);
        return;
    }
    mv_http_json(res, 200, out);
}

/* The answer to an action, now or later. */
static void answer_action(mv_message_routes *r, mv_http_response *res, mv_code rc, json_t *result,
                          const mv_err *err) {
    if (r->metrics) {
        const char *labels[] = {"outcome", rc == MV_OK ? "ok" : mv_code_name(rc), NULL};
        mv_metrics_counter_add(r->metrics, "missive_actions_total", labels, 1);
    }
    if (rc == MV_APPROVAL_REQUIRED) {
        mv_http_json(res, 202,
                     json_pack("{s:s,s:s,s:s,s:I}", "status", "approval_required", "approvalId",
                               err->approval_id, "resumeToken", err->resume_token, "expiresAt",
                               (json_int_t)err->expires_at));
        return;
    }
    if (rc != MV_OK) {
        mv_http_error(res, err);
        return;
    }
    mv_http_json(res, 200, json_pack("{s:o}", "result", result ? result : json_null()));
}

/* An action in flight: what its completion needs, in the request's arena (as create_call). */
typedef struct action_call {
    mv_http_later_rounds rounds; /* its rounds (a saga handler's too); rounds.later the answer */
    mv_message_routes *r;
    mv_user user;
    mv_action_request ar;
    mv_arena *arena;
    mv_code rc; /* the outcome, for action_render */
    json_t *result;
    mv_err *err;
} action_call;

/* On the connection's I/O thread, once resumed: the answer from what action_done kept. */
static void action_render(mv_http_request *req, mv_http_response *res, void *ctx) {
    (void)req;
    action_call *c = ctx;
    if (c->rc == MV_OK && !c->result) {
        mv_http_errorf(res, MV_NO_MEMORY, "out of memory");
        return;
    }
    answer_action(c->r, res, c->rc, json_incref(c->result), c->err);
}

/* Wherever the action ended: keeps the outcome and resumes the connection (as create_done). */
static void action_done(void *ctx, mv_code rc, json_t *result, const mv_err *err) {
    action_call *c = ctx;
    c->rc = rc;
    c->result = result ? mv_arena_json(c->arena, result) : NULL;
    if (rc != MV_OK && (c->err = mv_arena_alloc(c->arena, sizeof *c->err)))
        mv_err_copy(c->err, err);
    if (rc != MV_OK && !c->err) c->rc = MV_OK; /* rendered as out of memory */
    mv_http_later_done_io(c->rounds.later, action_render, c);
}

static void handle_action(mv_http_request *req, mv_http_response *res, void *app) {
    mv_message_routes *r = req->route_ctx;
    (void)app;
    if (!json_is_object(req->json)) { /* the optional input: {} when empty, else an object */
        mv_http_errorf(res, MV_INVALID_ARGUMENT, "body must be a JSON object");
        return;
    }
    action_call *c = mv_arena_alloc(req->arena, sizeof *c);
    if (!c) {
        mv_http_errorf(res, MV_NO_MEMORY, "out of memory");
        return;
    }
    memset(c, 0, sizeof *c);
    c->r = r;
    c->arena = req->arena;
    mv_http_user_identity(req, &c->user);
    c->ar = (mv_action_request){
        .message_id = mv_http_param(req, "id"),
        .action_cd = mv_http_param(req, "actionCd"),
        .user = &c->user,
        .input = req->json,
        .resume_token = mv_http_header_get(req, "X-Resume-Token"),
        .is_admin = mv_principal_has_permission(req->principal, r->admin_permission)};
    /* taken before the start: the action may end before it returns; nothing here touches req or
     * res once it started */
    if (!(c->rounds.later = mv_http_answer_later(req))) { /* no server: answered now */
        json_t *result = NULL;
        mv_err err = {0};
        mv_code rc = mv_action_handle(r->service, &c->ar, &result, &err);
        answer_action(r, res, rc, result, &err);
        return;
    }
    c->ar.submit = mv_http_later_submit; /* a book's saga runs its rounds through them too */
    c->ar.submit_ctx = &c->rounds;
    mv__action_env env = {mv_http_later_submit, &c->rounds, action_done, c, false};
    mv__action_begin(r->service, &c->ar, &env);
}

mv_code mv_message_routes_add(mv_router *router, mv_message_routes *routes, mv_err *err) {
    const mv_route table[] = {
        {"POST", "/messages/new/{templateCd}", create_message, false, true, check_template_cd,
         routes, .io_thread = true},
        {"GET", "/messages", mv_http_list_messages, false, false, NULL, routes},
        {"GET", "/messages/count", mv_http_count_messages, false, false, NULL, routes},
        {"GET", "/messages/{id}", get_message, false, false, check_id, routes},
        {"GET", "/messages/{id}/actions/{usertype}", get_actions, false, false, check_usertype,
         routes},
        {"POST", "/messages/{id}/action/{actionCd}", handle_action, false, true, check_action,
         routes, .io_thread = true},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        mv_code rc = mv_router_add(router, &table[i], err);
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}
