/* async_create_test.c — creates whose prepare webhook and payment calls wait on the loop, through
 * a real missived with a small write pool: fifty creates whose prepare takes 300 ms, sent at once
 * to `threads` 2, are answered in about one call's time (two threads holding a call each would
 * need 7.5 s) without the daemon growing threads; a refused payment session is the same 502 as
 * before, with the earlier session expired; SIGTERM with twenty prepare calls in flight
 * finishes and answers every create, then exits 0; and a prepare slower than the drain is
 * abandoned and answered 503 draining, its key left to the lease, so a later retry resends it. */
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>

#include "missive/base.h"
#include "support/daemon_proc.h"
#include "support/far_side.h"
#include "support/http_sink.h"
#include "support/stores.h"
#include "test.h"

/* A daemon on a fresh store of that kind whose template "prep" has a prepare webhook, and "paid"
 * a prepare webhook and a payment code, all going to a new sink that plays fs (*sink). */
static pid_t start_daemon(const char *name, const char *kind, far_side *fs, const char *extra,
                          http_sink **sink, int *port) {
    char dir[600], path[800], config[800], log[800], store[700];
    if (!(*sink = http_sink_start())) return -1;
    http_sink_set_handler(*sink, far_side_answer, fs);
    fs->to = "host";
    snprintf(path, sizeof path, "%s.db", name);
    mv_strlcpy(store, test_store_url(kind, path), sizeof store);
    mv_strlcpy(dir, test_tmp_path(name), sizeof dir);
    snprintf(path, sizeof path, "%s/templates", dir);
    mkdir(dir, 0700);
    mkdir(path, 0700);
    static const char *const names[] = {"prep", "paid"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/templates/%s.json", dir, names[i]);
        if (!test_write_file(path,
                             "{\"templateCd\": \"%s\", \"receiverContent\": {\"title\": \"t\"},"
                             " \"prepare\": {\"webhook\": \"%s/prepare\"}, \"actions\": []%s}",
                             names[i], http_sink_url(*sink),
                             i ? ", \"paymentCd\": \"deposit\"" : ""))
            return -1;
    }
    snprintf(config, sizeof config, "%s/missived.json", dir);
    if (!test_write_file(config,
                         "{\"store\": \"%s\", \"templates\": \"%s/templates\","
                         " \"auth\": {\"mode\": \"headers\"}, \"threads\": 2,"
                         " \"payment\": {\"webhook\": \"%s/pay\"}%s}",
                         store, dir, http_sink_url(*sink), extra))
        return -1;
    snprintf(log, sizeof log, "%s/daemon.log", dir);
    *port = test_free_port();
    return test_daemon_start(config, *port, NULL, log);
}

/* n creates of "prep" at once (a fresh Idempotency-Key each), on a thread of their own. */
typedef struct creates {
    int port, n;
    const char *key; /* every create with this Idempotency-Key; NULL: "many-<i>" */
    long *status;
    char **body;
    int64_t took_ms;
} creates;

static void *create_all(void *arg) {
    creates *c = arg;
    const char **paths = calloc((size_t)c->n, sizeof *paths),
               **bodies = calloc((size_t)c->n, sizeof *bodies);
    char **headers = calloc((size_t)c->n, sizeof *headers);
    for (int i = 0; i < c->n; i++) {
        paths[i] = "/messages/new/prep";
        bodies[i] = "{}";
        headers[i] = malloc(64);
        if (c->key)
            snprintf(headers[i], 64, "X-User-Id: guest\nIdempotency-Key: %s", c->key);
        else
            snprintf(headers[i], 64, "X-User-Id: guest\nIdempotency-Key: many-%d", i);
    }
    c->took_ms = test_http_many(c->port, c->n, "POST", paths, (const char *const *)headers, bodies,
                                c->status, c->body);
    for (int i = 0; i < c->n; i++)
        free(headers[i]);
    free(headers);
    free(bodies);
    free(paths);
    return NULL;
}

static void creates_init(creates *c, int port, int n) {
    *c = (creates){.port = port, .n = n};
    c->status = calloc((size_t)n, sizeof *c->status);
    c->body = calloc((size_t)n, sizeof *c->body);
}

/* Answers 201 with exactly one message to host. */
static int created(const creates *c) {
    int ok = 0;
    for (int i = 0; i < c->n; i++) {
        json_t *j = c->body[i] ? json_loads(c->body[i], 0, NULL) : NULL;
        json_t *msgs = json_object_get(j, "messages");
        if (c->status[i] == 201 && json_array_size(msgs) == 1 &&
            strcmp(mv_json_str(json_array_get(msgs, 0), "toUser"), "host") == 0)
            ok++;
        json_decref(j);
    }
    return ok;
}

static void creates_free(creates *c) {
    for (int i = 0; i < c->n; i++)
        free(c->body[i]);
    free(c->body);
    free(c->status);
}

