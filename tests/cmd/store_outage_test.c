/* store_outage_test.c — missived while its PostgreSQL goes away (a private server of this test,
 * never the shared one). A restart during a create's prepare call answers 503 store_unavailable
 * and leaves the key to its lease: pending while it lives, created by the retry after it — never
 * client_request_failed (issue 12 item 2). While the server is down every route answers 503
 * store_unavailable, /healthz included, and no body names the server's socket path, host or
 * driver text (items 3 and 6); when it is back everything works again. A SQLite daemon whose
 * files cannot grow (RLIMIT_FSIZE set from outside: what a full disk does) answers 503 to writes
 * and on /healthz, keeps serving reads, and recovers when the files may grow again. */
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "missive/base.h"
#include "support/daemon_proc.h"
#include "support/http_sink.h"
#include "support/pg_private.h"
#include "test.h"

typedef struct {
    pg_private pg;
    http_sink *sink;
    pid_t pid;
    int port;
    char dir[600];
    int restart_on_prepare; /* the next prepare call restarts the server first */
} rig;

static void sink_handler(void *ctx, const http_sink_request *req, http_sink_response *res) {
    rig *r = ctx;
    if (strcmp(req->path, "/prepare") == 0) {
        if (r->restart_on_prepare) {
            r->restart_on_prepare = 0;
            if (!pg_private_restart(&r->pg)) fprintf(stderr, "store_outage: restart failed\n");
        }
        res->body = "{\"toUser\": \"bob\"}";
        return;
    }
    res->body = "{}";
}

static int rig_start(rig *r, const char *name) {
    memset(r, 0, sizeof *r);
    if (!pg_private_start(&r->pg)) return 0;
    r->sink = http_sink_start();
    if (!r->sink) return 0;
    http_sink_set_handler(r->sink, sink_handler, r);
    const char *sink = http_sink_url(r->sink);
    char path[800], config[800];
    mv_strlcpy(r->dir, test_tmp_path(name), sizeof r->dir);
    snprintf(path, sizeof path, "%s/templates", r->dir);
    if (mkdir(r->dir, 0700) || mkdir(path, 0700)) return 0;
    snprintf(path, sizeof path, "%s/templates/slow.json", r->dir);
    if (!test_write_file(
            path,
            "{\"templateCd\": \"slow\", \"receiverContent\": {\"title\": \"Slow\"},"
            " \"prepare\": {\"webhook\": \"%s/prepare\"},"
            " \"actions\": [{\"actionCd\": \"ack\", \"name\": \"Ack\", \"variant\": \"p\","
            "   \"receiver\": true, \"handler\": null}]}",
            sink))
        return 0;
    snprintf(path, sizeof path, "%s/templates/refund.json", r->dir);
    if (!test_write_file(
            path, "{\"templateCd\": \"refund\", \"receiverContent\": {\"title\": \"R\"},"
                  " \"prepare\": {\"toUser\": \"bob\"},"
                  " \"actions\": [{\"actionCd\": \"approve\", \"name\": \"A\", \"variant\": \"p\","
                  "   \"receiver\": true, \"approval\": {\"capability\": \"refunds.large\"},"
                  "   \"handler\": null}]}"))
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
    snprintf(config, sizeof config, "%s/missived.json", r->dir);
    if (!test_write_file(config,
                         "{\"store\": \"%s\", \"templates\": \"%s/templates\","
                         " \"sagas\": \"%s/sagas\", \"auth\": {\"mode\": \"headers\"},"
                         " \"leases\": {\"clientRequestMs\": 700, \"clientRequestWaitMs\": 0},"
                         " \"approvals\": {\"secretEnv\": \"MISSIVE_TEST_APPROVAL_SECRET\"}}",
                         r->pg.url, r->dir, r->dir))
        return 0;
    setenv("MISSIVE_TEST_APPROVAL_SECRET", "an-approval-secret-of-at-least-32-bytes!", 1);
    r->port = test_free_port();
    char log[800];
    snprintf(log, sizeof log, "%s/daemon.log", r->dir);
    r->pid = test_daemon_start(config, r->port, NULL, log);
    return r->pid > 0;
}

