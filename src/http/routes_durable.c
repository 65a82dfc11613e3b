/* routes_durable.c — HTTP in front of approvals and sagas. Each handler checks the request and
 * makes one library call; there are no business rules here.
 *
 * Order of checks: authentication (router) → is the feature configured (404 not_found, as if the
 * route did not exist) → route parameters (400) → permission (403: the caller's rights do not
 * depend on the body, so an unauthorised caller learns nothing about body rules) → body (413, 400)
 * → store work. A saga call answers 200 with the saga in whatever state it reached: a step that
 * failed, was compensated or needs review is an outcome the record shows, not an HTTP error; only
 * what stopped the call itself (store, concurrency, mismatch, unknown saga) is an error. */
#include <string.h>

#include "durable/approval_async.h"
#include "http/auth.h"
#include "http/http_server.h"
#include "http/request.h"
#include "http/routes_durable.h"
#include "http/work_pool.h"

static const char *admin_permission(const mv_durable_routes *r) {
    return r->admin_permission ? r->admin_permission : "is.admin";
}

static bool is_admin(const mv_http_request *req) {
    const mv_durable_routes *r = req->route_ctx;
    return mv_principal_has_permission(req->principal, admin_permission(r));
}

static bool sagas_configured(const mv_durable_routes *r) { return r->engine && r->book; }

/* ---- parameter and permission checks ----------------------------------------------------- */

static mv_code check_approval(const mv_http_request *req, mv_err *err) {
    const mv_durable_routes *r = req->route_ctx;
    if (!r->approvals) return mv_err_set(err, MV_NOT_FOUND, "approvals are not configured");
    if (!mv_valid_uuid(mv_http_param(req, "id")))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "approval id must be a UUID");
    return MV_OK;
}

static mv_code check_decision(const mv_http_request *req, mv_err *err) {
    mv_code rc = check_approval(req, err);
    if (rc) return rc;
    if (!is_admin(req) &&
        !mv_principal_has_permission(req->principal, MV_APPROVALS_DECIDE_PERMISSION))
        return mv_err_set(err, MV_FORBIDDEN,
                          "deciding an approval needs the permission \"%s\" or admin",
                          MV_APPROVALS_DECIDE_PERMISSION);
    return MV_OK;
}

static mv_code check_saga_param(const mv_http_request *req, const char *param, const char *what,
                                mv_err *err) {
    const mv_durable_routes *r = req->route_ctx;
    if (!sagas_configured(r)) return mv_err_set(err, MV_NOT_FOUND, "sagas are not configured");
    if (!mv_valid_token(mv_http_param(req, param), 128))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "%s must be 1 to 128 printable characters without spaces", what);
    if (!is_admin(req))
        return mv_err_set(err, MV_FORBIDDEN, "saga routes need the admin permission \"%s\"",
                          admin_permission(r));
    return MV_OK;
}

static mv_code check_saga_id(const mv_http_request *req, mv_err *err) {
    return check_saga_param(req, "id", "saga id", err);
}

static mv_code check_definition(const mv_http_request *req, mv_err *err) {
    return check_saga_param(req, "definition", "saga definition name", err);
}

/* ---- body helpers ------------------------------------------------------------------------- */

/* 400 naming the first key of body not in allowed (NULL-terminated); false when answered. */
static bool known_keys(mv_http_response *res, const json_t *body, const char *const *allowed) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)body, key, v) {
        (void)v;
        const char *const *a = allowed;
        while (*a && strcmp(*a, key) != 0)
            a++;
        if (!*a) {
            mv_http_errorf(res, MV_INVALID_ARGUMENT, "unknown body field \"%.100s\"", key);
            return false;
        }
    }
    return true;
}

static bool body_object(mv_http_request *req, mv_http_response *res) {
    if (json_is_object(req->json)) return true;
    mv_http_errorf(res, MV_INVALID_ARGUMENT, "body must be a JSON object");
    return false;
}

/* A required string field; answers 400 and returns NULL when absent or not a string. */
static const char *required_string(mv_http_response *res, const json_t *body, const char *key) {
    const char *s = mv_json_str(body, key);
    if (!s) mv_http_errorf(res, MV_INVALID_ARGUMENT, "%s must be a string", key);
    return s;
}

/* ---- approvals ---------------------------------------------------------------------------- */

static bool may_see(const mv_http_request *req, const mv_approval_record *rec) {
    const mv_principal *p = req->principal;
    return strcmp(rec->principal_id, p->user_id) == 0 || is_admin(req) ||
           mv_principal_has_permission(p, MV_APPROVALS_DECIDE_PERMISSION);
}

