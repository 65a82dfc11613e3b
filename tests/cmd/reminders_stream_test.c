/* reminders_stream_test.c — reminders and escalation seen through GET /messages/stream of a real
 * missived on both stores: the unread receiver's stream gets `message.reminded` (with
 * viewer.remindedAt set), the sender's and a stranger's do not; at the escalation a member of the
 * added role gets `message.created` and can then read the message. */
#include <stdlib.h>
#include <string.h>

#include "missive/base.h"
#include "support/daemon_proc.h"
#include "support/sse_client.h"
#include "support/stores.h"

STORE_TEST(the_unread_receiver_is_reminded_on_its_stream_and_the_escalated_role_sees_the_message) {
    sse_env e;
    REQUIRE(sse_env_init(&e, kind, "remind_stream", NULL, ", \"timers\": {\"pollMs\": 100}"));
    char path[800];
    snprintf(path, sizeof path, "%s/templates/ask.json", e.dir);
    REQUIRE(test_write_file(
        path, "{\"templateCd\": \"ask\", \"receiverContent\": {\"title\": \"Ask\"},"
              " \"prepare\": {\"toUser\": \"{{to}}\"}, \"actions\": [],"
              " \"reminders\": [{\"afterMs\": 800, \"title\": \"Reminder\"}],"
              " \"escalation\": [{\"afterMs\": 1600, \"toRoles\": [\"managers\"]}]}"));
    int port;
    pid_t pid = sse_env_start(&e, &port);
    REQUIRE(pid > 0);
    sse *bob = sse_open(port, "/messages/stream", "X-User-Id: bob\r\n");
    sse *ana = sse_open(port, "/messages/stream", "X-User-Id: ana\r\n");
    sse *mia = sse_open(port, "/messages/stream", "X-User-Id: mia\r\nX-User-Roles: managers\r\n");
    CHECK_INT(bob->status, 200);
    CHECK_INT(mia->status, 200);
    sse_event ev;
    CHECK(sse_wait(bob, "counts", 2000, &ev));
    CHECK(sse_wait(ana, "counts", 2000, &ev));
    CHECK(sse_wait(mia, "counts", 2000, &ev));
    test_reply r =
        test_http(port, "POST", "/messages/new/ask", "X-User-Id: ana\n", "{\"to\": \"bob\"}");
    CHECK_INT(r.status, 201);
    char id[25] = "";
    mv_strlcpy(id, mv_json_str(json_array_get(json_object_get(r.json, "messages"), 0), "id"),
               sizeof id);
    test_reply_free(&r);
    CHECK(sse_wait(bob, "message.created", 3000, &ev));
    CHECK(sse_wait(bob, "message.reminded", 5000, &ev));
    CHECK(sse_data_has_id(&ev, id));
    CHECK(strstr(ev.data, "\"remindedAt\":null") == NULL);
    CHECK(sse_wait(mia, "message.created", 5000, &ev)); /* the escalation */
    CHECK(sse_data_has_id(&ev, id));
    char get[64];
    snprintf(get, sizeof get, "/messages/%s", id);
    r = test_http(port, "GET", get, "X-User-Id: mia\nX-User-Roles: managers\n", NULL);
    CHECK_INT(r.status, 200);
    CHECK(json_is_integer(json_object_get(r.json, "escalatedAt")));
    test_reply_free(&r);
    /* the sender saw her message created (and again at the escalation), never a reminder */
    bool reminded = false;
    while (sse_next(ana, 300, &ev))
        reminded = reminded || strcmp(ev.name, "message.reminded") == 0;
    CHECK(!reminded);
    sse_close(bob);
    sse_close(ana);
    sse_close(mia);
    CHECK_INT(test_daemon_stop(pid), 0);
}

int main(void) {
    return RUN_TESTS(
        the_unread_receiver_is_reminded_on_its_stream_and_the_escalated_role_sees_the_message);
}
