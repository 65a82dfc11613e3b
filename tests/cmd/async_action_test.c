/* async_action_test.c — webhook action handlers through a real missived with a small write pool
 * (`threads` 4): 200 actions whose handler takes 1 s, pressed at once, all complete in a few
 * seconds (4 threads holding a call each would need 50 s) while the daemon's thread count stays
 * where it was and /readyz stays fast; and SIGTERM with handler calls in flight answers every
 * accepted request (503 draining), exits 0, and leaves the attempts retryable with their key. */
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>

#include "missive/base.h"
#include "support/daemon_proc.h"
#include "support/http_sink.h"
#include "test.h"

static int64_t mono_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* A daemon whose template "slowpoke" has one action whose handler is the sink. */
static pid_t start_daemon(const char *name, http_sink *sink, const char *extra, int *port) {
    char dir[600], path[800], config[800], log[800];
    mv_strlcpy(dir, test_tmp_path(name), sizeof dir);
    snprintf(path, sizeof path, "%s/templates", dir);
    mkdir(dir, 0700);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/templates/slowpoke.json", dir);
    if (!test_write_file(path,
                         "{\"templateCd\": \"slowpoke\", \"receiverContent\": {\"title\": \"t\"},"
                         " \"prepare\": {\"toUser\": \"host\"},"
                         " \"actions\": [{\"actionCd\": \"accept\", \"name\": \"Accept\","
                         " \"variant\": \"primary\", \"receiver\": true,"
                         " \"handler\": {\"webhook\": \"%s/hook\"}}]}",
                         http_sink_url(sink)))
        return -1;
    snprintf(config, sizeof config, "%s/missived.json", dir);
    if (!test_write_file(config,
                         "{\"store\": \"sqlite:%s/m.db\", \"templates\": \"%s/templates\","
                         " \"auth\": {\"mode\": \"headers\"}, \"threads\": 4%s}",
                         dir, dir, extra))
        return -1;
    snprintf(log, sizeof log, "%s/daemon.log", dir);
    *port = test_free_port();
    return test_daemon_start(config, *port, NULL, log);
}

static char **create_messages(int port, int n) {
    char **ids = calloc((size_t)n, sizeof *ids);
    for (int i = 0; i < n; i++) {
        test_reply t = test_http(port, "POST", "/messages/new/slowpoke", "X-User-Id: guest", "{}");
        const char *id = mv_json_str(json_array_get(json_object_get(t.json, "messages"), 0), "id");
        if (t.status == 201 && id) ids[i] = strdup(id);
        test_reply_free(&t);
        if (!ids[i]) return ids;
    }
    return ids;
}

/* n action presses at once over libcurl's multi interface (one connection each). */
typedef struct presses {
    int port, n;
    char **ids;
    long *status;
    char **body;
    int64_t took_ms;
} presses;

static void *press_all(void *arg) {
    presses *p = arg;
    char **paths = calloc((size_t)p->n, sizeof *paths);
    const char **headers = calloc((size_t)p->n, sizeof *headers),
               **bodies = calloc((size_t)p->n, sizeof *bodies);
    for (int i = 0; i < p->n; i++) {
        paths[i] = malloc(256);
        snprintf(paths[i], 256, "/messages/%s/action/accept", p->ids[i]);
        headers[i] = "X-User-Id: host";
        bodies[i] = "{}";
    }
    p->took_ms = test_http_many(p->port, p->n, "POST", (const char *const *)paths, headers, bodies,
                                p->status, p->body);
    for (int i = 0; i < p->n; i++)
        free(paths[i]);
    free(paths);
    free(headers);
    free(bodies);
    return NULL;
}

static void presses_init(presses *p, int port, char **ids, int n) {
    *p = (presses){.port = port, .n = n, .ids = ids};
    p->status = calloc((size_t)n, sizeof *p->status);
    p->body = calloc((size_t)n, sizeof *p->body);
}

static void presses_free(presses *p) {
    for (int i = 0; i < p->n; i++) {
        free(p->body[i]);
        free(p->ids[i]);
    }
    free(p->body);
    free(p->status);
    free(p->ids);
}

