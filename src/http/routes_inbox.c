/* routes_inbox.c — HTTP in front of per-viewer inbox state: one handler per mark, one for
 * seen-all / read-all, the list and count routes and the filter parser they share. No rules here:
 * visibility, idempotency and the change log live in message/inbox.c. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "http/request.h"
#include "http/routes_inbox.h"
#include "http/routes_messages.h"
#include "http/routes_reach.h"
#include "http/routes_time.h"
#include "message/inbox_internal.h"

static const char *const FILTER_NAMES[] = {"templateCd", "type",     "read",    "seen",
                                           "dismissed",  "archived", "snoozed", NULL};

static bool listed(const char *const *names, const char *name) {
    for (size_t i = 0; names && names[i]; i++)
        if (strcmp(names[i], name) == 0) return true;
    return false;
}

static mv_code flag_param(mv_http_request *req, const char *name, mv_flag *out, mv_err *err) {
    const char *v = mv_http_query_get(req, name);
    if (!v) return MV_OK;
    if (strcmp(v, "true") == 0)
        *out = MV_FLAG_TRUE;
    else if (strcmp(v, "false") == 0)
        *out = MV_FLAG_FALSE;
    else
        return mv_err_set(err, MV_INVALID_ARGUMENT, "%s must be \"true\" or \"false\"", name);
    return MV_OK;
}

mv_code mv_http_inbox_filter(mv_http_request *req, const char *const *also_allowed,
                             mv_inbox_filter *f, bool *archived, mv_err *err) {
    *f = (mv_inbox_filter){0};
    *archived = false;
    for (size_t i = 0; i < req->nquery; i++) {
        const char *name = req->query[i].name;
        if (!listed(FILTER_NAMES, name) && !listed(also_allowed, name))
            return mv_err_set(err, MV_INVALID_ARGUMENT,
                              "unknown query parameter \"%.64s\" (filters: templateCd, type, read, "
                              "seen, dismissed, snoozed, archived)",
                              name);
    }
    f->template_cd = mv_http_query_get(req, "templateCd");
    if (f->template_cd && !mv_valid_template_cd(f->template_cd))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "templateCd must be a non-empty string of at most 128 letters, digits, "
                          "dots, underscores, and hyphens");
    f->type = mv_http_query_get(req, "type");
    if (f->type && !mv_valid_template_cd(f->type))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "type must be a non-empty string of at most 128 letters, digits, dots, "
                          "underscores, and hyphens");
    mv_flag a = MV_FLAG_UNSET;
    mv_code rc;
    if ((rc = flag_param(req, "read", &f->read, err)) ||
        (rc = flag_param(req, "seen", &f->seen, err)) ||
        (rc = flag_param(req, "dismissed", &f->dismissed, err)) ||
        (rc = flag_param(req, "snoozed", &f->snoozed, err)) ||
        (rc = flag_param(req, "archived", &a, err)))
        return rc;
    *archived = a == MV_FLAG_TRUE;
    return MV_OK;
}

/* ---- marks ------------------------------------------------------------------------------ */

static mv_code check_id(const mv_http_request *req, mv_err *err) {
    if (!mv_valid_message_id(mv_http_param(req, "id")))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "id must be a 24-character hex ObjectId");
    return MV_OK;
}

/* A mark in flight (the create's shape, routes_messages.c): in the request's arena. */
typedef struct mark_call {
    mv_http_later *later;
    mv_user user;
    mv_arena *arena;
    mv_code rc;
    json_t *message;
    mv_err *err;
} mark_call;

static void mark_render(mv_http_request *req, mv_http_response *res, void *ctx) {
    (void)req;
    mark_call *c = ctx;
    if (c->rc != MV_OK)
        mv_http_error(res, c->err);
    else if (!c->message)
        mv_http_errorf(res, MV_NO_MEMORY, "out of memory");
    else
        mv_http_json(res, 200, json_incref(c->message));
}

/* On the committing thread (or the handler's, for a failed check): keep, resume. */
static void mark_done(void *ctx, mv_code rc, json_t *message, const mv_err *err) {
    mark_call *c = ctx;
    c->rc = rc;
    c->message = message ? mv_arena_json(c->arena, message) : NULL;
    if (rc != MV_OK && (c->err = mv_arena_alloc(c->arena, sizeof *c->err)))
        mv_err_copy(c->err, err);
    if (rc != MV_OK && !c->err) c->rc = MV_OK; /* rendered as out of memory */
    mv_http_later_done_io(c->later, mark_render, c);
}

