/* router_test.c — routing, path parameters, the fixed order of checks, error bodies and the
 * request id, all through mv_http_dispatch without a socket. */
#include "http/auth.h"
#include "http/metrics.h"
#include "http/request.h"
#include "http/router.h"
#include "missive/base.h"
#include "test.h"

typedef struct call {
    mv_arena *arena;
    mv_http_request req;
    mv_http_response res;
    json_t *body; /* parsed response body */
} call;

static void call_init(call *c, const char *method, const char *target) {
    memset(c, 0, sizeof *c);
    c->arena = mv_arena_new();
    mv_http_request_init(&c->req, c->arena, method, target, NULL);
    mv_http_response_init(&c->res, c->arena);
}

static void call_header(call *c, const char *name, const char *value) {
    mv_http_request_add_header(&c->req, name, value, NULL);
}

static void call_body(call *c, const char *body) {
    c->req.body = body;
    c->req.body_len = strlen(body);
}

static void call_run(call *c, mv_router *r) {
    mv_http_dispatch(r, &c->req, &c->res);
    c->body = NULL;
    if (c->res.body) mv_json_parse(c->res.body, c->res.body_len, &c->body, NULL);
}

static void call_free(call *c) {
    json_decref(c->body);
    mv_arena_free(c->arena);
}

static const char *error_code(const call *c) {
    return json_string_value(json_object_get(json_object_get(c->body, "error"), "code"));
}

static const char *error_message(const call *c) {
    return json_string_value(json_object_get(json_object_get(c->body, "error"), "message"));
}

/* ---- handlers ---------------------------------------------------------------------------- */

static int handler_calls;

/* Answers {"route", "params": {...}, "json": <body>, "user"} so tests can see what it got. */
static void echo_handler(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    handler_calls++;
    json_t *params = json_object();
    for (size_t i = 0; i < req->nparams; i++)
        json_object_set_new(params, req->params[i].name, json_string(req->params[i].value));
    json_t *out = json_pack("{s:s,s:o}", "route", req->route, "params", params);
    if (req->json) json_object_set(out, "json", req->json);
    if (req->principal) json_object_set_new(out, "user", json_string(req->principal->user_id));
    mv_http_json(res, 200, out);
}

static void silent_handler(mv_http_request *req, mv_http_response *res, void *app) {
    (void)req;
    (void)res;
    (void)app;
}

static mv_code id_must_be_ok(const mv_http_request *req, mv_err *err) {
    if (strcmp(mv_http_param(req, "id"), "ok") != 0)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "id must be \"ok\"");
    return MV_OK;
}

static mv_router *make_router(mv_auth **auth_out) {
    mv_router *r = mv_router_new(NULL);
    mv_route routes[] = {
        {.method = "GET", .pattern = "/messages/{id}", .handler = echo_handler},
        {.method = "GET", .pattern = "/messages/count", .handler = echo_handler},
        {.method = "GET", .pattern = "/messages/{id}/actions/{usertype}", .handler = echo_handler},
        {.method = "POST",
         .pattern = "/messages/{id}/action/{actionCd}",
         .handler = echo_handler,
         .json_body = true},
        {.method = "POST",
         .pattern = "/things/{id}",
         .handler = echo_handler,
         .json_body = true,
         .check_params = id_must_be_ok},
        {.method = "GET", .pattern = "/public", .handler = echo_handler, .public_route = true},
        {.method = "GET", .pattern = "/silent", .handler = silent_handler, .public_route = true},
    };
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        CHECK_CODE(mv_router_add(r, &routes[i], NULL), MV_OK, (mv_err *)NULL);
    mv_auth_options ao = {.mode = MV_AUTH_HEADERS};
    mv_auth_new(&ao, auth_out, NULL);
    mv_router_set_auth(r, *auth_out);
    return r;
}

/* ---- routing ----------------------------------------------------------------------------- */

TEST(path_parameters_are_captured_and_percent_decoded) {
    mv_auth *auth;
    mv_router *r = make_router(&auth);
    call c;
    call_init(&c, "GET", "/messages/a%2Fb/actions/sender");
    call_header(&c, "X-User-Id", "u1");
    call_run(&c, r);
    CHECK_INT(c.res.status, 200);
    CHECK_STR(json_string_value(json_object_get(c.body, "route")),
              "/messages/{id}/actions/{usertype}");
    json_t *p = json_object_get(c.body, "params");
    CHECK_STR(json_string_value(json_object_get(p, "id")), "a/b");
    CHECK_STR(json_string_value(json_object_get(p, "usertype")), "sender");
    CHECK_STR(json_string_value(json_object_get(c.body, "user")), "u1");
    call_free(&c);
    mv_router_free(r);
    mv_auth_free(auth);
}

