/* stream_test.c — GET /messages/stream against real missived processes, with a raw-socket SSE
 * client: every committed change the user may see arrives once and in order (and nothing else);
 * a client killed mid-stream resumes with Last-Event-ID and loses nothing; a resume below the
 * retained log gets `reset`; tickets (valid, forged, expired, on another route); too many
 * streams; SIGTERM ends streams cleanly; two daemons on one SQLite file and three on one
 * PostgreSQL see each other's changes within 1 s; kill -9 of a daemon loses no committed event
 * for a client that reconnects elsewhere. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "missive/base.h"
#include "missive/inbox.h"
#include "support/daemon_proc.h"
#include "support/sse_client.h"
#include "support/stores.h"

/* ---- tests --------------------------------------------------------------------------------- */

STORE_TEST(a_stream_gets_every_change_its_user_may_see_once_and_in_order) {
    sse_env e;
    REQUIRE(sse_env_init(&e, kind, "stream_order", NULL, NULL));
    int port;
    pid_t pid = sse_env_start(&e, &port);
    REQUIRE(pid > 0);
    sse *bob = sse_open(port, "/messages/stream", "X-User-Id: bob\r\n");
    CHECK_INT(bob->status, 200);
    sse *bob_t2 = sse_open(port, "/messages/stream", "X-User-Id: bob\r\nX-Tenant-Id: t2\r\n");
    CHECK_INT(bob_t2->status, 200);
    sse_event ev;
    CHECK(sse_wait(bob, "counts", 2000, &ev)); /* the initial counts */
    CHECK(sse_wait(bob_t2, "counts", 2000, &ev));
    char ids[3][25];
    for (int i = 0; i < 3; i++) {
        snprintf(ids[i], sizeof ids[i], "%s", sse_send_note(port, "bob", i));
        sse_send_note(port, "carol", i); /* never on Bob's stream */
    }
    int64_t last = 0;
    for (int i = 0; i < 3; i++) {
        CHECK(sse_wait(bob, "message.created", 2000, &ev));
        CHECK(sse_data_has_id(&ev, ids[i]));
        CHECK(ev.id > last);
        last = ev.id;
    }
    char path[128];
    snprintf(path, sizeof path, "/messages/%s/read", ids[0]);
    test_reply r = test_http(port, "POST", path, "X-User-Id: bob\n", NULL);
    CHECK_INT(r.status, 200);
    test_reply_free(&r);
    CHECK(sse_wait(bob, "message.updated", 2000, &ev)); /* his own state, from "another device" */
    CHECK(sse_data_has_id(&ev, ids[0]));
    CHECK(strstr(ev.data, "\"readAt\":null") == NULL);
    /* the counts that follow may already have gone out with the page before (computed after the
     * mark committed): what matters is that the newest counts Bob holds are right */
    sse_wait(bob, "counts", 500, &ev);
    CHECK(strstr(bob->last_counts, "\"unread\":2") != NULL);
    /* nothing else is queued for Bob: Carol's messages never showed up */
    sse_event extra;
    bool more = sse_next(bob, 400, &extra);
    CHECK(!more);
    /* the other tenant's Bob saw none of it */
    CHECK(!sse_next(bob_t2, 100, &extra));
    sse_close(bob_t2);
    /* 16 streams per user, then 503 stream_capacity; /metrics still answers with them open */
    sse *dave[17];
    for (int i = 0; i < 17; i++)
        dave[i] = sse_open(port, "/messages/stream", "X-User-Id: dave\r\n");
    for (int i = 0; i < 16; i++)
        CHECK_INT(dave[i]->status, 200);
    CHECK_INT(dave[16]->status, 503);
    test_reply m = test_http(port, "GET", "/metrics", NULL, NULL);
    CHECK_INT(m.status, 200);
    test_reply_free(&m);
    for (int i = 0; i < 17; i++)
        sse_close(dave[i]);
    sse_close(bob);
    CHECK_INT(test_daemon_stop(pid), 0);
}

