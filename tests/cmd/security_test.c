/* security_test.c — the holes of issue 12, tried as an attacker would, through a real missived
 * process on each store (DESIGN "Security rules"): tenants isolate messages, reservations and
 * sagas; a message the caller cannot see is 404 on every route whatever its state; an approved
 * attempt is retried only by its principal with the approved input; nobody approves their own
 * request; a repeated identity header is refused. */
#include <signal.h>
#include <sys/stat.h>

#include "missive/base.h"
#include "store/db.h"
#include "support/daemon_proc.h"
#include "support/http_sink.h"
#include "support/stores.h"

static const char APPROVAL_SECRET[] = "an-approval-secret-of-at-least-32-bytes!";

typedef struct {
    http_sink *sink;
    pid_t pid;
    int port;
    char dir[600];
    char store[600];
} rig;

/* extra: more top-level config members (",\"key\": …"), may be "". */
static int rig_start(rig *r, const char *kind, const char *name, const char *extra) {
    memset(r, 0, sizeof *r);
    r->sink = http_sink_start();
    if (!r->sink) return 0;
    const char *sink = http_sink_url(r->sink);
    char path[800], config[800], label[128];
    snprintf(label, sizeof label, "%s-%s", name, kind);
    mv_strlcpy(r->dir, test_tmp_path(label), sizeof r->dir);
    snprintf(path, sizeof path, "%s/templates", r->dir);
    if (mkdir(r->dir, 0700) || mkdir(path, 0700)) return 0;
    snprintf(path, sizeof path, "%s/templates/refund.json", r->dir);
    if (!test_write_file(
            path,
            "{\"templateCd\": \"refund\", \"receiverContent\": {\"title\": \"Refund\"},"
            " \"prepare\": {\"toRoles\": [\"finance\"]},"
            " \"actions\": [{\"actionCd\": \"approve\", \"name\": \"Approve\","
            "   \"variant\": \"primary\", \"receiver\": true,"
            "   \"approval\": {\"capability\": \"refunds.large\"},"
            "   \"handler\": {\"webhook\": \"%s/refund\"}}]}",
            sink))
        return 0;
    snprintf(path, sizeof path, "%s/templates/note.json", r->dir);
    if (!test_write_file(
            path, "{\"templateCd\": \"note\", \"receiverContent\": {\"title\": \"{{title}}\"},"
                  " \"prepare\": {\"toUser\": \"{{to}}\"},"
                  " \"actions\": [{\"actionCd\": \"ack\", \"name\": \"Ack\","
                  "   \"variant\": \"primary\", \"receiver\": true, \"handler\": null}]}"))
        return 0;
    /* item 6: URLs with credentials and a query string, whose calls fail */
    const char *authority = sink + strlen("http://");
    snprintf(path, sizeof path, "%s/templates/leaky.json", r->dir);
    if (!test_write_file(
            path,
            "{\"templateCd\": \"leaky\", \"receiverContent\": {\"title\": \"L\"},"
            " \"prepare\": {\"webhook\": \"http://hook:s3cr3t@%s/prepare?token=t0k3n\"},"
            " \"actions\": []}",
            authority))
        return 0;
    snprintf(path, sizeof path, "%s/templates/paid.json", r->dir);
    if (!test_write_file(
            path,
            "{\"templateCd\": \"paid\", \"paymentCd\": \"deposit\","
            " \"receiverContent\": {\"title\": \"P\"}, \"prepare\": {\"toUser\": \"bob\"},"
            " \"actions\": [{\"actionCd\": \"go\", \"name\": \"Go\", \"variant\": \"p\","
            "   \"receiver\": true, \"handler\": {\"saga\": \"ship\"}},"
            "  {\"actionCd\": \"hook\", \"name\": \"Hook\", \"variant\": \"p\","
            "   \"receiver\": true,"
            "   \"handler\": {\"webhook\": \"http://h:s3cr3t@%s/handler?token=t0k3n\"}}]}",
            authority))
        return 0;
    /* item 8: a condition whose work grows with the payload */
    snprintf(path, sizeof path, "%s/templates/cond.json", r->dir);
    if (!test_write_file(
            path, "{\"templateCd\": \"cond\", \"receiverContent\": {\"title\": \"c\"},"
                  " \"prepare\": {\"toUser\": \"{{to}}\"},"
                  " \"actions\": [{\"actionCd\": \"open\", \"name\": \"Open\", \"variant\": \"p\","
                  "   \"receiver\": true, \"handler\": null, \"condition\": {\"!=\": [{\"reduce\":"
                  "   [{\"var\": \"payload.items\"}, {\"cat\": [{\"var\": \"accumulator\"},"
                  "   {\"var\": \"current\"}]}, \"\"]}, \"x\"]}}]}"))
        return 0;
    snprintf(path, sizeof path, "%s/sagas", r->dir);
    if (mkdir(path, 0700)) return 0;
    snprintf(path, sizeof path, "%s/sagas/ship.json", r->dir);
    if (!test_write_file(path,
                         "{\"name\": \"ship\", \"steps\": [{\"name\": \"pack\","
                         " \"run\": {\"webhook\": \"%s/pack\"},"
                         " \"compensate\": {\"webhook\": \"%s/unpack\"}}]}",
                         sink, sink))
        return 0;
    const char *store = test_store_url(kind, name);
    if (!store) return 0;
    mv_strlcpy(r->store, store, sizeof r->store);
    snprintf(config, sizeof config, "%s/missived.json", r->dir);
    if (!test_write_file(config,
                         "{\"store\": \"%s\", \"templates\": \"%s/templates\","
                         " \"sagas\": \"%s/sagas\", \"auth\": {\"mode\": \"headers\"},"
                         " \"approvals\": {\"secretEnv\": \"MISSIVE_TEST_APPROVAL_SECRET\"},"
                         " \"payment\": {\"webhook\": \"http://p:s3cr3t@%s/pay?token=t0k3n\"}%s}",
                         store, r->dir, r->dir, authority, extra))
        return 0;
    setenv("MISSIVE_TEST_APPROVAL_SECRET", APPROVAL_SECRET, 1);
    r->port = test_free_port();
    char log[800];
    snprintf(log, sizeof log, "%s/daemon.log", r->dir);
    r->pid = test_daemon_start(config, r->port, NULL, log);
    return r->pid > 0;
}

