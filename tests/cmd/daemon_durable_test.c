/* daemon_durable_test.c — approvals and webhook sagas through a real missived process: an action
 * that needs approval goes 202 → decide → 200 and its handler runs once; a webhook saga whose
 * third step is rejected compensates steps 2 and 1 in that order; an action whose handler is that
 * saga is compensated back to active. */
#include <signal.h>

#include "missive/base.h"
#include "support/daemon_proc.h"
#include "support/http_sink.h"
#include "test.h"

static const char APPROVAL_SECRET[] = "an-approval-secret-of-at-least-32-bytes!";

typedef struct {
    http_sink *sink;
    pid_t pid;
    int port;
} rig;

/* extra: more top-level config members (",\"key\": …"), or "". */
static int rig_start_with(rig *r, const char *name, const char *extra) {
    memset(r, 0, sizeof *r);
    r->sink = http_sink_start();
    if (!r->sink) return 0;
    /* step "ship" is rejected (conclusively not done); everything else answers 200 {} */
    http_sink_set_default(r->sink, &(http_sink_response){.status = 200, .body = "{\"ok\": true}"});
    const char *sink = http_sink_url(r->sink);
    char dir[600], path[800], config[800];
    mv_strlcpy(dir, test_tmp_path(name), sizeof dir);
    snprintf(path, sizeof path, "%s/templates", dir);
    if (mkdir(dir, 0700) || mkdir(path, 0700)) return 0;
    snprintf(path, sizeof path, "%s/templates/refund.json", dir);
    if (!test_write_file(
            path,
            "{\"templateCd\": \"refund\", \"receiverContent\": {\"title\": \"Refund\"},"
            " \"prepare\": {\"toRoles\": [\"finance\"]},"
            " \"actions\": [{\"actionCd\": \"approve\", \"name\": \"Approve\","
            "   \"variant\": \"primary\", \"receiver\": true,"
            "   \"approval\": {\"capability\": \"refunds.large\"},"
            "   \"handler\": {\"webhook\": \"%s/refund\"}},"
            "  {\"actionCd\": \"order\", \"name\": \"Order\", \"variant\": \"primary\","
            "   \"receiver\": true, \"handler\": {\"saga\": \"checkout3\"}}]}",
            sink))
        return 0;
    snprintf(path, sizeof path, "%s/sagas", dir);
    if (mkdir(path, 0700)) return 0;
    snprintf(path, sizeof path, "%s/sagas/checkout3.json", dir);
    if (!test_write_file(path,
                         "{\"name\": \"checkout3\", \"capability\": \"orders.checkout\","
                         " \"steps\": ["
                         "  {\"name\": \"reserve\", \"run\": {\"webhook\": \"%s/reserve\"},"
                         "   \"compensate\": {\"webhook\": \"%s/release\"}},"
                         "  {\"name\": \"charge\", \"run\": {\"webhook\": \"%s/charge\"},"
                         "   \"compensate\": {\"webhook\": \"%s/refund-charge\"}},"
                         "  {\"name\": \"ship\", \"run\": {\"webhook\": \"%s/ship\"},"
                         "   \"compensate\": {\"webhook\": \"%s/unship\"}}]}",
                         sink, sink, sink, sink, sink, sink))
        return 0;
    snprintf(config, sizeof config, "%s/missived.json", dir);
    if (!test_write_file(config,
                         "{\"store\": \"sqlite:%s/m.db\", \"templates\": \"%s/templates\","
                         " \"sagas\": \"%s/sagas\", \"auth\": {\"mode\": \"headers\"},"
                         " \"approvals\": {\"secretEnv\": \"MISSIVE_TEST_APPROVAL_SECRET\"}%s}",
                         dir, dir, dir, extra))
        return 0;
    setenv("MISSIVE_TEST_APPROVAL_SECRET", APPROVAL_SECRET, 1);
    r->port = test_free_port();
    char log[800];
    snprintf(log, sizeof log, "%s/daemon.log", dir);
    r->pid = test_daemon_start(config, r->port, NULL, log);
    return r->pid > 0;
}

static int rig_start(rig *r, const char *name) { return rig_start_with(r, name, ""); }

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

static char *create_refund(rig *r) {
    test_reply c = test_http(r->port, "POST", "/messages/new/refund", "X-User-Id: requester", "{}");
    const char *id = mv_json_str(json_array_get(json_object_get(c.json, "messages"), 0), "id");
    char *out = id ? strdup(id) : NULL;
    test_reply_free(&c);
    return out;
}

