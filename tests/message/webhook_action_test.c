/* webhook_action_test.c — webhook handlers and prepare hooks against a loopback server: request
 * shape, signature, the attempt id as Idempotency-Key on every retry, and a server killed with
 * SIGKILL in the middle of a handler whose action another server completes after the lease. */
#include <signal.h>
#include <sys/wait.h>

#include "fixture.h"
#include "support/http_sink.h"
#include "support/victim.h"

static const char SECRET[] = "webhook-secret-for-tests";

static const char *WEBHOOK_TEMPLATE =
    "{\"templateCd\": \"hooked\", \"type\": \"request\","
    " \"receiverContent\": {\"title\": \"Book {{listing}}\"},"
    " \"prepare\": {\"toUser\": \"{{hostId}}\"},"
    " \"actions\": [{\"actionCd\": \"accept\", \"name\": \"Accept {{listing}}\", \"variant\": "
    "\"primary\","
    "   \"receiver\": true, \"handler\": {\"webhook\": \"%s/hooks/accept\"},"
    "   \"senderNotification\": \"accepted\"}]}";

static int register_hooked_at(mv_registry *registry, const char *sink_url) {
    char buf[2048];
    snprintf(buf, sizeof buf, WEBHOOK_TEMPLATE, sink_url);
    json_t *t = json_loads(buf, 0, NULL);
    mv_err err = {0};
    int ok = mv_registry_register(registry, t, "<hooked>", &err) == MV_OK;
    if (!ok) fprintf(stderr, "%s\n", err.message);
    json_decref(t);
    return ok;
}

static int register_hooked(mv_registry *registry, http_sink *sink) {
    return register_hooked_at(registry, http_sink_url(sink));
}

static int open_hooked(fixture *f, const char *kind, const char *name, http_sink *sink,
                       int64_t lease_ms, bool real_clock) {
    static mv_webhook_config wh = {
        .secret = SECRET, .secret_len = sizeof SECRET - 1, .timeout_ms = 20000};
    mv_service_options o = {.webhook = &wh, .action_lease_ms = lease_ms};
    static const mv_clock real = {0};
    if (real_clock) o.clock = &real;
    if (!fixture_open_opts(f, kind, name, &o)) return 0;
    return register_hooked(f->registry, sink);
}

static char *create_hooked(fixture *f) {
    mv_user u = {.id = "guest"};
    json_t *payload = json_pack("{s:s,s:s}", "hostId", "host", "listing", "Flat");
    mv_create_request req = {.template_cd = "hooked", .user = &u, .payload = payload};
    json_t *m = NULL;
    mv_err err = {0};
    mv_message_create(f->svc, &req, &m, NULL, &err);
    char *id = m ? strdup(first_id(m)) : NULL;
    json_decref(m);
    json_decref(payload);
    return id;
}

static mv_code press_accept(fixture *f, const char *id, json_t **result, mv_err *err) {
    mv_user u = {.id = "host"};
    json_t *input = json_pack("{s:s}", "note", "welcome");
    mv_action_request req = {.message_id = id, .action_cd = "accept", .user = &u, .input = input};
    json_t *r = NULL;
    mv_code rc = mv_action_handle(f->svc, &req, &r, err);
    json_decref(input);
    if (result)
        *result = r;
    else
        json_decref(r);
    return rc;
}

