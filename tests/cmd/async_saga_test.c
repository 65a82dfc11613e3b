/* async_saga_test.c — webhook sagas through a real missived with a small write pool (`threads` 4),
 * on both stores: 100 sagas posted at once whose three steps take 0.5 s each all complete in a
 * few seconds (4 threads holding a saga each would need 100/4 × 1.5 s), the daemon's thread count
 * does not grow, and every step is called exactly once with the effect id its record names as
 * Idempotency-Key; SIGTERM with sagas in flight answers every request (503 draining), exits 0,
 * and the next daemon's recovery finishes each saga without calling a committed step again; a
 * compensation retried through POST /sagas/{id}/compensate on the loop keeps its key and order. */
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

static int64_t mono_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static _Atomic int step_delay_ms;
static _Atomic bool reject_step3; /* /step3 answers 422: the saga compensates */
static _Atomic int undo2_calls;   /* /undo2 fails (500) on its first attempt */

static void far_side(void *ctx, const http_sink_request *req, http_sink_response *res) {
    (void)ctx;
    res->status = 200;
    res->body = "{\"done\": true}";
    if (strncmp(req->path, "/step", 5) == 0) res->delay_ms = atomic_load(&step_delay_ms);
    if (strcmp(req->path, "/step3") == 0 && atomic_load(&reject_step3)) res->status = 422;
    if (strcmp(req->path, "/undo2") == 0 && atomic_fetch_add(&undo2_calls, 1) == 0)
        res->status = 500;
}

/* A daemon with the saga "slow": steps s1..s3 → /step1../step3, compensations /undo1../undo3. */
static pid_t start_daemon(const char *kind, const char *name, http_sink *sink, const char *extra,
                          int *port, char *config, size_t config_size) {
    const char *store = test_store_url(kind, name);
    if (!store) return -1;
    char dir[600], path[800];
    char label[128];
    snprintf(label, sizeof label, "%s-%s", name, kind);
    mv_strlcpy(dir, test_tmp_path(label), sizeof dir);
    snprintf(path, sizeof path, "%s/sagas", dir);
    mkdir(dir, 0700);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/sagas/slow.json", dir);
    const char *u = http_sink_url(sink);
    if (!test_write_file(path,
                         "{\"name\": \"slow\", \"steps\": ["
                         " {\"name\": \"s1\", \"run\": {\"webhook\": \"%s/step1\"},"
                         "  \"compensate\": {\"webhook\": \"%s/undo1\"}},"
                         " {\"name\": \"s2\", \"run\": {\"webhook\": \"%s/step2\"},"
                         "  \"compensate\": {\"webhook\": \"%s/undo2\"}},"
                         " {\"name\": \"s3\", \"run\": {\"webhook\": \"%s/step3\"},"
                         "  \"compensate\": {\"webhook\": \"%s/undo3\"}}]}",
                         u, u, u, u, u, u))
        return -1;
    snprintf(path, sizeof path, "%s/templates", dir);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/templates/press.json", dir);
    if (!test_write_file(path, "%s",
                         "{\"templateCd\": \"press\", \"receiverContent\": {\"title\": \"t\"},"
                         " \"prepare\": {\"toUser\": \"host\"},"
                         " \"actions\": [{\"actionCd\": \"go\", \"name\": \"Go\","
                         " \"variant\": \"primary\", \"receiver\": true,"
                         " \"handler\": {\"saga\": \"slow\"}}]}"))
        return -1;
    snprintf(config, config_size, "%s/missived.json", dir);
    if (!test_write_file(config,
                         "{\"store\": \"%s\", \"sagas\": \"%s/sagas\", \"templates\": "
                         "\"%s/templates\", \"auth\": {\"mode\": \"headers\"}, \"threads\": 4%s}",
                         store, dir, dir, extra))
        return -1;
    snprintf(path, sizeof path, "%s/daemon.log", dir);
    *port = test_free_port();
    return test_daemon_start(config, *port, NULL, path);
}

/* n POST /sagas/slow at once over libcurl's multi interface (one connection each). */
typedef struct posts {
    int port, n;
    const char *prefix;
    long *status;
    char **body;
    int64_t took_ms;
    atomic_bool done;
} posts;

