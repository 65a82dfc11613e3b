/* routes_messages_test.c — every message route through the router (no socket): statuses, the
 * order of checks, error bodies, replay header, mismatch, and GET on the action route. */
#include "../message/fixture.h"
#include "http/auth.h"
#include "http/routes_messages.h"
#include "support/http_call.h"

typedef struct env {
    fixture f;
    mv_auth *auth;
    mv_router *router;
    mv_message_routes routes;
    int handler_calls;
} env;

static mv_code approve_handler(void *ctx, const mv_action_input *in, json_t **result, mv_err *err) {
    (void)err;
    env *e = ctx;
    e->handler_calls++;
    *result = json_pack("{s:s}", "by", in->user->id);
    return MV_OK;
}

static int env_open(env *e, const char *kind, const char *name) {
    memset(e, 0, sizeof *e);
    if (!fixture_open(&e->f, kind, name)) return 0;
    mv_auth_options ao = {.mode = MV_AUTH_HEADERS};
    if (mv_auth_new(&ao, &e->auth, NULL) != MV_OK) return 0;
    e->router = mv_router_new(e);
    mv_router_set_auth(e->router, e->auth);
    e->routes = (mv_message_routes){e->f.svc, "is.admin"};
    mv_service_set_handler(e->f.svc, "svc-test", "approve", approve_handler, e);
    return mv_message_routes_add(e->router, &e->routes, NULL) == MV_OK;
}

static void env_close(env *e) {
    mv_router_free(e->router);
    mv_auth_free(e->auth);
    fixture_close(&e->f);
}

/* Runs one request as user (NULL = anonymous) and returns the status. */
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

static char *create_one(env *e, const char *from, const char *to) {
    call c;
    char body[256];
    snprintf(body, sizeof body, "{\"name\": \"Widget\", \"toUser\": \"%s\"}", to);
    run(e, &c, "POST", "/messages/new/svc-test", from, body);
    const char *id = mv_json_str(json_array_get(json_object_get(c.body, "messages"), 0), "id");
    char *out = id ? strdup(id) : NULL;
    call_free(&c);
    return out;
}

STORE_TEST(every_route_is_401_without_a_user_before_anything_else) {
    env e;
    REQUIRE(env_open(&e, kind, "r401.db"));
    const char *routes[][2] = {{"POST", "/messages/new/bad!"},
                               {"GET", "/messages?limit=abc"},
                               {"GET", "/messages/count"},
                               {"GET", "/messages/nothex"},
                               {"GET", "/messages/nothex/actions/admin"},
                               {"POST", "/messages/nothex/action/bad.action"}};
    for (int i = 0; i < 6; i++) {
        call c;
        CHECK_INT(run(&e, &c, routes[i][0], routes[i][1], NULL, "{"), 401);
        CHECK_STR(call_error_code(&c), "unauthenticated");
        call_free(&c);
    }
    CHECK_INT(fixture_rows(e.f.store, 'm'), 0);
    env_close(&e);
}