static void rig_stop(rig *r) {
    CHECK_INT(test_daemon_stop(r->pid), 0);
    http_sink_stop(r->sink);
}

static int sink_calls(rig *r, const char *path) {
    int n = 0;
    for (int i = 0; i < http_sink_count(r->sink); i++) {
        http_sink_request q;
        if (!http_sink_get(r->sink, i, &q)) continue;
        n += strcmp(q.path, path) == 0;
        http_sink_request_free(&q);
    }
    return n;
}

/* POST /messages/new/<template> as headers; returns the first message id (malloc'd) or NULL. */
static char *create(rig *r, const char *tpl, const char *headers, const char *body) {
    char path[256];
    snprintf(path, sizeof path, "/messages/new/%s", tpl);
    test_reply c = test_http(r->port, "POST", path, headers, body);
    const char *id = mv_json_str(json_array_get(json_object_get(c.json, "messages"), 0), "id");
    char *out = c.status == 201 && id ? strdup(id) : NULL;
    test_reply_free(&c);
    return out;
}

/* The status of one request; *code (may be NULL) receives a copy of error.code ("" when none). */
static long call(rig *r, const char *method, const char *path, const char *headers,
                 const char *body, char code[64]) {
    test_reply t = test_http(r->port, method, path, headers, body);
    if (code) mv_strlcpy(code, test_reply_code(&t) ? test_reply_code(&t) : "", 64);
    long status = t.status;
    test_reply_free(&t);
    return status;
}

static long count_of(rig *r, const char *headers) {
    test_reply t = test_http(r->port, "GET", "/messages/count", headers, NULL);
    long n = t.status == 200 ? (long)json_integer_value(json_object_get(t.json, "count")) : -1;
    test_reply_free(&t);
    return n;
}

static long listed(rig *r, const char *headers) {
    test_reply t = test_http(r->port, "GET", "/messages", headers, NULL);
    long n = t.status == 200 ? (long)json_array_size(json_object_get(t.json, "messages")) : -1;
    test_reply_free(&t);
    return n;
}

/* ---- 4. tenants -------------------------------------------------------------------------- */