static void get_approval(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_durable_routes *r = req->route_ctx;
    const char *id = mv_http_param(req, "id");
    mv_approval_record rec;
    mv_err err = {0};
    if (mv_approval_get(r->approvals, id, req->principal->tenant, &rec, &err) != MV_OK) {
        mv_http_error(res, &err);
        return;
    }
    if (!may_see(req, &rec)) { /* the same answer as a missing one: nothing leaks */
        mv_http_errorf(res, MV_APPROVAL_NOT_FOUND, "approval %s not found", id);
        return;
    }
    mv_http_json(res, 200, mv_approval_to_json(&rec));
}

/* A decision in flight (the create's shape, routes_messages.c): in the request's arena. */
typedef struct decide_call {
    mv_http_later *later;
    mv_durable_routes *r;
    const char *decision;
    mv_code rc;
    json_t *record;
    mv_err *err;
    mv_arena *arena;
} decide_call;

static void decide_render(mv_http_request *req, mv_http_response *res, void *ctx) {
    (void)req;
    decide_call *c = ctx;
    if (c->rc != MV_OK) {
        mv_http_error(res, c->err);
        return;
    }
    if (!c->record) {
        mv_http_errorf(res, MV_NO_MEMORY, "out of memory");
        return;
    }
    const char *labels[] = {"decision", c->decision, NULL};
    mv_metrics_counter_add(c->r->metrics, "missive_approvals_total", labels, 1);
    mv_http_json(res, 200, json_incref(c->record));
}

/* On the committing thread (or the handler's, for a failed check): keep, resume. */
static void decide_done(void *ctx, mv_code rc, const mv_approval_record *rec, const mv_err *err) {
    decide_call *c = ctx;
    c->rc = rc;
    c->record = rec ? mv_arena_json(c->arena, mv_approval_to_json(rec)) : NULL;
    if (rc != MV_OK && (c->err = mv_arena_alloc(c->arena, sizeof *c->err)))
        mv_err_copy(c->err, err);
    if (rc != MV_OK && !c->err) c->rc = MV_OK; /* rendered as out of memory */
    mv_http_later_done_io(c->later, decide_render, c);
}

static void decide_approval(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_durable_routes *r = req->route_ctx;
    if (!body_object(req, res)) return;
    static const char *const allowed[] = {"decision", NULL};
    if (!known_keys(res, req->json, allowed)) return;
    const char *decision = mv_json_str(req->json, "decision");
    if (!decision || (strcmp(decision, "approved") != 0 && strcmp(decision, "denied") != 0)) {
        mv_http_errorf(res, MV_INVALID_ARGUMENT, "decision must be \"approved\" or \"denied\"");
        return;
    }
    decide_call *c = mv_arena_alloc(req->arena, sizeof *c);
    if (!c) {
        mv_http_errorf(res, MV_NO_MEMORY, "out of memory");
        return;
    }
    *c = (decide_call){.r = r, .decision = decision, .arena = req->arena};
    const char *id = mv_http_param(req, "id"), *tenant = req->principal->tenant;
    if ((c->later = mv_http_answer_later(req))) {
        mv__approval_decide_begin(r->approvals, id, tenant, decision, req->principal->user_id,
                                  decide_done, c);
        return;
    }
    mv_approval_record rec; /* no server: answered now, the same three steps */
    mv_err err = {0};
    /* another tenant's approval is not found (decide alone would call it a rejected decision) */
    if (mv_approval_get(r->approvals, id, tenant, &rec, &err) != MV_OK ||
        mv_approval_decide(r->approvals, id, tenant, decision, req->principal->user_id, &err) !=
            MV_OK ||
        mv_approval_get(r->approvals, id, tenant, &rec, &err) != MV_OK) {
        mv_http_error(res, &err);
        return;
    }
    c->record = mv_arena_json(req->arena, mv_approval_to_json(&rec));
    decide_render(req, res, c);
}

/* ---- sagas -------------------------------------------------------------------------------- */

/* The saga {id} exists in the caller's tenant; otherwise answers 404 saga_not_found (another
 * tenant's saga is not found, as a missing one) or the store error, and returns false. */
static bool saga_in_tenant(mv_http_request *req, mv_http_response *res) {
    mv_durable_routes *r = req->route_ctx;
    const char *id = mv_http_param(req, "id");
    char tenant[256];
    mv_err err = {0};
    if (mv_saga_tenant(r->engine, id, tenant, &err) != MV_OK) {
        mv_http_error(res, &err);
        return false;
    }
    if (strcmp(tenant, req->principal->tenant) != 0) {
        mv_http_errorf(res, MV_SAGA_NOT_FOUND, "saga %s: not found", id);
        return false;
    }
    return true;
}