STORE_TEST(fifty_creates_whose_prepare_takes_300_ms_on_two_write_threads_finish_in_about_one_call) {
    enum { N = 50 };
    far_side fs = {.delay_ms = 300};
    http_sink *sink = NULL;
    int port;
    pid_t pid = start_daemon("acreate-many", kind, &fs, "", &sink, &port);
    REQUIRE(pid > 0);
    int threads_idle = test_threads_of(pid), threads_max = threads_idle;
    creates c;
    creates_init(&c, port, N);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, create_all, &c) == 0);
    while (http_sink_count(sink) < N / 2 && !c.took_ms)
        mv_sleep_ms(5);
    for (int i = 0; i < 5; i++) {
        int n = test_threads_of(pid);
        if (n > threads_max) threads_max = n;
        mv_sleep_ms(20);
    }
    pthread_join(t, NULL);
    printf("async creates (%s): %d × 300 ms prepare on 2 write threads in %lld ms; daemon threads"
           " idle %d, max %d\n",
           kind, N, (long long)c.took_ms, threads_idle, threads_max);
    CHECK_INT(created(&c), N);
    CHECK_INT(http_sink_count(sink), N);
    CHECK(c.took_ms < 3000);                /* a thread each: ≥ 7.5 s */
    CHECK(threads_max <= threads_idle + 2); /* does not grow with the calls */
    /* a replay answers the same messages without calling prepare again */
    test_reply r = test_http(port, "POST", "/messages/new/prep",
                             "X-User-Id: guest\nIdempotency-Key: many-0", "{}");
    CHECK_INT(r.status, 201);
    CHECK(r.replayed);
    test_reply_free(&r);
    CHECK_INT(http_sink_count(sink), N);
    CHECK_INT(test_daemon_stop(pid), 0);
    creates_free(&c);
    http_sink_stop(sink);
}

STORE_TEST(a_refused_payment_session_is_the_same_502_and_the_earlier_session_is_expired) {
    far_side fs = {0};
    http_sink *sink = NULL;
    int port;
    pid_t pid = start_daemon("acreate-pay", kind, &fs, "", &sink, &port);
    REQUIRE(pid > 0);
    const char *body = "{\"items\": [{\"toUser\": \"a\"}, {\"toUser\": \"b\", \"priceArgs\":"
                       " {\"fail\": true}}]}";
    const char *ana = "X-User-Id: ana\nIdempotency-Key: pay-1";
    test_reply t = test_http(port, "POST", "/messages/new/paid", ana, body);
    CHECK_INT(t.status, 502);
    CHECK_STR(test_reply_code(&t), "payment_failed");
    CHECK_STR(mv_json_str(json_object_get(t.json, "error"), "message"),
              "payment session creation failed");
    test_reply_free(&t);
    CHECK_INT(http_sink_count(sink), 4); /* prepare, create s-1, create refused, expire s-1 */
    http_sink_request q;
    REQUIRE(http_sink_get(sink, 3, &q));
    json_t *b = json_loads(q.body, 0, NULL);
    CHECK_STR(mv_json_str(b, "op"), "expire");
    CHECK_STR(mv_json_str(b, "sessionId"), "s-1");
    json_decref(b);
    http_sink_request_free(&q);
    /* the key is failed: the replay says so, and nothing is called again */
    t = test_http(port, "POST", "/messages/new/paid", ana, body);
    CHECK_INT(t.status, 409);
    CHECK_STR(test_reply_code(&t), "client_request_failed");
    test_reply_free(&t);
    CHECK_INT(http_sink_count(sink), 4);
    CHECK_INT(test_daemon_stop(pid), 0);
    http_sink_stop(sink);
}

STORE_TEST(sigterm_with_twenty_prepare_calls_in_flight_finishes_and_answers_every_create) {
    enum { N = 20 };
    far_side fs = {.delay_ms = 800};
    http_sink *sink = NULL;
    int port;
    pid_t pid =
        start_daemon("acreate-drain", kind, &fs, ", \"shutdownTimeoutMs\": 5000", &sink, &port);
    REQUIRE(pid > 0);
    creates c;
    creates_init(&c, port, N);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, create_all, &c) == 0);
    REQUIRE(http_sink_wait(sink, N, 10000));
    CHECK_INT(test_daemon_stop(pid), 0);
    pthread_join(t, NULL);
    CHECK_INT(created(&c), N);
    creates_free(&c);
    http_sink_stop(sink);
}

