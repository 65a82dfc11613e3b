/* commit_answer_test.c — the create and the action answered from their commit
 * (message/create_async.h, message/action_async.h) through a real missived: 32 clients sending one
 * Idempotency-Key at once get one message (one answer made from the commit, 31 replays), on both
 * stores; a create that calls out (a prepare webhook) still works from the I/O thread's route;
 * SIGTERM while a few hundred creates wait for their commits answers every request (201 or 503
 * draining, none reset), exits 0, and exactly the answered-201 creates are in the store afterwards;
 * 16 presses of an action without a handler (answered from its commit as well) archive the
 * message once; and 16 concurrent marks of one message answer 200 and move its count once. */
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "missive/base.h"
#include "support/daemon_proc.h"
#include "support/http_sink.h"
#include "support/stores.h"

typedef struct rig {
    pid_t pid;
    int port;
    char dir[600];
    char config[800];
} rig;

static bool rig_start(rig *r, const char *store, const char *name, const char *prepare_url) {
    memset(r, 0, sizeof *r);
    char path[800], log[800];
    mv_strlcpy(r->dir, test_tmp_path(name), sizeof r->dir);
    snprintf(path, sizeof path, "%s/templates", r->dir);
    if (mkdir(r->dir, 0700) || mkdir(path, 0700)) return false;
    snprintf(path, sizeof path, "%s/templates/note.json", r->dir);
    if (!test_write_file(path, "{\"templateCd\": \"note\", \"receiverContent\": {\"title\":"
                               " \"{{title}}\"}, \"prepare\": {\"toUser\": \"{{to}}\"},"
                               " \"actions\": [{\"actionCd\": \"ack\", \"name\": \"Ack\","
                               " \"variant\": \"primary\", \"receiver\": true,"
                               " \"handler\": null}]}"))
        return false;
    snprintf(path, sizeof path, "%s/templates/hooked.json", r->dir);
    if (prepare_url && !test_write_file(path,
                                        "{\"templateCd\": \"hooked\", \"receiverContent\":"
                                        " {\"title\": \"h\"}, \"prepare\": {\"webhook\": \"%s\"},"
                                        " \"actions\": []}",
                                        prepare_url))
        return false;
    snprintf(r->config, sizeof r->config, "%s/missived.json", r->dir);
    if (!test_write_file(r->config,
                         "{\"store\": \"%s\", \"templates\": \"%s/templates\","
                         " \"auth\": {\"mode\": \"headers\"}, \"threads\": 8,"
                         " \"shutdownTimeoutMs\": 5000}",
                         store, r->dir))
        return false;
    snprintf(log, sizeof log, "%s/daemon.log", r->dir);
    r->port = test_free_port();
    r->pid = test_daemon_start(r->config, r->port, NULL, log);
    return r->pid > 0;
}

static int64_t count_for(rig *r, const char *user) {
    char headers[128];
    snprintf(headers, sizeof headers, "X-User-Id: %s", user);
    test_reply t = test_http(r->port, "GET", "/messages/count", headers, NULL);
    int64_t n = t.status == 200 ? json_integer_value(json_object_get(t.json, "count")) : -1;
    test_reply_free(&t);
    return n;
}

/* n creates at once over libcurl's multi interface, one connection each. */
typedef struct burst {
    int port, n;
    const char *key; /* the same Idempotency-Key for all, or NULL for one each */
    long *status;
    char **body;
    bool *replayed;
    volatile int started;
} burst;

static atomic_int bodies; /* response bodies received so far, by every burst */

static size_t keep(char *p, size_t size, size_t n, void *ud) {
    char **b = ud;
    size_t old = *b ? strlen(*b) : 0;
    char *grown = realloc(*b, old + size * n + 1);
    if (!grown) return 0;
    memcpy(grown + old, p, size * n);
    grown[old + size * n] = '\0';
    *b = grown;
    atomic_fetch_add(&bodies, 1);
    return size * n;
}