static void *post_all(void *arg) {
    posts *p = arg;
    const char **paths = calloc((size_t)p->n, sizeof *paths),
               **headers = calloc((size_t)p->n, sizeof *headers);
    char **bodies = calloc((size_t)p->n, sizeof *bodies);
    for (int i = 0; i < p->n; i++) {
        paths[i] = "/sagas/slow";
        headers[i] = "X-User-Id: ops\nX-User-Permissions: is.admin";
        bodies[i] = malloc(128);
        snprintf(bodies[i], 128, "{\"sagaId\": \"%s-%d\", \"input\": {\"n\": %d}}", p->prefix, i,
                 i);
    }
    p->took_ms = test_http_many(p->port, p->n, "POST", paths, headers, (const char *const *)bodies,
                                p->status, p->body);
    atomic_store(&p->done, true);
    for (int i = 0; i < p->n; i++)
        free(bodies[i]);
    free(bodies);
    free(headers);
    free(paths);
    return NULL;
}

static void posts_init(posts *p, int port, const char *prefix, int n) {
    memset(p, 0, sizeof *p);
    p->port = port;
    p->n = n;
    p->prefix = prefix;
    p->status = calloc((size_t)n, sizeof *p->status);
    p->body = calloc((size_t)n, sizeof *p->body);
}

static void posts_free(posts *p) {
    for (int i = 0; i < p->n; i++)
        free(p->body[i]);
    free(p->body);
    free(p->status);
}

/* How many calls of the sink were for (saga, step) with key; and how many for (saga, step). */
static int calls_for(http_sink *sink, const char *saga, const char *step, const char *key,
                     int *any) {
    int n = http_sink_count(sink), same = 0;
    *any = 0;
    for (int i = 0; i < n; i++) {
        http_sink_request r;
        if (!http_sink_get(sink, i, &r)) continue;
        json_t *b = json_loads(r.body, 0, NULL);
        const char *k = http_sink_header(&r, "Idempotency-Key");
        if (mv_json_str(b, "sagaId") && strcmp(mv_json_str(b, "sagaId"), saga) == 0 &&
            mv_json_str(b, "step") && strcmp(mv_json_str(b, "step"), step) == 0 &&
            strncmp(r.path, "/step", 5) == 0) {
            (*any)++;
            if (k && key && strcmp(k, key) == 0) same++;
        }
        json_decref(b);
        http_sink_request_free(&r);
    }
    return same;
}

static const char ADMIN[] = "X-User-Id: ops\nX-User-Permissions: is.admin\n";

STORE_TEST(a_hundred_sagas_of_three_half_second_steps_on_four_threads_finish_together) {
    enum { N = 100 };
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_set_handler(sink, far_side, NULL);
    atomic_store(&step_delay_ms, 500);
    int port;
    char config[800];
    pid_t pid = start_daemon(kind, "async_sagas", sink, "", &port, config, sizeof config);
    REQUIRE(pid > 0);
    int threads_idle = test_threads_of(pid), threads_max = threads_idle;
    posts p;
    posts_init(&p, port, "many", N);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, post_all, &p) == 0);
    while (!atomic_load(&p.done)) { /* the daemon's threads while the sagas run */
        int n = test_threads_of(pid);
        if (n > threads_max) threads_max = n;
        mv_sleep_ms(20);
    }
    pthread_join(t, NULL);
    int completed = 0, keyed = 0;
    for (int i = 0; i < N; i++) {
        json_t *rec = p.body[i] ? json_loads(p.body[i], 0, NULL) : NULL;
        if (p.status[i] == 200 && mv_json_str(rec, "state") &&
            strcmp(mv_json_str(rec, "state"), "completed") == 0)
            completed++;
        /* each step once, with the effect id the record names as its key */
        bool all = json_array_size(json_object_get(rec, "steps")) == 3;
        for (size_t k = 0; all && k < 3; k++) {
            json_t *st = json_array_get(json_object_get(rec, "steps"), k);
            int any = 0;
            int same = calls_for(sink, mv_json_str(rec, "sagaId"), mv_json_str(st, "name"),
                                 mv_json_str(st, "effectId"), &any);
            all = same == 1 && any == 1;
        }
        if (all) keyed++;
        json_decref(rec);
    }
    printf("async sagas [%s]: %d × 3 × 0.5 s steps on 4 write threads in %lld ms; daemon threads "
           "idle %d, max %d\n",
           kind, N, (long long)p.took_ms, threads_idle, threads_max);
    CHECK_INT(completed, N);
    CHECK_INT(keyed, N);
    CHECK_INT(http_sink_count(sink), 3 * N);
    CHECK(p.took_ms < 8000);                /* a thread each: ≥ 37 s */
    CHECK(threads_max <= threads_idle + 2); /* does not grow with the sagas */
    CHECK_INT(test_daemon_stop(pid), 0);
    posts_free(&p);
    http_sink_stop(sink);
}

