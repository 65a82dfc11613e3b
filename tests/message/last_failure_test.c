/* last_failure_test.c — a retryable message says why: lastFailure carries the handler's own words
 * (its {"error": {"code", "message"}}, or what happened on the wire) and never a URL, on both
 * stores; the next attempt that succeeds clears it. Handlers are webhooks on a loopback sink. */
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fixture.h"
#include "support/http_sink.h"

static const char *TEMPLATE =
    "{\"templateCd\": \"hooked\", \"type\": \"request\","
    " \"receiverContent\": {\"title\": \"Book {{listing}}\"},"
    " \"prepare\": {\"toUser\": \"{{hostId}}\"},"
    " \"actions\": [{\"actionCd\": \"accept\", \"name\": \"Accept\", \"variant\": \"primary\","
    "   \"receiver\": true, \"handler\": {\"webhook\": \"%s/hooks/accept?token=s3cret\"}}]}";

/* A fixture whose handler URL is base (with credentials and a query string in the template). */
static int open_with(fixture *f, const char *kind, const char *name, const char *base) {
    static mv_webhook_config wh = {.timeout_ms = 400, .connect_timeout_ms = 300};
    static const mv_clock real = {0};
    mv_service_options o = {.webhook = &wh, .clock = &real};
    if (!fixture_open_opts(f, kind, name, &o)) return 0;
    char buf[2048];
    snprintf(buf, sizeof buf, TEMPLATE, base);
    json_t *t = json_loads(buf, 0, NULL);
    mv_err err = {0};
    int ok = mv_registry_register(f->registry, t, "<hooked>", &err) == MV_OK;
    if (!ok) fprintf(stderr, "%s\n", err.message);
    json_decref(t);
    return ok;
}

static char *create(fixture *f) {
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

static mv_code press(fixture *f, const char *id, mv_err *err) {
    mv_user u = {.id = "host"};
    mv_action_request req = {.message_id = id, .action_cd = "accept", .user = &u};
    json_t *r = NULL;
    mv_code rc = mv_action_handle(f->svc, &req, &r, err);
    json_decref(r);
    return rc;
}

/* The message as its receiver sees it (a new reference). */
static json_t *load(fixture *f, const char *id) {
    mv_user u = {.id = "host"};
    json_t *m = NULL;
    mv_message_get(f->svc, id, &u, &m, NULL);
    return m;
}

/* No "://" and none of the sink's address in any string of the failure. */
static int has_no_url(const json_t *failure, const char *address) {
    char *text = json_dumps(failure, JSON_COMPACT);
    int ok = text && !strstr(text, "://") && !strstr(text, address) && !strstr(text, "s3cret");
    if (!ok) fprintf(stderr, "lastFailure leaks: %s\n", text ? text : "(null)");
    free(text);
    return ok;
}

STORE_TEST(a_handler_answering_500_with_an_error_body_is_the_last_failure_until_a_success) {
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    /* the handler's words name a URL of its own: they are kept, the URL is not */
    http_sink_push(sink, &(http_sink_response){
                             .status = 500,
                             .body = "{\"error\": {\"code\": \"card_declined\", \"message\": "
                                     "\"card declined, see https://pay.example/help?id=9\"}}"});
    fixture f;
    REQUIRE(open_with(&f, kind, "lf500", http_sink_url(sink)));
    char *id = create(&f);
    REQUIRE(id);
    json_t *before = load(&f, id);
    CHECK(json_is_null(json_object_get(before, "lastFailure")));
    json_decref(before);

    mv_err err = {0};
    CHECK_CODE(press(&f, id, &err), MV_ACTION_RETRYABLE, &err);
    json_t *m = load(&f, id);
    json_t *lf = json_object_get(m, "lastFailure");
    CHECK_STR(mv_json_str(m, "actionState"), "retryable");
    CHECK_STR(mv_json_str(lf, "code"), "card_declined");
    CHECK_STR(mv_json_str(lf, "message"), "card declined, see [url]");
    CHECK_STR(mv_json_str(lf, "actionAttemptId"), mv_json_str(m, "actionAttemptId"));
    CHECK(json_integer_value(json_object_get(lf, "at")) > 0);
    CHECK(has_no_url(lf, http_sink_url(sink) + 7));
    json_decref(m);

    /* the next attempt succeeds: the message is archived and says nothing of the old failure */
    CHECK_CODE(press(&f, id, &err), MV_OK, &err);
    m = load(&f, id);
    CHECK_STR(mv_json_str(m, "actionState"), "archived");
    CHECK(json_is_null(json_object_get(m, "lastFailure")));
    json_decref(m);
    free(id);
    fixture_close(&f);
    http_sink_stop(sink);
}

STORE_TEST(a_handler_answering_500_without_a_body_is_named_by_its_status) {
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_push(sink, &(http_sink_response){.status = 503, .body = "<html>busy</html>"});
    fixture f;
    REQUIRE(open_with(&f, kind, "lf503", http_sink_url(sink)));
    char *id = create(&f);
    REQUIRE(id);
    mv_err err = {0};
    CHECK_CODE(press(&f, id, &err), MV_ACTION_RETRYABLE, &err);
    json_t *m = load(&f, id);
    json_t *lf = json_object_get(m, "lastFailure");
    CHECK_STR(mv_json_str(lf, "code"), "upstream_status");
    CHECK_STR(mv_json_str(lf, "message"), "HTTP 503");
    CHECK(has_no_url(lf, http_sink_url(sink) + 7));
    json_decref(m);
    free(id);
    fixture_close(&f);
    http_sink_stop(sink);
}

STORE_TEST(a_handler_that_times_out_is_a_timeout_without_its_address) {
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_push(sink, &(http_sink_response){.status = 200, .delay_ms = 3000});
    fixture f;
    REQUIRE(open_with(&f, kind, "lftimeout", http_sink_url(sink)));
    char *id = create(&f);
    REQUIRE(id);
    mv_err err = {0};
    CHECK_CODE(press(&f, id, &err), MV_ACTION_RETRYABLE, &err);
    json_t *m = load(&f, id);
    json_t *lf = json_object_get(m, "lastFailure");
    CHECK_STR(mv_json_str(lf, "code"), "upstream_timeout");
    CHECK_STR(mv_json_str(lf, "message"), "timed out");
    CHECK(has_no_url(lf, http_sink_url(sink) + 7));
    json_decref(m);
    free(id);
    fixture_close(&f);
    http_sink_stop(sink);
}

/* A loopback port nothing listens on (bound, then closed). */
static int dead_port(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(s, (struct sockaddr *)&a, &n))
        return -1;
    close(s);
    return ntohs(a.sin_port);
}

