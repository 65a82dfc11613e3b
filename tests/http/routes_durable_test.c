/* routes_durable_test.c — the approval and saga routes through the router (no socket) over a
 * SQLite file, with http_sink as the saga's far side: every status of every route, who may see
 * and decide an approval, saga outcomes answered as 200 records, replay and mismatch, resume,
 * compensate (due now only), resolve, and the 404s of unconfigured features. */
#include "durable/fixture.h"
#include "http/auth.h"
#include "http/routes_durable.h"
#include "support/http_call.h"
#include "support/http_sink.h"

typedef struct env {
    mv_store *store;
    int64_t now;
    mv_clock clock;
    mv_approvals *approvals;
    mv_saga_engine *engine;
    mv_saga_book *book;
    http_sink *sink;
    mv_auth *auth;
    mv_router *router;
    mv_durable_routes routes;
} env;

static int env_open(env *e, const char *name) {
    memset(e, 0, sizeof *e);
    e->store = fixture_store("sqlite", name, NULL, 0);
    if (!e->store) return 0;
    e->now = 5000000;
    e->clock = mv_manual_clock(&e->now);
    mv_approvals_options ao = {.secret = (const unsigned char *)"0123456789abcdef0123456789abcdef",
                               .secret_len = 32,
                               .clock = &e->clock};
    mv_saga_engine_options so = {.clock = &e->clock};
    if (mv_approvals_new(e->store, &ao, &e->approvals, NULL) != MV_OK ||
        mv_saga_engine_new(e->store, &so, &e->engine, NULL) != MV_OK)
        return 0;
    e->sink = http_sink_start();
    e->book = mv_saga_book_new(NULL);
    if (!e->sink || !e->book) return 0;
    char text[1024];
    const char *u = http_sink_url(e->sink);
    snprintf(text, sizeof text,
             "{\"name\": \"checkout\", \"retry\": {\"backoffMs\": {\"initial\": 1000}},"
             " \"steps\": ["
             "  {\"name\": \"reserve\", \"run\": {\"webhook\": \"%s/reserve\"},"
             "   \"compensate\": {\"webhook\": \"%s/release\"}},"
             "  {\"name\": \"charge\", \"run\": {\"webhook\": \"%s/charge\"},"
             "   \"compensate\": {\"webhook\": \"%s/refund\"}}]}",
             u, u, u, u);
    json_t *j = NULL;
    if (mv_json_parse(text, strlen(text), &j, NULL) != MV_OK) return 0;
    mv_code rc = mv_saga_book_add_json(e->book, j, "checkout.json", NULL);
    json_decref(j);
    if (rc != MV_OK) return 0;
    mv_auth_options auth = {.mode = MV_AUTH_HEADERS};
    if (mv_auth_new(&auth, &e->auth, NULL) != MV_OK) return 0;
    e->router = mv_router_new(e);
    mv_router_set_auth(e->router, e->auth);
    e->routes = (mv_durable_routes){.approvals = e->approvals,
                                    .engine = e->engine,
                                    .book = e->book,
                                    .admin_permission = "is.admin"};
    return mv_durable_routes_add(e->router, &e->routes, NULL) == MV_OK;
}

static void env_close(env *e) {
    mv_router_free(e->router);
    mv_auth_free(e->auth);
    mv_saga_book_free(e->book);
    http_sink_stop(e->sink);
    mv_saga_engine_free(e->engine);
    mv_approvals_free(e->approvals);
    mv_store_close(e->store);
}

/* Who calls: "user[@tenant][:perm1,perm2]"; NULL = anonymous. */
static int run(env *e, call *c, const char *method, const char *target, const char *who,
               const char *body) {
    call_init(c, method, target);
    if (who) {
        char user[128], tenant[64] = "", perms[128] = "";
        snprintf(user, sizeof user, "%s", who);
        char *colon = strchr(user, ':');
        if (colon) {
            snprintf(perms, sizeof perms, "%s", colon + 1);
            *colon = '\0';
        }
        char *at = strchr(user, '@');
        if (at) {
            snprintf(tenant, sizeof tenant, "%s", at + 1);
            *at = '\0';
        }
        call_header(c, "X-User-Id", user);
        if (tenant[0]) call_header(c, "X-Tenant-Id", tenant);
        if (perms[0]) call_header(c, "X-User-Permissions", perms);
    }
    if (body) {
        call_header(c, "Content-Type", "application/json");
        call_body(c, body);
    }
    call_run(c, e->router);
    return c->res.status;
}