STORE_TEST(a_prepare_outlasting_the_drain_is_503_draining_and_a_retry_later_resends_its_key) {
    enum { N = 5 };
    far_side fs = {.delay_ms = 8000};
    http_sink *sink = NULL;
    int port;
    const char *extra = ", \"shutdownTimeoutMs\": 1500, \"webhooks\": {\"timeoutMs\": 10000},"
                        " \"leases\": {\"clientRequestMs\": 1000}";
    pid_t pid = start_daemon("acreate-cut", kind, &fs, extra, &sink, &port);
    REQUIRE(pid > 0);
    creates c;
    creates_init(&c, port, N);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, create_all, &c) == 0);
    REQUIRE(http_sink_wait(sink, N, 10000));
    int64_t t0 = mv_now_ms();
    CHECK_INT(test_daemon_stop(pid), 0);
    CHECK(mv_now_ms() - t0 < 3000);
    pthread_join(t, NULL);
    int draining = 0;
    for (int i = 0; i < N; i++)
        if (c.status[i] == 503 && c.body[i] && strstr(c.body[i], "\"draining\"") &&
            !strstr(c.body[i], "127.0.0.1") && !strstr(c.body[i], "http"))
            draining++; /* the error names no URL */
    CHECK_INT(draining, N);
    /* the key was left to its lease: after it, a retry creates, sending the same prepare key */
    fs.delay_ms = 0;
    char dir[600], config[800];
    mv_strlcpy(dir, test_tmp_path("acreate-cut"), sizeof dir);
    snprintf(config, sizeof config, "%s/missived.json", dir);
    mv_sleep_ms(1100);
    pid = test_daemon_start(config, port, NULL, NULL);
    REQUIRE(pid > 0);
    test_reply r = test_http(port, "POST", "/messages/new/prep",
                             "X-User-Id: guest\nIdempotency-Key: many-0", "{}");
    CHECK_INT(r.status, 201);
    test_reply_free(&r);
    http_sink_request first, retry;
    REQUIRE(http_sink_get(sink, N, &retry));
    const char *key = http_sink_header(&retry, "Idempotency-Key");
    int same = 0;
    for (int i = 0; i < N; i++) {
        if (!http_sink_get(sink, i, &first)) continue;
        const char *k = http_sink_header(&first, "Idempotency-Key");
        if (key && k && strcmp(k, key) == 0) same++;
        http_sink_request_free(&first);
    }
    http_sink_request_free(&retry);
    CHECK_INT(same, 1);
    CHECK_INT(test_daemon_stop(pid), 0);
    creates_free(&c);
    http_sink_stop(sink);
}

/* Forty creates waiting on a key another create holds (its prepare takes 1.5 s) wait as timers on
 * the loop, not on the two write threads: ten creates with fresh keys sent after them reach their
 * prepare while the key is still held (a thread per wait would hold both until it is released),
 * and every waiter is then answered the holder's message. */
STORE_TEST(forty_creates_pending_on_one_key_hold_no_write_thread_while_they_wait) {
    enum { W = 40, F = 10 };
    far_side fs = {.delay_ms = 1500};
    http_sink *sink = NULL;
    int port;
    pid_t pid = start_daemon("acreate-pending", kind, &fs, "", &sink, &port);
    REQUIRE(pid > 0);
    creates h, w, f;
    creates_init(&h, port, 1);
    creates_init(&w, port, W);
    creates_init(&f, port, F);
    h.key = w.key = "shared";
    pthread_t th, tw, tf;
    REQUIRE(pthread_create(&th, NULL, create_all, &h) == 0);
    while (http_sink_count(sink) < 1) /* the holder's prepare: the key is reserved */
        mv_sleep_ms(5);
    REQUIRE(pthread_create(&tw, NULL, create_all, &w) == 0);
    mv_sleep_ms(200); /* the waiters are in (each a replay read, then a wait) */
    REQUIRE(pthread_create(&tf, NULL, create_all, &f) == 0);
    while (http_sink_count(sink) < 1 + F && !h.took_ms)
        mv_sleep_ms(5);
    bool fresh_called_while_held = !h.took_ms;
    pthread_join(th, NULL);
    pthread_join(tw, NULL);
    pthread_join(tf, NULL);
    CHECK(fresh_called_while_held);
    CHECK_INT(created(&h), 1);
    CHECK_INT(created(&w), W);
    CHECK_INT(created(&f), F);
    json_t *held = json_loads(h.body[0], 0, NULL);
    const char *id = mv_json_str(json_array_get(json_object_get(held, "messages"), 0), "id");
    int same = 0;
    for (int i = 0; i < W; i++) {
        json_t *j = json_loads(w.body[i], 0, NULL);
        const char *got = mv_json_str(json_array_get(json_object_get(j, "messages"), 0), "id");
        same += id && got && strcmp(id, got) == 0;
        json_decref(j);
    }
    CHECK_INT(same, W);
    CHECK_INT(http_sink_count(sink), 1 + F); /* the waiters called nothing */
    json_decref(held);
    creates_free(&h);
    creates_free(&w);
    creates_free(&f);
    CHECK_INT(test_daemon_stop(pid), 0);
    http_sink_stop(sink);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = RUN_TESTS(
        fifty_creates_whose_prepare_takes_300_ms_on_two_write_threads_finish_in_about_one_call,
        a_refused_payment_session_is_the_same_502_and_the_earlier_session_is_expired,
        sigterm_with_twenty_prepare_calls_in_flight_finishes_and_answers_every_create,
        a_prepare_outlasting_the_drain_is_503_draining_and_a_retry_later_resends_its_key,
        forty_creates_pending_on_one_key_hold_no_write_thread_while_they_wait);
    curl_global_cleanup();
    return rc;
}
