/* schedule_stream_test.c — scheduled send against a real missived on both stores, with a raw-socket
 * SSE client: a note created with sendAt 1.5 s ahead is 201 scheduled, 404 to its receiver and
 * absent from the receiver's stream until sendAt, then the `send` timer (within a second while the
 * daemon runs) sends message.created to the receiver's stream and the message answers active;
 * cancel is 409 message_already_sent after sendAt, 404 to the receiver, 200 cancelled before. */
#include <stdlib.h>

#include "missive/base.h"
#include "support/daemon_proc.h"
#include "support/sse_client.h"
#include "support/stores.h"

/* ana's note to bob at send_at: the created message's id (static) or "". */
static const char *send_note_at(int port, int64_t send_at, char *state, size_t size) {
    static char id[25];
    char body[128];
    snprintf(body, sizeof body, "{\"to\": \"bob\", \"n\": 1, \"sendAt\": %lld}",
             (long long)send_at);
    test_reply r = test_http(port, "POST", "/messages/new/note", "X-User-Id: ana\n", body);
    json_t *m = json_array_get(json_object_get(r.json, "messages"), 0);
    snprintf(id, sizeof id, "%s",
             r.status == 201 && mv_json_str(m, "id") ? mv_json_str(m, "id") : "");
    snprintf(state, size, "%s", mv_json_str(m, "actionState") ? mv_json_str(m, "actionState") : "");
    if (json_integer_value(json_object_get(m, "sendAt")) != send_at) id[0] = 0;
    test_reply_free(&r);
    return id;
}

static int status_of(int port, const char *method, const char *path, const char *who) {
    char hdr[64];
    snprintf(hdr, sizeof hdr, "X-User-Id: %s\n", who);
    test_reply r = test_http(port, method, path, hdr, method[0] == 'P' ? "{}" : NULL);
    int s = r.status;
    test_reply_free(&r);
    return s;
}

STORE_TEST(a_scheduled_note_reaches_the_receivers_stream_at_send_at_and_cancel_answers_by_time) {
    sse_env e;
    REQUIRE(sse_env_init(&e, kind, "schedule_stream", NULL, ", \"timers\": {\"pollMs\": 100}"));
    int port;
    pid_t pid = sse_env_start(&e, &port);
    REQUIRE(pid > 0);
    sse *bob = sse_open(port, "/messages/stream", "X-User-Id: bob\r\n");
    sse_event ev;
    CHECK(sse_wait(bob, "counts", 2000, &ev));
    int64_t at = mv_now_ms() + 1500;
    char state[32], id[25], path[96];
    mv_strlcpy(id, send_note_at(port, at, state, sizeof state), sizeof id);
    REQUIRE(id[0]);
    CHECK_STR(state, "scheduled");
    snprintf(path, sizeof path, "/messages/%s", id);
    CHECK_INT(status_of(port, "GET", path, "bob"), 404);
    CHECK_INT(status_of(port, "GET", path, "ana"), 200);
    test_reply r = test_http(port, "GET", "/messages?scheduled=true", "X-User-Id: ana\n", NULL);
    CHECK_INT(json_array_size(json_object_get(r.json, "messages")), 1);
    test_reply_free(&r);
    r = test_http(port, "GET", "/messages?scheduled=maybe", "X-User-Id: ana\n", NULL);
    CHECK_INT(r.status, 400);
    test_reply_free(&r);
    /* nothing on bob's stream before sendAt; message.created within a second after it */
    CHECK(sse_wait(bob, "message.created", 6000, &ev));
    CHECK(sse_data_has_id(&ev, id));
    CHECK(mv_now_ms() >= at && mv_now_ms() < at + 2000);
    r = test_http(port, "GET", path, "X-User-Id: bob\n", NULL);
    CHECK_INT(r.status, 200);
    CHECK_STR(mv_json_str(r.json, "actionState"), "active");
    test_reply_free(&r);
    snprintf(path, sizeof path, "/messages/%s/cancel", id);
    r = test_http(port, "POST", path, "X-User-Id: ana\n", "{}");
    CHECK_INT(r.status, 409);
    CHECK_STR(mv_json_str(json_object_get(r.json, "error"), "code"), "message_already_sent");
    test_reply_free(&r);
    /* a second one, cancelled before its sendAt */
    mv_strlcpy(id, send_note_at(port, mv_now_ms() + 60000, state, sizeof state), sizeof id);
    REQUIRE(id[0]);
    snprintf(path, sizeof path, "/messages/%s/cancel", id);
    CHECK_INT(status_of(port, "POST", path, "bob"), 404);
    r = test_http(port, "POST", path, "X-User-Id: ana\n", "{}");
    CHECK_INT(r.status, 200);
    CHECK_STR(mv_json_str(r.json, "actionState"), "cancelled");
    test_reply_free(&r);
    snprintf(path, sizeof path, "/messages/%s", id);
    CHECK_INT(status_of(port, "GET", path, "bob"), 404);
    r = test_http(port, "GET", "/messages?scheduled=true", "X-User-Id: ana\n", NULL);
    CHECK_INT(json_array_size(json_object_get(r.json, "messages")), 0);
    test_reply_free(&r);
    r = test_http(port, "POST", "/messages/new/note", "X-User-Id: ana\n",
                  "{\"to\": \"bob\", \"n\": 1, \"sendAt\": 12}");
    CHECK_INT(r.status, 400);
    CHECK(strstr(mv_json_str(json_object_get(r.json, "error"), "message"), "sendAt") != NULL);
    test_reply_free(&r);
    sse_close(bob);
    CHECK_INT(test_daemon_stop(pid), 0);
}

int main(void) {
    return RUN_TESTS(
        a_scheduled_note_reaches_the_receivers_stream_at_send_at_and_cancel_answers_by_time);
}