static void rig_stop(rig *r) {
    if (r->pid > 0) CHECK_INT(test_daemon_stop(r->pid), 0);
    http_sink_stop(r->sink);
    pg_private_remove(&r->pg);
}

/* No client-facing text names the server: its socket directory, host, port or driver words. */
static bool leaks(const rig *r, const test_reply *t) {
    char *text = t->json ? json_dumps(t->json, JSON_COMPACT) : NULL;
    bool bad =
        text && (strstr(text, r->pg.dir) || strstr(text, "127.0.0.1") || strstr(text, "postgres") ||
                 strstr(text, "socket") || strstr(text, "SQLSTATE") || strstr(text, "http://"));
    if (bad) fprintf(stderr, "leaking body: %s\n", text);
    free(text);
    return bad;
}

TEST(a_postgres_restart_during_a_create_is_503_and_the_key_is_taken_over_after_its_lease) {
    rig r;
    REQUIRE(rig_start(&r, "outage-create"));
    const char *h = "X-User-Id: ana\nIdempotency-Key: order-1";
    r.restart_on_prepare = 1;
    test_reply t = test_http(r.port, "POST", "/messages/new/slow", h, "{\"n\": 1}");
    CHECK_INT(t.status, 503);
    CHECK_STR(test_reply_code(&t), "store_unavailable");
    CHECK(!leaks(&r, &t));
    test_reply_free(&t);
    /* within the lease: pending (409 with Retry-After), not failed */
    t = test_http(r.port, "POST", "/messages/new/slow", h, "{\"n\": 1}");
    CHECK_INT(t.status, 409);
    CHECK_STR(test_reply_code(&t), "client_request_pending");
    test_reply_free(&t);
    mv_sleep_ms(800);
    t = test_http(r.port, "POST", "/messages/new/slow", h, "{\"n\": 1}");
    CHECK_INT(t.status, 201);
    CHECK(!t.replayed);
    CHECK_INT(json_array_size(json_object_get(t.json, "messages")), 1);
    test_reply_free(&t);
    t = test_http(r.port, "POST", "/messages/new/slow", h, "{\"n\": 1}");
    CHECK_INT(t.status, 201);
    CHECK(t.replayed);
    test_reply_free(&t);
    t = test_http(r.port, "GET", "/messages/count", "X-User-Id: bob", NULL);
    CHECK_INT(json_integer_value(json_object_get(t.json, "count")), 1);
    test_reply_free(&t);
    rig_stop(&r);
}