STORE_TEST(a_client_killed_mid_stream_resumes_with_last_event_id_and_loses_nothing) {
    sse_env e;
    REQUIRE(sse_env_init(&e, kind, "stream_resume", NULL, NULL));
    int port;
    pid_t pid = sse_env_start(&e, &port);
    REQUIRE(pid > 0);
    sse *c = sse_open(port, "/messages/stream", "X-User-Id: bob\r\n");
    sse_event ev;
    sse_send_note(port, "bob", 1);
    CHECK(sse_wait(c, "message.created", 2000, &ev));
    int64_t last = ev.id;
    sse_close(c); /* the client dies */
    char ids[5][25];
    for (int i = 0; i < 5; i++)
        snprintf(ids[i], sizeof ids[i], "%s", sse_send_note(port, "bob", 10 + i));
    char hdr[64];
    snprintf(hdr, sizeof hdr, "X-User-Id: bob\r\nLast-Event-ID: %lld\r\n", (long long)last);
    c = sse_open(port, "/messages/stream", hdr);
    CHECK_INT(c->status, 200);
    for (int i = 0; i < 5; i++) {
        CHECK(sse_wait(c, "message.created", 2000, &ev));
        CHECK(sse_data_has_id(&ev, ids[i]));
    }
    sse_close(c);
    char q[96];
    snprintf(q, sizeof q, "/messages/stream?lastEventId=%lld", (long long)last);
    c = sse_open(port, q, "X-User-Id: bob\r\n"); /* the query form replays the same */
    CHECK(sse_wait(c, "message.created", 2000, &ev));
    CHECK(sse_data_has_id(&ev, ids[0]));
    sse_close(c);
    /* below what retention removed: one reset, then live */
    mv_store *store = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_store_open(e.url, NULL, &store, &err), MV_OK, &err);
    CHECK_CODE(mv_changes_gc(store, mv_now_ms() + 1000, NULL, &err), MV_OK, &err);
    mv_store_close(store);
    c = sse_open(port, "/messages/stream", hdr);
    CHECK(sse_next(c, 2000, &ev));
    CHECK_STR(ev.name, "reset");
    const char *id = sse_send_note(port, "bob", 99);
    CHECK(sse_wait(c, "message.created", 2000, &ev));
    CHECK(sse_data_has_id(&ev, id));
    sse_close(c);
    CHECK_INT(test_daemon_stop(pid), 0);
}

STORE_TEST(tickets_authenticate_the_stream_only_and_bad_input_is_refused) {
    sse_env e;
    REQUIRE(sse_env_init(&e, kind, "stream_ticket", ", \"maxConnections\": 3", NULL));
    int port;
    pid_t pid = sse_env_start(&e, &port);
    REQUIRE(pid > 0);
    test_reply r = test_http(port, "POST", "/stream-tickets", "X-User-Id: bob\n", NULL);
    CHECK_INT(r.status, 201);
    const char *ticket = mv_json_str(r.json, "ticket");
    CHECK(json_integer_value(json_object_get(r.json, "expiresAt")) > mv_now_ms());
    char path[1024];
    snprintf(path, sizeof path, "/messages/stream?ticket=%s", ticket);
    sse *c = sse_open(port, path, NULL);
    CHECK_INT(c->status, 200);
    const char *id = sse_send_note(port, "bob", 1);
    sse_event ev;
    CHECK(sse_wait(c, "message.created", 2000, &ev));
    CHECK(sse_data_has_id(&ev, id));
    snprintf(path, sizeof path, "/messages?ticket=%s", ticket); /* no other route takes one */
    test_reply o = test_http(port, "GET", path, NULL, NULL);
    CHECK_INT(o.status, 401);
    test_reply_free(&o);
    test_reply_free(&r);
    char *expired =
        sse_sign_ticket("{\"sub\":\"bob\",\"roles\":[],\"perms\":{},\"tenant\":\"default\","
                        "\"exp\":1000,\"use\":\"stream\"}");
    const char *bad[] = {expired, "v1.eyJzdWIiOiJib2IifQ.AAAA", "nonsense", ""};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "/messages/stream?ticket=%s", bad[i]);
        sse *b = sse_open(port, path, NULL);
        CHECK_INT(b->status, 401);
        sse_close(b);
    }
    free(expired);
    const char *malformed[] = {"Last-Event-ID: abc\r\n", "Last-Event-ID: -1\r\n",
                               "Last-Event-ID: 99999999999999999999999\r\n"};
    for (int i = 0; i < 3; i++) {
        char hdr[128];
        snprintf(hdr, sizeof hdr, "X-User-Id: bob\r\n%s", malformed[i]);
        sse *b = sse_open(port, "/messages/stream", hdr);
        CHECK_INT(b->status, 400);
        sse_close(b);
    }
    sse *b = sse_open(port, "/messages/stream?colour=red", "X-User-Id: bob\r\n");
    CHECK_INT(b->status, 400);
    sse_close(b);
    /* maxConnections 3: c plus two more, then 503 stream_capacity */
    sse *more[3];
    for (int i = 0; i < 3; i++)
        more[i] = sse_open(port, "/messages/stream", "X-User-Id: carol\r\n");
    CHECK_INT(more[0]->status, 200);
    CHECK_INT(more[1]->status, 200);
    CHECK_INT(more[2]->status, 503);
    CHECK(strstr(more[2]->buf, "stream_capacity") != NULL);
    for (int i = 0; i < 3; i++)
        sse_close(more[i]);
    /* SIGTERM: the open stream ends cleanly and the daemon exits 0 */
    kill(pid, SIGTERM);
    CHECK(sse_ended(c, 3000));
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    sse_close(c);
}