STORE_TEST(another_tenants_user_neither_lists_counts_reads_nor_acts_on_a_message) {
    rig r;
    REQUIRE(rig_start(&r, kind, "tenant_msgs", ""));
    const char *ana = "X-User-Id: ana\nX-Tenant-Id: acme";
    const char *bob_acme = "X-User-Id: bob\nX-Tenant-Id: acme";
    const char *bob_globex = "X-User-Id: bob\nX-Tenant-Id: globex";
    const char *bob_default = "X-User-Id: bob";
    const char *admin_globex = "X-User-Id: root\nX-Tenant-Id: globex\nX-User-Permissions: is.admin";
    char *id = create(&r, "note", ana, "{\"to\": \"bob\", \"title\": \"acme secret\"}");
    REQUIRE(id);
    CHECK_INT(listed(&r, bob_acme), 1);
    CHECK_INT(count_of(&r, bob_acme), 1);
    CHECK_INT(listed(&r, bob_globex), 0);
    CHECK_INT(count_of(&r, bob_globex), 0);
    CHECK_INT(listed(&r, bob_default), 0);
    CHECK_INT(count_of(&r, bob_default), 0);
    char path[256], code[64];
    snprintf(path, sizeof path, "/messages/%s", id);
    CHECK_INT(call(&r, "GET", path, bob_globex, NULL, code), 404);
    CHECK_STR(code, "message_not_found");
    snprintf(path, sizeof path, "/messages/%s/actions/receiver", id);
    CHECK_INT(call(&r, "GET", path, bob_globex, NULL, code), 404);
    CHECK_STR(code, "message_not_found");
    CHECK_INT(call(&r, "GET", path, admin_globex, NULL, code), 404); /* admin of another tenant */
    snprintf(path, sizeof path, "/messages/%s/action/ack", id);
    CHECK_INT(call(&r, "POST", path, bob_globex, "{}", code), 404);
    CHECK_STR(code, "message_not_found");
    CHECK_INT(call(&r, "POST", path, admin_globex, "{}", code), 404);
    CHECK_INT(count_of(&r, bob_acme), 1); /* nothing changed */
    CHECK_INT(call(&r, "POST", path, bob_acme, "{}", code), 200);
    CHECK_INT(count_of(&r, bob_acme), 0);
    free(id);
    rig_stop(&r);
}

STORE_TEST(the_same_idempotency_key_in_two_tenants_is_two_requests) {
    rig r;
    REQUIRE(rig_start(&r, kind, "tenant_keys", ""));
    const char *body = "{\"to\": \"bob\", \"title\": \"hello\"}";
    char *a = create(&r, "note", "X-User-Id: ana\nX-Tenant-Id: acme\nIdempotency-Key: k1", body);
    REQUIRE(a);
    test_reply g = test_http(r.port, "POST", "/messages/new/note",
                             "X-User-Id: ana\nX-Tenant-Id: globex\nIdempotency-Key: k1", body);
    CHECK_INT(g.status, 201);
    CHECK(!g.replayed); /* not acme's messages replayed to globex */
    const char *gid = mv_json_str(json_array_get(json_object_get(g.json, "messages"), 0), "id");
    CHECK(gid && strcmp(gid, a) != 0);
    test_reply_free(&g);
    g = test_http(r.port, "POST", "/messages/new/note",
                  "X-User-Id: ana\nX-Tenant-Id: acme\nIdempotency-Key: k1", body);
    CHECK_INT(g.status, 201);
    CHECK(g.replayed);
    CHECK_STR(mv_json_str(json_array_get(json_object_get(g.json, "messages"), 0), "id"), a);
    test_reply_free(&g);
    CHECK_INT(listed(&r, "X-User-Id: bob\nX-Tenant-Id: acme"), 1);
    CHECK_INT(listed(&r, "X-User-Id: bob\nX-Tenant-Id: globex"), 1);
    free(a);
    rig_stop(&r);
}

STORE_TEST(a_globex_admin_can_neither_read_nor_compensate_an_acme_saga) {
    rig r;
    REQUIRE(rig_start(&r, kind, "tenant_sagas", ""));
    const char *acme = "X-User-Id: root\nX-Tenant-Id: acme\nX-User-Permissions: is.admin";
    const char *globex = "X-User-Id: root\nX-Tenant-Id: globex\nX-User-Permissions: is.admin";
    const char *start = "{\"sagaId\": \"order-7\", \"input\": {\"sku\": \"lamp\"}}";
    char code[64];
    CHECK_INT(call(&r, "POST", "/sagas/ship", acme, start, code), 200);
    CHECK_INT(call(&r, "GET", "/sagas/order-7", globex, NULL, code), 404);
    CHECK_STR(code, "saga_not_found");
    CHECK_INT(call(&r, "POST", "/sagas/order-7/compensate", globex, NULL, code), 404);
    CHECK_STR(code, "saga_not_found");
    CHECK_INT(call(&r, "POST", "/sagas/order-7/resume", globex, NULL, code), 404);
    CHECK_INT(call(&r, "POST", "/sagas/order-7/resolve", globex,
                   "{\"kind\": \"execution\", \"step\": \"pack\", \"effectId\": \"e\","
                   " \"outcome\": \"committed\"}",
                   code),
              404);
    CHECK_INT(call(&r, "POST", "/sagas/ship", globex, start, code), 404); /* no replay either */
    CHECK_INT(sink_calls(&r, "/unpack"), 0);
    test_reply t = test_http(r.port, "GET", "/sagas/order-7", acme, NULL);
    CHECK_INT(t.status, 200);
    CHECK_STR(mv_json_str(t.json, "state"), "completed");
    test_reply_free(&t);
    rig_stop(&r);
}

