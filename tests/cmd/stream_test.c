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
#include "support/stores.h"

#define SECRET "0123456789abcdef0123456789abcdef-stream-secret"

/* ---- a tiny SSE client (HTTP/1.0, so the body is not chunked) ---------------------------------
 */

typedef struct sse {
    int fd;
    int status;
    char buf[1 << 16];
    size_t len;
    bool eof;
    char last_counts[256]; /* the data of the newest counts event read so far */
} sse;

typedef struct sse_event {
    int64_t id;
    char name[32];
    char data[8192];
} sse_event;

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool fill(sse *c, int timeout_ms) {
    if (c->eof || c->len >= sizeof c->buf - 1) return false;
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    if (poll(&p, 1, timeout_ms) <= 0) return false;
    ssize_t n = read(c->fd, c->buf + c->len, sizeof c->buf - 1 - c->len);
    if (n <= 0) {
        c->eof = true;
        return false;
    }
    c->len += (size_t)n;
    c->buf[c->len] = '\0';
    return true;
}

/* Opens path with extra header lines ("Name: value\r\n"...). status 0 when nothing answered. */
static sse *sse_open(int port, const char *path, const char *headers) {
    sse *c = calloc(1, sizeof *c);
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0) return c;
    char req[2048];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n%s\r\n", path,
                     headers ? headers : "");
    if (write(c->fd, req, (size_t)n) != n) return c;
    int64_t end = now_ms() + 3000;
    char *head_end;
    while (!(head_end = strstr(c->buf, "\r\n\r\n")) && now_ms() < end)
        fill(c, 100);
    if (!head_end) return c;
    sscanf(c->buf, "HTTP/1.%*d %d", &c->status);
    size_t body = (size_t)(head_end + 4 - c->buf);
    memmove(c->buf, c->buf + body, c->len - body + 1);
    c->len -= body;
    return c;
}

/* The next event (comments and retry lines skipped) within timeout_ms; false when none. */
static bool sse_next(sse *c, int timeout_ms, sse_event *ev) {
    int64_t end = now_ms() + timeout_ms;
    for (;;) {
        char *sep;
        while ((sep = strstr(c->buf, "\n\n")) != NULL) {
            *sep = '\0';
            memset(ev, 0, sizeof *ev);
            ev->id = -1;
            for (char *line = c->buf, *next; line && *line; line = next) {
                next = strchr(line, '\n');
                if (next) *next++ = '\0';
                if (strncmp(line, "id: ", 4) == 0)
                    ev->id = strtoll(line + 4, NULL, 10);
                else if (strncmp(line, "event: ", 7) == 0)
                    snprintf(ev->name, sizeof ev->name, "%s", line + 7);
                else if (strncmp(line, "data: ", 6) == 0)
                    snprintf(ev->data, sizeof ev->data, "%s", line + 6);
            }
            if (strcmp(ev->name, "counts") == 0)
                snprintf(c->last_counts, sizeof c->last_counts, "%s", ev->data);
            size_t used = (size_t)(sep + 2 - c->buf);
            memmove(c->buf, c->buf + used, c->len - used + 1);
            c->len -= used;
            if (ev->name[0]) return true;
        }
        int left = (int)(end - now_ms());
        if (left <= 0 || c->eof) return false;
        fill(c, left);
    }
}

/* The next event named name (others skipped). */
static bool sse_wait(sse *c, const char *name, int timeout_ms, sse_event *ev) {
    int64_t end = now_ms() + timeout_ms;
    while (now_ms() < end)
        if (sse_next(c, (int)(end - now_ms()), ev) && strcmp(ev->name, name) == 0) return true;
    return false;
}

/* True when the server ended the stream within timeout_ms. */
static bool sse_ended(sse *c, int timeout_ms) {
    int64_t end = now_ms() + timeout_ms;
    while (!c->eof && now_ms() < end) {
        fill(c, 50);
        c->len = 0;
        c->buf[0] = '\0';
    }
    return c->eof;
}

static void sse_close(sse *c) {
    if (!c) return;
    close(c->fd);
    free(c);
}

/* ---- daemons ------------------------------------------------------------------------------- */

typedef struct env {
    char dir[600], config[700], log[700];
    const char *url;
} env;

static bool env_init(env *e, const char *kind, const char *name, const char *extra) {
    memset(e, 0, sizeof *e);
    e->url = test_store_url(kind, name);
    if (!e->url) return false;
    char label[96];
    snprintf(label, sizeof label, "%s-%s", name, kind);
    snprintf(e->dir, sizeof e->dir, "%s", test_tmp_path(label));
    char path[800];
    snprintf(path, sizeof path, "%s/templates", e->dir);
    if (mkdir(e->dir, 0700) || mkdir(path, 0700)) return false;
    snprintf(path, sizeof path, "%s/templates/note.json", e->dir);
    if (!test_write_file(path, "{\"templateCd\": \"note\", \"type\": \"info\","
                               " \"receiverContent\": {\"title\": \"Note {{n}}\"},"
                               " \"prepare\": {\"toUser\": \"{{to}}\"}, \"actions\": []}"))
        return false;
    snprintf(e->config, sizeof e->config, "%s/missived.json", e->dir);
    snprintf(e->log, sizeof e->log, "%s/daemon.log", e->dir);
    setenv("MISSIVE_STREAM_SECRET", SECRET, 1);
    return test_write_file(e->config,
                           "{\"templates\": \"%s/templates\", \"auth\": {\"mode\": \"headers\"},"
                           " \"stream\": {\"heartbeatMs\": 200, \"secretEnv\": "
                           "\"MISSIVE_STREAM_SECRET\"%s}}",
                           e->dir, extra ? extra : "");
}

