/* routes_inbox_test.c — the inbox-state routes and filters through the router (no socket):
 * marks, seen-all / read-all, count with its three numbers, and bad filters, bad bodies and
 * invisible messages answered without changing anything. */
#include "../message/fixture.h"
#include "http/auth.h"
#include "http/routes_inbox.h"
#include "missive/inbox.h"
#include "support/http_call.h"

typedef struct env {
    fixture f;
    mv_auth *auth;
    mv_router *router;
    mv_message_routes routes;
} env;

static int env_open(env *e, const char *kind, const char *name) {
    memset(e, 0, sizeof *e);
    if (!fixture_open(&e->f, kind, name)) return 0;
    mv_auth_options ao = {.mode = MV_AUTH_HEADERS};
    if (mv_auth_new(&ao, &e->auth, NULL) != MV_OK) return 0;
    e->router = mv_router_new(e);
    mv_router_set_auth(e->router, e->auth);
    e->routes = (mv_message_routes){e->f.svc, "is.admin"};
    return mv_message_routes_add(e->router, &e->routes, NULL) == MV_OK &&
           mv_inbox_routes_add(e->router, &e->routes, NULL) == MV_OK;
}

static void env_close(env *e) {
    mv_router_free(e->router);
    mv_auth_free(e->auth);
    fixture_close(&e->f);
}

static int run(env *e, call *c, const char *method, const char *target, const char *user,
               const char *roles, const char *body) {
    call_init(c, method, target);
    if (user) call_header(c, "X-User-Id", user);
    if (roles) call_header(c, "X-User-Roles", roles);
    if (body) {
        call_header(c, "Content-Type", "application/json");
        call_body(c, body);
    }
    call_run(c, e->router);
    return c->res.status;
}

static char *create_one(env *e, const char *to) {
    call c;
    char body[256];
    snprintf(body, sizeof body, "{\"name\": \"Widget\", \"toUser\": \"%s\"}", to);
    run(e, &c, "POST", "/messages/new/svc-test", "ana", NULL, body);
    char *id = strdup(mv_json_str(json_array_get(json_object_get(c.body, "messages"), 0), "id"));
    call_free(&c);
    e->f.now++;
    return id;
}

static int64_t count_of(env *e, const char *query, const char *key) {
    call c;
    char target[256];
    snprintf(target, sizeof target, "/messages/count%s", query);
    int64_t n = run(e, &c, "GET", target, "bob", NULL, NULL) == 200
                    ? json_integer_value(json_object_get(c.body, key))
                    : -1;
    call_free(&c);
    return n;
}

STORE_TEST(mark_routes_answer_the_message_with_its_new_viewer) {
    env e;
    REQUIRE(env_open(&e, kind, "rinbox-mark.db"));
    char *id = create_one(&e, "bob");
    char target[128];
    call c;
    snprintf(target, sizeof target, "/messages/%s/read", id);
    CHECK_INT(run(&e, &c, "POST", target, "bob", NULL, NULL), 200);
    CHECK_STR(mv_json_str(c.body, "id"), id);
    CHECK_INT(json_integer_value(json_object_get(json_object_get(c.body, "viewer"), "readAt")),
              e.f.now);
    call_free(&c);
    CHECK_INT(count_of(&e, "", "count"), 1);
    CHECK_INT(count_of(&e, "", "unread"), 0);
    snprintf(target, sizeof target, "/messages/%s/dismiss", id);
    CHECK_INT(run(&e, &c, "POST", target, "bob", NULL, NULL), 200);
    call_free(&c);
    CHECK_INT(count_of(&e, "", "count"), 0);
    CHECK_INT(count_of(&e, "?dismissed=true", "count"), 1);
    snprintf(target, sizeof target, "/messages/%s/undismiss", id);
    CHECK_INT(run(&e, &c, "POST", target, "bob", NULL, NULL), 200);
    call_free(&c);
    snprintf(target, sizeof target, "/messages/%s/unread", id);
    CHECK_INT(run(&e, &c, "POST", target, "bob", NULL, NULL), 200);
    CHECK(json_is_null(json_object_get(json_object_get(c.body, "viewer"), "readAt")));
    call_free(&c);
    snprintf(target, sizeof target, "/messages/%s/seen", id);
    CHECK_INT(run(&e, &c, "POST", target, "eve", NULL, NULL), 404); /* not hers */
    CHECK_STR(call_error_code(&c), "message_not_found");
    call_free(&c);
    CHECK_INT(run(&e, &c, "POST", "/messages/xyz/seen", "bob", NULL, NULL), 400);
    call_free(&c);
    CHECK_INT(run(&e, &c, "POST", target, NULL, NULL, NULL), 401);
    call_free(&c);
    free(id);
    env_close(&e);
}