TEST(an_action_with_approval_goes_202_then_decision_then_200_and_runs_once) {
    rig r;
    REQUIRE(rig_start(&r, "approve-http"));
    char *id = create_refund(&r);
    REQUIRE(id);
    char path[256], headers[1024];
    snprintf(path, sizeof path, "/messages/%s/action/approve", id);
    const char *ana = "X-User-Id: ana\nX-User-Roles: finance";
    test_reply a = test_http(r.port, "POST", path, ana, "{}");
    CHECK_INT(a.status, 202);
    CHECK_STR(mv_json_str(a.json, "status"), "approval_required");
    const char *approval = mv_json_str(a.json, "approvalId");
    const char *token = mv_json_str(a.json, "resumeToken");
    REQUIRE(approval && token);
    CHECK_INT(sink_calls(&r, "/refund"), 0);

    char apath[256];
    snprintf(apath, sizeof apath, "/approvals/%s/decision", approval);
    test_reply d = test_http(r.port, "POST", apath, ana, "{\"decision\": \"approved\"}");
    CHECK_INT(d.status, 403); /* the actor is no approver */
    test_reply_free(&d);
    d = test_http(r.port, "POST", apath, "X-User-Id: boss\nX-User-Permissions: approvals.decide",
                  "{\"decision\": \"approved\"}");
    CHECK_INT(d.status, 200);
    CHECK_STR(mv_json_str(d.json, "state"), "approved");
    CHECK_STR(mv_json_str(d.json, "decidedBy"), "boss");
    CHECK(json_object_get(d.json, "resumeToken") == NULL);
    test_reply_free(&d);
    /* decided already: a second decision is refused in the same transaction; an unknown one is
     * not found (both answered from the decision's commit) */
    d = test_http(r.port, "POST", apath, "X-User-Id: boss\nX-User-Permissions: approvals.decide",
                  "{\"decision\": \"denied\"}");
    CHECK_INT(d.status, 409);
    CHECK_STR(test_reply_code(&d), "approval_decision_rejected");
    test_reply_free(&d);
    char other[256];
    mv_strlcpy(other, apath, sizeof other);
    char *last = other + strlen("/approvals/") + strlen(approval) - 1;
    *last = *last == '0' ? '1' : '0'; /* a well-formed id nobody has */
    d = test_http(r.port, "POST", other, "X-User-Id: boss\nX-User-Permissions: approvals.decide",
                  "{\"decision\": \"approved\"}");
    CHECK_INT(d.status, 404);
    CHECK_STR(test_reply_code(&d), "approval_not_found");
    test_reply_free(&d);

    snprintf(headers, sizeof headers, "X-User-Id: bob\nX-User-Roles: finance\nX-Resume-Token: %s",
             token);
    test_reply b = test_http(r.port, "POST", path, headers, "{}");
    CHECK_INT(b.status, 403);
    CHECK_STR(test_reply_code(&b), "approval_binding");
    test_reply_free(&b);
    snprintf(headers, sizeof headers, "%s\nX-Resume-Token: %s", ana, token);
    b = test_http(r.port, "POST", path, headers, "{}");
    CHECK_INT(b.status, 200);
    CHECK(json_is_true(json_object_get(json_object_get(b.json, "result"), "ok")));
    test_reply_free(&b);
    CHECK_INT(sink_calls(&r, "/refund"), 1);
    b = test_http(r.port, "POST", path, headers, "{}");
    CHECK_INT(b.status, 410);
    test_reply_free(&b);
    CHECK_INT(sink_calls(&r, "/refund"), 1);
    test_reply_free(&a);
    free(id);
    rig_stop(&r);
}

TEST(a_webhook_saga_failing_at_step_three_compensates_two_then_one) {
    rig r;
    REQUIRE(rig_start(&r, "saga-http"));
    http_sink_push(r.sink, &(http_sink_response){.path = "/ship", .status = 400});
    const char *admin = "X-User-Id: ops\nX-User-Permissions: is.admin";
    test_reply s = test_http(r.port, "POST", "/sagas/checkout3", "X-User-Id: ops",
                             "{\"sagaId\": \"order-1\", \"input\": {\"sku\": \"lamp\"}}");
    CHECK_INT(s.status, 403);
    test_reply_free(&s);
    s = test_http(r.port, "POST", "/sagas/checkout3", admin,
                  "{\"sagaId\": \"order-1\", \"input\": {\"sku\": \"lamp\"}}");
    CHECK_INT(s.status, 200);
    CHECK_STR(mv_json_str(s.json, "state"), "compensated");
    test_reply_free(&s);
    const char *expected[] = {"/reserve", "/charge", "/ship", "/refund-charge", "/release"};
    CHECK_INT(http_sink_count(r.sink), 5);
    for (int i = 0; i < 5; i++) {
        http_sink_request q;
        REQUIRE(http_sink_get(r.sink, i, &q));
        CHECK_STR(q.path, expected[i]);
        json_t *body = json_loads(q.body, 0, NULL);
        const char *key = mv_json_str(body, i < 3 ? "effectId" : "compensationEffectId");
        CHECK_STR(http_sink_header(&q, "Idempotency-Key"), key);
        json_decref(body);
        http_sink_request_free(&q);
    }
    /* the same id again: the record as it is, marked as a replay; another input: 422 */
    s = test_http(r.port, "POST", "/sagas/checkout3", admin,
                  "{\"sagaId\": \"order-1\", \"input\": {\"sku\": \"lamp\"}}");
    CHECK_INT(s.status, 200);
    CHECK(s.replayed);
    test_reply_free(&s);
    s = test_http(r.port, "POST", "/sagas/checkout3", admin,
                  "{\"sagaId\": \"order-1\", \"input\": {\"sku\": \"desk\"}}");
    CHECK_INT(s.status, 422);
    CHECK_STR(test_reply_code(&s), "saga_mismatch");
    test_reply_free(&s);
    CHECK_INT(http_sink_count(r.sink), 5);
    rig_stop(&r);
}