/* Answers a saga call: 200 with the record when the call did its work — including when the saga
 * ended in a failed step, compensation or manual review (and, unless ambiguous_is_error, when it
 * stopped at an ambiguous step) — else the error. Steals record. */
static void answer_saga(mv_http_response *res, mv_code rc, json_t *record, const mv_err *err,
                        bool ambiguous_is_error) {
    bool outcome = rc == MV_OK || rc == MV_SAGA_STEP_FAILED || rc == MV_UPSTREAM_FAILED ||
                   (rc == MV_SAGA_AMBIGUOUS_STEP && !ambiguous_is_error);
    if (outcome && record) {
        mv_http_json(res, 200, record);
        return;
    }
    json_decref(record);
    if (rc == MV_OK) { /* it ran, but reading its record back failed: the store went away */
        mv_http_errorf(res, MV_STORE_UNAVAILABLE, "the saga's record could not be read back");
        return;
    }
    mv_http_error(res, err);
}

/* A saga run on the loop, answered later: what its jobs and its answer need, in the request's
 * arena (the request lives until it is answered). At most one job of a run is queued at a time,
 * so one job record serves them all. */
typedef struct saga_call {
    mv_http_later_rounds rounds; /* its jobs; rounds.later the answer */
    bool compensating;
    mv_code rc;
    json_t *record;
    mv_err err;
} saga_call;

static void saga_then(mv_http_request *req, mv_http_response *res, void *ctx) {
    (void)req;
    saga_call *c = ctx;
    answer_saga(res, c->rc, c->record, &c->err, c->compensating);
}

static void saga_done(void *ctx, mv_code rc, json_t *record, const mv_err *err) {
    saga_call *c = ctx;
    c->rc = rc;
    c->record = record;
    mv_err_copy(&c->err, err);
    mv_http_later_done(c->rounds.later, saga_then, c);
}

/* A saga call on the loop when the server and the definition allow it: the later answer taken,
 * env filled; NULL to run it here. */
static saga_call *saga_on_loop(mv_http_request *req, const mv_saga_definition *def,
                               mv_saga_async *env) {
    mv_durable_routes *r = req->route_ctx;
    if (!r->loop || !mv_saga_book_owns(def)) return NULL;
    saga_call *c = mv_arena_alloc(req->arena, sizeof *c);
    if (!c) return NULL;
    memset(c, 0, sizeof *c);
    /* taken before the start: the run may end before the start returns */
    if (!(c->rounds.later = mv_http_answer_later(req))) return NULL;
    *env = (mv_saga_async){
        .loop = r->loop, .submit = mv_http_later_submit, .submit_ctx = &c->rounds, .stop = r->stop};
    return c;
}

static void start_saga(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_durable_routes *r = req->route_ctx;
    if (!body_object(req, res)) return;
    static const char *const allowed[] = {"sagaId", "input", NULL};
    if (!known_keys(res, req->json, allowed)) return;
    const char *saga_id = mv_json_str(req->json, "sagaId");
    if (!mv_valid_token(saga_id, 128)) {
        mv_http_errorf(res, MV_INVALID_ARGUMENT,
                       "sagaId must be a string of 1 to 128 printable characters without spaces");
        return;
    }
    const char *name = mv_http_param(req, "definition");
    const mv_saga_definition *def = mv_saga_book_find(r->book, name);
    if (!def) {
        mv_http_errorf(res, MV_SAGA_DEFINITION_NOT_FOUND, "saga definition \"%s\" not found", name);
        return;
    }
    json_t *input = json_object_get(req->json, "input");
    json_t *record = NULL;
    bool replayed = false;
    mv_err err = {0};
    mv_saga_async env;
    saga_call *c = saga_on_loop(req, def, &env);
    mv_code rc;
    if (c) {
        bool started = false;
        rc = mv_saga_book_start_async(r->engine, def, &env, req->principal->tenant, saga_id,
                                      input ? input : json_null(), saga_done, c, &started, &record,
                                      &replayed, &err);
        if (started) return; /* answered by saga_then */
        mv_http_later_cancel(c->rounds.later);
    } else {
        rc = mv_saga_start_in(r->engine, req->principal->tenant, def, saga_id,
                              input ? input : json_null(), NULL, &record, &replayed, &err);
    }
    if (replayed) mv_http_set_header(res, "Idempotent-Replayed", "true");
    answer_saga(res, rc, record, &err, false);
}

static void get_saga(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_durable_routes *r = req->route_ctx;
    json_t *record = NULL;
    mv_err err = {0};
    if (!saga_in_tenant(req, res)) return;
    if (mv_saga_get(r->engine, mv_http_param(req, "id"), &record, &err) != MV_OK) {
        mv_http_error(res, &err);
        return;
    }
    mv_http_json(res, 200, record);
}

