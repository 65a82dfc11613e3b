/* snooze_stream_test.c — snooze against a real missived on both stores, with a raw-socket SSE
 * client: the snoozing receiver's stream gets its counts without the message, then, when the
 * snooze timer fires at `until` (within a second while the daemon runs), message.updated with
 * viewer.snoozedUntil null and counts with it back; another user's stream gets none of it. */
#include <stdlib.h>

#include "missive/base.h"
#include "support/daemon_proc.h"
#include "support/sse_client.h"
#include "support/stores.h"

STORE_TEST(a_snooze_ending_sends_message_updated_and_counts_to_that_viewers_stream_only) {
    sse_env e;
    REQUIRE(sse_env_init(&e, kind, "snooze_stream", NULL, ", \"timers\": {\"pollMs\": 100}"));
    int port;
    pid_t pid = sse_env_start(&e, &port);
    REQUIRE(pid > 0);
    sse *bob = sse_open(port, "/messages/stream", "X-User-Id: bob\r\n");
    sse *carol = sse_open(port, "/messages/stream", "X-User-Id: carol\r\n");
    sse_event ev;
    CHECK(sse_wait(bob, "counts", 2000, &ev));
    CHECK(sse_wait(carol, "counts", 2000, &ev));
    char id[25];
    mv_strlcpy(id, sse_send_note(port, "bob", 1), sizeof id);
    REQUIRE(id[0]);
    CHECK(sse_wait(bob, "message.created", 2000, &ev));
    char path[96], body[64];
    snprintf(path, sizeof path, "/messages/%s/snooze", id);
    int64_t until = mv_now_ms() + 1500;
    snprintf(body, sizeof body, "{\"until\": %lld}", (long long)until);
    test_reply r = test_http(port, "POST", path, "X-User-Id: bob\n", body);
    CHECK_INT(r.status, 200);
    CHECK_INT(
        json_integer_value(json_object_get(json_object_get(r.json, "viewer"), "snoozedUntil")),
        until);
    test_reply_free(&r);
    CHECK(sse_wait(bob, "message.updated", 2000, &ev)); /* the snooze itself */
    CHECK(strstr(ev.data, "\"snoozedUntil\":") != NULL && sse_data_has_id(&ev, id));
    sse_wait(bob, "counts", 1000, &ev);
    CHECK(strstr(bob->last_counts, "\"count\":0") != NULL);
    /* the return: at until, within a second */
    CHECK(sse_wait(bob, "message.updated", 4000, &ev));
    CHECK(sse_data_has_id(&ev, id));
    CHECK(strstr(ev.data, "\"snoozedUntil\":null") != NULL);
    CHECK(mv_now_ms() >= until && mv_now_ms() < until + 2000);
    sse_wait(bob, "counts", 1000, &ev);
    CHECK(strstr(bob->last_counts, "\"count\":1") != NULL);
    sse_event extra;
    CHECK(!sse_next(carol, 300, &extra) || strcmp(extra.name, "message.updated") != 0);
    r = test_http(port, "GET", "/messages/count?snoozed=true", "X-User-Id: bob\n", NULL);
    CHECK_INT(json_integer_value(json_object_get(r.json, "count")), 0);
    test_reply_free(&r);
    sse_close(carol);
    sse_close(bob);
    CHECK_INT(test_daemon_stop(pid), 0);
}

int main(void) {
    return RUN_TESTS(a_snooze_ending_sends_message_updated_and_counts_to_that_viewers_stream_only);
}
