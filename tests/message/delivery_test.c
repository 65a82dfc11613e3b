/* delivery_test.c — the message service talking to the outside: the webhook payment provider
 * (one session per item even when the create is retried, refund on the action) and email from
 * creation to an SMTP server through the outbox (one mail per qualifying message, none for an
 * excluded title). */
#include <signal.h>

#include "fixture.h"
#include "support/http_sink.h"
#include "support/smtp_sink.h"

static const char *PAID_TEMPLATE =
    "{\"templateCd\": \"paid\", \"paymentCd\": \"deposit\","
    " \"receiverContent\": {\"title\": \"Pay {{amount}}\"}, \"prepare\": {\"toUser\": \"{{to}}\"},"
    " \"actions\": [{\"actionCd\": \"refund\", \"name\": \"Refund\", \"variant\": \"danger\","
    "   \"receiver\": true, \"handler\": {\"payment\": \"refund\"}}]}";

STORE_TEST(the_payment_webhook_opens_one_session_per_item_and_refunds_it) {
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_push(sink, &(http_sink_response){.body = "{\"sessionId\": \"sess-1\"}"});
    mv_payment_provider *pay = mv_payment_webhook_new(http_sink_url(sink), NULL);
    mv_service_options o = {.payment = pay};
    fixture f;
    REQUIRE(fixture_open_opts(&f, kind, "paywebhook.db", &o));
    json_t *t = json_loads(PAID_TEMPLATE, 0, NULL);
    mv_err err = {0};
    REQUIRE(mv_registry_register(f.registry, t, "<paid>", &err) == MV_OK);
    json_decref(t);
    mv_user u = {.id = "payer"};
    json_t *payload = json_pack("{s:s,s:i}", "to", "shop", "amount", 30);
    json_t *key = json_string("order-9");
    mv_create_request req = {
        .template_cd = "paid", .user = &u, .payload = payload, .client_request_id = key};
    json_t *m1 = NULL, *m2 = NULL;
    CHECK_CODE(mv_message_create(f.svc, &req, &m1, NULL, &err), MV_OK, &err);
    CHECK_CODE(mv_message_create(f.svc, &req, &m2, NULL, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(json_array_get(m1, 0), "paymentSession"), "sess-1");
    CHECK_INT(http_sink_count(sink), 1);
    http_sink_request r;
    REQUIRE(http_sink_get(sink, 0, &r));
    json_t *body = json_loads(r.body, 0, NULL);
    CHECK_STR(mv_json_str(body, "op"), "create");
    CHECK_STR(mv_json_str(body, "payerId"), "payer");
    CHECK_STR(mv_json_str(body, "paymentCd"), "deposit");
    CHECK(mv_valid_digest(http_sink_header(&r, "Idempotency-Key")));
    json_decref(body);
    http_sink_request_free(&r);
    mv_user shop = {.id = "shop"};
    mv_action_request ar = {.message_id = mv_json_str(json_array_get(m1, 0), "id"),
                            .action_cd = "refund",
                            .user = &shop};
    json_t *result = NULL;
    CHECK_CODE(mv_action_handle(f.svc, &ar, &result, &err), MV_OK, &err);
    json_decref(result);
    REQUIRE(http_sink_get(sink, 1, &r));
    body = json_loads(r.body, 0, NULL);
    CHECK_STR(mv_json_str(body, "op"), "refund");
    CHECK_STR(mv_json_str(body, "sessionId"), "sess-1");
    json_decref(body);
    http_sink_request_free(&r);
    json_decref(m1);
    json_decref(m2);
    json_decref(payload);
    json_decref(key);
    fixture_close(&f);
    mv_payment_webhook_free(pay);
    http_sink_stop(sink);
}

STORE_TEST(a_created_message_is_emailed_once_through_the_outbox_and_excluded_titles_never) {
    smtp_sink *smtp = smtp_sink_start();
    REQUIRE(smtp);
    json_t *exclusions = json_pack("[s]", "quiet");
    mv_service_options o = {.email = true, .email_exclusions = exclusions};
    fixture f;
    REQUIRE(fixture_open_opts(&f, kind, "email-e2e.db", &o));
    mv_code rc;
    json_decref(fixture_create(&f, "u1", "u2", NULL, &rc)); /* receiver title "Recv Title" */
    REQUIRE(rc == MV_OK);
    json_t *params = json_pack("{s:s,s:{s:s,s:s}}", "toUser", "u2", "receiverContent", "title",
                               " Quiet ", "long", "not mailed");
    json_t *n = NULL;
    mv_err err = {0};
    REQUIRE(mv_notification_create(f.svc, params, &n, &err) == MV_OK);
    json_t *map = json_pack("{s:s}", "u2", "u2@example.com");
    mv_directory *dir = NULL;
    REQUIRE(mv_directory_open_map(map, &dir, &err) == MV_OK);
    mv_email_config email = {.smtp = {.url = smtp_sink_url(smtp), .from = "noreply@example.com"},
                             .directory = dir};
    mv_outbox_config oc = {.email = &email, .clock = &f.clock};
    int delivered = 0;
    CHECK_CODE(mv_outbox_run_due(f.store, &oc, 10, &delivered, &err), MV_OK, &err);
    CHECK_INT(delivered, 1);
    CHECK_CODE(mv_outbox_run_due(f.store, &oc, 10, &delivered, &err), MV_OK, &err);
    CHECK_INT(delivered, 0);
    CHECK_INT(smtp_sink_accepted(smtp), 1);
    smtp_sink_message m;
    REQUIRE(smtp_sink_get(smtp, 0, &m));
    char *subject = smtp_sink_header(&m, "Subject");
    CHECK_STR(subject, "Recv Title");
    CHECK(m.nto == 1 && strcmp(m.to[0], "u2@example.com") == 0);
    CHECK(strstr(m.data, "Recv Long Widget") != NULL); /* the longer of long and short */
    free(subject);
    smtp_sink_message_free(&m);
    mv_directory_close(dir);
    json_decref(map);
    json_decref(n);
    json_decref(params);
    json_decref(exclusions);
    fixture_close(&f);
    smtp_sink_stop(smtp);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    return RUN_TESTS(
        the_payment_webhook_opens_one_session_per_item_and_refunds_it,
        a_created_message_is_emailed_once_through_the_outbox_and_excluded_titles_never);
}