STORE_TEST(a_handler_refusing_connections_is_unreachable_without_its_address) {
    int port = dead_port();
    REQUIRE(port > 0);
    char base[64], address[32];
    snprintf(base, sizeof base, "http://user:pw@127.0.0.1:%d", port);
    snprintf(address, sizeof address, "127.0.0.1:%d", port);
    fixture f;
    REQUIRE(open_with(&f, kind, "lfrefused", base));
    char *id = create(&f);
    REQUIRE(id);
    mv_err err = {0};
    CHECK_CODE(press(&f, id, &err), MV_ACTION_RETRYABLE, &err);
    json_t *m = load(&f, id);
    json_t *lf = json_object_get(m, "lastFailure");
    CHECK_STR(mv_json_str(lf, "code"), "upstream_unreachable");
    CHECK_STR(mv_json_str(lf, "message"), "connection refused");
    CHECK(has_no_url(lf, address));
    /* the client-facing error of the press says no more than lastFailure */
    CHECK(!strstr(err.message, "://") && !strstr(err.message, address));
    json_decref(m);
    free(id);
    fixture_close(&f);
}

TEST(public_text_drops_urls_and_control_characters_and_stays_short) {
    char out[256];
    mv_webhook_public_text("see http://a.b/c?x=1 or (https://d.e) now\n\tok", out, sizeof out);
    CHECK_STR(out, "see [url] or ([url]) now  ok");
    char longer[600];
    memset(longer, 'x', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    mv_webhook_public_text(longer, out, sizeof out);
    CHECK_INT((long long)strlen(out), 200);
    mv_webhook_public_text("caf\xc3\xa9", out, 5); /* never half a UTF-8 sequence */
    CHECK_STR(out, "caf");
}

int main(void) {
    return RUN_TESTS(a_handler_answering_500_with_an_error_body_is_the_last_failure_until_a_success,
                     a_handler_answering_500_without_a_body_is_named_by_its_status,
                     a_handler_that_times_out_is_a_timeout_without_its_address,
                     a_handler_refusing_connections_is_unreachable_without_its_address,
                     public_text_drops_urls_and_control_characters_and_stays_short);
}
