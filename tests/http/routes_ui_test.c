/* routes_ui_test.c — the /ui/ routes over a table of assets made here: content types, the security
 * headers, revalidation with ETag, unknown names, and that no credentials are asked for. The real
 * files are exercised in a browser by tests/browser/browser_test.sh. */
#include "http/request.h"
#include "http/router.h"
#include "http/routes_ui.h"
#include "missive/base.h"
#include "test.h"

static const unsigned char PAGE[] = "<!doctype html><title>t</title>";
static const unsigned char SCRIPT[] = "export const x = 1;";

static const mv_ui_asset ASSETS[] = {
    {"index.html", "text/html; charset=utf-8", "\"aaaa\"", PAGE, sizeof PAGE - 1},
    {"app.js", "text/javascript; charset=utf-8", "\"bbbb\"", SCRIPT, sizeof SCRIPT - 1},
    {0},
};
static const mv_ui_routes UI = {.assets = ASSETS, .index = "index.html"};

typedef struct call {
    mv_arena *arena;
    mv_http_request req;
    mv_http_response res;
} call;

/* Dispatches GET target (with an optional If-None-Match) on a router of ui's routes, without
 * authentication. */
static void get_from(call *c, const mv_ui_routes *ui, const char *target,
                     const char *if_none_match) {
    memset(c, 0, sizeof *c);
    c->arena = mv_arena_new();
    mv_router *r = mv_router_new(NULL);
    mv_err err = {0};
    CHECK_CODE(mv_ui_routes_add(r, ui, &err), MV_OK, &err);
    mv_http_request_init(&c->req, c->arena, "GET", target, NULL);
    if (if_none_match) mv_http_request_add_header(&c->req, "If-None-Match", if_none_match, NULL);
    mv_http_response_init(&c->res, c->arena);
    mv_http_dispatch(r, &c->req, &c->res);
    mv_router_free(r);
}

static void get(call *c, const char *target, const char *if_none_match) {
    get_from(c, &UI, target, if_none_match);
}

static const char *header(const call *c, const char *name) {
    return mv_http_response_header(&c->res, name);
}

static void check_security_headers(const call *c) {
    const char *csp = header(c, "Content-Security-Policy");
    REQUIRE(csp != NULL);
    CHECK(strstr(csp, "script-src 'self'") != NULL);
    CHECK(strstr(csp, "default-src 'none'") != NULL);
    CHECK(strstr(csp, "unsafe-inline") == NULL);
    CHECK(strstr(csp, "unsafe-eval") == NULL);
    CHECK_STR(header(c, "X-Content-Type-Options"), "nosniff");
}

TEST(an_asset_is_served_with_its_type_etag_cache_control_and_csp_without_credentials) {
    call c;
    get(&c, "/ui/app.js", NULL);
    CHECK_INT(c.res.status, 200);
    CHECK_STR(header(&c, "Content-Type"), "text/javascript; charset=utf-8");
    CHECK_STR(header(&c, "Cache-Control"), "no-cache");
    CHECK_STR(header(&c, "ETag"), "\"bbbb\"");
    check_security_headers(&c);
    CHECK_INT(c.res.body_len, sizeof SCRIPT - 1);
    CHECK(c.res.body && memcmp(c.res.body, SCRIPT, c.res.body_len) == 0);
    mv_arena_free(c.arena);
}

TEST(the_element_has_its_own_route_and_is_404_when_the_table_lacks_it) {
    static const mv_ui_asset with[] = {
        {"missive-inbox.js", "text/javascript; charset=utf-8", "\"cccc\"", SCRIPT,
         sizeof SCRIPT - 1},
        {0},
    };
    const mv_ui_routes tables[] = {{.assets = with, .index = "index.html"}, UI};
    for (int i = 0; i < 2; i++) {
        mv_arena *a = mv_arena_new();
        mv_router *r = mv_router_new(NULL);
        CHECK_CODE(mv_ui_routes_add(r, &tables[i], NULL), MV_OK, (mv_err *)NULL);
        mv_http_request req;
        mv_http_response res;
        mv_http_request_init(&req, a, "GET", "/ui/missive-inbox.js", NULL);
        mv_http_response_init(&res, a);
        mv_http_dispatch(r, &req, &res);
        CHECK_INT(res.status, i == 0 ? 200 : 404);
        if (i == 0) CHECK_STR(mv_http_response_header(&res, "ETag"), "\"cccc\"");
        mv_router_free(r);
        mv_arena_free(a);
    }
}