STORE_TEST(seen_all_and_read_all_count_what_they_changed) {
    env e;
    REQUIRE(env_open(&e, kind, "rinbox-all.db"));
    free(create_one(&e, "bob"));
    free(create_one(&e, "bob"));
    free(create_one(&e, "carol"));
    call c;
    CHECK_INT(run(&e, &c, "POST", "/messages/seen-all", "bob", NULL, NULL), 200);
    CHECK_INT(json_integer_value(json_object_get(c.body, "updated")), 2);
    call_free(&c);
    CHECK_INT(count_of(&e, "", "unseen"), 0);
    CHECK_INT(run(&e, &c, "POST", "/messages/read-all", "bob", NULL, "{\"templateCd\": \"other\"}"),
              200);
    CHECK_INT(json_integer_value(json_object_get(c.body, "updated")), 0);
    call_free(&c);
    CHECK_INT(
        run(&e, &c, "POST", "/messages/read-all", "bob", NULL,
            "{\"templateCd\": \"svc-test\", \"type\": \"request\", \"before\": 99999999999999}"),
        200);
    CHECK_INT(json_integer_value(json_object_get(c.body, "updated")), 2);
    call_free(&c);
    CHECK_INT(run(&e, &c, "POST", "/messages/read-all", "bob", NULL, "{\"typo\": 1}"), 400);
    CHECK_STR(call_error_code(&c), "invalid_argument");
    call_free(&c);
    CHECK_INT(run(&e, &c, "POST", "/messages/read-all", "bob", NULL, "{\"before\": \"soon\"}"),
              400);
    call_free(&c);
    CHECK_INT(run(&e, &c, "POST", "/messages/read-all", "bob", NULL, "[1]"), 400);
    call_free(&c);
    env_close(&e);
}

STORE_TEST(unknown_filters_and_values_are_rejected_and_change_nothing) {
    env e;
    REQUIRE(env_open(&e, kind, "rinbox-bad.db"));
    free(create_one(&e, "bob"));
    const char *bad[] = {
        "/messages?colour=red",           "/messages?read=yes",         "/messages?seen=1",
        "/messages?dismissed=",           "/messages?templateCd=a%20b", "/messages/count?limit=5",
        "/messages/count?archived=maybe", "/messages/count?type="};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        call c;
        CHECK_INT(run(&e, &c, "GET", bad[i], "bob", NULL, NULL), 400);
        CHECK_STR(call_error_code(&c), "invalid_argument");
        call_free(&c);
    }
    call c;
    CHECK_INT(run(&e, &c, "GET", "/messages?read=false&seen=false&templateCd=svc-test&limit=5",
                  "bob", NULL, NULL),
              200);
    CHECK_INT(json_array_size(json_object_get(c.body, "messages")), 1);
    call_free(&c);
    CHECK_INT(count_of(&e, "?type=request&read=false", "count"), 1);
    CHECK_INT(count_of(&e, "?type=notification", "count"), 0);
    env_close(&e);
}

int main(void) {
    return RUN_TESTS(mark_routes_answer_the_message_with_its_new_viewer,
                     seen_all_and_read_all_count_what_they_changed,
                     unknown_filters_and_values_are_rejected_and_change_nothing);
}