TEST(literal_segment_beats_parameter) {
    mv_auth *auth;
    mv_router *r = make_router(&auth);
    call c;
    call_init(&c, "GET", "/messages/count?x=1");
    call_header(&c, "X-User-Id", "u1");
    call_run(&c, r);
    CHECK_STR(json_string_value(json_object_get(c.body, "route")), "/messages/count");
    call_free(&c);
    call_init(&c, "GET", "/messages/counts");
    call_header(&c, "X-User-Id", "u1");
    call_run(&c, r);
    CHECK_STR(json_string_value(json_object_get(c.body, "route")), "/messages/{id}");
    call_free(&c);
    mv_router_free(r);
    mv_auth_free(auth);
}

TEST(wrong_method_on_a_known_path_is_404_not_found) {
    mv_auth *auth;
    mv_router *r = make_router(&auth);
    handler_calls = 0;
    call c;
    call_init(&c, "GET", "/messages/507f1f77bcf86cd799439011/action/accept");
    call_header(&c, "X-User-Id", "u1");
    call_run(&c, r);
    CHECK_INT(c.res.status, 404);
    CHECK_STR(error_code(&c), "not_found");
    CHECK_INT(handler_calls, 0);
    call_free(&c);
    mv_router_free(r);
    mv_auth_free(auth);
}

TEST(unknown_paths_empty_segments_and_nul_bytes_are_404) {
    mv_auth *auth;
    mv_router *r = make_router(&auth);
    const char *targets[] = {"/nope",
                             "/messages",
                             "/messages/",
                             "/messages//actions/sender",
                             "/messages/a%00b",
                             "/public/",
                             "/messages/a/actions/sender/x"};
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        call c;
        call_init(&c, "GET", targets[i]);
        call_header(&c, "X-User-Id", "u1");
        call_run(&c, r);
        CHECK_INT(c.res.status, 404);
        CHECK_STR(error_code(&c), "not_found");
        call_free(&c);
    }
    mv_router_free(r);
    mv_auth_free(auth);
}

TEST(router_rejects_malformed_and_duplicate_patterns) {
    mv_router *r = mv_router_new(NULL);
    mv_err err = {0};
    mv_route ok = {.method = "GET", .pattern = "/a/{id}", .handler = echo_handler};
    CHECK_CODE(mv_router_add(r, &ok, &err), MV_OK, &err);
    CHECK_CODE(mv_router_add(r, &ok, &err), MV_INVALID_ARGUMENT, &err);
    CHECK(strstr(err.message, "twice") != NULL);
    const char *bad[] = {"a/b", "/a/x{id}", "/a/{}", "/a//b", "/a/{id"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mv_route rt = {.method = "GET", .pattern = bad[i], .handler = echo_handler};
        CHECK_CODE(mv_router_add(r, &rt, &err), MV_INVALID_ARGUMENT, &err);
    }
    mv_route post = {.method = "POST", .pattern = "/a/{id}", .handler = echo_handler};
    CHECK_CODE(mv_router_add(r, &post, &err), MV_OK, &err);
    mv_router_free(r);
}

TEST(query_parameters_are_decoded) {
    mv_arena *a = mv_arena_new();
    mv_http_request req;
    CHECK_CODE(mv_http_request_init(&req, a, "GET", "/m?limit=5&x=a+b%21&flag&&bad=%zz", NULL),
               MV_OK, (mv_err *)NULL);
    CHECK_STR(req.path, "/m");
    CHECK_STR(mv_http_query_get(&req, "limit"), "5");
    CHECK_STR(mv_http_query_get(&req, "x"), "a b!");
    CHECK_STR(mv_http_query_get(&req, "flag"), "");
    CHECK_STR(mv_http_query_get(&req, "bad"), "%zz");
    CHECK(mv_http_query_get(&req, "missing") == NULL);
    mv_err err = {0};
    CHECK_CODE(mv_http_request_init(&req, a, "GET", "no-slash", &err), MV_INVALID_ARGUMENT, &err);
    mv_arena_free(a);
}