TEST(two_daemons_on_one_sqlite_file_see_each_others_changes_within_a_second) {
    sse_env e;
    REQUIRE(sse_env_init(&e, "sqlite", "stream_sqlite2", NULL, NULL));
    int pa, pb;
    pid_t a = sse_env_start(&e, &pa), b = sse_env_start(&e, &pb);
    REQUIRE(a > 0 && b > 0);
    sse *c = sse_open(pb, "/messages/stream", "X-User-Id: bob\r\n");
    sse_event ev;
    CHECK(sse_wait(c, "counts", 2000, &ev));
    int64_t t0 = sse_now_ms();
    const char *id = sse_send_note(pa, "bob", 1);
    CHECK(sse_wait(c, "message.created", 1000, &ev));
    CHECK(sse_data_has_id(&ev, id));
    CHECK(sse_now_ms() - t0 < 1000);
    sse_close(c);
    CHECK_INT(test_daemon_stop(a), 0);
    CHECK_INT(test_daemon_stop(b), 0);
}

POSTGRES_TEST(three_daemons_on_one_postgres_and_a_kill_9_lose_nothing) {
    sse_env e;
    REQUIRE(sse_env_init(&e, kind, "stream_pg3", NULL, NULL));
    int port[3];
    pid_t pid[3];
    for (int i = 0; i < 3; i++)
        REQUIRE((pid[i] = sse_env_start(&e, &port[i])) > 0);
    sse *onc = sse_open(port[2], "/messages/stream", "X-User-Id: bob\r\n");
    sse *onb = sse_open(port[1], "/messages/stream", "X-User-Id: bob\r\n");
    sse_event ev;
    CHECK(sse_wait(onc, "counts", 2000, &ev));
    CHECK(sse_wait(onb, "counts", 2000, &ev));
    int64_t t0 = sse_now_ms();
    const char *id = sse_send_note(port[0], "bob", 1); /* through A, seen on C */
    CHECK(sse_wait(onc, "message.created", 1000, &ev));
    CHECK(sse_data_has_id(&ev, id));
    CHECK(sse_now_ms() - t0 < 1000);
    CHECK(sse_wait(onb, "message.created", 1000, &ev));
    int64_t last = ev.id;
    kill(pid[1], SIGKILL); /* B dies with Bob's stream open */
    waitpid(pid[1], NULL, 0);
    sse_close(onb);
    char ids[4][25];
    for (int i = 0; i < 4; i++)
        snprintf(ids[i], sizeof ids[i], "%s", sse_send_note(port[0], "bob", 2 + i));
    char hdr[96];
    snprintf(hdr, sizeof hdr, "X-User-Id: bob\r\nLast-Event-ID: %lld\r\n", (long long)last);
    sse *again = sse_open(port[2], "/messages/stream", hdr); /* reconnects elsewhere */
    for (int i = 0; i < 4; i++) {
        CHECK(sse_wait(again, "message.created", 2000, &ev));
        CHECK(sse_data_has_id(&ev, ids[i]));
    }
    sse_close(again);
    sse_close(onc);
    CHECK_INT(test_daemon_stop(pid[0]), 0);
    CHECK_INT(test_daemon_stop(pid[2]), 0);
}