/* Expects status and error code, then frees the call. */
static void expect(env *e, const char *method, const char *target, const char *who,
                   const char *body, int status, const char *code, int line) {
    call c;
    int got = run(e, &c, method, target, who, body);
    if (got != status || (code && (!call_error_code(&c) || strcmp(call_error_code(&c), code)))) {
        char m[512];
        snprintf(m, sizeof m, "%s %s as %s: %d %s (expected %d %s)", method, target,
                 who ? who : "(nobody)", got, c.res.body ? c.res.body : "", status,
                 code ? code : "");
        test_fail_(__FILE__, line, m);
    }
    call_free(&c);
}
#define EXPECT(method, target, who, body, status, code)                                            \
    expect(&e, method, target, who, body, status, code, __LINE__)

static void pending_approval(env *e, const char *tenant, const char *principal, char id[64]) {
    mv_approval_request req = {.effect_id = "eff-1",
                               .capability = "refunds.large",
                               .target = "msg-1",
                               .tenant_id = tenant,
                               .principal_id = principal};
    mv_err err = {0};
    id[0] = '\0';
    if (mv_approval_authorize(e->approvals, &req, &err) == MV_APPROVAL_REQUIRED)
        snprintf(id, 64, "%s", err.approval_id);
}

TEST(get_approval_is_for_the_principal_approvers_and_admins_of_the_same_tenant) {
    env e;
    REQUIRE(env_open(&e, "rd_get.db"));
    char id[64], target[128];
    pending_approval(&e, "t1", "alice", id);
    REQUIRE(id[0]);
    snprintf(target, sizeof target, "/approvals/%s", id);
    EXPECT("GET", target, NULL, NULL, 401, "unauthenticated");
    EXPECT("GET", "/approvals/not-a-uuid", "alice@t1", NULL, 400, "invalid_argument");
    call c;
    CHECK_INT(run(&e, &c, "GET", target, "alice@t1", NULL), 200);
    CHECK_STR(mv_json_str(c.body, "approvalId"), id);
    CHECK_STR(mv_json_str(c.body, "state"), "pending");
    CHECK_STR(mv_json_str(c.body, "capability"), "refunds.large");
    CHECK_STR(mv_json_str(c.body, "target"), "msg-1");
    CHECK_STR(mv_json_str(c.body, "tenantId"), "t1");
    CHECK_STR(mv_json_str(c.body, "principalId"), "alice");
    CHECK(json_object_get(c.body, "expiresAt") != NULL);
    CHECK(strstr(c.res.body, "oken") == NULL); /* never the token or its hash */
    CHECK(json_object_get(c.body, "decidedBy") == NULL);
    call_free(&c);
    EXPECT("GET", target, "carol@t1:approvals.decide", NULL, 200, NULL);
    EXPECT("GET", target, "dave@t1:is.admin", NULL, 200, NULL);
    EXPECT("GET", target, "bob@t1", NULL, 404, "approval_not_found");
    EXPECT("GET", target, "bob@t1:other.permission", NULL, 404, "approval_not_found");
    EXPECT("GET", target, "alice@t2", NULL, 404, "approval_not_found");
    EXPECT("GET", target, "erin@t2:approvals.decide,is.admin", NULL, 404, "approval_not_found");
    EXPECT("GET", "/approvals/6f1c1b36-3f8e-4c55-9d0a-0b7f1a2e3c4d", "dave@t1:is.admin", NULL, 404,
           "approval_not_found");
    env_close(&e);
}