/* GET /sagas/{id}: the record (caller decrefs) or NULL. */
static json_t *get_saga(int port, const char *id) {
    char path[128];
    snprintf(path, sizeof path, "/sagas/%s", id);
    test_reply r = test_http(port, "GET", path, ADMIN, NULL);
    json_t *out = r.status == 200 ? json_incref(r.json) : NULL;
    test_reply_free(&r);
    return out;
}

STORE_TEST(sigterm_with_sagas_in_flight_answers_every_request_and_recovery_finishes_them) {
    enum { N = 8 };
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_set_handler(sink, far_side, NULL);
    atomic_store(&step_delay_ms, 600);
    int port;
    char config[800];
    pid_t pid = start_daemon(kind, "async_drain", sink,
                             ", \"shutdownTimeoutMs\": 5000, \"leases\": {\"actionMs\": 1500},"
                             " \"webhooks\": {\"timeoutMs\": 1000, \"connectTimeoutMs\": 500},"
                             " \"recovery\": {\"intervalMs\": 200}",
                             &port, config, sizeof config);
    REQUIRE(pid > 0);
    posts p;
    posts_init(&p, port, "drain", N);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, post_all, &p) == 0);
    REQUIRE(http_sink_wait(sink, N, 10000)); /* every saga's first step is in flight */
    int64_t t0 = mono_ms();
    CHECK_INT(test_daemon_stop(pid), 0);
    int64_t stop_ms = mono_ms() - t0;
    pthread_join(t, NULL);
    int draining = 0;
    for (int i = 0; i < N; i++)
        if (p.status[i] == 503 && p.body[i] && strstr(p.body[i], "\"draining\"") &&
            !strstr(p.body[i], "127.0.0.1") && !strstr(p.body[i], "http"))
            draining++;
    CHECK_INT(draining, N);
    CHECK(stop_ms < 3000); /* each ended after its step in flight, not after three */
    CHECK_INT(http_sink_count(sink), N);
    /* the next daemon's recovery goes on from step 2: step 1 is not called again */
    atomic_store(&step_delay_ms, 0);
    pid = test_daemon_start(config, port, NULL, NULL);
    REQUIRE(pid > 0);
    int completed = 0;
    int64_t until = mono_ms() + 15000;
    while (completed < N && mono_ms() < until) {
        completed = 0;
        for (int i = 0; i < N; i++) {
            char id[32];
            snprintf(id, sizeof id, "drain-%d", i);
            json_t *rec = get_saga(port, id);
            if (mv_json_str(rec, "state") && strcmp(mv_json_str(rec, "state"), "completed") == 0)
                completed++;
            json_decref(rec);
        }
        if (completed < N) mv_sleep_ms(100);
    }
    CHECK_INT(completed, N);
    CHECK_INT(http_sink_count(sink), 3 * N);
    int once = 0;
    for (int i = 0; i < N; i++) {
        char id[32];
        snprintf(id, sizeof id, "drain-%d", i);
        json_t *rec = get_saga(port, id);
        bool all = rec != NULL;
        for (size_t k = 0; all && k < 3; k++) {
            json_t *st = json_array_get(json_object_get(rec, "steps"), k);
            int any = 0;
            all = calls_for(sink, id, mv_json_str(st, "name"), mv_json_str(st, "effectId"), &any) ==
                      1 &&
                  any == 1;
        }
        if (all) once++;
        json_decref(rec);
    }
    CHECK_INT(once, N);
    CHECK_INT(test_daemon_stop(pid), 0);
    posts_free(&p);
    http_sink_stop(sink);
}

/* The path and Idempotency-Key of sink request i. */
static void request_of(http_sink *sink, int i, char path[32], char key[64]) {
    http_sink_request r;
    path[0] = key[0] = '\0';
    if (!http_sink_get(sink, i, &r)) return;
    const char *k = http_sink_header(&r, "Idempotency-Key");
    snprintf(path, 32, "%s", r.path);
    snprintf(key, 64, "%s", k ? k : "");
    http_sink_request_free(&r);
}