static void mark(mv_http_request *req, mv_http_response *res, mv_mark m) {
    mv_message_routes *r = req->route_ctx;
    mark_call *c = mv_arena_alloc(req->arena, sizeof *c);
    if (!c) {
        mv_http_errorf(res, MV_NO_MEMORY, "out of memory");
        return;
    }
    memset(c, 0, sizeof *c);
    c->arena = req->arena;
    mv_http_user(req, &c->user);
    if (!(c->later = mv_http_answer_later(req))) { /* no server: answered now */
        json_t *msg = NULL;
        mv_err err = {0};
        if (mv_message_mark(r->service, mv_http_param(req, "id"), &c->user, m, &msg, &err) !=
            MV_OK) {
            mv_http_error(res, &err);
            return;
        }
        mv_http_json(res, 200, msg);
        return;
    }
    mv__mark_begin(r->service, mv_http_param(req, "id"), &c->user, m, mark_done, c);
}

static void mark_seen(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mark(req, res, MV_MARK_SEEN);
}
static void mark_read(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mark(req, res, MV_MARK_READ);
}
static void mark_unread(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mark(req, res, MV_MARK_UNREAD);
}
static void mark_dismiss(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mark(req, res, MV_MARK_DISMISS);
}
static void mark_undismiss(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mark(req, res, MV_MARK_UNDISMISS);
}

/* ---- seen-all / read-all ---------------------------------------------------------------- */

static mv_code body_code(const json_t *body, const char *key, const char **out, mv_err *err) {
    json_t *v = json_object_get(body, key);
    *out = NULL;
    if (!v || json_is_null(v)) return MV_OK;
    if (!json_is_string(v) || !mv_valid_template_cd(json_string_value(v)))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "%s must be a non-empty string of at most 128 letters, digits, dots, "
                          "underscores, and hyphens",
                          key);
    *out = json_string_value(v);
    return MV_OK;
}

static void mark_all(mv_http_request *req, mv_http_response *res, mv_mark m) {
    mv_message_routes *r = req->route_ctx;
    mv_err err = {0};
    mv_inbox_filter f = {0};
    int64_t before = -1;
    const char *key;
    json_t *v;
    if (!json_is_object(req->json)) {
        mv_http_errorf(res, MV_INVALID_ARGUMENT, "body must be a JSON object");
        return;
    }
    json_object_foreach(req->json, key, v) {
        if (strcmp(key, "templateCd") != 0 && strcmp(key, "type") != 0 &&
            strcmp(key, "before") != 0) {
            mv_http_errorf(res, MV_INVALID_ARGUMENT,
                           "unknown body field \"%.64s\" (allowed: templateCd, type, before)", key);
            return;
        }
    }
    if (body_code(req->json, "templateCd", &f.template_cd, &err) != MV_OK ||
        body_code(req->json, "type", &f.type, &err) != MV_OK) {
        mv_http_error(res, &err);
        return;
    }
    v = json_object_get(req->json, "before");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            mv_http_errorf(res, MV_INVALID_ARGUMENT,
                           "before must be a time in ms (an integer >= 0)");
            return;
        }
        before = json_integer_value(v);
    }
    mv_user user;
    mv_http_user(req, &user);
    int64_t updated = 0;
    if (mv_message_mark_all(r->service, &user, m, &f, before, &updated, &err) != MV_OK) {
        mv_http_error(res, &err);
        return;
    }
    mv_http_json(res, 200, json_pack("{s:I}", "updated", (json_int_t)updated));
}

static void seen_all(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mark_all(req, res, MV_MARK_SEEN);
}
static void read_all(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mark_all(req, res, MV_MARK_READ);
}

/* ---- GET /messages, GET /messages/count ---------------------------------------------------- */

/* A query value as a JSON number for the service's pagination checks: integers stay integers,
 * other numbers become reals (rejected as non-integers), anything else a string (rejected). */
static json_t *query_number(mv_http_request *req, const char *name) {
    const char *v = mv_http_query_get(req, name);
    if (!v) return NULL;
    char *end;
    errno = 0;
    long long i = strtoll(v, &end, 10);
    json_t *out;
    if (*v && !*end && errno == 0) {
        out = json_integer(i);
    } else {
        double d = strtod(v, &end);
        out = *v && !*end && isfinite(d) ? json_real(d) : json_string(v);
    }
    return mv_arena_json(req->arena, out);
}