STORE_TEST(webhook_handler_gets_the_signed_request_and_its_body_is_the_result) {
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_push(sink, &(http_sink_response){.status = 200, .body = "{\"charged\": true}"});
    fixture f;
    REQUIRE(open_hooked(&f, kind, "hook.db", sink, 0, false));
    char *id = create_hooked(&f);
    REQUIRE(id);
    json_t *result = NULL;
    mv_err err = {0};
    CHECK_CODE(press_accept(&f, id, &result, &err), MV_OK, &err);
    CHECK(json_is_true(json_object_get(result, "charged")));
    http_sink_request r;
    REQUIRE(http_sink_get(sink, 0, &r));
    CHECK_STR(r.path, "/hooks/accept");
    char sig[72];
    mv_webhook_signature(SECRET, sizeof SECRET - 1, r.body, r.body_len, sig);
    CHECK_STR(http_sink_header(&r, "X-Missive-Signature"), sig);
    json_t *body = json_loads(r.body, 0, NULL);
    CHECK_STR(mv_json_str(json_object_get(body, "message"), "id"), id);
    CHECK_STR(mv_json_str(json_object_get(body, "action"), "name"), "Accept Flat");
    CHECK_STR(mv_json_str(json_object_get(body, "user"), "id"), "host");
    CHECK_STR(mv_json_str(json_object_get(body, "input"), "note"), "welcome");
    CHECK_STR(http_sink_header(&r, "Idempotency-Key"), mv_json_str(body, "attemptId"));
    json_decref(body);
    http_sink_request_free(&r);
    json_decref(result);
    free(id);
    fixture_close(&f);
    http_sink_stop(sink);
}

STORE_TEST(a_failing_webhook_is_retryable_and_the_retry_sends_the_same_key) {
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_push(sink, &(http_sink_response){.status = 503});
    fixture f;
    REQUIRE(open_hooked(&f, kind, "hookretry.db", sink, 0, false));
    char *id = create_hooked(&f);
    mv_err err = {0};
    CHECK_CODE(press_accept(&f, id, NULL, &err), MV_ACTION_RETRYABLE, &err);
    char attempt[64];
    mv_strlcpy(attempt, err.attempt_id, sizeof attempt);
    CHECK_CODE(press_accept(&f, id, NULL, &err), MV_OK, &err);
    http_sink_request a, b;
    REQUIRE(http_sink_get(sink, 0, &a) && http_sink_get(sink, 1, &b));
    CHECK_STR(http_sink_header(&a, "Idempotency-Key"), attempt);
    CHECK_STR(http_sink_header(&b, "Idempotency-Key"), attempt);
    http_sink_request_free(&a);
    http_sink_request_free(&b);
    free(id);
    fixture_close(&f);
    http_sink_stop(sink);
}

/* The victim: another server on the parent's store (lines: store URL, sink URL, message id). */
static void hook_victim(char **lines, int n, void *arg) {
    (void)arg;
    if (n != 3) _exit(2);
    fixture cf;
    memset(&cf, 0, sizeof cf);
    if (mv_store_open(lines[0], NULL, &cf.store, NULL) != MV_OK) _exit(3);
    cf.registry = mv_registry_new();
    if (!register_hooked_at(cf.registry, lines[1])) _exit(3);
    mv_webhook_config wh = {.secret = SECRET, .secret_len = sizeof SECRET - 1, .timeout_ms = 20000};
    mv_service_options o = {
        .store = cf.store, .registry = cf.registry, .webhook = &wh, .action_lease_ms = 600};
    mv_service_new(&o, &cf.svc, NULL);
    mv_err e = {0};
    press_accept(&cf, lines[2], NULL, &e);
}

STORE_TEST(a_server_killed_mid_handler_is_completed_by_another_after_the_lease) {
    victim victim;
    REQUIRE(victim_fork(&victim, hook_victim, NULL));
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    /* the first call hangs (the victim is killed meanwhile); later calls answer at once */
    http_sink_push(sink, &(http_sink_response){.status = 200, .delay_ms = 20000});
    fixture f;
    REQUIRE(open_hooked(&f, kind, "kill.db", sink, 600, true));
    char *id = create_hooked(&f);
    REQUIRE(id);
    REQUIRE(victim_send(&victim, (const char *[]){f.url, http_sink_url(sink), id}, 3));
    REQUIRE(victim_reached(&victim, sink, 60000));
    CHECK(victim_kill(&victim));
    mv_err err = {0};
    CHECK_CODE(press_accept(&f, id, NULL, &err), MV_ACTION_CONFLICT, &err); /* lease still live */
    mv_sleep_ms(700);
    CHECK_CODE(press_accept(&f, id, NULL, &err), MV_OK, &err);
    http_sink_request a, b;
    REQUIRE(http_sink_get(sink, 0, &a) && http_sink_get(sink, 1, &b));
    CHECK_STR(http_sink_header(&a, "Idempotency-Key"), http_sink_header(&b, "Idempotency-Key"));
    http_sink_request_free(&a);
    http_sink_request_free(&b);
    json_t *m = NULL;
    mv_message_get(f.svc, id, NULL, &m, &err);
    CHECK_STR(mv_json_str(m, "actionState"), "archived");
    json_decref(m);
    CHECK_INT(fixture_rows(f.store, 'm'), 2); /* the message and exactly one notification */
    free(id);
    fixture_close(&f);
    http_sink_stop(sink);
}