TEST(an_action_whose_saga_is_compensated_is_active_again) {
    rig r;
    REQUIRE(rig_start(&r, "saga-action-http"));
    http_sink_push(r.sink, &(http_sink_response){.path = "/ship", .status = 400});
    char *id = create_refund(&r);
    REQUIRE(id);
    char path[256];
    snprintf(path, sizeof path, "/messages/%s/action/order", id);
    const char *ana = "X-User-Id: ana\nX-User-Roles: finance";
    test_reply a = test_http(r.port, "POST", path, ana, "{}");
    CHECK_INT(a.status, 409);
    CHECK_STR(test_reply_code(&a), "action_compensated");
    const char *saga = mv_json_str(json_object_get(a.json, "error"), "sagaId");
    CHECK(saga && mv_valid_uuid(saga));
    test_reply_free(&a);
    snprintf(path, sizeof path, "/messages/%s", id);
    a = test_http(r.port, "GET", path, ana, NULL);
    CHECK_STR(mv_json_str(a.json, "actionState"), "active");
    test_reply_free(&a);
    /* the next press is a new saga, which now succeeds */
    snprintf(path, sizeof path, "/messages/%s/action/order", id);
    a = test_http(r.port, "POST", path, ana, "{}");
    CHECK_INT(a.status, 200);
    CHECK(json_object_get(json_object_get(a.json, "result"), "ship") != NULL);
    test_reply_free(&a);
    CHECK_INT(sink_calls(&r, "/reserve"), 2);
    free(id);
    rig_stop(&r);
}

/* True when the bytes of file path contain needle. */
static bool file_contains(const char *path, const char *needle) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    static char buf[4 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return memmem(buf, n, needle, strlen(needle)) != NULL;
}

TEST(saga_encryption_in_the_config_keeps_saga_data_sealed_at_rest) {
    setenv("MISSIVE_TEST_SAGA_KEY", "0123456789abcdef0123456789abcdef", 1);
    rig r;
    REQUIRE(rig_start_with(&r, "saga-sealed",
                           ", \"sagaEncryption\": {\"keyEnv\": \"MISSIVE_TEST_SAGA_KEY\"}"));
    http_sink_set_default(
        r.sink, &(http_sink_response){.status = 200, .body = "{\"receipt\": \"rcpt-plain\"}"});
    const char *admin = "X-User-Id: ops\nX-User-Permissions: is.admin";
    test_reply s =
        test_http(r.port, "POST", "/sagas/checkout3", admin,
                  "{\"sagaId\": \"sealed-1\", \"input\": {\"card\": \"card-plaintext\"}}");
    CHECK_INT(s.status, 200);
    CHECK_STR(mv_json_str(s.json, "state"), "completed");
    CHECK_STR(mv_json_str(json_object_get(s.json, "input"), "card"), "card-plaintext");
    test_reply_free(&s);
    rig_stop(&r);
    char db[800], wal[820];
    snprintf(db, sizeof db, "%s/m.db", test_tmp_path("saga-sealed"));
    snprintf(wal, sizeof wal, "%s-wal", db);
    CHECK(!file_contains(db, "card-plaintext") && !file_contains(wal, "card-plaintext"));
    CHECK(!file_contains(db, "rcpt-plain") && !file_contains(wal, "rcpt-plain"));
    CHECK(file_contains(db, "enc:v1:") || file_contains(wal, "enc:v1:"));
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    return RUN_TESTS(an_action_with_approval_goes_202_then_decision_then_200_and_runs_once,
                     a_webhook_saga_failing_at_step_three_compensates_two_then_one,
                     an_action_whose_saga_is_compensated_is_active_again,
                     saga_encryption_in_the_config_keeps_saga_data_sealed_at_rest);
}