/* The page is written as it is read: each message's JSON text, written from its stored row
 * (mv_message_list_text: no document is built, parsed or serialised), is appended to the response
 * as soon as the service hands it over. A response never holds a page (list.maxPageBytes) twice. */
typedef struct {
    mv_strbuf out;
    size_t n;
} page_writer;

static bool write_message(void *ctx, const char *json, size_t len) {
    page_writer *w = ctx;
    if (w->n) mv_strbuf_add(&w->out, ",", 1);
    mv_strbuf_add(&w->out, json, len);
    w->n++;
    return !w->out.oom;
}

void mv_http_list_messages(mv_http_request *req, mv_http_response *res, void *app) {
    mv_message_routes *r = req->route_ctx;
    (void)app;
    static const char *const paging[] = {"limit", "skip", "cursor", "scheduled", NULL};
    mv_inbox_filter filter;
    bool archived, scheduled;
    mv_err err = {0};
    if (mv_http_inbox_filter(req, paging, &filter, &archived, &err) != MV_OK ||
        mv_http_scheduled_param(req, &scheduled, &err) != MV_OK) {
        mv_http_error(res, &err);
        return;
    }
    mv_user user;
    mv_http_user(req, &user);
    mv_list_request lr = {.user = &user,
                          .limit = query_number(req, "limit"),
                          .skip = query_number(req, "skip"),
                          .cursor = mv_http_query_get(req, "cursor"),
                          .archived = archived,
                          .filter = &filter,
                          .scheduled = scheduled};
    if (mv_http_reader_locale(req, r->locale_claim)) { /* a language is named: routes_reach.c */
        mv_http_localized_list(req, res, r->service, &lr, r->locale_claim);
        return;
    }
    /* a page of 50 ordinary messages is 30-60 KiB: start there rather than double up from 64 B */
    page_writer w = {.out = {.data = malloc(32 * 1024), .cap = 32 * 1024}};
    if (!w.out.data) w.out = (mv_strbuf){0};
    char *next = NULL;
    mv_strbuf_adds(&w.out, "{\"messages\":[");
    if (mv_message_list_text(r->service, &lr, write_message, &w, &next, &err) != MV_OK) {
        free(mv_strbuf_take(&w.out, NULL));
        mv_http_error(res, &err);
        return;
    }
    /* a cursor is base64url: nothing in it needs escaping */
    mv_strbuf_adds(&w.out, next ? "],\"nextCursor\":\"" : "],\"nextCursor\":null}");
    if (next) {
        mv_strbuf_adds(&w.out, next);
        mv_strbuf_adds(&w.out, "\"}");
    }
    free(next);
    size_t len = 0;
    char *body = mv_strbuf_take(&w.out, &len);
    mv_http_adopt(res, 200, "application/json", body, len);
}

void mv_http_count_messages(mv_http_request *req, mv_http_response *res, void *app) {
    mv_message_routes *r = req->route_ctx;
    (void)app;
    mv_inbox_filter filter;
    bool archived;
    mv_err err = {0};
    if (mv_http_inbox_filter(req, NULL, &filter, &archived, &err) != MV_OK) {
        mv_http_error(res, &err);
        return;
    }
    mv_user user;
    mv_http_user(req, &user);
    mv_inbox_counts c;
    if (mv_message_counts(r->service, &user, &filter, archived, &c, &err) != MV_OK) {
        mv_http_error(res, &err);
        return;
    }
    mv_http_json(res, 200,
                 json_pack("{s:I,s:I,s:I}", "count", (json_int_t)c.count, "unseen",
                           (json_int_t)c.unseen, "unread", (json_int_t)c.unread));
}

mv_code mv_inbox_routes_add(mv_router *router, mv_message_routes *routes, mv_err *err) {
    const mv_route table[] = {
        {"POST", "/messages/{id}/seen", mark_seen, false, false, check_id, routes,
         .io_thread = true},
        {"POST", "/messages/{id}/read", mark_read, false, false, check_id, routes,
         .io_thread = true},
        {"POST", "/messages/{id}/unread", mark_unread, false, false, check_id, routes,
         .io_thread = true},
        {"POST", "/messages/{id}/dismiss", mark_dismiss, false, false, check_id, routes,
         .io_thread = true},
        {"POST", "/messages/{id}/undismiss", mark_undismiss, false, false, check_id, routes,
         .io_thread = true},
        {"POST", "/messages/seen-all", seen_all, false, true, NULL, routes},
        {"POST", "/messages/read-all", read_all, false, true, NULL, routes},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        mv_code rc = mv_router_add(router, &table[i], err);
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}