TEST(every_route_answers_503_store_unavailable_while_postgres_is_down_and_works_after) {
    rig r;
    REQUIRE(rig_start(&r, "outage-routes"));
    const char *ana = "X-User-Id: ana";
    const char *bob = "X-User-Id: bob\nX-User-Permissions: is.admin,approvals.decide";
    test_reply t = test_http(r.port, "POST", "/messages/new/refund", ana, "{}");
    REQUIRE(t.status == 201);
    char id[32];
    mv_strlcpy(id, mv_json_str(json_array_get(json_object_get(t.json, "messages"), 0), "id"),
               sizeof id);
    test_reply_free(&t);
    char msg[64], actions[96], action[96];
    snprintf(msg, sizeof msg, "/messages/%s", id);
    snprintf(actions, sizeof actions, "/messages/%s/actions/receiver", id);
    snprintf(action, sizeof action, "/messages/%s/action/approve", id);
    t = test_http(r.port, "POST", action, bob, "{}");
    REQUIRE(t.status == 202);
    char approval[128], decision[160];
    snprintf(approval, sizeof approval, "/approvals/%s", mv_json_str(t.json, "approvalId"));
    snprintf(decision, sizeof decision, "%s/decision", approval);
    test_reply_free(&t);
    t = test_http(r.port, "POST", "/sagas/ship", bob, "{\"sagaId\": \"s-1\", \"input\": {}}");
    CHECK_INT(t.status, 200);
    test_reply_free(&t);

    const struct {
        const char *method, *path, *headers, *body;
    } calls[] = {
        {"GET", "/healthz", NULL, NULL},
        {"POST", "/messages/new/refund", ana, "{}"},
        {"POST", "/messages/new/refund", "X-User-Id: ana\nIdempotency-Key: k", "{}"},
        {"GET", "/messages", bob, NULL},
        {"GET", "/messages/count", bob, NULL},
        {"GET", msg, bob, NULL},
        {"GET", actions, bob, NULL},
        {"POST", action, bob, "{}"},
        {"GET", approval, bob, NULL},
        {"POST", decision, "X-User-Id: carol\nX-User-Permissions: approvals.decide",
         "{\"decision\": \"approved\"}"},
        {"POST", "/sagas/ship", bob, "{\"sagaId\": \"s-2\", \"input\": {}}"},
        {"GET", "/sagas/s-1", bob, NULL},
        {"POST", "/sagas/s-1/resume", bob, NULL},
        {"POST", "/sagas/s-1/compensate", bob, NULL},
        {"POST", "/sagas/s-1/resolve", bob,
         "{\"kind\": \"execution\", \"step\": \"pack\", \"effectId\": \"e\", \"outcome\": "
         "\"committed\"}"},
    };
    /* a restart under the pooled connections: each route once, never 500 */
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        REQUIRE(pg_private_restart(&r.pg));
        t = test_http(r.port, calls[i].method, calls[i].path, calls[i].headers, calls[i].body);
        if (t.status >= 500 && t.status != 503)
            fprintf(stderr, "after a restart %s %s: %ld\n", calls[i].method, calls[i].path,
                    t.status);
        CHECK(t.status < 500 || t.status == 503);
        CHECK(!leaks(&r, &t));
        test_reply_free(&t);
    }
    REQUIRE(pg_private_stop_server(&r.pg));
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        /* twice: the first call finds the cut connection, the second finds no server */
        for (int k = 0; k < 2; k++) {
            t = test_http(r.port, calls[i].method, calls[i].path, calls[i].headers, calls[i].body);
            if (t.status != 503)
                fprintf(stderr, "%s %s: %ld\n", calls[i].method, calls[i].path, t.status);
            CHECK_INT(t.status, 503);
            if (i > 0) CHECK_STR(test_reply_code(&t), "store_unavailable");
            CHECK(!leaks(&r, &t));
            test_reply_free(&t);
        }
    }
    REQUIRE(pg_private_start_server(&r.pg));
    int ok = 0;
    for (int i = 0; i < 40 && !ok; i++) {
        t = test_http(r.port, "GET", "/healthz", NULL, NULL);
        ok = t.status == 200;
        test_reply_free(&t);
        if (!ok) mv_sleep_ms(50);
    }
    CHECK(ok);
    t = test_http(r.port, "GET", "/messages/count", "X-User-Id: bob", NULL);
    CHECK_INT(t.status, 200);
    test_reply_free(&t);
    t = test_http(r.port, "POST", "/messages/new/refund", ana, "{}");
    CHECK_INT(t.status, 201);
    test_reply_free(&t);
    rig_stop(&r);
}

/* ---- SQLite whose files cannot grow (a full disk) ------------------------------------------ */

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

/* Sets the daemon's soft RLIMIT_FSIZE (bytes; RLIM_INFINITY lifts it, as far as the hard limit
 * allows): its files cannot grow past it, as on a full disk (missived ignores SIGXFSZ, so a write
 * fails instead of killing it). */
