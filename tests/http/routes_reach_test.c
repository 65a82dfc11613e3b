/* routes_reach_test.c — GET and PUT /preferences through the router (no socket) on every store
 * kind: the caller's own set in their tenant, 400 invalid_argument naming the field for a bad
 * body with nothing changed, and 401 without a user. */
#include "../message/fixture.h"
#include "http/auth.h"
#include "http/routes_reach.h"
#include "support/http_call.h"

typedef struct env {
    fixture f;
    mv_auth *auth;
    mv_router *router;
    mv_reach *reach;
    mv_reach_routes routes;
} env;

static int env_open(env *e, const char *kind, const char *name) {
    memset(e, 0, sizeof *e);
    if (!fixture_open(&e->f, kind, name)) return 0;
    mv_auth_options ao = {.mode = MV_AUTH_HEADERS};
    if (mv_auth_new(&ao, &e->auth, NULL) != MV_OK) return 0;
    json_t *ch = json_loads("{\"sms\": {\"webhook\": \"http://127.0.0.1:9/sms\"}}", 0, NULL);
    mv_code rc = mv_reach_new(ch, NULL, true, &e->reach, NULL);
    json_decref(ch);
    if (rc != MV_OK) return 0;
    e->router = mv_router_new(e);
    mv_router_set_auth(e->router, e->auth);
    mv_service_set_reach(e->f.svc, e->reach); /* the routes read the service's channels */
    e->routes = (mv_reach_routes){e->f.store, e->f.svc};
    return mv_reach_routes_add(e->router, &e->routes, NULL) == MV_OK;
}

static void env_close(env *e) {
    mv_router_free(e->router);
    mv_auth_free(e->auth);
    mv_reach_free(e->reach);
    fixture_close(&e->f);
}

static int run(env *e, call *c, const char *method, const char *user, const char *tenant,
               const char *body) {
    call_init(c, method, "/preferences");
    if (user) call_header(c, "X-User-Id", user);
    if (tenant) call_header(c, "X-Tenant-Id", tenant);
    if (body) {
        call_header(c, "Content-Type", "application/json");
        call_body(c, body);
    }
    call_run(c, e->router);
    return c->res.status;
}

STORE_TEST(put_preferences_answers_the_stored_set_and_get_reads_it_in_that_tenant_only) {
    env e;
    REQUIRE(env_open(&e, kind, "rreach_put"));
    call c;
    CHECK_INT(run(&e, &c, "PUT", "bob", "acme",
                  "{\"channels\": {\"sms\": false}, \"categories\": {\"bookings\": {\"email\": "
                  "false}}, \"locale\": \"de\"}"),
              200);
    CHECK(json_is_false(json_object_get(json_object_get(c.body, "channels"), "sms")));
    CHECK_STR(mv_json_str(c.body, "locale"), "de");
    call_free(&c);
    CHECK_INT(run(&e, &c, "GET", "bob", "acme", NULL), 200);
    CHECK(json_is_false(json_object_get(
        json_object_get(json_object_get(c.body, "categories"), "bookings"), "email")));
    CHECK_STR(mv_json_str(c.body, "locale"), "de");
    call_free(&c);
    CHECK_INT(run(&e, &c, "GET", "bob", NULL, NULL), 200); /* the default tenant: nothing */
    CHECK_INT(json_object_size(json_object_get(c.body, "channels")), 0);
    CHECK(json_is_null(json_object_get(c.body, "locale")));
    call_free(&c);
    CHECK_INT(run(&e, &c, "GET", "carol", "acme", NULL), 200); /* another user: nothing */
    CHECK_INT(json_object_size(json_object_get(c.body, "categories")), 0);
    call_free(&c);
    env_close(&e);
}

STORE_TEST(a_bad_preferences_body_is_400_naming_the_field_and_changes_nothing) {
    env e;
    REQUIRE(env_open(&e, kind, "rreach_bad"));
    call c;
    CHECK_INT(run(&e, &c, "PUT", "bob", NULL, "{\"channels\": {\"sms\": false}}"), 200);
    call_free(&c);
    CHECK_INT(run(&e, &c, "PUT", "bob", NULL, "{\"channels\": {\"fax\": true}}"), 400);
    CHECK_STR(mv_json_str(json_object_get(c.body, "error"), "code"), "invalid_argument");
    CHECK(strstr(mv_json_str(json_object_get(c.body, "error"), "message"), "channels.fax"));
    call_free(&c);
    CHECK_INT(run(&e, &c, "PUT", "bob", NULL, "{\"digest\": {\"sms\": {\"everyMs\": \"1h\"}}}"),
              400);
    CHECK(strstr(mv_json_str(json_object_get(c.body, "error"), "message"), "digest.sms"));
    call_free(&c);
    CHECK_INT(run(&e, &c, "PUT", "bob", NULL, "{\"channels\": "), 400);
    CHECK_STR(mv_json_str(json_object_get(c.body, "error"), "code"), "invalid_json");
    call_free(&c);
    CHECK_INT(run(&e, &c, "GET", "bob", NULL, NULL), 200);
    CHECK(json_is_false(json_object_get(json_object_get(c.body, "channels"), "sms")));
    call_free(&c);
    CHECK_INT(run(&e, &c, "GET", NULL, NULL, NULL), 401);
    call_free(&c);
    env_close(&e);
}

int main(void) {
    return RUN_TESTS(put_preferences_answers_the_stored_set_and_get_reads_it_in_that_tenant_only,
                     a_bad_preferences_body_is_400_naming_the_field_and_changes_nothing);
}