static size_t header_line(char *p, size_t size, size_t n, void *ud) {
    if (size * n >= 26 && strncasecmp(p, "Idempotent-Replayed: true", 25) == 0) *(bool *)ud = true;
    return size * n;
}

static void *run_burst(void *arg) {
    burst *b = arg;
    CURLM *m = curl_multi_init();
    CURL **h = calloc((size_t)b->n, sizeof *h);
    struct curl_slist **hdrs = calloc((size_t)b->n, sizeof *hdrs);
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/messages/new/note", b->port);
    for (int i = 0; i < b->n; i++) {
        char key[96];
        snprintf(key, sizeof key, "Idempotency-Key: %s", b->key ? b->key : "");
        if (!b->key) snprintf(key, sizeof key, "Idempotency-Key: burst-%d", i);
        hdrs[i] = curl_slist_append(NULL, "X-User-Id: ana");
        hdrs[i] = curl_slist_append(hdrs[i], "Content-Type: application/json");
        hdrs[i] = curl_slist_append(hdrs[i], key);
        h[i] = curl_easy_init();
        curl_easy_setopt(h[i], CURLOPT_URL, url);
        curl_easy_setopt(h[i], CURLOPT_POSTFIELDS, "{\"to\": \"bob\", \"title\": \"hi\"}");
        curl_easy_setopt(h[i], CURLOPT_HTTPHEADER, hdrs[i]);
        curl_easy_setopt(h[i], CURLOPT_TIMEOUT_MS, 30000L);
        curl_easy_setopt(h[i], CURLOPT_WRITEFUNCTION, keep);
        curl_easy_setopt(h[i], CURLOPT_WRITEDATA, &b->body[i]);
        curl_easy_setopt(h[i], CURLOPT_HEADERFUNCTION, header_line);
        curl_easy_setopt(h[i], CURLOPT_HEADERDATA, &b->replayed[i]);
        curl_multi_add_handle(m, h[i]);
    }
    int running = 1;
    b->started = 1;
    while (running) {
        curl_multi_perform(m, &running);
        if (running) curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    for (int i = 0; i < b->n; i++) {
        curl_easy_getinfo(h[i], CURLINFO_RESPONSE_CODE, &b->status[i]);
        curl_multi_remove_handle(m, h[i]);
        curl_easy_cleanup(h[i]);
        curl_slist_free_all(hdrs[i]);
    }
    free(hdrs);
    free(h);
    curl_multi_cleanup(m);
    return NULL;
}

static void burst_init(burst *b, int port, int n, const char *key) {
    *b = (burst){.port = port, .n = n, .key = key};
    b->status = calloc((size_t)n, sizeof *b->status);
    b->body = calloc((size_t)n, sizeof *b->body);
    b->replayed = calloc((size_t)n, sizeof *b->replayed);
}

static void burst_free(burst *b) {
    for (int i = 0; i < b->n; i++)
        free(b->body[i]);
    free(b->body);
    free(b->status);
    free(b->replayed);
}

/* The id of the only message of a create's answer, or "" */
static void first_id(const char *body, char out[32]) {
    out[0] = '\0';
    json_t *j = body ? json_loads(body, 0, NULL) : NULL;
    const char *id = mv_json_str(json_array_get(json_object_get(j, "messages"), 0), "id");
    if (id) mv_strlcpy(out, id, 32);
    json_decref(j);
}

STORE_TEST(thirty_two_clients_with_one_idempotency_key_create_one_message) {
    enum { N = 32 };
    char label[64];
    snprintf(label, sizeof label, "async-create-key-%s", kind);
    const char *store = test_store_url(kind, "async_create_key");
    REQUIRE(store);
    rig r;
    REQUIRE(rig_start(&r, store, label, NULL));
    burst b;
    burst_init(&b, r.port, N, "one-key");
    run_burst(&b);
    int created = 0, fresh = 0, same = 0;
    char first[32] = "", id[32];
    for (int i = 0; i < N; i++) {
        created += b.status[i] == 201;
        fresh += b.status[i] == 201 && !b.replayed[i];
        first_id(b.body[i], id);
        if (!first[0]) mv_strlcpy(first, id, sizeof first);
        same += id[0] && strcmp(id, first) == 0;
    }
    CHECK_INT(created, N);
    CHECK_INT(fresh, 1); /* one answer from the commit, every other one a replay */
    CHECK_INT(same, N);
    CHECK_INT(count_for(&r, "bob"), 1);
    CHECK_INT(count_for(&r, "ana"), 1); /* the sender's side too */
    CHECK_INT(test_daemon_stop(r.pid), 0);
    burst_free(&b);
}

TEST(a_create_whose_prepare_calls_out_still_answers_from_the_io_threads_route) {
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_set_default(sink, &(http_sink_response){.body = "{\"toUser\": \"carol\"}"});
    char url[300], store[700];
    snprintf(url, sizeof url, "%s/prepare", http_sink_url(sink));
    snprintf(store, sizeof store, "sqlite:%s", test_tmp_path("async-create-hooked.db"));
    rig r;
    REQUIRE(rig_start(&r, store, "async-create-hooked", url));
    test_reply t = test_http(r.port, "POST", "/messages/new/hooked",
                             "X-User-Id: ana\nIdempotency-Key: h1", "{}");
    CHECK_INT(t.status, 201);
    CHECK(!t.replayed);
    test_reply_free(&t);
    t = test_http(r.port, "POST", "/messages/new/hooked", "X-User-Id: ana\nIdempotency-Key: h1",
                  "{}");
    CHECK_INT(t.status, 201);
    CHECK(t.replayed);
    test_reply_free(&t);
    CHECK_INT(http_sink_count(sink), 1);
    CHECK_INT(count_for(&r, "carol"), 1);
    /* and the common path's errors are still answered, in the error shape */
    t = test_http(r.port, "POST", "/messages/new/nosuch", "X-User-Id: ana", "{}");
    CHECK_INT(t.status, 404);
    CHECK_STR(test_reply_code(&t), "template_not_found");
    test_reply_free(&t);
    t = test_http(r.port, "POST", "/messages/new/note", "X-User-Id: ana\nIdempotency-Key: h2",
                  "{\"clientRequestId\": \"other\"}");
    CHECK_INT(t.status, 400);
    test_reply_free(&t);
    CHECK_INT(test_daemon_stop(r.pid), 0);
    http_sink_stop(sink);
}

TEST(sigterm_while_creates_wait_for_their_commit_answers_every_request) {
    enum { N = 300 };
    char store[700];
    snprintf(store, sizeof store, "sqlite:%s", test_tmp_path("async-create-drain.db"));
    rig r;
    REQUIRE(rig_start(&r, store, "async-create-drain", NULL));
    burst b;
    burst_init(&b, r.port, N, NULL);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, run_burst, &b) == 0);
    atomic_store(&bodies, 0);
    while (!b.started)
        mv_sleep_ms(1);
    while (atomic_load(&bodies) < 20) /* creates are being answered: more are in flight */
        mv_sleep_ms(1);
    CHECK_INT(test_daemon_stop(r.pid), 0);
    pthread_join(t, NULL);
    int created = 0, draining = 0, other = 0;
    for (int i = 0; i < N; i++) {
        if (b.status[i] == 201)
            created++;
        else if (b.status[i] == 503 && b.body[i] && strstr(b.body[i], "\"draining\""))
            draining++;
        else
            other++; /* 0: reset or refused */
    }
    printf("SIGTERM during %d creates: %d created, %d draining, %d other\n", N, created, draining,
           other);
    /* a connection the gate had not accepted yet is refused (before it sent anything): those are
     * not requests; every request the daemon read was answered */
    r.pid = test_daemon_start(r.config, r.port, NULL, NULL);
    REQUIRE(r.pid > 0);
    CHECK_INT(count_for(&r, "bob"), created); /* exactly the answered creates committed */
    CHECK(created > 0);
    CHECK_INT(other, 0);
    CHECK_INT(test_daemon_stop(r.pid), 0);
    burst_free(&b);
}