STORE_TEST(a_compensation_retried_over_http_on_the_loop_keeps_its_key_and_order) {
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_set_handler(sink, far_side, NULL);
    atomic_store(&step_delay_ms, 0);
    atomic_store(&reject_step3, true);
    atomic_store(&undo2_calls, 0);
    int port;
    char config[800];
    pid_t pid = start_daemon(kind, "async_comp", sink, "", &port, config, sizeof config);
    REQUIRE(pid > 0);
    test_reply r =
        test_http(port, "POST", "/sagas/slow", ADMIN, "{\"sagaId\": \"c-1\", \"input\": {}}");
    CHECK_INT(r.status, 200);
    /* step3 rejected: undo2 failed once (waits for its backoff), undo1 not reached yet */
    CHECK_STR(mv_json_str(r.json, "state"), "compensating");
    test_reply_free(&r);
    CHECK_INT(http_sink_count(sink), 4);
    mv_sleep_ms(150); /* the default backoff of a first failure is 100 ms */
    r = test_http(port, "POST", "/sagas/c-1/compensate", ADMIN, NULL);
    CHECK_INT(r.status, 200);
    CHECK_STR(mv_json_str(r.json, "state"), "compensated");
    json_t *steps = json_object_get(r.json, "steps");
    const char *undo2 = mv_json_str(json_array_get(steps, 1), "compensationEffectId"),
               *undo1 = mv_json_str(json_array_get(steps, 0), "compensationEffectId");
    const char *want[] = {"/step1", "/step2", "/step3", "/undo2", "/undo2", "/undo1"};
    CHECK_INT(http_sink_count(sink), 6);
    for (int i = 0; i < 6; i++) {
        char path[32], key[64];
        request_of(sink, i, path, key);
        CHECK_STR(path, want[i]);
        if (i == 3 || i == 4) CHECK_STR(key, undo2 ? undo2 : "?");
        if (i == 5) CHECK_STR(key, undo1 ? undo1 : "?");
    }
    test_reply_free(&r);
    /* resume of a compensated saga: answered with the record, nothing runs */
    r = test_http(port, "POST", "/sagas/c-1/resume", ADMIN, NULL);
    CHECK_INT(r.status, 200);
    CHECK_STR(mv_json_str(r.json, "state"), "compensated");
    test_reply_free(&r);
    CHECK_INT(http_sink_count(sink), 6);
    atomic_store(&reject_step3, false);
    CHECK_INT(test_daemon_stop(pid), 0);
    http_sink_stop(sink);
}

/* n action presses (POST /messages/{id}/action/go as the receiver) at once. */
typedef struct presses {
    int port, n;
    char **ids;
    long *status;
    char **body;
    int64_t took_ms;
    atomic_bool done;
} presses;

static void *press_all(void *arg) {
    presses *p = arg;
    char **paths = calloc((size_t)p->n, sizeof *paths);
    const char **headers = calloc((size_t)p->n, sizeof *headers),
               **bodies = calloc((size_t)p->n, sizeof *bodies);
    for (int i = 0; i < p->n; i++) {
        paths[i] = malloc(256);
        snprintf(paths[i], 256, "/messages/%s/action/go", p->ids[i]);
        headers[i] = "X-User-Id: host";
        bodies[i] = "{}";
    }
    p->took_ms = test_http_many(p->port, p->n, "POST", (const char *const *)paths, headers, bodies,
                                p->status, p->body);
    atomic_store(&p->done, true);
    for (int i = 0; i < p->n; i++)
        free(paths[i]);
    free(paths);
    free(headers);
    free(bodies);
    return NULL;
}

STORE_TEST(forty_actions_whose_handler_is_a_slow_saga_finish_together_on_four_threads) {
    enum { N = 40 };
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_set_handler(sink, far_side, NULL);
    atomic_store(&step_delay_ms, 500);
    atomic_store(&reject_step3, false);
    int port;
    char config[800];
    pid_t pid = start_daemon(kind, "async_saga_actions", sink, "", &port, config, sizeof config);
    REQUIRE(pid > 0);
    presses p;
    memset(&p, 0, sizeof p);
    p.port = port;
    p.n = N;
    p.ids = calloc(N, sizeof *p.ids);
    p.status = calloc(N, sizeof *p.status);
    p.body = calloc(N, sizeof *p.body);
    for (int i = 0; i < N; i++) {
        test_reply t = test_http(port, "POST", "/messages/new/press", "X-User-Id: guest", "{}");
        const char *id = mv_json_str(json_array_get(json_object_get(t.json, "messages"), 0), "id");
        if (t.status == 201 && id) p.ids[i] = strdup(id);
        test_reply_free(&t);
        REQUIRE(p.ids[i]);
    }
    int threads_idle = test_threads_of(pid), threads_max = threads_idle;
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, press_all, &p) == 0);
    while (!atomic_load(&p.done)) {
        int n = test_threads_of(pid);
        if (n > threads_max) threads_max = n;
        mv_sleep_ms(20);
    }
    pthread_join(t, NULL);
    int ok = 0;
    for (int i = 0; i < N; i++) {
        json_t *b = p.body[i] ? json_loads(p.body[i], 0, NULL) : NULL;
        json_t *result = json_object_get(b, "result");
        /* the saga's step results, as the synchronous handler answers them */
        if (p.status[i] == 200 && json_object_size(result) == 3 &&
            json_is_true(json_object_get(json_object_get(result, "s3"), "done")))
            ok++;
        json_decref(b);
    }
    printf("saga actions [%s]: %d × 3 × 0.5 s steps on 4 write threads in %lld ms; daemon "
           "threads idle %d, max %d\n",
           kind, N, (long long)p.took_ms, threads_idle, threads_max);
    CHECK_INT(ok, N);
    CHECK_INT(http_sink_count(sink), 3 * N); /* each step once */
    CHECK(p.took_ms < 8000);                 /* a thread each: ≥ 15 s */
    CHECK(threads_max <= threads_idle + 2);
    /* a second press of a done action runs nothing */
    char path[256];
    snprintf(path, sizeof path, "/messages/%s/action/go", p.ids[0]);
    test_reply r = test_http(port, "POST", path, "X-User-Id: host", "{}");
    CHECK(r.status != 200);
    test_reply_free(&r);
    CHECK_INT(http_sink_count(sink), 3 * N);
    CHECK_INT(test_daemon_stop(pid), 0);
    for (int i = 0; i < N; i++) {
        free(p.ids[i]);
        free(p.body[i]);
    }
    free(p.ids);
    free(p.body);
    free(p.status);
    http_sink_stop(sink);
}