STORE_TEST(route_parameters_are_checked_before_the_body) {
    env e;
    REQUIRE(env_open(&e, kind, "rparams.db"));
    call c;
    CHECK_INT(run(&e, &c, "POST", "/messages/new/bad!", "u1", "{"), 400);
    CHECK_STR(call_error_message(&c), "templateCd must be a non-empty string of at most 128 "
                                      "letters, digits, dots, underscores, and hyphens");
    call_free(&c);
    CHECK_INT(run(&e, &c, "GET", "/messages/not-an-object-id/actions/sender", "u1", NULL), 400);
    CHECK_STR(call_error_message(&c), "id must be a 24-character hex ObjectId");
    call_free(&c);
    CHECK_INT(run(&e, &c, "GET", "/messages/507f1f77bcf86cd799439011/actions/admin", "u1", NULL),
              400);
    CHECK_STR(call_error_message(&c), "usertype must be \"sender\" or \"receiver\"");
    call_free(&c);
    CHECK_INT(
        run(&e, &c, "POST", "/messages/507f1f77bcf86cd799439011/action/bad.action", "u1", "{"),
        400);
    CHECK_STR(call_error_message(&c), "actionCd must be a non-empty string of at most 128 letters, "
                                      "digits, underscores, and hyphens");
    call_free(&c);
    CHECK_INT(run(&e, &c, "POST", "/messages/new/svc-test", "u1", "{\"a\": tru"), 400);
    CHECK_STR(call_error_code(&c), "invalid_json");
    CHECK(strstr(call_error_message(&c), "line 1") != NULL);
    call_free(&c);
    CHECK_INT(run(&e, &c, "POST", "/messages/new/svc-test", "u1", "[1]"), 400);
    CHECK_STR(call_error_message(&c), "body must be a JSON object");
    call_free(&c);
    CHECK_INT(run(&e, &c, "POST", "/messages/new/svc-test", "u1", "{\"clientRequestId\": 123}"),
              400);
    CHECK_STR(call_error_message(&c), "clientRequestId must be a string when provided");
    call_free(&c);
    CHECK_INT(run(&e, &c, "POST", "/messages/new/svc-test", "u1", "{\"clientRequestId\": \"   \"}"),
              400);
    CHECK_STR(call_error_code(&c), "invalid_client_request_id");
    call_free(&c);
    CHECK_INT(fixture_rows(e.f.store, 'm'), 0);
    env_close(&e);
}

STORE_TEST(the_action_route_refuses_a_malformed_or_non_object_body_and_claims_nothing) {
    env e;
    REQUIRE(env_open(&e, kind, "raction-body.db"));
    char *id = create_one(&e, "u1", "u2");
    REQUIRE(id);
    char path[128];
    snprintf(path, sizeof path, "/messages/%s/action/approve", id);
    const char *bodies[] = {"{\"a\":", "[]", "\"x\"", "null"};
    const char *codes[] = {"invalid_json", "invalid_argument", "invalid_argument",
                           "invalid_argument"};
    for (int i = 0; i < 4; i++) {
        call c;
        CHECK_INT(run(&e, &c, "POST", path, "u2", bodies[i]), 400);
        CHECK_STR(call_error_code(&c), codes[i]);
        call_free(&c);
    }
    call c;
    snprintf(path, sizeof path, "/messages/%s", id);
    CHECK_INT(run(&e, &c, "GET", path, "u2", NULL), 200);
    CHECK_STR(mv_json_str(c.body, "actionState"), "active");
    call_free(&c);
    free(id);
    env_close(&e);
}

STORE_TEST(a_user_with_64_roles_lists_and_counts_the_messages_of_their_last_role) {
    env e;
    REQUIRE(env_open(&e, kind, "rroles64.db"));
    call c;
    CHECK_INT(run(&e, &c, "POST", "/messages/new/svc-test", "u1",
                  "{\"name\": \"W\", \"toRoles\": [\"group-63\"]}"),
              201);
    call_free(&c);
    char roles[1024] = "";
    for (int i = 0; i < 64; i++)
        snprintf(roles + strlen(roles), sizeof roles - strlen(roles), "%sgroup-%02d", i ? "," : "",
                 i);
    const char *paths[] = {"/messages", "/messages/count"};
    for (int i = 0; i < 2; i++) {
        call_init(&c, "GET", paths[i]);
        call_header(&c, "X-User-Id", "member");
        call_header(&c, "X-User-Roles", roles);
        call_run(&c, e.router);
        CHECK_INT(c.res.status, 200);
        if (i == 0)
            CHECK_INT(json_array_size(json_object_get(c.body, "messages")), 1);
        else
            CHECK_INT(json_integer_value(json_object_get(c.body, "count")), 1);
        call_free(&c);
    }
    env_close(&e);
}