static bool limit_file_size(pid_t pid, rlim_t bytes) {
    struct rlimit rl;
    if (prlimit(pid, RLIMIT_FSIZE, NULL, &rl) != 0) return false;
    rl.rlim_cur = bytes < rl.rlim_max ? bytes : rl.rlim_max;
    return prlimit(pid, RLIMIT_FSIZE, &rl, NULL) == 0;
}

TEST(sqlite_that_cannot_grow_is_503_on_writes_and_healthz_until_it_can_again) {
    char dir[600], path[800], config[800], db[800];
    mv_strlcpy(dir, test_tmp_path("full-disk"), sizeof dir);
    snprintf(path, sizeof path, "%s/templates", dir);
    REQUIRE(mkdir(dir, 0700) == 0 && mkdir(path, 0700) == 0);
    snprintf(path, sizeof path, "%s/templates/note.json", dir);
    REQUIRE(test_write_file(path, "{\"templateCd\": \"note\", \"receiverContent\": {\"title\":"
                                  " \"{{text}}\"}, \"prepare\": {\"toUser\": \"bob\"},"
                                  " \"actions\": []}"));
    snprintf(db, sizeof db, "%s/m.db", dir);
    snprintf(config, sizeof config, "%s/missived.json", dir);
    REQUIRE(test_write_file(config,
                            "{\"store\": \"sqlite:%s\", \"templates\": \"%s/templates\","
                            " \"auth\": {\"mode\": \"headers\"}}",
                            db, dir));
    int port = test_free_port();
    pid_t pid = test_daemon_start(config, port, NULL, NULL);
    REQUIRE(pid > 0);
    test_reply t =
        test_http(port, "POST", "/messages/new/note", "X-User-Id: ana", "{\"text\": \"a\"}");
    CHECK_INT(t.status, 201);
    test_reply_free(&t);
    /* from now on no file of the store may grow */
    char wal[820], shm[820];
    snprintf(wal, sizeof wal, "%s-wal", db);
    snprintf(shm, sizeof shm, "%s-shm", db);
    long biggest = file_size(db);
    if (file_size(wal) > biggest) biggest = file_size(wal);
    if (file_size(shm) > biggest) biggest = file_size(shm);
    CHECK(limit_file_size(pid, (rlim_t)biggest));
    static char body[200000];
    int n = snprintf(body, sizeof body, "{\"text\": \"");
    memset(body + n, 'x', 150000);
    snprintf(body + n + 150000, sizeof body - (size_t)n - 150000, "\"}");
    t = test_http(port, "POST", "/messages/new/note", "X-User-Id: ana", body);
    CHECK_INT(t.status, 503);
    CHECK_STR(test_reply_code(&t), "store_unavailable");
    test_reply_free(&t);
    t = test_http(port, "GET", "/healthz", NULL, NULL);
    CHECK_INT(t.status, 503);
    test_reply_free(&t);
    t = test_http(port, "GET", "/messages/count", "X-User-Id: bob", NULL); /* reads still work */
    CHECK_INT(t.status, 200);
    CHECK_INT(json_integer_value(json_object_get(t.json, "count")), 1);
    test_reply_free(&t);
    /* room again */
    CHECK(limit_file_size(pid, RLIM_INFINITY));
    t = test_http(port, "GET", "/healthz", NULL, NULL);
    CHECK_INT(t.status, 200);
    test_reply_free(&t);
    t = test_http(port, "POST", "/messages/new/note", "X-User-Id: ana", body);
    CHECK_INT(t.status, 201);
    test_reply_free(&t);
    CHECK_INT(test_daemon_stop(pid), 0);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    return RUN_TESTS(
        sqlite_that_cannot_grow_is_503_on_writes_and_healthz_until_it_can_again,
        a_postgres_restart_during_a_create_is_503_and_the_key_is_taken_over_after_its_lease,
        every_route_answers_503_store_unavailable_while_postgres_is_down_and_works_after);
}
