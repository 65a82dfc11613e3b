/* routes_time_test.c — POST /messages/{id}/snooze and /unsnooze through the router (no socket):
 * the answer carries viewer.snoozedUntil, GET /messages and /messages/count leave the message out
 * unless snoozed=true, unsnooze brings it back; a bad or missing until, an unknown body field,
 * the sender and a stranger are refused (400 naming until / 404) and change nothing. */
#include <stdlib.h>

#include "../message/fixture.h"
#include "http/auth.h"
#include "http/routes_inbox.h"
#include "http/routes_time.h"
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
           mv_inbox_routes_add(e->router, &e->routes, NULL) == MV_OK &&
           mv_time_routes_add(e->router, &e->routes, NULL) == MV_OK;
}

static void env_close(env *e) {
    mv_router_free(e->router);
    mv_auth_free(e->auth);
    fixture_close(&e->f);
}

static int run(env *e, call *c, const char *method, const char *target, const char *user,
               const char *body) {
    call_init(c, method, target);
    if (user) call_header(c, "X-User-Id", user);
    if (body) {
        call_header(c, "Content-Type", "application/json");
        call_body(c, body);
    }
    call_run(c, e->router);
    return c->res.status;
}

static int status_of(env *e, const char *method, const char *target, const char *user,
                     const char *body) {
    call c;
    int s = run(e, &c, method, target, user, body);
    call_free(&c);
    return s;
}

static int64_t count_of(env *e, const char *query) {
    call c;
    char target[256];
    snprintf(target, sizeof target, "/messages/count%s", query);
    int64_t n = run(e, &c, "GET", target, "bob", NULL) == 200
                    ? json_integer_value(json_object_get(c.body, "count"))
                    : -1;
    call_free(&c);
    return n;
}

static size_t listed(env *e, const char *query) {
    call c;
    char target[256];
    snprintf(target, sizeof target, "/messages%s", query);
    size_t n = run(e, &c, "GET", target, "bob", NULL) == 200
                   ? json_array_size(json_object_get(c.body, "messages"))
                   : (size_t)-1;
    call_free(&c);
    return n;
}

STORE_TEST(snooze_answers_the_message_with_snoozed_until_and_unsnooze_brings_it_back) {
    env e;
    REQUIRE(env_open(&e, kind, "rtime-snooze.db"));
    call c;
    run(&e, &c, "POST", "/messages/new/svc-test", "ana", "{\"name\": \"W\", \"toUser\": \"bob\"}");
    char *id = strdup(mv_json_str(json_array_get(json_object_get(c.body, "messages"), 0), "id"));
    call_free(&c);
    char target[128], body[128];
    snprintf(target, sizeof target, "/messages/%s/snooze", id);
    int64_t until = e.f.now + 86400000;
    snprintf(body, sizeof body, "{\"until\": %lld}", (long long)until);
    CHECK_INT(run(&e, &c, "POST", target, "bob", body), 200);
    CHECK_STR(mv_json_str(c.body, "id"), id);
    CHECK_INT(
        json_integer_value(json_object_get(json_object_get(c.body, "viewer"), "snoozedUntil")),
        until);
    call_free(&c);
    CHECK_INT(count_of(&e, ""), 0);
    CHECK_INT(count_of(&e, "?snoozed=false"), 0);
    CHECK_INT(count_of(&e, "?snoozed=true"), 1);
    CHECK_INT(listed(&e, ""), 0);
    CHECK_INT(listed(&e, "?snoozed=true"), 1);
    CHECK_INT(status_of(&e, "GET", "/messages?snoozed=maybe", "bob", NULL), 400);
    snprintf(target, sizeof target, "/messages/%s/unsnooze", id);
    CHECK_INT(run(&e, &c, "POST", target, "bob", NULL), 200);
    CHECK(json_is_null(json_object_get(json_object_get(c.body, "viewer"), "snoozedUntil")));
    call_free(&c);
    CHECK_INT(count_of(&e, ""), 1);
    CHECK_INT(listed(&e, ""), 1);
    free(id);
    env_close(&e);
}

STORE_TEST(a_bad_until_an_unknown_field_the_sender_and_a_stranger_are_refused_changing_nothing) {
    env e;
    REQUIRE(env_open(&e, kind, "rtime-refuse.db"));
    call c;
    run(&e, &c, "POST", "/messages/new/svc-test", "ana", "{\"name\": \"W\", \"toUser\": \"bob\"}");
    char *id = strdup(mv_json_str(json_array_get(json_object_get(c.body, "messages"), 0), "id"));
    call_free(&c);
    char target[128], good[128], past[128], far[128];
    snprintf(target, sizeof target, "/messages/%s/snooze", id);
    snprintf(good, sizeof good, "{\"until\": %lld}", (long long)(e.f.now + 1000));
    snprintf(past, sizeof past, "{\"until\": %lld}", (long long)(e.f.now - 1));
    snprintf(far, sizeof far, "{\"until\": %lld}", (long long)(e.f.now + MV_MAX_DELAY_MS + 1));
    const char *bad[] = {"{}", "{\"until\": \"soon\"}", "{\"until\": 1.5}", past, far};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_INT(run(&e, &c, "POST", target, "bob", bad[i]), 400);
        CHECK_STR(call_error_code(&c), "invalid_argument");
        CHECK(strstr(call_error_message(&c), "until") != NULL);
        call_free(&c);
    }
    CHECK_INT(run(&e, &c, "POST", target, "bob", "{\"until\": 1, \"x\": 2}"), 400);
    CHECK(strstr(call_error_message(&c), "\"x\"") != NULL);
    call_free(&c);
    CHECK_INT(status_of(&e, "POST", target, "ana", good), 404);
    CHECK_INT(status_of(&e, "POST", target, "eve", good), 404);
    CHECK_INT(status_of(&e, "POST", target, NULL, good), 401);
    CHECK_INT(status_of(&e, "POST", "/messages/nope/snooze", "bob", good), 400);
    CHECK_INT(status_of(&e, "POST", "/messages/000000000000000000000000/snooze", "bob", good), 404);
    snprintf(target, sizeof target, "/messages/%s/unsnooze", id);
    CHECK_INT(status_of(&e, "POST", target, "eve", NULL), 404);
    CHECK_INT(count_of(&e, ""), 1);
    CHECK_INT(count_of(&e, "?snoozed=true"), 0);
    free(id);
    env_close(&e);
}

int main(void) {
    return RUN_TESTS(
        snooze_answers_the_message_with_snoozed_until_and_unsnooze_brings_it_back,
        a_bad_until_an_unknown_field_the_sender_and_a_stranger_are_refused_changing_nothing);
}