STORE_TEST(prepare_webhook_items_become_messages_and_a_bad_answer_is_prepare_failed) {
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_push(sink,
                   &(http_sink_response){
                       .body = "[{\"toUser\": \"a\", \"templateData\": {\"listing\": \"X\"}},"
                               " {\"toUser\": \"b\", \"templateData\": {\"listing\": \"Y\"}}]"});
    http_sink_push(sink, &(http_sink_response){.status = 500});
    http_sink_push(sink, &(http_sink_response){.body = "42"});
    fixture f;
    REQUIRE(fixture_open(&f, kind, "prep.db"));
    char buf[512];
    snprintf(buf, sizeof buf,
             "{\"templateCd\": \"prep\", \"receiverContent\": {\"title\": \"T {{listing}}\"},"
             " \"prepare\": {\"webhook\": \"%s/prepare\"}, \"actions\": []}",
             http_sink_url(sink));
    json_t *t = json_loads(buf, 0, NULL);
    mv_err err = {0};
    REQUIRE(mv_registry_register(f.registry, t, "<prep>", &err) == MV_OK);
    json_decref(t);
    const char *roles[] = {"guest"};
    mv_user u = {.id = "u1", .roles = roles, .nroles = 1};
    json_t *payload = json_pack("{s:i}", "n", 1);
    mv_create_request req = {.template_cd = "prep", .user = &u, .payload = payload};
    json_t *m = NULL;
    CHECK_CODE(mv_message_create(f.svc, &req, &m, NULL, &err), MV_OK, &err);
    CHECK_INT(json_array_size(m), 2);
    CHECK_STR(mv_json_str(json_object_get(json_array_get(m, 1), "receiverContent"), "title"),
              "T Y");
    json_decref(m);
    http_sink_request r;
    REQUIRE(http_sink_get(sink, 0, &r));
    json_t *body = json_loads(r.body, 0, NULL);
    CHECK_STR(mv_json_str(body, "templateCd"), "prep");
    CHECK_STR(mv_json_str(json_object_get(body, "user"), "id"), "u1");
    CHECK_INT(json_integer_value(json_object_get(json_object_get(body, "payload"), "n")), 1);
    json_decref(body);
    http_sink_request_free(&r);
    /* a 5xx says nothing definitive (prepare_failed over HTTP, but it would not fail a key);
     * an answer that is no item is a refusal */
    CHECK_CODE(mv_message_create(f.svc, &req, &m, NULL, &err), MV_PREPARE_UNAVAILABLE, &err);
    CHECK_STR(mv_code_name(err.code), "prepare_failed");
    CHECK(!mv_code_is_definitive(err.code));
    CHECK_CODE(mv_message_create(f.svc, &req, &m, NULL, &err), MV_PREPARE_FAILED, &err);
    CHECK(mv_code_is_definitive(err.code));
    CHECK_INT(fixture_rows(f.store, 'm'), 2);
    json_decref(payload);
    fixture_close(&f);
    http_sink_stop(sink);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    return RUN_TESTS(webhook_handler_gets_the_signed_request_and_its_body_is_the_result,
                     a_failing_webhook_is_retryable_and_the_retry_sends_the_same_key,
                     a_server_killed_mid_handler_is_completed_by_another_after_the_lease,
                     prepare_webhook_items_become_messages_and_a_bad_answer_is_prepare_failed);
}