/* An HS256 token for claims (JSON text), signed with secret. */
static const char *jwt_for(const char *claims, const char *secret) {
    static char tok[2048];
    const char *header = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
    char h[128], c[1024], sig[64];
    mv_b64url_encode(header, strlen(header), h);
    mv_b64url_encode(claims, strlen(claims), c);
    snprintf(tok, sizeof tok, "%s.%s", h, c);
    unsigned char mac[32];
    mv_hmac_sha256(secret, strlen(secret), tok, strlen(tok), mac);
    mv_b64url_encode(mac, 32, sig);
    size_t n = strlen(tok);
    snprintf(tok + n, sizeof tok - n, ".%s", sig);
    return tok;
}

static const char JWT_SECRET[] = "a-jwt-secret-of-at-least-thirty-two-bytes";

/* Restarts r's daemon in jwt mode (HS256 with JWT_SECRET); auth_extra: more members of "auth"
 * (",\"key\": …"), may be "". */
static bool restart_with_jwt(rig *r, const char *auth_extra) {
    if (test_daemon_stop(r->pid) != 0) return false;
    setenv("MISSIVE_TEST_JWT_SECRET", JWT_SECRET, 1);
    char config[800], log[800];
    snprintf(config, sizeof config, "%s/missived.json", r->dir);
    snprintf(log, sizeof log, "%s/daemon-jwt.log", r->dir);
    if (!test_write_file(
            config,
            "{\"store\": \"%s\", \"templates\": \"%s/templates\","
            " \"auth\": {\"mode\": \"jwt\", \"secretEnv\": \"MISSIVE_TEST_JWT_SECRET\"%s},"
            " \"approvals\": {\"secretEnv\": \"MISSIVE_TEST_APPROVAL_SECRET\"},"
            " \"payment\": {\"webhook\": \"%s/pay\"}, \"sagas\": \"%s/sagas\"}",
            r->store, r->dir, auth_extra, http_sink_url(r->sink), r->dir))
        return false;
    r->pid = test_daemon_start(config, r->port, NULL, log);
    return r->pid > 0;
}

STORE_TEST(a_jwt_of_another_tenant_sees_nothing_of_this_one) {
    rig r;
    REQUIRE(rig_start(&r, kind, "tenant_jwt", ""));
    REQUIRE(restart_with_jwt(&r, ""));
    const char *secret = JWT_SECRET;
    char ana[2200], bob_acme[2200], bob_globex[2200];
    snprintf(ana, sizeof ana, "Authorization: Bearer %s",
             jwt_for("{\"sub\":\"ana\",\"tenant\":\"acme\",\"exp\":4102444800}", secret));
    snprintf(bob_acme, sizeof bob_acme, "Authorization: Bearer %s",
             jwt_for("{\"sub\":\"bob\",\"tenant\":\"acme\",\"exp\":4102444800}", secret));
    snprintf(bob_globex, sizeof bob_globex, "Authorization: Bearer %s",
             jwt_for("{\"sub\":\"bob\",\"tenant\":\"globex\",\"exp\":4102444800}", secret));
    char *id = create(&r, "note", ana, "{\"to\": \"bob\", \"title\": \"acme only\"}");
    REQUIRE(id);
    CHECK_INT(listed(&r, bob_acme), 1);
    CHECK_INT(listed(&r, bob_globex), 0);
    CHECK_INT(count_of(&r, bob_globex), 0);
    char path[256], code[64];
    snprintf(path, sizeof path, "/messages/%s", id);
    CHECK_INT(call(&r, "GET", path, bob_globex, NULL, code), 404);
    CHECK_STR(code, "message_not_found");
    CHECK_INT(call(&r, "GET", path, bob_acme, NULL, code), 200);
    free(id);
    rig_stop(&r);
}

STORE_TEST(a_jwt_without_exp_is_401_unless_auth_require_exp_is_false) {
    rig r;
    REQUIRE(rig_start(&r, kind, "require_exp", ""));
    REQUIRE(restart_with_jwt(&r, ""));
    char forever[2200], hour[2200], code[64];
    snprintf(forever, sizeof forever, "Authorization: Bearer %s",
             jwt_for("{\"sub\":\"ana\"}", JWT_SECRET));
    char claims[128];
    snprintf(claims, sizeof claims, "{\"sub\":\"ana\",\"exp\":%lld}",
             (long long)(mv_now_ms() / 1000 + 3600));
    snprintf(hour, sizeof hour, "Authorization: Bearer %s", jwt_for(claims, JWT_SECRET));
    test_reply t = test_http(r.port, "GET", "/messages", forever, NULL);
    CHECK_INT(t.status, 401);
    CHECK_STR(test_reply_code(&t), "unauthenticated");
    const char *why = mv_json_str(json_object_get(t.json, "error"), "message");
    CHECK(why && strstr(why, "no exp"));
    test_reply_free(&t);
    CHECK_INT(call(&r, "GET", "/messages", hour, NULL, code), 200);
    /* the operator's choice: tokens that never expire */
    REQUIRE(restart_with_jwt(&r, ", \"requireExp\": false"));
    CHECK_INT(call(&r, "GET", "/messages", forever, NULL, code), 200);
    CHECK_INT(call(&r, "GET", "/messages", hour, NULL, code), 200);
    rig_stop(&r);
}

