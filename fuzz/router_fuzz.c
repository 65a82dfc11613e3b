/* router_fuzz.c — libFuzzer harness: a raw HTTP-ish request (request line, headers, blank line,
 * body) through mv_http_request_init + mv_http_dispatch on a router shaped like the daemon's,
 * with headers authentication. Every input must produce a response with a status and, for
 * errors, a body that parses as JSON. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/auth.h"
#include "http/request.h"
#include "http/router.h"
#include "missive/base.h"

static void answer(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    json_t *o = json_object();
    for (size_t i = 0; i < req->nparams; i++)
        json_object_set_new(o, req->params[i].name, json_string(req->params[i].value));
    if (req->json) json_object_set(o, "body", req->json);
    mv_http_json(res, 200, o);
}

static mv_code check_id(const mv_http_request *req, mv_err *err) {
    return mv_valid_message_id(mv_http_param(req, "id"))
               ? MV_OK
               : mv_err_set(err, MV_INVALID_ARGUMENT, "id must be a 24-character hex ObjectId");
}

static mv_router *router;
static mv_auth *auth;

static void setup(void) {
    router = mv_router_new(NULL);
    mv_auth_options ao = {.mode = MV_AUTH_HEADERS};
    mv_auth_new(&ao, &auth, NULL);
    mv_router_set_auth(router, auth);
    mv_route routes[] = {
        {.method = "POST", .pattern = "/messages/new/{templateCd}", .handler = answer, .json_body = true},
        {.method = "GET", .pattern = "/messages", .handler = answer},
        {.method = "GET", .pattern = "/messages/count", .handler = answer},
        {.method = "GET", .pattern = "/messages/{id}", .handler = answer, .check_params = check_id},
        {.method = "GET", .pattern = "/messages/{id}/actions/{usertype}", .handler = answer,
         .check_params = check_id},
        {.method = "POST", .pattern = "/messages/{id}/action/{actionCd}", .handler = answer,
         .json_body = true, .check_params = check_id},
        {.method = "GET", .pattern = "/healthz", .handler = answer, .public_route = true},
    };
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) mv_router_add(router, &routes[i], NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!router) setup();
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    mv_arena *a = mv_arena_new();
    mv_http_request req;
    mv_http_response res;
    mv_http_response_init(&res, a);

    /* request line "METHOD TARGET", then "Name: value" lines until an empty line, then body */
    char *body = strstr(text, "\n\n");
    size_t head_len = body ? (size_t)(body - text) : size;
    if (body) body += 2;
    char *line_end = memchr(text, '\n', head_len);
    char *first = strndup(text, line_end ? (size_t)(line_end - text) : head_len);
    char *sp = strchr(first, ' ');
    if (sp) *sp = '\0';
    if (mv_http_request_init(&req, a, first, sp ? sp + 1 : "/", NULL) == MV_OK) {
        char *p = line_end ? line_end + 1 : NULL;
        while (p && p < text + head_len) {
            char *e = memchr(p, '\n', (size_t)(text + head_len - p));
            char *l = strndup(p, e ? (size_t)(e - p) : (size_t)(text + head_len - p));
            char *colon = strchr(l, ':');
            if (colon) {
                *colon = '\0';
                mv_http_request_add_header(&req, l, colon + 1, NULL);
            }
            free(l);
            p = e ? e + 1 : NULL;
        }
        if (body) {
            req.body = body;
            req.body_len = size - (size_t)(body - text);
        }
        mv_http_dispatch(router, &req, &res);
        if (res.status < 200 || res.status > 599) abort();
        if (res.status >= 400) {
            json_t *v = NULL;
            if (mv_json_parse(res.body, res.body_len, &v, NULL) != MV_OK) abort();
            json_decref(v);
        }
    }
    free(first);
    mv_arena_free(a);
    free(text);
    return 0;
}
