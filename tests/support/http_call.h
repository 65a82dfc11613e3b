/* http_call.h — one in-memory HTTP exchange through mv_http_dispatch (no socket), for route
 * tests:  call c; call_init(&c, "GET", "/messages"); call_header(&c, "X-User-Id", "u1");
 *         call_run(&c, router); CHECK_INT(c.res.status, 200); ... call_free(&c); */
#ifndef MISSIVE_TEST_HTTP_CALL_H
#define MISSIVE_TEST_HTTP_CALL_H

#include <string.h>

#include "http/request.h"
#include "http/router.h"
#include "missive/base.h"

typedef struct call {
    mv_arena *arena;
    mv_http_request req;
    mv_http_response res;
    json_t *body; /* the parsed response body */
} call;

static inline void call_init(call *c, const char *method, const char *target) {
    memset(c, 0, sizeof *c);
    c->arena = mv_arena_new();
    mv_http_request_init(&c->req, c->arena, method, target, NULL);
    mv_http_response_init(&c->res, c->arena);
}

static inline void call_header(call *c, const char *name, const char *value) {
    mv_http_request_add_header(&c->req, name, value, NULL);
}

static inline void call_body(call *c, const char *body) {
    c->req.body = mv_arena_strdup(c->arena, body);
    c->req.body_len = strlen(body);
}

static inline void call_run(call *c, mv_router *r) {
    mv_http_dispatch(r, &c->req, &c->res);
    c->body = NULL;
    if (c->res.body) mv_json_parse(c->res.body, c->res.body_len, &c->body, NULL);
}

static inline void call_free(call *c) {
    json_decref(c->body);
    mv_arena_free(c->arena);
}

static inline const char *call_error_code(const call *c) {
    return json_string_value(json_object_get(json_object_get(c->body, "error"), "code"));
}

static inline const char *call_error_message(const call *c) {
    return json_string_value(json_object_get(json_object_get(c->body, "error"), "message"));
}

#endif