/* ---- 9. invisible is not found ----------------------------------------------------------- */

STORE_TEST(a_message_the_caller_cannot_see_is_not_found_on_the_action_route_in_every_state) {
    rig r;
    REQUIRE(rig_start(&r, kind, "oracle", ""));
    char *id = create(&r, "note", "X-User-Id: ana", "{\"to\": \"bob\", \"title\": \"t\"}");
    REQUIRE(id);
    char path[256], code[64];
    snprintf(path, sizeof path, "/messages/%s/action/ack", id);
    /* active: a stranger got 403 action_not_allowed before */
    CHECK_INT(call(&r, "POST", path, "X-User-Id: mallory", "{}", code), 404);
    CHECK_STR(code, "message_not_found");
    snprintf(path, sizeof path, "/messages/%s/action/nope", id);
    CHECK_INT(call(&r, "POST", path, "X-User-Id: mallory", "{}", code), 404);
    CHECK_STR(code, "message_not_found");
    snprintf(path, sizeof path, "/messages/%s/action/ack", id);
    CHECK_INT(call(&r, "POST", path, "X-User-Id: bob", "{}", code), 200);
    /* archived: a stranger got 410 message_archived before */
    CHECK_INT(call(&r, "POST", path, "X-User-Id: mallory", "{}", code), 404);
    CHECK_STR(code, "message_not_found");
    /* the receiver still gets the reference order: archived → 410 */
    CHECK_INT(call(&r, "POST", path, "X-User-Id: bob", "{}", code), 410);
    CHECK_INT(call(&r, "POST", "/messages/507f1f77bcf86cd799439011/action/ack",
                   "X-User-Id: mallory", "{}", code),
              404);
    CHECK_STR(code, "message_not_found");
    free(id);
    rig_stop(&r);
}

/* ---- 1. approvals bind retries ----------------------------------------------------------- */

STORE_TEST(a_retry_of_an_approved_attempt_runs_only_for_its_principal_with_the_approved_input) {
    rig r;
    REQUIRE(rig_start(&r, kind, "approval_retry", ""));
    http_sink_push(r.sink, &(http_sink_response){.path = "/refund", .status = 500});
    char *id = create(&r, "refund", "X-User-Id: requester", "{}");
    REQUIRE(id);
    char path[256], headers[1024], apath[256], code[64];
    snprintf(path, sizeof path, "/messages/%s/action/approve", id);
    const char *fbob = "X-User-Id: fbob\nX-User-Roles: finance";
    const char *fcarol = "X-User-Id: fcarol\nX-User-Roles: finance";
    test_reply a = test_http(r.port, "POST", path, fbob, "{\"amount\": 10}");
    REQUIRE(a.status == 202);
    snprintf(apath, sizeof apath, "/approvals/%s/decision", mv_json_str(a.json, "approvalId"));
    snprintf(headers, sizeof headers, "%s\nX-Resume-Token: %s", fbob,
             mv_json_str(a.json, "resumeToken"));
    test_reply_free(&a);
    CHECK_INT(call(&r, "POST", apath, "X-User-Id: boss\nX-User-Permissions: approvals.decide",
                   "{\"decision\": \"approved\"}", code),
              200);
    CHECK_INT(call(&r, "POST", path, headers, "{\"amount\": 10}", code), 409);
    CHECK_STR(code, "action_retryable");
    CHECK_INT(sink_calls(&r, "/refund"), 1);
    /* another principal of the role, without approval or token, with another input */
    CHECK_INT(call(&r, "POST", path, fcarol, "{\"amount\": 99999}", code), 403);
    CHECK_STR(code, "approval_binding");
    CHECK_INT(call(&r, "POST", path, fcarol, "{\"amount\": 10}", code), 403);
    /* the approved principal with another input */
    CHECK_INT(call(&r, "POST", path, fbob, "{\"amount\": 10000}", code), 403);
    CHECK_STR(code, "approval_binding");
    CHECK_INT(sink_calls(&r, "/refund"), 1);
    /* the approved principal with the approved input: the retry runs, with that input */
    CHECK_INT(call(&r, "POST", path, fbob, "{\"amount\": 10}", code), 200);
    CHECK_INT(sink_calls(&r, "/refund"), 2);
    http_sink_request q;
    REQUIRE(http_sink_get(r.sink, http_sink_count(r.sink) - 1, &q));
    json_t *body = json_loads(q.body, 0, NULL);
    CHECK_INT(json_integer_value(json_object_get(json_object_get(body, "input"), "amount")), 10);
    json_decref(body);
    http_sink_request_free(&q);
    free(id);
    rig_stop(&r);
}