/* The loaded definition the stored saga names; NULL after answering 404 (saga or definition). */
static const mv_saga_definition *definition_of(mv_http_request *req, mv_http_response *res) {
    mv_durable_routes *r = req->route_ctx;
    json_t *record = NULL;
    mv_err err = {0};
    if (!saga_in_tenant(req, res)) return NULL;
    if (mv_saga_get(r->engine, mv_http_param(req, "id"), &record, &err) != MV_OK) {
        mv_http_error(res, &err);
        return NULL;
    }
    const char *name = mv_json_str(record, "definition");
    const mv_saga_definition *def = mv_saga_book_find(r->book, name);
    if (!def)
        mv_http_errorf(res, MV_SAGA_DEFINITION_NOT_FOUND,
                       "saga definition \"%s\" not found (the saga names it; is it still loaded?)",
                       name ? name : "");
    json_decref(record);
    return def;
}

typedef mv_code (*saga_run_fn)(mv_saga_engine *e, const mv_saga_definition *def,
                               const char *saga_id, mv_abort *abort, json_t **record, mv_err *err);

/* resume and compensate: the saga names its definition; run it and answer the record. */
static void run_saga(mv_http_request *req, mv_http_response *res, saga_run_fn run,
                     bool compensating) {
    mv_durable_routes *r = req->route_ctx;
    /* the body is optional ({} when empty) but, when sent, must be an object with no fields */
    static const char *const allowed[] = {NULL};
    if (!body_object(req, res) || !known_keys(res, req->json, allowed)) return;
    const mv_saga_definition *def = definition_of(req, res);
    if (!def) return;
    json_t *record = NULL;
    mv_err err = {0};
    mv_saga_async env;
    saga_call *c = saga_on_loop(req, def, &env);
    mv_code rc;
    if (c) {
        bool started = false;
        c->compensating = compensating;
        rc = mv_saga_book_run_async(r->engine, def, &env, mv_http_param(req, "id"), compensating,
                                    saga_done, c, &started, &record, &err);
        if (started) return; /* answered by saga_then */
        mv_http_later_cancel(c->rounds.later);
    } else {
        rc = run(r->engine, def, mv_http_param(req, "id"), NULL, &record, &err);
    }
    answer_saga(res, rc, record, &err, compensating);
}

static void resume_saga(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    run_saga(req, res, mv_saga_resume, false);
}

static void compensate_saga(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    run_saga(req, res, mv_saga_compensate, true);
}

static void resolve_saga(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_durable_routes *r = req->route_ctx;
    if (!body_object(req, res)) return;
    static const char *const allowed[] = {"kind",   "step",      "effectId", "outcome",
                                          "result", "errorCode", NULL};
    if (!known_keys(res, req->json, allowed)) return;
    mv_saga_resolution resolution = {.result = json_object_get(req->json, "result")};
    if (!(resolution.kind = required_string(res, req->json, "kind")) ||
        !(resolution.step = required_string(res, req->json, "step")) ||
        !(resolution.effect_id = required_string(res, req->json, "effectId")) ||
        !(resolution.outcome = required_string(res, req->json, "outcome")))
        return;
    json_t *code = json_object_get(req->json, "errorCode");
    if (code && !json_is_null(code) && !(resolution.error_code = json_string_value(code))) {
        mv_http_errorf(res, MV_INVALID_ARGUMENT, "errorCode must be a string");
        return;
    }
    const mv_saga_definition *def = definition_of(req, res);
    if (!def) return;
    json_t *record = NULL;
    mv_err err = {0};
    mv_code rc =
        mv_saga_resolve(r->engine, def, mv_http_param(req, "id"), &resolution, &record, &err);
    if (rc != MV_OK) {
        json_decref(record);
        mv_http_error(res, &err);
        return;
    }
    mv_http_json(res, 200, record);
}

mv_code mv_durable_routes_add(mv_router *router, mv_durable_routes *routes, mv_err *err) {
    const mv_route table[] = {
        {"GET", "/approvals/{id}", get_approval, false, false, check_approval, routes},
        {"POST", "/approvals/{id}/decision", decide_approval, false, true, check_decision, routes,
         .io_thread = true},
        {"POST", "/sagas/{definition}", start_saga, false, true, check_definition, routes},
        {"GET", "/sagas/{id}", get_saga, false, false, check_saga_id, routes},
        {"POST", "/sagas/{id}/resume", resume_saga, false, true, check_saga_id, routes},
        {"POST", "/sagas/{id}/compensate", compensate_saga, false, true, check_saga_id, routes},
        {"POST", "/sagas/{id}/resolve", resolve_saga, false, true, check_saga_id, routes},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        mv_code rc = mv_router_add(router, &table[i], err);
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}