TEST(the_index_is_answered_at_the_trailing_slash_and_the_bare_path_redirects_to_it) {
    call c;
    get(&c, "/ui/", NULL);
    CHECK_INT(c.res.status, 200);
    CHECK_STR(header(&c, "Content-Type"), "text/html; charset=utf-8");
    CHECK(c.res.body && strncmp(c.res.body, "<!doctype html>", 15) == 0);
    check_security_headers(&c);
    mv_arena_free(c.arena);
    get(&c, "/ui", NULL);
    CHECK_INT(c.res.status, 308);
    CHECK_STR(header(&c, "Location"), "/ui/");
    mv_arena_free(c.arena);
}

TEST(a_matching_if_none_match_is_304_without_a_body_and_a_stale_one_is_200) {
    const char *match[] = {"\"aaaa\"", "W/\"aaaa\"", "\"zz\", \"aaaa\"", "*"};
    for (size_t i = 0; i < sizeof match / sizeof match[0]; i++) {
        call c;
        get(&c, "/ui/index.html", match[i]);
        CHECK_INT(c.res.status, 304);
        CHECK_INT(c.res.body_len, 0);
        CHECK_STR(header(&c, "ETag"), "\"aaaa\"");
        mv_arena_free(c.arena);
    }
    call c;
    get(&c, "/ui/index.html", "\"old\"");
    CHECK_INT(c.res.status, 200);
    mv_arena_free(c.arena);
}

TEST(an_unknown_file_or_a_deeper_path_is_404_not_found_naming_nothing_internal) {
    const char *targets[] = {"/ui/missing.js", "/ui/../index.html", "/ui/a/b.js",
                             "/ui/%2e%2e%2fetc", "/ui/index.html%00"};
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        call c;
        get(&c, targets[i], NULL);
        CHECK_INT(c.res.status, 404);
        CHECK(c.res.body && strstr(c.res.body, "\"not_found\"") != NULL);
        mv_arena_free(c.arena);
    }
}

TEST(a_post_to_a_ui_path_is_404_not_found) {
    call c;
    memset(&c, 0, sizeof c);
    c.arena = mv_arena_new();
    mv_router *r = mv_router_new(NULL);
    CHECK_CODE(mv_ui_routes_add(r, &UI, NULL), MV_OK, (mv_err *)NULL);
    mv_http_request_init(&c.req, c.arena, "POST", "/ui/app.js", NULL);
    mv_http_response_init(&c.res, c.arena);
    mv_http_dispatch(r, &c.req, &c.res);
    CHECK_INT(c.res.status, 404);
    mv_router_free(r);
    mv_arena_free(c.arena);
}

TEST(oidc_json_names_the_issuer_and_client_and_the_policy_lets_the_console_reach_the_issuer) {
    call c;
    get(&c, "/ui/oidc.json", NULL);
    CHECK_INT(c.res.status, 200);
    CHECK_STR(c.res.body, "{\"issuer\":null,\"clientId\":null}");
    CHECK(strstr(header(&c, "Content-Security-Policy"), "connect-src 'self';") != NULL);
    mv_arena_free(c.arena);

    mv_ui_routes with = UI;
    with.oidc_issuer = "https://idp.example.com/realms/ops";
    with.oidc_client_id = "missive-console";
    get_from(&c, &with, "/ui/oidc.json", NULL);
    CHECK_INT(c.res.status, 200);
    CHECK_STR(c.res.body, "{\"issuer\":\"https://idp.example.com/realms/ops\",\"clientId\":"
                          "\"missive-console\"}");
    mv_arena_free(c.arena);
    get_from(&c, &with, "/ui/", NULL);
    check_security_headers(&c);
    const char *csp = header(&c, "Content-Security-Policy");
    CHECK(strstr(csp, "connect-src 'self' https://idp.example.com; img-src") != NULL);
    CHECK(strstr(csp, "frame-ancestors 'none'") != NULL);
    mv_arena_free(c.arena);
}

int main(void) {
    return RUN_TESTS(
        an_asset_is_served_with_its_type_etag_cache_control_and_csp_without_credentials,
        the_index_is_answered_at_the_trailing_slash_and_the_bare_path_redirects_to_it,
        the_element_has_its_own_route_and_is_404_when_the_table_lacks_it,
        a_matching_if_none_match_is_304_without_a_body_and_a_stale_one_is_200,
        an_unknown_file_or_a_deeper_path_is_404_not_found_naming_nothing_internal,
        a_post_to_a_ui_path_is_404_not_found,
        oidc_json_names_the_issuer_and_client_and_the_policy_lets_the_console_reach_the_issuer);
}