TEST(header_lookup_ignores_case) {
    mv_arena *a = mv_arena_new();
    mv_http_request req;
    mv_http_request_init(&req, a, "GET", "/", NULL);
    for (int i = 0; i < 40; i++) { /* more than the first block of headers */
        char n[16];
        snprintf(n, sizeof n, "X-H%d", i);
        mv_http_request_add_header(&req, n, "v", NULL);
    }
    mv_http_request_add_header(&req, "content-TYPE", "application/json", NULL);
    CHECK_STR(mv_http_header_get(&req, "Content-Type"), "application/json");
    CHECK_STR(mv_http_header_get(&req, "x-h39"), "v");
    CHECK(mv_http_header_get(&req, "X-Other") == NULL);
    mv_arena_free(a);
}

/* ---- order of checks --------------------------------------------------------------------- */

static char *big_body(void) {
    char *b = malloc(MV_HTTP_MAX_BODY + 2);
    memset(b, ' ', MV_HTTP_MAX_BODY + 1);
    b[MV_HTTP_MAX_BODY + 1] = '\0';
    return b;
}

TEST(checks_run_in_the_fixed_order_401_400_413_400json) {
    mv_auth *auth;
    mv_router *r = make_router(&auth);
    handler_calls = 0;
    call c;
    /* everything wrong: authentication answers first */
    call_init(&c, "POST", "/things/bad");
    call_body(&c, "{nope");
    c.req.body_too_large = true;
    call_run(&c, r);
    CHECK_INT(c.res.status, 401);
    CHECK_STR(error_code(&c), "unauthenticated");
    call_free(&c);
    /* authenticated: the route parameter comes next */
    call_init(&c, "POST", "/things/bad");
    call_header(&c, "X-User-Id", "u1");
    call_body(&c, "{nope");
    c.req.body_too_large = true;
    call_run(&c, r);
    CHECK_INT(c.res.status, 400);
    CHECK_STR(error_code(&c), "invalid_argument");
    CHECK_STR(error_message(&c), "id must be \"ok\"");
    call_free(&c);
    /* then the body size */
    call_init(&c, "POST", "/things/ok");
    call_header(&c, "X-User-Id", "u1");
    call_body(&c, "{nope");
    c.req.body_too_large = true;
    call_run(&c, r);
    CHECK_INT(c.res.status, 413);
    CHECK_STR(error_code(&c), "payload_too_large");
    call_free(&c);
    /* then the JSON, naming line and column */
    call_init(&c, "POST", "/things/ok");
    call_header(&c, "X-User-Id", "u1");
    call_body(&c, "{\n  \"a\": nope}");
    call_run(&c, r);
    CHECK_INT(c.res.status, 400);
    CHECK_STR(error_code(&c), "invalid_json");
    CHECK(error_message(&c) && strstr(error_message(&c), "line 2, column") != NULL);
    call_free(&c);
    CHECK_INT(handler_calls, 0);
    /* all good: the handler runs and sees the body */
    call_init(&c, "POST", "/things/ok");
    call_header(&c, "X-User-Id", "u1");
    call_header(&c, "Content-Type", "application/json; charset=utf-8");
    call_body(&c, "{\"a\": [1, 2]}");
    call_run(&c, r);
    CHECK_INT(c.res.status, 200);
    CHECK_INT(json_array_size(json_object_get(json_object_get(c.body, "json"), "a")), 2);
    CHECK_INT(handler_calls, 1);
    call_free(&c);
    mv_router_free(r);
    mv_auth_free(auth);
}

TEST(a_real_oversized_body_is_413_even_on_a_route_without_body) {
    mv_auth *auth;
    mv_router *r = make_router(&auth);
    char *b = big_body();
    call c;
    call_init(&c, "GET", "/public");
    call_body(&c, b);
    c.req.body_too_large = true;
    call_run(&c, r);
    CHECK_INT(c.res.status, 413);
    call_free(&c);
    free(b);
    mv_router_free(r);
    mv_auth_free(auth);
}

TEST(empty_body_counts_as_empty_object) {
    mv_auth *auth;
    mv_router *r = make_router(&auth);
    call c;
    call_init(&c, "POST", "/things/ok");
    call_header(&c, "X-User-Id", "u1");
    call_run(&c, r);
    CHECK_INT(c.res.status, 200);
    json_t *j = json_object_get(c.body, "json");
    CHECK(json_is_object(j) && json_object_size(j) == 0);
    call_free(&c);
    mv_router_free(r);
    mv_auth_free(auth);
}