STORE_TEST(create_is_201_and_a_replay_says_so) {
    env e;
    REQUIRE(env_open(&e, kind, "rcreate.db"));
    call a, b, c, d;
    const char *body = "{\"name\": \"W\", \"toUser\": \"u2\", \"clientRequestId\": \"k1\"}";
    CHECK_INT(run(&e, &a, "POST", "/messages/new/svc-test", "u1", body), 201);
    CHECK(mv_http_response_header(&a.res, "Idempotent-Replayed") == NULL);
    CHECK_INT(run(&e, &b, "POST", "/messages/new/svc-test", "u1", body), 201);
    CHECK_STR(mv_http_response_header(&b.res, "Idempotent-Replayed"), "true");
    CHECK(json_equal(a.body, b.body));
    /* the header form is the same key */
    call_init(&c, "POST", "/messages/new/svc-test");
    call_header(&c, "X-User-Id", "u1");
    call_header(&c, "Idempotency-Key", "k1");
    call_body(&c, "{\"name\": \"W\", \"toUser\": \"u2\"}");
    call_run(&c, e.router);
    CHECK_INT(c.res.status, 201);
    CHECK_STR(mv_http_response_header(&c.res, "Idempotent-Replayed"), "true");
    /* a different payload under the same key */
    CHECK_INT(run(&e, &d, "POST", "/messages/new/svc-test", "u1",
                  "{\"name\": \"Other\", \"toUser\": \"u2\", \"clientRequestId\": \"k1\"}"),
              422);
    CHECK_STR(call_error_code(&d), "client_request_mismatch");
    CHECK_INT(fixture_rows(e.f.store, 'm'), 1);
    call_free(&a);
    call_free(&b);
    call_free(&c);
    call_free(&d);
    /* body id and header id differ */
    call_init(&c, "POST", "/messages/new/svc-test");
    call_header(&c, "X-User-Id", "u1");
    call_header(&c, "Idempotency-Key", "k2");
    call_body(&c, "{\"clientRequestId\": \"k3\"}");
    call_run(&c, e.router);
    CHECK_INT(c.res.status, 400);
    CHECK_STR(call_error_code(&c), "invalid_client_request_id");
    call_free(&c);
    CHECK_INT(run(&e, &c, "POST", "/messages/new/missing-template", "u1", "{}"), 404);
    CHECK_STR(call_error_code(&c), "template_not_found");
    call_free(&c);
    env_close(&e);
}

STORE_TEST(list_count_get_and_pagination_errors) {
    env e;
    REQUIRE(env_open(&e, kind, "rlist.db"));
    char *id1 = create_one(&e, "u1", "u2");
    e.f.now++;
    char *id2 = create_one(&e, "u1", "u2");
    call c;
    CHECK_INT(run(&e, &c, "GET", "/messages?limit=1", "u2", NULL), 200);
    json_t *msgs = json_object_get(c.body, "messages");
    CHECK_INT(json_array_size(msgs), 1);
    CHECK_STR(mv_json_str(json_array_get(msgs, 0), "id"), id2);
    char target[256];
    snprintf(target, sizeof target, "/messages?limit=1&cursor=%s",
             mv_json_str(c.body, "nextCursor"));
    call_free(&c);
    CHECK_INT(run(&e, &c, "GET", target, "u2", NULL), 200);
    CHECK_STR(mv_json_str(json_array_get(json_object_get(c.body, "messages"), 0), "id"), id1);
    CHECK(json_is_null(json_object_get(c.body, "nextCursor")));
    call_free(&c);
    CHECK_INT(run(&e, &c, "GET", "/messages?limit=1.5", "u2", NULL), 400);
    CHECK_STR(call_error_code(&c), "invalid_pagination");
    call_free(&c);
    CHECK_INT(run(&e, &c, "GET", "/messages?cursor=zzz", "u2", NULL), 400);
    CHECK_STR(call_error_code(&c), "invalid_pagination");
    call_free(&c);
    CHECK_INT(run(&e, &c, "GET", "/messages/count", "u2", NULL), 200);
    CHECK_INT(json_integer_value(json_object_get(c.body, "count")), 2);
    call_free(&c);
    snprintf(target, sizeof target, "/messages/%s", id1);
    CHECK_INT(run(&e, &c, "GET", target, "u2", NULL), 200);
    CHECK_STR(mv_json_str(c.body, "id"), id1);
    call_free(&c);
    CHECK_INT(run(&e, &c, "GET", target, "stranger", NULL), 404);
    CHECK_STR(call_error_code(&c), "message_not_found");
    call_free(&c);
    free(id1);
    free(id2);
    env_close(&e);
}