TEST(deciding_needs_the_approver_permission_and_records_the_caller) {
    env e;
    REQUIRE(env_open(&e, "rd_decide.db"));
    char id[64], target[128];
    pending_approval(&e, "default", "alice", id);
    REQUIRE(id[0]);
    snprintf(target, sizeof target, "/approvals/%s/decision", id);
    const char *ok = "{\"decision\": \"approved\"}";
    EXPECT("POST", target, NULL, ok, 401, "unauthenticated");
    EXPECT("POST", "/approvals/xyz/decision", "carol:approvals.decide", ok, 400,
           "invalid_argument");
    EXPECT("POST", target, "alice", ok, 403, "forbidden");  /* the principal cannot approve */
    EXPECT("POST", target, "alice", "{", 403, "forbidden"); /* before the body is read */
    EXPECT("POST", target, "carol:approvals.decide", "{", 400, "invalid_json");
    EXPECT("POST", target, "carol:approvals.decide", "[]", 400, "invalid_argument");
    EXPECT("POST", target, "carol:approvals.decide", "{}", 400, "invalid_argument");
    EXPECT("POST", target, "carol:approvals.decide", "{\"decision\": \"maybe\"}", 400,
           "invalid_argument");
    EXPECT("POST", target, "carol:approvals.decide", "{\"decision\": \"approved\", \"x\": 1}", 400,
           "invalid_argument");
    EXPECT("POST", target, "erin@t2:approvals.decide", ok, 404, "approval_not_found");
    call c;
    CHECK_INT(run(&e, &c, "POST", target, "carol:approvals.decide", ok), 200);
    CHECK_STR(mv_json_str(c.body, "state"), "approved");
    CHECK_STR(mv_json_str(c.body, "decidedBy"), "carol");
    call_free(&c);
    EXPECT("POST", target, "dave:is.admin", "{\"decision\": \"denied\"}", 409,
           "approval_decision_rejected");
    mv_approval_record rec;
    CHECK_CODE(mv_approval_get(e.approvals, id, "default", &rec, NULL), MV_OK, NULL);
    CHECK_STR(rec.state, "approved");
    /* an admin may deny */
    pending_approval(&e, "default", "alice", id);
    snprintf(target, sizeof target, "/approvals/%s/decision", id);
    CHECK_INT(run(&e, &c, "POST", target, "dave:is.admin", "{\"decision\": \"denied\"}"), 200);
    CHECK_STR(mv_json_str(c.body, "state"), "denied");
    CHECK_STR(mv_json_str(c.body, "decidedBy"), "dave");
    call_free(&c);
    /* expired: rejected */
    pending_approval(&e, "default", "alice", id);
    snprintf(target, sizeof target, "/approvals/%s/decision", id);
    e.now += 900001;
    EXPECT("POST", target, "carol:approvals.decide", ok, 409, "approval_decision_rejected");
    env_close(&e);
}

#define ADMIN "ops:is.admin"