/* ---- 5. self-approval -------------------------------------------------------------------- */

STORE_TEST(the_principal_of_an_approval_cannot_decide_it_unless_configured) {
    rig r;
    REQUIRE(rig_start(&r, kind, "self_approval", ""));
    char *id = create(&r, "refund", "X-User-Id: requester", "{}");
    REQUIRE(id);
    char path[256], apath[256], code[64];
    snprintf(path, sizeof path, "/messages/%s/action/approve", id);
    const char *bob = "X-User-Id: bob\nX-User-Roles: finance\nX-User-Permissions: approvals.decide";
    test_reply a = test_http(r.port, "POST", path, bob, "{}");
    REQUIRE(a.status == 202);
    snprintf(apath, sizeof apath, "/approvals/%s", mv_json_str(a.json, "approvalId"));
    test_reply_free(&a);
    char dpath[300];
    snprintf(dpath, sizeof dpath, "%s/decision", apath);
    CHECK_INT(call(&r, "POST", dpath, bob, "{\"decision\": \"approved\"}", code), 403);
    CHECK_STR(code, "approval_binding");
    test_reply g = test_http(r.port, "GET", apath, bob, NULL);
    CHECK_STR(mv_json_str(g.json, "state"), "pending");
    test_reply_free(&g);
    free(id);
    rig_stop(&r);

    /* approvals.allowSelfApproval: true lets the principal decide */
    REQUIRE(rig_start(&r, kind, "self_approval_on", ""));
    CHECK_INT(test_daemon_stop(r.pid), 0);
    char config[800], log[800];
    snprintf(config, sizeof config, "%s/missived.json", r.dir);
    snprintf(log, sizeof log, "%s/daemon2.log", r.dir);
    REQUIRE(test_write_file(config,
                            "{\"store\": \"%s\", \"templates\": \"%s/templates\","
                            " \"sagas\": \"%s/sagas\","
                            " \"auth\": {\"mode\": \"headers\"}, \"approvals\": {\"secretEnv\":"
                            " \"MISSIVE_TEST_APPROVAL_SECRET\", \"allowSelfApproval\": true}}",
                            test_store_url(kind, "self_approval_on2"), r.dir, r.dir));
    r.pid = test_daemon_start(config, r.port, NULL, log);
    REQUIRE(r.pid > 0);
    id = create(&r, "refund", "X-User-Id: requester", "{}");
    REQUIRE(id);
    snprintf(path, sizeof path, "/messages/%s/action/approve", id);
    a = test_http(r.port, "POST", path, bob, "{}");
    REQUIRE(a.status == 202);
    snprintf(dpath, sizeof dpath, "/approvals/%s/decision", mv_json_str(a.json, "approvalId"));
    test_reply_free(&a);
    CHECK_INT(call(&r, "POST", dpath, bob, "{\"decision\": \"approved\"}", code), 200);
    free(id);
    rig_stop(&r);
}

/* ---- 10. repeated identity headers ------------------------------------------------------- */

TEST(a_repeated_identity_header_is_refused_in_headers_mode) {
    rig r;
    REQUIRE(rig_start(&r, "sqlite", "dup_headers", ""));
    char *id = create(&r, "note", "X-User-Id: ana", "{\"to\": \"bob\", \"title\": \"t\"}");
    REQUIRE(id);
    const char *twice[] = {
        "X-User-Id: mallory\nX-User-Id: bob",
        "X-User-Id: bob\nX-User-Roles: a\nX-User-Roles: b",
        "X-User-Id: bob\nX-User-Permissions: x\nX-User-Permissions: is.admin",
        "X-User-Id: bob\nX-Tenant-Id: default\nX-Tenant-Id: acme",
    };
    char code[64];
    for (int i = 0; i < 4; i++) {
        CHECK_INT(call(&r, "GET", "/messages", twice[i], NULL, code), 400);
        CHECK_STR(code, "invalid_argument");
        CHECK_INT(call(&r, "POST", "/messages/new/note", twice[i], "{\"to\": \"x\"}", code), 400);
    }
    CHECK_INT(listed(&r, "X-User-Id: bob"), 1); /* one header is fine */
    CHECK_INT(listed(&r, "X-User-Id: x"), 0);   /* and nothing was created */
    free(id);
    rig_stop(&r);
}