/* n presses of one action at once, one connection each. */
typedef struct presses {
    int port, n;
    const char *path;
    long *status;
    char **body;
} presses;

static void *run_presses(void *arg) {
    presses *p = arg;
    CURLM *m = curl_multi_init();
    CURL **h = calloc((size_t)p->n, sizeof *h);
    struct curl_slist *hdrs = curl_slist_append(NULL, "X-User-Id: bob");
    hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", p->port, p->path);
    for (int i = 0; i < p->n; i++) {
        h[i] = curl_easy_init();
        curl_easy_setopt(h[i], CURLOPT_URL, url);
        curl_easy_setopt(h[i], CURLOPT_POSTFIELDS, "{}");
        curl_easy_setopt(h[i], CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(h[i], CURLOPT_TIMEOUT_MS, 30000L);
        curl_easy_setopt(h[i], CURLOPT_WRITEFUNCTION, keep);
        curl_easy_setopt(h[i], CURLOPT_WRITEDATA, &p->body[i]);
        curl_multi_add_handle(m, h[i]);
    }
    int running = 1;
    while (running) {
        curl_multi_perform(m, &running);
        if (running) curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    for (int i = 0; i < p->n; i++) {
        curl_easy_getinfo(h[i], CURLINFO_RESPONSE_CODE, &p->status[i]);
        curl_multi_remove_handle(m, h[i]);
        curl_easy_cleanup(h[i]);
    }
    curl_slist_free_all(hdrs);
    free(h);
    curl_multi_cleanup(m);
    return NULL;
}

STORE_TEST(sixteen_presses_of_an_action_without_handler_archive_the_message_once) {
    enum { N = 16 };
    char label[64];
    snprintf(label, sizeof label, "async-action-%s", kind);
    const char *store = test_store_url(kind, "async_action");
    REQUIRE(store);
    rig r;
    REQUIRE(rig_start(&r, store, label, NULL));
    test_reply t = test_http(r.port, "POST", "/messages/new/note", "X-User-Id: ana",
                             "{\"to\": \"bob\", \"title\": \"hi\"}");
    REQUIRE(t.status == 201);
    char id[32], path[128];
    mv_strlcpy(id, mv_json_str(json_array_get(json_object_get(t.json, "messages"), 0), "id"),
               sizeof id);
    test_reply_free(&t);
    /* an unknown action and another user's press: the checks' errors, nothing archived */
    snprintf(path, sizeof path, "/messages/%s/action/nosuch", id);
    t = test_http(r.port, "POST", path, "X-User-Id: bob", "{}");
    CHECK_INT(t.status, 404);
    CHECK_STR(test_reply_code(&t), "action_not_found");
    test_reply_free(&t);
    snprintf(path, sizeof path, "/messages/%s/action/ack", id);
    t = test_http(r.port, "POST", path, "X-User-Id: eve", "{}");
    CHECK_INT(t.status, 404);
    CHECK_STR(test_reply_code(&t), "message_not_found");
    test_reply_free(&t);
    presses p = {.port = r.port, .n = N, .path = path};
    p.status = calloc(N, sizeof *p.status);
    p.body = calloc(N, sizeof *p.body);
    run_presses(&p);
    int ok = 0, refused = 0;
    for (int i = 0; i < N; i++) {
        ok += p.status[i] == 200 && p.body[i] && strstr(p.body[i], "\"result\":null");
        refused += (p.status[i] == 409 && strstr(p.body[i], "action_conflict")) ||
                   (p.status[i] == 410 && strstr(p.body[i], "message_archived"));
    }
    CHECK_INT(ok, 1);
    CHECK_INT(refused, N - 1);
    t = test_http(r.port, "GET", "/messages/count?archived=true", "X-User-Id: bob", NULL);
    CHECK_INT(t.status, 200);
    CHECK_INT(json_integer_value(json_object_get(t.json, "count")), 1);
    test_reply_free(&t);
    CHECK_INT(count_for(&r, "bob"), 0); /* archived: out of the inbox */
    CHECK_INT(test_daemon_stop(r.pid), 0);
    for (int i = 0; i < N; i++)
        free(p.body[i]);
    free(p.body);
    free(p.status);
}

/* A mark answered from its commit: sixteen concurrent reads of one message by its receiver all
 * answer 200 with the message read, the unread count moves once, and a stranger's mark and an
 * unknown message are 404 — the checks' errors from the same route. */
STORE_TEST(sixteen_concurrent_marks_answer_from_their_commit_and_move_the_count_once) {
    enum { N = 16 };
    char label[64];
    snprintf(label, sizeof label, "async-mark-%s", kind);
    const char *store = test_store_url(kind, "async_mark");
    REQUIRE(store);
    rig r;
    REQUIRE(rig_start(&r, store, label, NULL));
    test_reply t = test_http(r.port, "POST", "/messages/new/note", "X-User-Id: ana",
                             "{\"to\": \"bob\", \"title\": \"hi\"}");
    REQUIRE(t.status == 201);
    char id[32], path[128];
    mv_strlcpy(id, mv_json_str(json_array_get(json_object_get(t.json, "messages"), 0), "id"),
               sizeof id);
    test_reply_free(&t);
    t = test_http(r.port, "GET", "/messages/count", "X-User-Id: bob", NULL);
    CHECK_INT(json_integer_value(json_object_get(t.json, "unread")), 1);
    test_reply_free(&t);
    snprintf(path, sizeof path, "/messages/%s/read", id);
    t = test_http(r.port, "POST", path, "X-User-Id: eve", NULL);
    CHECK_INT(t.status, 404);
    CHECK_STR(test_reply_code(&t), "message_not_found");
    test_reply_free(&t);
    t = test_http(r.port, "POST", "/messages/0123456789abcdef01234567/read", "X-User-Id: bob",
                  NULL);
    CHECK_INT(t.status, 404);
    test_reply_free(&t);
    presses p = {.port = r.port, .n = N, .path = path};
    p.status = calloc(N, sizeof *p.status);
    p.body = calloc(N, sizeof *p.body);
    run_presses(&p);
    int ok = 0;
    for (int i = 0; i < N; i++) {
        json_t *j = p.body[i] ? json_loads(p.body[i], 0, NULL) : NULL;
        json_t *read_at = json_object_get(json_object_get(j, "viewer"), "readAt");
        ok += p.status[i] == 200 && json_integer_value(read_at) > 0 && mv_json_str(j, "id") &&
              strcmp(mv_json_str(j, "id"), id) == 0;
        json_decref(j);
    }
    CHECK_INT(ok, N);
    t = test_http(r.port, "GET", "/messages/count", "X-User-Id: bob", NULL);
    CHECK_INT(json_integer_value(json_object_get(t.json, "count")), 1);
    CHECK_INT(json_integer_value(json_object_get(t.json, "unread")), 0);
    test_reply_free(&t);
    CHECK_INT(test_daemon_stop(r.pid), 0);
    for (int i = 0; i < N; i++)
        free(p.body[i]);
    free(p.body);
    free(p.status);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = RUN_TESTS(thirty_two_clients_with_one_idempotency_key_create_one_message,
                       a_create_whose_prepare_calls_out_still_answers_from_the_io_threads_route,
                       sigterm_while_creates_wait_for_their_commit_answers_every_request,
                       sixteen_presses_of_an_action_without_handler_archive_the_message_once,
                       sixteen_concurrent_marks_answer_from_their_commit_and_move_the_count_once);
    curl_global_cleanup();
    return rc;
}