TEST(starting_a_saga_answers_its_record_in_whatever_state_it_reached) {
    env e;
    REQUIRE(env_open(&e, "rd_start.db"));
    const char *body = "{\"sagaId\": \"s1\", \"input\": {\"order\": 1}}";
    EXPECT("POST", "/sagas/checkout", NULL, body, 401, "unauthenticated");
    EXPECT("POST", "/sagas/bad%20name", ADMIN, body, 400, "invalid_argument");
    EXPECT("POST", "/sagas/checkout", "alice:approvals.decide", body, 403, "forbidden");
    EXPECT("POST", "/sagas/checkout", ADMIN, "{\"input\": 1", 400, "invalid_json");
    EXPECT("POST", "/sagas/checkout", ADMIN, "{\"input\": {}}", 400, "invalid_argument");
    EXPECT("POST", "/sagas/checkout", ADMIN, "{\"sagaId\": \"has space\"}", 400,
           "invalid_argument");
    EXPECT("POST", "/sagas/checkout", ADMIN, "{\"sagaId\": \"s1\", \"inputs\": {}}", 400,
           "invalid_argument");
    EXPECT("POST", "/sagas/nothing", ADMIN, body, 404, "saga_definition_not_found");
    CHECK_INT(http_sink_count(e.sink), 0);

    http_sink_push(e.sink, &(http_sink_response){.path = "/charge", .body = "{\"paid\": true}"});
    call c, d;
    CHECK_INT(run(&e, &c, "POST", "/sagas/checkout", ADMIN, body), 200);
    CHECK_STR(mv_json_str(c.body, "sagaId"), "s1");
    CHECK_STR(mv_json_str(c.body, "state"), "completed");
    CHECK(mv_http_response_header(&c.res, "Idempotent-Replayed") == NULL);
    CHECK_INT(http_sink_count(e.sink), 2);
    /* replay: the current record, nothing runs */
    CHECK_INT(run(&e, &d, "POST", "/sagas/checkout", ADMIN, body), 200);
    CHECK_STR(mv_http_response_header(&d.res, "Idempotent-Replayed"), "true");
    CHECK(json_equal(c.body, d.body));
    call_free(&c);
    call_free(&d);
    CHECK_INT(http_sink_count(e.sink), 2);
    EXPECT("POST", "/sagas/checkout", ADMIN, "{\"sagaId\": \"s1\", \"input\": {\"order\": 2}}", 422,
           "saga_mismatch");

    /* a rejected step: compensated, still 200 */
    http_sink_push(e.sink, &(http_sink_response){.path = "/charge", .status = 409});
    CHECK_INT(run(&e, &c, "POST", "/sagas/checkout", ADMIN, "{\"sagaId\": \"s2\"}"), 200);
    CHECK_STR(mv_json_str(c.body, "state"), "compensated");
    CHECK(json_is_null(json_object_get(c.body, "input")));
    call_free(&c);
    CHECK_INT(http_sink_count(e.sink), 5); /* reserve, charge, release */

    /* an ambiguous step: manual review, still 200 */
    http_sink_push(e.sink, &(http_sink_response){.path = "/charge", .status = 502});
    CHECK_INT(run(&e, &c, "POST", "/sagas/checkout", ADMIN, "{\"sagaId\": \"s3\"}"), 200);
    CHECK_STR(mv_json_str(c.body, "state"), "manual-review");
    call_free(&c);
    env_close(&e);
}

TEST(get_saga_needs_admin_and_a_valid_existing_id) {
    env e;
    REQUIRE(env_open(&e, "rd_getsaga.db"));
    call c;
    CHECK_INT(run(&e, &c, "POST", "/sagas/checkout", ADMIN, "{\"sagaId\": \"g1\"}"), 200);
    call_free(&c);
    CHECK_INT(run(&e, &c, "GET", "/sagas/g1", ADMIN, NULL), 200);
    CHECK_STR(mv_json_str(c.body, "sagaId"), "g1");
    CHECK_STR(mv_json_str(c.body, "definition"), "checkout");
    CHECK_STR(mv_json_str(c.body, "state"), "completed");
    json_t *step = json_array_get(json_object_get(c.body, "steps"), 0);
    CHECK_STR(mv_json_str(step, "name"), "reserve");
    CHECK(mv_json_str(step, "effectId") != NULL);
    CHECK(mv_json_str(step, "compensationEffectId") != NULL);
    CHECK(json_object_get(step, "compensationArgs") == NULL);
    CHECK(json_object_get(c.body, "createdAt") && json_object_get(c.body, "updatedAt"));
    call_free(&c);
    EXPECT("GET", "/sagas/g1", "alice", NULL, 403, "forbidden");
    EXPECT("GET", "/sagas/g1", NULL, NULL, 401, "unauthenticated");
    EXPECT("GET", "/sagas/missing", ADMIN, NULL, 404, "saga_not_found");
    char target[200] = "/sagas/";
    memset(target + 7, 'x', 129);
    target[136] = '\0';
    EXPECT("GET", target, ADMIN, NULL, 400, "invalid_argument");
    target[135] = '\0'; /* 128 characters: fine, just absent */
    EXPECT("GET", target, ADMIN, NULL, 404, "saga_not_found");
    EXPECT("DELETE", "/sagas/g1", ADMIN, NULL, 404, "not_found");
    env_close(&e);
}