/* ---- 6. nothing internal in a client-facing error --------------------------------------- */

/* The body names no URL, host:port, credential or query of the failing call. */
static bool body_leaks(const rig *r, const test_reply *t) {
    char *text = t->json ? json_dumps(t->json, JSON_COMPACT) : NULL;
    const char *authority = http_sink_url(r->sink) + strlen("http://");
    bool bad = !text || strstr(text, "http") || strstr(text, authority) || strstr(text, "s3cr3t") ||
               strstr(text, "t0k3n") || strstr(text, "127.0.0.1");
    if (bad) fprintf(stderr, "leaking body: %s\n", text ? text : "(none)");
    free(text);
    return bad;
}

static const char SQL_FAILURE[] = "SELECT action_failure_message FROM messages WHERE id = ?";

typedef struct {
    const char *id;
    char *out;
    size_t size;
} failure_arg;

static mv_code failure_tx(mv_db *db, void *ctx, mv_err *err) {
    failure_arg *a = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_FAILURE, &st, err, "s", a->id);
    if (st) mv_strlcpy(a->out, mv_stmt_text(st, 0), a->size);
    mv_stmt_done(st);
    return rc;
}

/* The failure text stored with a retryable attempt. */
static bool stored_failure(const char *url, const char *id, char *out, size_t size) {
    mv_store *s = NULL;
    mv_err err = {0};
    if (mv_store_open(url, NULL, &s, &err) != MV_OK) return false;
    failure_arg a = {id, out, size};
    mv_code rc = mv_store_read(s, failure_tx, &a, &err);
    mv_store_close(s);
    return rc == MV_OK;
}

/* The daemon log has the detail, but never the credentials or the query string. */
static void check_log(const rig *r) {
    char path[800];
    snprintf(path, sizeof path, "%s/daemon.log", r->dir);
    FILE *f = fopen(path, "r");
    REQUIRE(f);
    static char log[1 << 20];
    size_t n = fread(log, 1, sizeof log - 1, f);
    fclose(f);
    log[n] = '\0';
    CHECK(strstr(log, "/prepare") != NULL); /* the detail is there */
    CHECK(strstr(log, "s3cr3t") == NULL);
    CHECK(strstr(log, "t0k3n") == NULL);
}

TEST(error_bodies_and_replays_carry_the_contracts_words_and_the_log_a_redacted_detail) {
    rig r;
    REQUIRE(rig_start(&r, "sqlite", "leaks", ""));
    http_sink_push(r.sink, &(http_sink_response){.path = "/prepare", .status = 400});
    const char *ana = "X-User-Id: ana\nIdempotency-Key: leak-1";
    test_reply t = test_http(r.port, "POST", "/messages/new/leaky", ana, "{}");
    CHECK_INT(t.status, 502);
    CHECK_STR(test_reply_code(&t), "prepare_failed");
    CHECK(!body_leaks(&r, &t));
    test_reply_free(&t);
    /* the failed key replays the contract's words, not the stored internal text */
    t = test_http(r.port, "POST", "/messages/new/leaky", ana, "{}");
    CHECK_INT(t.status, 409);
    CHECK_STR(test_reply_code(&t), "client_request_failed");
    CHECK(!body_leaks(&r, &t));
    test_reply_free(&t);
    /* the payment provider refuses */
    http_sink_push(r.sink, &(http_sink_response){.path = "/pay", .status = 400});
    t = test_http(r.port, "POST", "/messages/new/paid", "X-User-Id: ana", "{}");
    CHECK_INT(t.status, 502);
    CHECK_STR(test_reply_code(&t), "payment_failed");
    CHECK_STR(mv_json_str(json_object_get(t.json, "error"), "message"),
              "payment session creation failed");
    CHECK(!body_leaks(&r, &t));
    test_reply_free(&t);
    http_sink_set_default(r.sink, &(http_sink_response){.body = "{\"sessionId\": \"s-1\"}"});
    char *id = create(&r, "paid", "X-User-Id: ana", "{}");
    REQUIRE(id);
    char path[256];
    /* a saga step answers 500: needs review, with its sagaId and no URL */
    http_sink_push(r.sink, &(http_sink_response){.path = "/pack", .status = 500});
    snprintf(path, sizeof path, "/messages/%s/action/go", id);
    t = test_http(r.port, "POST", path, "X-User-Id: bob", "{}");
    CHECK_INT(t.status, 409);
    CHECK_STR(test_reply_code(&t), "action_needs_review");
    CHECK(mv_json_str(json_object_get(t.json, "error"), "sagaId") != NULL);
    CHECK(!body_leaks(&r, &t));
    test_reply_free(&t);
    free(id);
    /* a webhook handler that cannot be reached: retryable, no libcurl text, no URL */
    id = create(&r, "paid", "X-User-Id: ana", "{}");
    REQUIRE(id);
    http_sink_push(r.sink, &(http_sink_response){.path = "/handler", .close_without_answer = true});
    snprintf(path, sizeof path, "/messages/%s/action/hook", id);
    t = test_http(r.port, "POST", path, "X-User-Id: bob", "{}");
    CHECK_INT(t.status, 409);
    CHECK_STR(test_reply_code(&t), "action_retryable");
    CHECK(!body_leaks(&r, &t));
    test_reply_free(&t);
    /* what the attempt remembers (the message's lastFailure) names no URL either */
    char failure[512] = "";
    CHECK(stored_failure(r.store, id, failure, sizeof failure));
    CHECK(failure[0] && !strstr(failure, "http") && !strstr(failure, "127.0.0.1"));
    free(id);
    rig_stop(&r);
    check_log(&r);
}