STORE_TEST(actions_and_action_statuses) {
    env e;
    REQUIRE(env_open(&e, kind, "ractions.db"));
    char *id = create_one(&e, "u1", "u2");
    char target[256];
    call c;
    snprintf(target, sizeof target, "/messages/%s/actions/receiver", id);
    CHECK_INT(run(&e, &c, "GET", target, "u2", NULL), 200);
    CHECK_STR(mv_json_str(c.body, "uiTemplate"), "default-message");
    CHECK_INT(json_array_size(json_object_get(c.body, "actions")), 2);
    call_free(&c);
    snprintf(target, sizeof target, "/messages/%s/action/approve", id);
    CHECK_INT(run(&e, &c, "GET", target, "u2", NULL), 404); /* never a state change on GET */
    CHECK_STR(call_error_code(&c), "not_found");
    call_free(&c);
    CHECK_INT(e.handler_calls, 0);
    CHECK_INT(run(&e, &c, "POST", target, "u3", NULL), 404); /* u3 cannot see it: no oracle */
    CHECK_STR(call_error_code(&c), "message_not_found");
    call_free(&c);
    CHECK_INT(run(&e, &c, "POST", target, "u1", NULL), 403); /* the sender sees it */
    CHECK_STR(call_error_code(&c), "action_not_allowed");
    call_free(&c);
    snprintf(target, sizeof target, "/messages/%s/action/nope", id);
    CHECK_INT(run(&e, &c, "POST", target, "u2", NULL), 404);
    CHECK_STR(call_error_code(&c), "action_not_found");
    call_free(&c);
    snprintf(target, sizeof target, "/messages/%s/action/approve", id);
    CHECK_INT(run(&e, &c, "POST", target, "u2", ""), 200);
    CHECK_STR(mv_json_str(json_object_get(c.body, "result"), "by"), "u2");
    call_free(&c);
    CHECK_INT(run(&e, &c, "POST", target, "u2", "{}"), 410);
    CHECK_STR(call_error_code(&c), "message_archived");
    call_free(&c);
    CHECK_INT(e.handler_calls, 1);
    snprintf(target, sizeof target, "/messages/%s/action/approve", "507f1f77bcf86cd799439011");
    CHECK_INT(run(&e, &c, "POST", target, "u2", NULL), 404);
    CHECK_STR(call_error_code(&c), "message_not_found");
    call_free(&c);
    CHECK_INT(run(&e, &c, "GET", "/messages?archived=true", "u2", NULL), 200);
    CHECK_INT(json_array_size(json_object_get(c.body, "messages")), 1);
    call_free(&c);
    CHECK_INT(run(&e, &c, "GET", "/messages?archived=maybe", "u2", NULL), 400);
    call_free(&c);
    free(id);
    env_close(&e);
}

int main(void) {
    return RUN_TESTS(every_route_is_401_without_a_user_before_anything_else,
                     route_parameters_are_checked_before_the_body,
                     the_action_route_refuses_a_malformed_or_non_object_body_and_claims_nothing,
                     a_user_with_64_roles_lists_and_counts_the_messages_of_their_last_role,
                     create_is_201_and_a_replay_says_so, list_count_get_and_pagination_errors,
                     actions_and_action_statuses);
}