TEST(two_hundred_one_second_handlers_on_four_threads_finish_together_and_readyz_stays_fast) {
    enum { N = 200 };
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_set_default(sink, &(http_sink_response){.body = "{\"ok\": true}", .delay_ms = 1000});
    int port;
    pid_t pid = start_daemon("async-many", sink, "", &port);
    REQUIRE(pid > 0);
    char **ids = create_messages(port, N);
    REQUIRE(ids[N - 1]);
    int threads_idle = test_threads_of(pid);
    presses p;
    presses_init(&p, port, ids, N);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, press_all, &p) == 0);
    /* meanwhile: the daemon's threads and /readyz */
    int threads_max = threads_idle, readyz_n = 0, readyz_bad = 0;
    int64_t readyz_max = 0;
    while (http_sink_count(sink) < N / 2)
        mv_sleep_ms(5);
    for (int i = 0; i < 10; i++) {
        int n = test_threads_of(pid);
        if (n > threads_max) threads_max = n;
        int64_t t0 = mono_ms();
        test_reply r = test_http(port, "GET", "/readyz", NULL, NULL);
        int64_t took = mono_ms() - t0;
        if (took > readyz_max) readyz_max = took;
        if (r.status != 200) readyz_bad++;
        readyz_n++;
        test_reply_free(&r);
        mv_sleep_ms(40);
    }
    pthread_join(t, NULL);
    int ok = 0;
    for (int i = 0; i < N; i++)
        if (p.status[i] == 200 && p.body[i] && strstr(p.body[i], "\"ok\":true")) ok++;
    printf("async actions: %d × 1 s handlers on 4 write threads in %lld ms; daemon threads idle %d,"
           " max %d; /readyz max %lld ms over %d\n",
           N, (long long)p.took_ms, threads_idle, threads_max, (long long)readyz_max, readyz_n);
    CHECK_INT(ok, N);
    CHECK_INT(http_sink_count(sink), N);
    CHECK(p.took_ms < 10000);               /* a thread each: ≥ 50 s */
    CHECK(threads_max <= threads_idle + 2); /* does not grow with the handlers */
    CHECK_INT(readyz_bad, 0);
    CHECK(readyz_max < 1000);
    CHECK_INT(test_daemon_stop(pid), 0);
    presses_free(&p);
    http_sink_stop(sink);
}

TEST(sigterm_with_handler_calls_in_flight_answers_every_request_and_exits_zero) {
    enum { N = 12 };
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_set_default(sink, &(http_sink_response){.delay_ms = 8000});
    int port;
    pid_t pid =
        start_daemon("async-drain", sink,
                     ", \"shutdownTimeoutMs\": 1500, \"webhooks\": {\"timeoutMs\": 10000}", &port);
    REQUIRE(pid > 0);
    char **ids = create_messages(port, N);
    REQUIRE(ids[N - 1]);
    char keep_id[64];
    mv_strlcpy(keep_id, ids[0], sizeof keep_id);
    presses p;
    presses_init(&p, port, ids, N);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, press_all, &p) == 0);
    REQUIRE(http_sink_wait(sink, N, 10000));
    int64_t t0 = mono_ms();
    CHECK_INT(test_daemon_stop(pid), 0);
    int64_t stop_ms = mono_ms() - t0;
    pthread_join(t, NULL);
    int draining = 0;
    for (int i = 0; i < N; i++)
        if (p.status[i] == 503 && p.body[i] && strstr(p.body[i], "\"draining\"") &&
            !strstr(p.body[i], "127.0.0.1") && !strstr(p.body[i], "http"))
            draining++; /* the error names no URL */
    CHECK_INT(draining, N);
    CHECK(stop_ms < 3000);
    /* the next daemon on the same store retries the attempt with the same key */
    http_sink_set_default(sink, &(http_sink_response){.body = "null"});
    char dir[600], config[800];
    mv_strlcpy(dir, test_tmp_path("async-drain"), sizeof dir);
    snprintf(config, sizeof config, "%s/missived.json", dir);
    pid = test_daemon_start(config, port, NULL, NULL);
    REQUIRE(pid > 0);
    char path[256];
    snprintf(path, sizeof path, "/messages/%s/action/accept", keep_id);
    test_reply r = test_http(port, "POST", path, "X-User-Id: host", "{}");
    CHECK_INT(r.status, 200);
    test_reply_free(&r);
    CHECK_INT(http_sink_count(sink), N + 1);
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
    CHECK_INT(same, 1);
    http_sink_request_free(&retry);
    CHECK_INT(test_daemon_stop(pid), 0);
    presses_free(&p);
    http_sink_stop(sink);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = RUN_TESTS(
        two_hundred_one_second_handlers_on_four_threads_finish_together_and_readyz_stays_fast,
        sigterm_with_handler_calls_in_flight_answers_every_request_and_exits_zero);
    curl_global_cleanup();
    return rc;
}