/* ---- 8. bounded conditions ---------------------------------------------------------------- */

TEST(
    a_condition_over_a_huge_payload_stops_quickly_the_action_is_not_allowed_and_a_warning_is_logged) {
    rig r;
    REQUIRE(rig_start(&r, "sqlite", "logic_bound", ""));
    /* small: the condition holds */
    char *small = create(&r, "cond", "X-User-Id: mallory", "{\"to\": \"bob\", \"items\": [\"a\"]}");
    REQUIRE(small);
    char path[256];
    snprintf(path, sizeof path, "/messages/%s/actions/receiver", small);
    test_reply t = test_http(r.port, "GET", path, "X-User-Id: bob", NULL);
    CHECK_INT(json_array_size(json_object_get(t.json, "actions")), 1);
    test_reply_free(&t);
    /* 30,000 items concatenated one by one: seconds and gigabytes without a bound */
    size_t n = 30000;
    char *body = malloc(n * 13 + 64);
    size_t off = (size_t)sprintf(body, "{\"to\": \"bob\", \"items\": [");
    for (size_t i = 0; i < n; i++)
        off += (size_t)sprintf(body + off, "%s\"0123456789\"", i ? "," : "");
    sprintf(body + off, "]}");
    char *id = create(&r, "cond", "X-User-Id: mallory", body);
    free(body);
    REQUIRE(id);
    int64_t t0 = mv_now_ms();
    snprintf(path, sizeof path, "/messages/%s/actions/receiver", id);
    t = test_http(r.port, "GET", path, "X-User-Id: bob", NULL);
    CHECK_INT(t.status, 200);
    CHECK_INT(json_array_size(json_object_get(t.json, "actions")), 0);
    test_reply_free(&t);
    char code[64];
    snprintf(path, sizeof path, "/messages/%s/action/open", id);
    CHECK_INT(call(&r, "POST", path, "X-User-Id: bob", "{}", code), 403);
    CHECK_STR(code, "action_not_allowed");
    int64_t took = mv_now_ms() - t0;
    printf("logic bound: a reduce/cat over 30000 items answered in %lld ms (GET and POST)\n",
           (long long)took);
    CHECK(took < 3000);
    rig_stop(&r);
    char log_path[800];
    snprintf(log_path, sizeof log_path, "%s/daemon.log", r.dir);
    FILE *f = fopen(log_path, "r");
    REQUIRE(f);
    char line[4096];
    int warned = 0;
    while (fgets(line, sizeof line, f))
        warned += strstr(line, "\"warn\"") && strstr(line, "work bound") &&
                  strstr(line, "\"templateCd\":\"cond\"") && strstr(line, "\"actionCd\":\"open\"");
    fclose(f);
    CHECK(warned >= 2); /* the GET and the POST */
    free(small);
    free(id);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    return RUN_TESTS(
        another_tenants_user_neither_lists_counts_reads_nor_acts_on_a_message,
        the_same_idempotency_key_in_two_tenants_is_two_requests,
        a_globex_admin_can_neither_read_nor_compensate_an_acme_saga,
        a_jwt_of_another_tenant_sees_nothing_of_this_one,
        a_jwt_without_exp_is_401_unless_auth_require_exp_is_false,
        a_message_the_caller_cannot_see_is_not_found_on_the_action_route_in_every_state,
        a_retry_of_an_approved_attempt_runs_only_for_its_principal_with_the_approved_input,
        the_principal_of_an_approval_cannot_decide_it_unless_configured,
        a_repeated_identity_header_is_refused_in_headers_mode,
        error_bodies_and_replays_carry_the_contracts_words_and_the_log_a_redacted_detail,
        a_condition_over_a_huge_payload_stops_quickly_the_action_is_not_allowed_and_a_warning_is_logged);
}