/* ---- the index of streams by user and role ----------------------------------------------- */

/* One series' value from GET /metrics (a raw HTTP/1.0 request), -1 when absent. */
static double metric(int port, const char *series) {
    static char text[1 << 17];
    size_t len = 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const char *req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        write(fd, req, strlen(req)) == (ssize_t)strlen(req))
        for (ssize_t r;
             len < sizeof text - 1 && (r = read(fd, text + len, sizeof text - 1 - len)) > 0;)
            len += (size_t)r;
    if (fd >= 0) close(fd);
    text[len] = '\0';
    size_t n = strlen(series);
    for (const char *p = text; (p = strstr(p, series)) != NULL; p += n)
        if (p > text && p[-1] == '\n' && p[n] == ' ') return strtod(p + n + 1, NULL);
    return -1;
}

/* Waits up to 3 s for the hub to have dropped closed streams: both gauges at the values. */
static bool hub_holds(int port, double streams, double entries) {
    for (int64_t end = sse_now_ms() + 3000; sse_now_ms() < end; usleep(20 * 1000))
        if (metric(port, "missive_stream_connections") == streams &&
            metric(port, "missive_stream_index_entries") == entries)
            return true;
    return false;
}

static const char *send_as(int port, const char *tenant, const char *tmpl, const char *to, int n) {
    static char id[25];
    char path[64], hdr[96], body[96];
    snprintf(path, sizeof path, "/messages/new/%s", tmpl);
    snprintf(hdr, sizeof hdr, "X-User-Id: ana\nX-Tenant-Id: %s\n", tenant);
    snprintf(body, sizeof body, "{\"to\": \"%s\", \"n\": %d}", to, n);
    test_reply r = test_http(port, "POST", path, hdr, body);
    const char *got =
        r.status == 201 ? mv_json_str(json_array_get(json_object_get(r.json, "messages"), 0), "id")
                        : NULL;
    snprintf(id, sizeof id, "%s", got ? got : "");
    test_reply_free(&r);
    return id;
}

typedef struct watcher {
    const char *tenant, *user, *roles;
    sse *c;
    int want[6]; /* indexes into the ids sent, -1 ends */
} watcher;

/* Every message.created event the stream gets within 1.5 s is one of want, each once. */
static bool got_exactly(watcher *w, char ids[][25]) {
    int expected = 0, seen[6] = {0}, stray = 0;
    while (expected < 6 && w->want[expected] >= 0)
        expected++;
    sse_event ev;
    for (int64_t end = sse_now_ms() + 1500; sse_now_ms() < end;) {
        if (!sse_next(w->c, 100, &ev) || strcmp(ev.name, "message.created") != 0) continue;
        bool mine = false;
        for (int k = 0; k < expected; k++)
            if (sse_data_has_id(&ev, ids[w->want[k]])) {
                seen[k]++;
                mine = true;
            }
        stray += !mine;
    }
    bool ok = stray == 0;
    for (int k = 0; k < expected; k++)
        ok = ok && seen[k] == 1;
    if (!ok) fprintf(stderr, "  %s/%s: %d stray events\n", w->tenant, w->user, stray);
    return ok;
}

