/* async_create_test.c — creates whose prepare webhook and payment calls wait on the loop, through
 * a real missived with a small write pool: fifty creates whose prepare takes 300 ms, sent at once
 * to `threads` 2, are answered in about one call's time (two threads holding a call each would
 * need 7.5 s) without the daemon growing threads; a refused payment session is the same 502 as
 * before, with the earlier session expired; and SIGTERM with twenty prepare calls in flight
 * finishes and answers every create, then exits 0. */
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>

#include "missive/base.h"
#include "support/daemon_proc.h"
#include "support/http_sink.h"
#include "support/stores.h"
#include "test.h"

static int64_t mono_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int threads_of(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    int n = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "Threads:", 8) == 0) n = atoi(line + 8);
    if (f) fclose(f);
    return n;
}

/* The far side: prepare answers the payload's "items" (default one item to "host") after
 * delay_ms; the payment provider opens s-1, s-2, … and refuses priceArgs {"fail": true}. */
typedef struct far_side {
    int delay_ms;
    atomic_int sessions;
} far_side;

static void answer(void *ctx, const http_sink_request *req, http_sink_response *res) {
    far_side *fs = ctx;
    static _Thread_local char body[2048];
    json_t *in = json_loads(req->body, 0, NULL);
    *res = (http_sink_response){.body = "{}"};
    if (strncmp(req->path, "/prepare", 8) == 0) {
        json_t *items = json_object_get(json_object_get(in, "payload"), "items");
        char *text = items ? json_dumps(items, JSON_COMPACT) : strdup("{\"toUser\": \"host\"}");
        mv_strlcpy(body, text, sizeof body);
        free(text);
        res->body = body;
        res->delay_ms = fs->delay_ms;
    } else if (strcmp(mv_json_str(in, "op") ? mv_json_str(in, "op") : "", "create") == 0) {
        if (json_is_true(json_object_get(json_object_get(in, "priceArgs"), "fail"))) {
            res->status = 400;
        } else {
            snprintf(body, sizeof body, "{\"sessionId\": \"s-%d\"}",
                     atomic_fetch_add(&fs->sessions, 1) + 1);
            res->body = body;
        }
    }
    json_decref(in);
}

/* A daemon on store (a URL) whose template "prep" has a prepare webhook, and "paid" a prepare
 * webhook and a payment code, both going to the sink. */
static pid_t start_daemon(const char *name, const char *store, http_sink *sink, const char *extra,
                          int *port) {
    char dir[600], path[800], config[800], log[800];
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
                             names[i], http_sink_url(sink),
                             i ? ", \"paymentCd\": \"deposit\"" : ""))
            return -1;
    }
    snprintf(config, sizeof config, "%s/missived.json", dir);
    if (!test_write_file(config,
                         "{\"store\": \"%s\", \"templates\": \"%s/templates\","
                         " \"auth\": {\"mode\": \"headers\"}, \"threads\": 2,"
                         " \"payment\": {\"webhook\": \"%s/pay\"}%s}",
                         store, dir, http_sink_url(sink), extra))
        return -1;
    snprintf(log, sizeof log, "%s/daemon.log", dir);
    *port = test_free_port();
    return test_daemon_start(config, *port, NULL, log);
}

/* n creates of "prep" at once over libcurl's multi interface (one connection each). */
typedef struct creates {
    int port, n;
    long *status;
    char **body;
    int64_t took_ms;
} creates;

static size_t keep(char *p, size_t size, size_t n, void *ud) {
    char **b = ud;
    size_t old = *b ? strlen(*b) : 0;
    char *grown = realloc(*b, old + size * n + 1);
    if (!grown) return 0;
    memcpy(grown + old, p, size * n);
    grown[old + size * n] = '\0';
    *b = grown;
    return size * n;
}

static void *create_all(void *arg) {
    creates *c = arg;
    CURLM *m = curl_multi_init();
    CURL **h = calloc((size_t)c->n, sizeof *h);
    struct curl_slist **hdrs = calloc((size_t)c->n, sizeof *hdrs);
    int64_t t0 = mono_ms();
    for (int i = 0; i < c->n; i++) {
        char url[256], key[64];
        snprintf(url, sizeof url, "http://127.0.0.1:%d/messages/new/prep", c->port);
        snprintf(key, sizeof key, "Idempotency-Key: many-%d", i);
        hdrs[i] = curl_slist_append(NULL, "X-User-Id: guest");
        hdrs[i] = curl_slist_append(hdrs[i], "Content-Type: application/json");
        hdrs[i] = curl_slist_append(hdrs[i], key);
        h[i] = curl_easy_init();
        curl_easy_setopt(h[i], CURLOPT_URL, url);
        curl_easy_setopt(h[i], CURLOPT_POSTFIELDS, "{}");
        curl_easy_setopt(h[i], CURLOPT_HTTPHEADER, hdrs[i]);
        curl_easy_setopt(h[i], CURLOPT_TIMEOUT_MS, 30000L);
        curl_easy_setopt(h[i], CURLOPT_WRITEFUNCTION, keep);
        curl_easy_setopt(h[i], CURLOPT_WRITEDATA, &c->body[i]);
        curl_multi_add_handle(m, h[i]);
    }
    int running = 1;
    while (running) {
        curl_multi_perform(m, &running);
        if (running) curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    c->took_ms = mono_ms() - t0;
    for (int i = 0; i < c->n; i++) {
        curl_easy_getinfo(h[i], CURLINFO_RESPONSE_CODE, &c->status[i]);
        curl_multi_remove_handle(m, h[i]);
        curl_easy_cleanup(h[i]);
        curl_slist_free_all(hdrs[i]);
    }
    free(hdrs);
    free(h);
    curl_multi_cleanup(m);
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
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_set_handler(sink, answer, &fs);
    int port;
    pid_t pid =
        start_daemon("acreate-many", test_store_url(kind, "acreate-many.db"), sink, "", &port);
    REQUIRE(pid > 0);
    int threads_idle = threads_of(pid), threads_max = threads_idle;
    creates c;
    creates_init(&c, port, N);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, create_all, &c) == 0);
    while (http_sink_count(sink) < N / 2 && !c.took_ms)
        mv_sleep_ms(5);
    for (int i = 0; i < 5; i++) {
        int n = threads_of(pid);
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
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_set_handler(sink, answer, &fs);
    int port;
    pid_t pid =
        start_daemon("acreate-pay", test_store_url(kind, "acreate-pay.db"), sink, "", &port);
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
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_set_handler(sink, answer, &fs);
    int port;
    pid_t pid = start_daemon("acreate-drain", test_store_url(kind, "acreate-drain.db"), sink,
                             ", \"shutdownTimeoutMs\": 5000", &port);
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

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = RUN_TESTS(
        fifty_creates_whose_prepare_takes_300_ms_on_two_write_threads_finish_in_about_one_call,
        a_refused_payment_session_is_the_same_502_and_the_earlier_session_is_expired,
        sigterm_with_twenty_prepare_calls_in_flight_finishes_and_answers_every_create);
    curl_global_cleanup();
    return rc;
}