STORE_TEST(sigterm_with_saga_actions_in_flight_answers_draining_and_the_next_press_goes_on) {
    enum { N = 6 };
    http_sink *sink = http_sink_start();
    REQUIRE(sink);
    http_sink_set_handler(sink, far_side, NULL);
    atomic_store(&step_delay_ms, 600);
    atomic_store(&reject_step3, false);
    int port;
    char config[800];
    pid_t pid = start_daemon(kind, "async_action_drain", sink, ", \"shutdownTimeoutMs\": 5000",
                             &port, config, sizeof config);
    REQUIRE(pid > 0);
    presses p;
    memset(&p, 0, sizeof p);
    p.port = port;
    p.n = N;
    p.ids = calloc(N, sizeof *p.ids);
    p.status = calloc(N, sizeof *p.status);
    p.body = calloc(N, sizeof *p.body);
    for (int i = 0; i < N; i++) {
        test_reply t = test_http(port, "POST", "/messages/new/press", "X-User-Id: guest", "{}");
        const char *id = mv_json_str(json_array_get(json_object_get(t.json, "messages"), 0), "id");
        if (t.status == 201 && id) p.ids[i] = strdup(id);
        test_reply_free(&t);
        REQUIRE(p.ids[i]);
    }
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, press_all, &p) == 0);
    REQUIRE(http_sink_wait(sink, N, 10000)); /* every saga's first step is in flight */
    CHECK_INT(test_daemon_stop(pid), 0);
    pthread_join(t, NULL);
    int draining = 0;
    for (int i = 0; i < N; i++)
        if (p.status[i] == 503 && p.body[i] && strstr(p.body[i], "\"draining\"") &&
            !strstr(p.body[i], "http"))
            draining++;
    CHECK_INT(draining, N);
    CHECK_INT(http_sink_count(sink), N); /* no step started after the stop */
    /* the next press (same attempt, same saga) continues from step 2 */
    atomic_store(&step_delay_ms, 0);
    pid = test_daemon_start(config, port, NULL, NULL);
    REQUIRE(pid > 0);
    int ok = 0;
    for (int i = 0; i < N; i++) {
        char path[256];
        snprintf(path, sizeof path, "/messages/%s/action/go", p.ids[i]);
        test_reply r = test_http(port, "POST", path, "X-User-Id: host", "{}");
        if (r.status == 200 && json_object_size(json_object_get(r.json, "result")) == 3) ok++;
        test_reply_free(&r);
    }
    CHECK_INT(ok, N);
    CHECK_INT(http_sink_count(sink), 3 * N); /* step 1 was not called again */
    CHECK_INT(test_daemon_stop(pid), 0);
    for (int i = 0; i < N; i++) {
        free(p.ids[i]);
        free(p.body[i]);
    }
    free(p.ids);
    free(p.body);
    free(p.status);
    http_sink_stop(sink);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc =
        RUN_TESTS(a_hundred_sagas_of_three_half_second_steps_on_four_threads_finish_together,
                  sigterm_with_sagas_in_flight_answers_every_request_and_recovery_finishes_them,
                  a_compensation_retried_over_http_on_the_loop_keeps_its_key_and_order,
                  forty_actions_whose_handler_is_a_slow_saga_finish_together_on_four_threads,
                  sigterm_with_saga_actions_in_flight_answers_draining_and_the_next_press_goes_on);
    curl_global_cleanup();
    return rc;
}