static pid_t start(env *e, int *port) {
    *port = test_free_port();
    return test_daemon_start(e->config, *port, e->url, e->log);
}

/* Creates a note from ana to `to`; returns its id (static buffer) or "" on failure. */
static const char *send_note(int port, const char *to, int n) {
    static char id[25];
    char body[128];
    snprintf(body, sizeof body, "{\"to\": \"%s\", \"n\": %d}", to, n);
    test_reply r = test_http(port, "POST", "/messages/new/note", "X-User-Id: ana\n", body);
    const char *got =
        r.status == 201 ? mv_json_str(json_array_get(json_object_get(r.json, "messages"), 0), "id")
                        : NULL;
    snprintf(id, sizeof id, "%s", got ? got : "");
    test_reply_free(&r);
    return id;
}

static bool data_has_id(const sse_event *ev, const char *id) {
    json_t *d = json_loads(ev->data, 0, NULL);
    bool ok = d && strcmp(mv_json_str(d, "id") ? mv_json_str(d, "id") : "", id) == 0;
    json_decref(d);
    return ok;
}

/* ---- tests --------------------------------------------------------------------------------- */

STORE_TEST(a_stream_gets_every_change_its_user_may_see_once_and_in_order) {
    env e;
    REQUIRE(env_init(&e, kind, "stream_order", NULL));
    int port;
    pid_t pid = start(&e, &port);
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
        snprintf(ids[i], sizeof ids[i], "%s", send_note(port, "bob", i));
        send_note(port, "carol", i); /* never on Bob's stream */
    }
    int64_t last = 0;
    for (int i = 0; i < 3; i++) {
        CHECK(sse_wait(bob, "message.created", 2000, &ev));
        CHECK(data_has_id(&ev, ids[i]));
        CHECK(ev.id > last);
        last = ev.id;
    }
    char path[128];
    snprintf(path, sizeof path, "/messages/%s/read", ids[0]);
    test_reply r = test_http(port, "POST", path, "X-User-Id: bob\n", NULL);
    CHECK_INT(r.status, 200);
    test_reply_free(&r);
    CHECK(sse_wait(bob, "message.updated", 2000, &ev)); /* his own state, from "another device" */
    CHECK(data_has_id(&ev, ids[0]));
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
    env e;
    REQUIRE(env_init(&e, kind, "stream_resume", NULL));
    int port;
    pid_t pid = start(&e, &port);
    REQUIRE(pid > 0);
    sse *c = sse_open(port, "/messages/stream", "X-User-Id: bob\r\n");
    sse_event ev;
    send_note(port, "bob", 1);
    CHECK(sse_wait(c, "message.created", 2000, &ev));
    int64_t last = ev.id;
    sse_close(c); /* the client dies */
    char ids[5][25];
    for (int i = 0; i < 5; i++)
        snprintf(ids[i], sizeof ids[i], "%s", send_note(port, "bob", 10 + i));
    char hdr[64];
    snprintf(hdr, sizeof hdr, "X-User-Id: bob\r\nLast-Event-ID: %lld\r\n", (long long)last);
    c = sse_open(port, "/messages/stream", hdr);
    CHECK_INT(c->status, 200);
    for (int i = 0; i < 5; i++) {
        CHECK(sse_wait(c, "message.created", 2000, &ev));
        CHECK(data_has_id(&ev, ids[i]));
    }
    sse_close(c);
    char q[96];
    snprintf(q, sizeof q, "/messages/stream?lastEventId=%lld", (long long)last);
    c = sse_open(port, q, "X-User-Id: bob\r\n"); /* the query form replays the same */
    CHECK(sse_wait(c, "message.created", 2000, &ev));
    CHECK(data_has_id(&ev, ids[0]));
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
    const char *id = send_note(port, "bob", 99);
    CHECK(sse_wait(c, "message.created", 2000, &ev));
    CHECK(data_has_id(&ev, id));
    sse_close(c);
    CHECK_INT(test_daemon_stop(pid), 0);
}

/* A ticket signed with SECRET (the daemon's), for forging expired ones. */
static char *sign_ticket(const char *claims) {
    size_t n = strlen(claims);
    char *t = malloc(3 + mv_b64url_len(n) + 1 + 44 + 1);
    memcpy(t, "v1.", 3);
    mv_b64url_encode(claims, n, t + 3);
    size_t head = strlen(t);
    unsigned char mac[32];
    mv_hmac_sha256(SECRET, strlen(SECRET), t, head, mac);
    t[head] = '.';
    mv_b64url_encode(mac, 32, t + head + 1);
    return t;
}