TEST(resume_compensate_and_resolve_a_saga_in_manual_review) {
    env e;
    REQUIRE(env_open(&e, "rd_review.db"));
    http_sink_push(e.sink, &(http_sink_response){.path = "/charge", .status = 500});
    call c;
    CHECK_INT(run(&e, &c, "POST", "/sagas/checkout", ADMIN, "{\"sagaId\": \"m1\"}"), 200);
    CHECK_STR(mv_json_str(c.body, "state"), "manual-review");
    json_t *charge = json_array_get(json_object_get(c.body, "steps"), 1);
    char effect[64];
    snprintf(effect, sizeof effect, "%s", mv_json_str(charge, "effectId"));
    call_free(&c);
    int sent = http_sink_count(e.sink);

    EXPECT("POST", "/sagas/m1/compensate", ADMIN, NULL, 409, "saga_ambiguous_step");
    EXPECT("POST", "/sagas/m1/compensate", "alice", NULL, 403, "forbidden");
    EXPECT("POST", "/sagas/nope/compensate", ADMIN, NULL, 404, "saga_not_found");
    EXPECT("POST", "/sagas/nope/resume", ADMIN, NULL, 404, "saga_not_found");
    CHECK_INT(run(&e, &c, "POST", "/sagas/m1/resume", ADMIN, NULL), 200);
    CHECK_STR(mv_json_str(c.body, "state"), "manual-review"); /* unchanged */
    call_free(&c);
    CHECK_INT(http_sink_count(e.sink), sent);

    char body[512];
    EXPECT("POST", "/sagas/m1/resolve", "alice", "{}", 403, "forbidden");
    EXPECT("POST", "/sagas/m1/resolve", ADMIN, "{\"kind\": \"execution\"}", 400,
           "invalid_argument");
    EXPECT("POST", "/sagas/m1/resolve", ADMIN,
           "{\"kind\": \"execution\", \"step\": \"charge\", \"effectId\": \"x\", "
           "\"outcome\": \"committed\", \"note\": 1}",
           400, "invalid_argument");
    EXPECT("POST", "/sagas/m1/resolve", ADMIN,
           "{\"kind\": \"execution\", \"step\": \"charge\", \"effectId\": \"x\", "
           "\"outcome\": \"maybe\"}",
           400, "invalid_argument");
    EXPECT("POST", "/sagas/m1/resolve", ADMIN,
           "{\"kind\": \"execution\", \"step\": \"charge\", \"effectId\": \"wrong\", "
           "\"outcome\": \"committed\"}",
           409, "saga_resolution");
    EXPECT("POST", "/sagas/m1/resolve", ADMIN,
           "{\"kind\": \"execution\", \"step\": \"charge\", \"effectId\": \"x\", "
           "\"outcome\": \"committed\", \"errorCode\": 5}",
           400, "invalid_argument");
    snprintf(body, sizeof body,
             "{\"kind\": \"execution\", \"step\": \"charge\", \"effectId\": \"%s\", "
             "\"outcome\": \"committed\", \"result\": {\"paid\": 1}}",
             effect);
    CHECK_INT(run(&e, &c, "POST", "/sagas/m1/resolve", ADMIN, body), 200);
    CHECK_STR(mv_json_str(c.body, "state"), "running"); /* recorded only */
    call_free(&c);
    CHECK_INT(run(&e, &c, "POST", "/sagas/m1/resume", ADMIN, NULL), 200);
    CHECK_STR(mv_json_str(c.body, "state"), "completed");
    charge = json_array_get(json_object_get(c.body, "steps"), 1);
    CHECK_INT(json_integer_value(json_object_get(json_object_get(charge, "result"), "paid")), 1);
    call_free(&c);
    CHECK_INT(http_sink_count(e.sink), sent); /* no step ran again */
    /* completed: resume and compensate leave it alone */
    CHECK_INT(run(&e, &c, "POST", "/sagas/m1/compensate", ADMIN, NULL), 200);
    CHECK_STR(mv_json_str(c.body, "state"), "completed");
    call_free(&c);
    CHECK_INT(run(&e, &c, "POST", "/sagas/m1/resume", ADMIN, NULL), 200);
    CHECK_STR(mv_json_str(c.body, "state"), "completed");
    call_free(&c);
    CHECK_INT(http_sink_count(e.sink), sent);
    EXPECT("POST", "/sagas/m1/resolve", ADMIN, body, 409, "saga_resolution");
    env_close(&e);
}

