/* cors_test.c — CORS through the router: an allowed origin is echoed (never a wildcard), a
 * preflight from it is answered 204 with the route's methods and the headers the API reads, and
 * any other origin gets no CORS header at all. */
#include "http/auth.h"
#include "http/request.h"
#include "http/router.h"
#include "support/http_call.h"
#include "test.h"

static void ok_handler(mv_http_request *req, mv_http_response *res, void *app) {
    (void)req;
    (void)app;
    mv_http_json(res, 200, json_pack("{s:b}", "ok", 1));
}

static mv_router *router_with_cors(mv_auth **auth) {
    mv_auth_options ao = {.mode = MV_AUTH_HEADERS};
    mv_auth_new(&ao, auth, NULL);
    mv_router *r = mv_router_new(NULL);
    mv_router_set_auth(r, *auth);
    mv_route get = {"GET", "/messages", ok_handler, false, false, NULL, NULL};
    mv_route post = {"POST", "/messages/{id}/read", ok_handler, false, false, NULL, NULL};
    mv_router_add(r, &get, NULL);
    mv_router_add(r, &post, NULL);
    const char *origins[] = {"https://app.example.com"};
    mv_router_set_cors(r, origins, 1, 600, NULL);
    return r;
}

TEST(an_allowed_origin_is_echoed_and_any_other_gets_no_cors_header) {
    mv_auth *auth;
    mv_router *r = router_with_cors(&auth);
    call c;
    call_init(&c, "GET", "/messages");
    call_header(&c, "X-User-Id", "bob");
    call_header(&c, "Origin", "https://app.example.com");
    call_run(&c, r);
    CHECK_INT(c.res.status, 200);
    CHECK_STR(mv_http_response_header(&c.res, "Access-Control-Allow-Origin"),
              "https://app.example.com");
    CHECK_STR(mv_http_response_header(&c.res, "Vary"), "Origin");
    call_free(&c);
    const char *others[] = {"https://evil.example.com", "null", "*",
                            "https://app.example.com.evil"};
    for (int i = 0; i < 4; i++) {
        call_init(&c, "GET", "/messages");
        call_header(&c, "X-User-Id", "bob");
        call_header(&c, "Origin", others[i]);
        call_run(&c, r);
        CHECK_INT(c.res.status, 200);
        CHECK(mv_http_response_header(&c.res, "Access-Control-Allow-Origin") == NULL);
        call_free(&c);
    }
    mv_router_free(r);
    mv_auth_free(auth);
}

TEST(preflight_answers_the_route_methods_to_an_allowed_origin_only) {
    mv_auth *auth;
    mv_router *r = router_with_cors(&auth);
    call c;
    call_init(&c, "OPTIONS", "/messages/0123456789abcdef01234567/read");
    call_header(&c, "Origin", "https://app.example.com");
    call_header(&c, "Access-Control-Request-Method", "POST");
    call_run(&c, r);
    CHECK_INT(c.res.status, 204);
    CHECK_STR(mv_http_response_header(&c.res, "Access-Control-Allow-Methods"), "POST");
    CHECK_STR(mv_http_response_header(&c.res, "Access-Control-Max-Age"), "600");
    CHECK(strstr(mv_http_response_header(&c.res, "Access-Control-Allow-Headers"), "Last-Event-ID"));
    call_free(&c);
    call_init(&c, "OPTIONS", "/messages");
    call_header(&c, "Origin", "https://evil.example.com");
    call_run(&c, r);
    CHECK_INT(c.res.status, 204);
    CHECK(mv_http_response_header(&c.res, "Access-Control-Allow-Origin") == NULL);
    CHECK(mv_http_response_header(&c.res, "Access-Control-Allow-Methods") == NULL);
    call_free(&c);
    call_init(&c, "OPTIONS", "/nowhere");
    call_header(&c, "Origin", "https://app.example.com");
    call_run(&c, r);
    CHECK(mv_http_response_header(&c.res, "Access-Control-Allow-Origin") == NULL);
    call_free(&c);
    mv_router_free(r);
    mv_auth_free(auth);
}

TEST(without_cors_configured_nothing_changes) {
    mv_auth_options ao = {.mode = MV_AUTH_HEADERS};
    mv_auth *auth;
    mv_auth_new(&ao, &auth, NULL);
    mv_router *r = mv_router_new(NULL);
    mv_router_set_auth(r, auth);
    mv_route get = {"GET", "/messages", ok_handler, false, false, NULL, NULL};
    mv_router_add(r, &get, NULL);
    call c;
    call_init(&c, "OPTIONS", "/messages");
    call_header(&c, "Origin", "https://app.example.com");
    call_run(&c, r);
    CHECK_INT(c.res.status, 404);
    CHECK(mv_http_response_header(&c.res, "Access-Control-Allow-Origin") == NULL);
    call_free(&c);
    mv_router_free(r);
    mv_auth_free(auth);
}

int main(void) {
    return RUN_TESTS(an_allowed_origin_is_echoed_and_any_other_gets_no_cors_header,
                     preflight_answers_the_route_methods_to_an_allowed_origin_only,
                     without_cors_configured_nothing_changes);
}