STORE_TEST(tickets_authenticate_the_stream_only_and_bad_input_is_refused) {
    env e;
    REQUIRE(env_init(&e, kind, "stream_ticket", ", \"maxConnections\": 3"));
    int port;
    pid_t pid = start(&e, &port);
    REQUIRE(pid > 0);
    test_reply r = test_http(port, "POST", "/stream-tickets", "X-User-Id: bob\n", NULL);
    CHECK_INT(r.status, 201);
    const char *ticket = mv_json_str(r.json, "ticket");
    CHECK(json_integer_value(json_object_get(r.json, "expiresAt")) > mv_now_ms());
    char path[1024];
    snprintf(path, sizeof path, "/messages/stream?ticket=%s", ticket);
    sse *c = sse_open(port, path, NULL);
    CHECK_INT(c->status, 200);
    const char *id = send_note(port, "bob", 1);
    sse_event ev;
    CHECK(sse_wait(c, "message.created", 2000, &ev));
    CHECK(data_has_id(&ev, id));
    snprintf(path, sizeof path, "/messages?ticket=%s", ticket); /* no other route takes one */
    test_reply o = test_http(port, "GET", path, NULL, NULL);
    CHECK_INT(o.status, 401);
    test_reply_free(&o);
    test_reply_free(&r);
    char *expired = sign_ticket("{\"sub\":\"bob\",\"roles\":[],\"perms\":{},\"tenant\":\"default\","
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
    env e;
    REQUIRE(env_init(&e, "sqlite", "stream_sqlite2", NULL));
    int pa, pb;
    pid_t a = start(&e, &pa), b = start(&e, &pb);
    REQUIRE(a > 0 && b > 0);
    sse *c = sse_open(pb, "/messages/stream", "X-User-Id: bob\r\n");
    sse_event ev;
    CHECK(sse_wait(c, "counts", 2000, &ev));
    int64_t t0 = now_ms();
    const char *id = send_note(pa, "bob", 1);
    CHECK(sse_wait(c, "message.created", 1000, &ev));
    CHECK(data_has_id(&ev, id));
    CHECK(now_ms() - t0 < 1000);
    sse_close(c);
    CHECK_INT(test_daemon_stop(a), 0);
    CHECK_INT(test_daemon_stop(b), 0);
}

POSTGRES_TEST(three_daemons_on_one_postgres_and_a_kill_9_lose_nothing) {
    env e;
    REQUIRE(env_init(&e, kind, "stream_pg3", NULL));
    int port[3];
    pid_t pid[3];
    for (int i = 0; i < 3; i++)
        REQUIRE((pid[i] = start(&e, &port[i])) > 0);
    sse *onc = sse_open(port[2], "/messages/stream", "X-User-Id: bob\r\n");
    sse *onb = sse_open(port[1], "/messages/stream", "X-User-Id: bob\r\n");
    sse_event ev;
    CHECK(sse_wait(onc, "counts", 2000, &ev));
    CHECK(sse_wait(onb, "counts", 2000, &ev));
    int64_t t0 = now_ms();
    const char *id = send_note(port[0], "bob", 1); /* through A, seen on C */
    CHECK(sse_wait(onc, "message.created", 1000, &ev));
    CHECK(data_has_id(&ev, id));
    CHECK(now_ms() - t0 < 1000);
    CHECK(sse_wait(onb, "message.created", 1000, &ev));
    int64_t last = ev.id;
    kill(pid[1], SIGKILL); /* B dies with Bob's stream open */
    waitpid(pid[1], NULL, 0);
    sse_close(onb);
    char ids[4][25];
    for (int i = 0; i < 4; i++)
        snprintf(ids[i], sizeof ids[i], "%s", send_note(port[0], "bob", 2 + i));
    char hdr[96];
    snprintf(hdr, sizeof hdr, "X-User-Id: bob\r\nLast-Event-ID: %lld\r\n", (long long)last);
    sse *again = sse_open(port[2], "/messages/stream", hdr); /* reconnects elsewhere */
    for (int i = 0; i < 4; i++) {
        CHECK(sse_wait(again, "message.created", 2000, &ev));
        CHECK(data_has_id(&ev, ids[i]));
    }
    sse_close(again);
    sse_close(onc);
    CHECK_INT(test_daemon_stop(pid[0]), 0);
    CHECK_INT(test_daemon_stop(pid[2]), 0);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    return RUN_TESTS(a_stream_gets_every_change_its_user_may_see_once_and_in_order,
                     a_client_killed_mid_stream_resumes_with_last_event_id_and_loses_nothing,
                     tickets_authenticate_the_stream_only_and_bad_input_is_refused,
                     two_daemons_on_one_sqlite_file_see_each_others_changes_within_a_second,
                     three_daemons_on_one_postgres_and_a_kill_9_lose_nothing);
}