TEST(resume_and_compensate_refuse_a_malformed_or_non_object_body_and_change_nothing) {
    env e;
    REQUIRE(env_open(&e, "rd_body.db"));
    http_sink_push(e.sink, &(http_sink_response){.path = "/charge", .status = 500});
    call c;
    CHECK_INT(run(&e, &c, "POST", "/sagas/checkout", ADMIN, "{\"sagaId\": \"b1\"}"), 200);
    json_t *before = json_incref(c.body);
    call_free(&c);
    int sent = http_sink_count(e.sink);
    const char *routes[] = {"/sagas/b1/resume", "/sagas/b1/compensate"};
    for (int i = 0; i < 2; i++) {
        EXPECT("POST", routes[i], ADMIN, "{\"a\":", 400, "invalid_json");
        EXPECT("POST", routes[i], ADMIN, "[]", 400, "invalid_argument");
        EXPECT("POST", routes[i], ADMIN, "7", 400, "invalid_argument");
        EXPECT("POST", routes[i], ADMIN, "{\"force\": true}", 400, "invalid_argument");
        /* the permission comes before the body: a stranger learns nothing about body rules */
        EXPECT("POST", routes[i], "alice", "{\"a\":", 403, "forbidden");
    }
    CHECK_INT(http_sink_count(e.sink), sent);
    CHECK_INT(run(&e, &c, "GET", "/sagas/b1", ADMIN, NULL), 200);
    CHECK(json_equal(c.body, before));
    call_free(&c);
    /* an empty body and {} are the same valid call */
    CHECK_INT(run(&e, &c, "POST", "/sagas/b1/resume", ADMIN, "{}"), 200);
    call_free(&c);
    CHECK_INT(run(&e, &c, "POST", "/sagas/b1/resume", ADMIN, ""), 200);
    call_free(&c);
    json_decref(before);
    env_close(&e);
}

TEST(a_not_committed_resolution_then_compensate_releases_what_was_done_when_due) {
    env e;
    REQUIRE(env_open(&e, "rd_notcommitted.db"));
    http_sink_push(e.sink, &(http_sink_response){.path = "/charge", .status = 504});
    call c;
    CHECK_INT(run(&e, &c, "POST", "/sagas/checkout", ADMIN, "{\"sagaId\": \"n1\"}"), 200);
    char effect[64], body[512];
    snprintf(effect, sizeof effect, "%s",
             mv_json_str(json_array_get(json_object_get(c.body, "steps"), 1), "effectId"));
    call_free(&c);
    snprintf(body, sizeof body,
             "{\"kind\": \"execution\", \"step\": \"charge\", \"effectId\": \"%s\", "
             "\"outcome\": \"not-committed\", \"errorCode\": \"card_declined\"}",
             effect);
    CHECK_INT(run(&e, &c, "POST", "/sagas/n1/resolve", ADMIN, body), 200);
    CHECK_STR(mv_json_str(c.body, "state"), "compensating");
    call_free(&c);
    /* the release fails once: 200, compensating, the step waits for its backoff */
    http_sink_push(e.sink, &(http_sink_response){.path = "/release", .status = 500});
    CHECK_INT(run(&e, &c, "POST", "/sagas/n1/compensate", ADMIN, NULL), 200);
    CHECK_STR(mv_json_str(c.body, "state"), "compensating");
    json_t *reserve = json_array_get(json_object_get(c.body, "steps"), 0);
    CHECK_STR(mv_json_str(reserve, "state"), "compensation-failed");
    CHECK_INT(json_integer_value(json_object_get(reserve, "nextAttemptAt")), e.now + 1000);
    call_free(&c);
    int sent = http_sink_count(e.sink);
    CHECK_INT(run(&e, &c, "POST", "/sagas/n1/compensate", ADMIN, NULL), 200);
    CHECK_STR(mv_json_str(c.body, "state"), "compensating"); /* not due: nothing sent */
    call_free(&c);
    CHECK_INT(http_sink_count(e.sink), sent);
    e.now += 1000;
    CHECK_INT(run(&e, &c, "POST", "/sagas/n1/compensate", ADMIN, NULL), 200);
    CHECK_STR(mv_json_str(c.body, "state"), "compensated");
    call_free(&c);
    CHECK_INT(http_sink_count(e.sink), sent + 1);
    env_close(&e);
}