TEST(non_json_content_type_and_non_utf8_bodies_are_400) {
    mv_auth *auth;
    mv_router *r = make_router(&auth);
    call c;
    call_init(&c, "POST", "/things/ok");
    call_header(&c, "X-User-Id", "u1");
    call_header(&c, "Content-Type", "text/plain");
    call_body(&c, "{}");
    call_run(&c, r);
    CHECK_INT(c.res.status, 400);
    CHECK_STR(error_code(&c), "invalid_argument");
    CHECK_STR(error_message(&c), "Content-Type must be application/json");
    call_free(&c);
    call_init(&c, "POST", "/things/ok");
    call_header(&c, "X-User-Id", "u1");
    call_header(&c, "Content-Type", "application/jsonx");
    call_body(&c, "{}");
    call_run(&c, r);
    CHECK_INT(c.res.status, 400);
    call_free(&c);
    call_init(&c, "POST", "/things/ok");
    call_header(&c, "X-User-Id", "u1");
    call_body(&c, "\"\xff\xfe\"");
    call_run(&c, r);
    CHECK_INT(c.res.status, 400);
    CHECK_STR(error_code(&c), "invalid_json");
    call_free(&c);
    mv_router_free(r);
    mv_auth_free(auth);
}

TEST(router_without_auth_refuses_protected_routes_but_serves_public_ones) {
    mv_router *r = mv_router_new(NULL);
    mv_route a = {.method = "GET", .pattern = "/p", .handler = echo_handler};
    mv_route b = {.method = "GET", .pattern = "/q", .handler = echo_handler, .public_route = true};
    mv_router_add(r, &a, NULL);
    mv_router_add(r, &b, NULL);
    call c;
    call_init(&c, "GET", "/p");
    call_header(&c, "X-User-Id", "u1");
    call_run(&c, r);
    CHECK_INT(c.res.status, 401);
    call_free(&c);
    call_init(&c, "GET", "/q");
    call_run(&c, r);
    CHECK_INT(c.res.status, 200);
    CHECK(json_object_get(c.body, "user") == NULL);
    call_free(&c);
    mv_router_free(r);
}

TEST(handler_that_answers_nothing_gives_a_masked_500) {
    mv_auth *auth;
    mv_router *r = make_router(&auth);
    call c;
    call_init(&c, "GET", "/silent");
    call_run(&c, r);
    CHECK_INT(c.res.status, 500);
    CHECK_STR(error_code(&c), "internal");
    CHECK_STR(error_message(&c), "internal error");
    CHECK(c.res.detail && strstr(c.res.detail, "/silent") != NULL);
    call_free(&c);
    mv_router_free(r);
    mv_auth_free(auth);
}

/* ---- request id and metrics -------------------------------------------------------------- */

TEST(request_id_is_echoed_when_sane_and_generated_otherwise) {
    mv_auth *auth;
    mv_router *r = make_router(&auth);
    call c;
    call_init(&c, "GET", "/public");
    call_header(&c, "X-Request-Id", "abc-123");
    call_run(&c, r);
    CHECK_STR(mv_http_response_header(&c.res, "X-Request-Id"), "abc-123");
    call_free(&c);
    call_init(&c, "GET", "/public");
    call_header(&c, "X-Request-Id", "has space");
    call_run(&c, r);
    const char *id = mv_http_response_header(&c.res, "X-Request-Id");
    CHECK(id && mv_valid_uuid(id));
    call_free(&c);
    call_init(&c, "GET", "/nowhere");
    call_run(&c, r);
    id = mv_http_response_header(&c.res, "X-Request-Id");
    CHECK(id && mv_valid_uuid(id));
    call_free(&c);
    mv_router_free(r);
    mv_auth_free(auth);
}

TEST(dispatch_counts_requests_by_route_pattern_method_and_status) {
    mv_auth *auth;
    mv_router *r = make_router(&auth);
    mv_metrics *m = mv_metrics_new();
    mv_router_set_metrics(r, m);
    for (int i = 0; i < 3; i++) {
        call c;
        call_init(&c, "GET", i < 2 ? "/messages/x1" : "/messages/x2");
        if (i > 0) call_header(&c, "X-User-Id", "u");
        call_run(&c, r);
        call_free(&c);
    }
    call c;
    call_init(&c, "BREW", "/coffee");
    call_run(&c, r);
    call_free(&c);
    const char *ok[] = {"route", "/messages/{id}", "method", "GET", "status", "200", NULL};
    const char *unauth[] = {"route", "/messages/{id}", "method", "GET", "status", "401", NULL};
    const char *other[] = {"route", "unmatched", "method", "other", "status", "404", NULL};
    CHECK(mv_metrics_value(m, "missive_http_requests_total", ok) == 2);
    CHECK(mv_metrics_value(m, "missive_http_requests_total", unauth) == 1);
    CHECK(mv_metrics_value(m, "missive_http_requests_total", other) == 1);
    const char *hist[] = {"route", "/messages/{id}", "method", "GET", NULL};
    CHECK(mv_metrics_value(m, "missive_http_request_duration_seconds", hist) == 3);
    char *text = mv_metrics_render(m);
    CHECK(strstr(text, "missive_http_requests_total{route=\"/messages/{id}\",method=\"GET\","
                       "status=\"200\"} 2\n") != NULL);
    CHECK(strstr(text, "missive_http_request_duration_seconds_count{route=\"/messages/{id}\","
                       "method=\"GET\"} 3\n") != NULL);
    free(text);
    mv_metrics_free(m);
    mv_router_free(r);
    mv_auth_free(auth);
}