STORE_TEST(each_change_reaches_exactly_its_subscribers_and_closed_streams_leave_the_index) {
    sse_env e;
    REQUIRE(sse_env_init(&e, kind, "stream_index", NULL, NULL));
    char path[700];
    snprintf(path, sizeof path, "%s/templates/finance.json", e.dir);
    REQUIRE(test_write_file(path, "{\"templateCd\": \"finance\", \"type\": \"info\","
                                  " \"receiverContent\": {\"title\": \"F {{n}}\"},"
                                  " \"prepare\": {\"toRoles\": [\"finance\"]}, \"actions\": []}"));
    snprintf(path, sizeof path, "%s/templates/ops.json", e.dir);
    REQUIRE(test_write_file(path, "{\"templateCd\": \"ops\", \"type\": \"info\","
                                  " \"receiverContent\": {\"title\": \"O {{n}}\"},"
                                  " \"prepare\": {\"toRoles\": [\"ops\"]}, \"actions\": []}"));
    int port;
    pid_t pid = sse_env_start(&e, &port);
    REQUIRE(pid > 0);
    /* 40 streams of 20 users come and go (closed by the client, abruptly), half after one event */
    sse *churn[40];
    for (int i = 0; i < 40; i++) {
        char hdr[96];
        snprintf(hdr, sizeof hdr, "X-User-Id: gone-%d\r\nX-User-Roles: finance,ops\r\n", i % 20);
        churn[i] = sse_open(port, "/messages/stream", hdr);
        CHECK_INT(churn[i]->status, 200);
    }
    CHECK(hub_holds(port, 40, 120));
    sse_send_note(port, "gone-1", 0);
    sse_event ev;
    for (int i = 0; i < 40; i++) {
        if (i % 2) CHECK(sse_wait(churn[i], "counts", 2000, &ev));
        sse_close(churn[i]);
    }
    CHECK(hub_holds(port, 0, 0));
    /* ids: 0 note to u1, 1 finance, 2 ops, 3 note to u5 (no stream), 4 t2: note to u1 */
    watcher w[] = {
        {"default", "ana", NULL, NULL, {0, 1, 2, 3, -1}},
        {"default", "u0", "finance", NULL, {1, -1}},
        {"default", "u0", "finance", NULL, {1, -1}}, /* a second device */
        {"default", "u1", "finance", NULL, {0, 1, -1}},
        {"default", "u2", "ops", NULL, {2, -1}},
        {"default", "u3", "ops,finance,ops", NULL, {1, 2, -1}},
        {"default", "u4", "sales", NULL, {-1}},
        {"t2", "ana", NULL, NULL, {4, -1}},
        {"t2", "u1", "finance", NULL, {4, -1}},
        {"t2", "u2", "ops", NULL, {-1}},
    };
    int nw = (int)(sizeof w / sizeof w[0]), entries = 0;
    for (int i = 0; i < nw; i++) {
        char hdr[160];
        int n = snprintf(hdr, sizeof hdr, "X-User-Id: %s\r\nX-Tenant-Id: %s\r\n", w[i].user,
                         w[i].tenant);
        if (w[i].roles)
            snprintf(hdr + n, sizeof hdr - (size_t)n, "X-User-Roles: %s\r\n", w[i].roles);
        w[i].c = sse_open(port, "/messages/stream", hdr);
        CHECK_INT(w[i].c->status, 200);
        entries += 1;
        for (const char *r = w[i].roles; r && *r; r++)
            entries += r == w[i].roles || r[-1] == ',';
    }
    CHECK(hub_holds(port, nw, entries));
    char ids[5][25];
    snprintf(ids[0], 25, "%s", send_as(port, "default", "note", "u1", 1));
    snprintf(ids[1], 25, "%s", send_as(port, "default", "finance", "", 2));
    snprintf(ids[2], 25, "%s", send_as(port, "default", "ops", "", 3));
    snprintf(ids[3], 25, "%s", send_as(port, "default", "note", "u5", 4));
    snprintf(ids[4], 25, "%s", send_as(port, "t2", "note", "u1", 5));
    for (int i = 0; i < 5; i++)
        CHECK(ids[i][0] != '\0');
    for (int i = 0; i < nw; i++)
        CHECK(got_exactly(&w[i], ids));
    for (int i = 0; i < nw; i++)
        sse_close(w[i].c);
    CHECK(hub_holds(port, 0, 0)); /* nothing of them is left in the index */
    CHECK_INT(test_daemon_stop(pid), 0);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    return RUN_TESTS(
        a_stream_gets_every_change_its_user_may_see_once_and_in_order,
        a_client_killed_mid_stream_resumes_with_last_event_id_and_loses_nothing,
        tickets_authenticate_the_stream_only_and_bad_input_is_refused,
        two_daemons_on_one_sqlite_file_see_each_others_changes_within_a_second,
        three_daemons_on_one_postgres_and_a_kill_9_lose_nothing,
        each_change_reaches_exactly_its_subscribers_and_closed_streams_leave_the_index);
}