TEST(a_saga_whose_definition_is_not_loaded_cannot_be_resumed) {
    env e;
    REQUIRE(env_open(&e, "rd_ghost.db"));
    mv_saga_book *other = mv_saga_book_new(NULL);
    const char *text = "{\"name\": \"ghost\", \"steps\": [{\"name\": \"s\", \"run\": {\"webhook\": "
                       "\"http://127.0.0.1:1/s\"}, \"compensate\": {\"webhook\": "
                       "\"http://127.0.0.1:1/c\"}}]}";
    json_t *j = NULL;
    REQUIRE(mv_json_parse(text, strlen(text), &j, NULL) == MV_OK);
    REQUIRE(mv_saga_book_add_json(other, j, "ghost.json", NULL) == MV_OK);
    json_decref(j);
    mv_saga_execute(e.engine, mv_saga_book_find(other, "ghost"), "gh1", json_null(), NULL, NULL,
                    NULL);
    mv_saga_book_free(other);
    EXPECT("GET", "/sagas/gh1", ADMIN, NULL, 200, NULL);
    EXPECT("POST", "/sagas/gh1/resume", ADMIN, NULL, 404, "saga_definition_not_found");
    EXPECT("POST", "/sagas/gh1/compensate", ADMIN, NULL, 404, "saga_definition_not_found");
    EXPECT("POST", "/sagas/gh1/resolve", ADMIN,
           "{\"kind\": \"execution\", \"step\": \"s\", \"effectId\": \"x\", "
           "\"outcome\": \"committed\"}",
           404, "saga_definition_not_found");
    /* the same id under another definition */
    EXPECT("POST", "/sagas/checkout", ADMIN, "{\"sagaId\": \"gh1\"}", 422, "saga_mismatch");
    env_close(&e);
}

TEST(unconfigured_approvals_and_sagas_answer_404_not_found) {
    env e;
    REQUIRE(env_open(&e, "rd_off.db"));
    e.routes.approvals = NULL;
    e.routes.book = NULL;
    EXPECT("GET", "/approvals/6f1c1b36-3f8e-4c55-9d0a-0b7f1a2e3c4d", "dave:is.admin", NULL, 404,
           "not_found");
    EXPECT("POST", "/approvals/6f1c1b36-3f8e-4c55-9d0a-0b7f1a2e3c4d/decision", "dave:is.admin",
           "{\"decision\": \"approved\"}", 404, "not_found");
    EXPECT("POST", "/sagas/checkout", ADMIN, "{\"sagaId\": \"x\"}", 404, "not_found");
    EXPECT("GET", "/sagas/x", ADMIN, NULL, 404, "not_found");
    EXPECT("POST", "/sagas/x/resume", ADMIN, NULL, 404, "not_found");
    e.routes.book = e.book;
    e.routes.engine = NULL;
    EXPECT("POST", "/sagas/x/resolve", ADMIN, "{}", 404, "not_found");
    CHECK_INT(http_sink_count(e.sink), 0);
    env_close(&e);
}

int main(void) {
    return RUN_TESTS(get_approval_is_for_the_principal_approvers_and_admins_of_the_same_tenant,
                     deciding_needs_the_approver_permission_and_records_the_caller,
                     starting_a_saga_answers_its_record_in_whatever_state_it_reached,
                     get_saga_needs_admin_and_a_valid_existing_id,
                     resume_compensate_and_resolve_a_saga_in_manual_review,
                     resume_and_compensate_refuse_a_malformed_or_non_object_body_and_change_nothing,
                     a_not_committed_resolution_then_compensate_releases_what_was_done_when_due,
                     a_saga_whose_definition_is_not_loaded_cannot_be_resumed,
                     unconfigured_approvals_and_sagas_answer_404_not_found);
}