/* ---- arena ------------------------------------------------------------------------------- */

static int cleanups_run;
static void count_cleanup(void *p) {
    (void)p;
    cleanups_run++;
}

TEST(arena_serves_small_and_large_allocations_and_runs_cleanups) {
    mv_arena *a = mv_arena_new();
    char *small = mv_arena_strdup(a, "hello");
    char *large = mv_arena_alloc(a, 100000);
    REQUIRE(small && large);
    memset(large, 'x', 100000);
    char *after = mv_arena_printf(a, "%s-%d", "n", 42);
    CHECK_STR(small, "hello");
    CHECK_STR(after, "n-42");
    for (int i = 0; i < 1000; i++)
        CHECK(mv_arena_alloc(a, 100) != NULL);
    cleanups_run = 0;
    mv_arena_defer(a, count_cleanup, NULL);
    mv_arena_defer(a, count_cleanup, NULL);
    mv_arena_json(a, json_pack("{s:i}", "a", 1)); /* released by the arena (ASan checks) */
    mv_arena_free(a);
    CHECK_INT(cleanups_run, 2);
    mv_arena_free(NULL);
}

/* The write routes marked io_thread run on the I/O thread in every auth mode: JWT takes the same
 * path as headers (a token needing a key refresh parks instead of waiting). */
TEST(io_thread_routes_run_on_the_io_thread_in_headers_and_jwt_mode) {
    static const unsigned char key[32] = "0123456789abcdef0123456789abcdef";
    mv_auth_options modes[] = {{.mode = MV_AUTH_HEADERS},
                               {.mode = MV_AUTH_JWT, .secret = key, .secret_len = sizeof key}};
    for (size_t m = 0; m < 2; m++) {
        mv_router *r = mv_router_new(NULL);
        mv_route routes[] = {
            {.method = "POST", .pattern = "/w", .handler = echo_handler, .io_thread = true},
            {.method = "POST", .pattern = "/p", .handler = echo_handler},
        };
        for (size_t i = 0; i < 2; i++)
            CHECK_CODE(mv_router_add(r, &routes[i], NULL), MV_OK, (mv_err *)NULL);
        mv_auth *auth = NULL;
        mv_err err = {0};
        REQUIRE(mv_auth_new(&modes[m], &auth, &err) == MV_OK);
        mv_router_set_auth(r, auth);
        mv_arena *a = mv_arena_new();
        mv_http_request req;
        mv_http_request_init(&req, a, "POST", "/w", NULL);
        CHECK(mv_router_io_thread(r, &req));
        mv_http_request_init(&req, a, "POST", "/p", NULL);
        CHECK(!mv_router_io_thread(r, &req));
        mv_arena_free(a);
        mv_router_free(r);
        mv_auth_free(auth);
    }
}

int main(void) {
    return RUN_TESTS(path_parameters_are_captured_and_percent_decoded,
                     literal_segment_beats_parameter, wrong_method_on_a_known_path_is_404_not_found,
                     unknown_paths_empty_segments_and_nul_bytes_are_404,
                     router_rejects_malformed_and_duplicate_patterns, query_parameters_are_decoded,
                     header_lookup_ignores_case, checks_run_in_the_fixed_order_401_400_413_400json,
                     a_real_oversized_body_is_413_even_on_a_route_without_body,
                     empty_body_counts_as_empty_object,
                     non_json_content_type_and_non_utf8_bodies_are_400,
                     router_without_auth_refuses_protected_routes_but_serves_public_ones,
                     handler_that_answers_nothing_gives_a_masked_500,
                     request_id_is_echoed_when_sane_and_generated_otherwise,
                     dispatch_counts_requests_by_route_pattern_method_and_status,
                     arena_serves_small_and_large_allocations_and_runs_cleanups,
                     io_thread_routes_run_on_the_io_thread_in_headers_and_jwt_mode);
}
