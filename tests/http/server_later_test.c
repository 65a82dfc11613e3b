/* server_later_test.c — answering later (mv_http_answer_later) over real sockets: twenty requests
 * whose answers come 300 ms later from another thread finish together on a server with one write
 * thread; a completion that comes before the handler returns, and a handler that answers now after
 * all, are both answered once; and a drain waits for a request still being answered later. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "http/request.h"
#include "http/router.h"
#include "missive/base.h"
#include "test.h"

static int64_t mono_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* ---- routes ---- */

static atomic_int then_runs;

static void then_answer(mv_http_request *req, mv_http_response *res, void *ctx) {
    (void)req;
    atomic_fetch_add(&then_runs, 1);
    mv_http_json(res, 200, json_pack("{s:s}", "answered", (const char *)ctx));
}

typedef struct delayed {
    mv_http_later *later;
    int ms;
} delayed;

static void *complete_later(void *arg) {
    delayed *d = arg;
    mv_sleep_ms(d->ms);
    mv_http_later_done(d->later, then_answer, "later");
    free(d);
    return NULL;
}

/* Answers 300 ms later from a thread of its own (as the call loop would). */
static void later(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_http_later *l = mv_http_answer_later(req);
    if (!l) {
        mv_http_json(res, 500, json_pack("{s:s}", "error", "no later"));
        return;
    }
    delayed *d = malloc(sizeof *d);
    *d = (delayed){.later = l, .ms = 300};
    pthread_t t;
    pthread_create(&t, NULL, complete_later, d);
    pthread_detach(t);
}

/* The completion comes before the handler has returned. */
static void early(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    (void)res;
    mv_http_later *l = mv_http_answer_later(req);
    mv_http_later_done(l, then_answer, "early");
    mv_sleep_ms(100); /* the answer must wait for this return */
}

/* Takes a later, then answers now after all. */
static void now(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_http_later *l = mv_http_answer_later(req);
    mv_http_later_cancel(l);
    mv_http_json(res, 200, json_pack("{s:s}", "answered", "now"));
}

typedef struct server {
    mv_router *router;
    mv_http_server *srv;
    int port;
} server;

static bool server_start(server *s) {
    memset(s, 0, sizeof *s);
    s->router = mv_router_new(NULL);
    mv_route routes[] = {
        {.method = "POST", .pattern = "/later", .handler = later, .public_route = true},
        {.method = "POST", .pattern = "/early", .handler = early, .public_route = true},
        {.method = "POST", .pattern = "/now", .handler = now, .public_route = true},
    };
    for (size_t i = 0; i < 3; i++)
        mv_router_add(s->router, &routes[i], NULL);
    mv_http_server_options so = {.listen = "127.0.0.1:0", .threads = 1};
    mv_err err = {0};
    if (mv_http_server_start(&so, s->router, &s->srv, &err) != MV_OK) return false;
    s->port = mv_http_server_port(s->srv);
    return true;
}

static void server_stop(server *s) {
    mv_http_server_drain(s->srv, 2000);
    mv_http_server_free(s->srv);
    mv_router_free(s->router);
}

/* ---- client ---- */

typedef struct post {
    int port;
    const char *path;
    long status;
    char body[256];
    bool request_id;
} post;

static size_t keep_body(char *p, size_t size, size_t n, void *ud) {
    post *q = ud;
    size_t have = strlen(q->body), add = size * n;
    if (have + add < sizeof q->body) {
        memcpy(q->body + have, p, add);
        q->body[have + add] = '\0';
    }
    return add;
}

static size_t keep_header(char *p, size_t size, size_t n, void *ud) {
    post *q = ud;
    if (size * n > 13 && strncasecmp(p, "X-Request-Id:", 13) == 0) q->request_id = true;
    return size * n;
}

static void *do_post(void *arg) {
    post *q = arg;
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", q->port, q->path);
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, keep_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, q);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, keep_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, q);
    if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &q->status);
    curl_easy_cleanup(h);
    return NULL;
}

TEST(twenty_answers_made_later_do_not_hold_the_single_write_thread) {
    server s;
    REQUIRE(server_start(&s));
    enum { N = 20 };
    post q[N];
    pthread_t t[N];
    int64_t t0 = mono_ms();
    for (int i = 0; i < N; i++) {
        q[i] = (post){.port = s.port, .path = "/later"};
        pthread_create(&t[i], NULL, do_post, &q[i]);
    }
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    int64_t took = mono_ms() - t0;
    int ok = 0;
    for (int i = 0; i < N; i++)
        ok += q[i].status == 200 && strstr(q[i].body, "\"later\"") && q[i].request_id;
    CHECK_INT(ok, N);
    CHECK(took < 2000); /* a thread waiting 300 ms each: 6 s */
    server_stop(&s);
}

TEST(a_completion_before_the_handler_returns_and_a_cancelled_later_are_answered_once) {
    server s;
    REQUIRE(server_start(&s));
    atomic_store(&then_runs, 0);
    post e = {.port = s.port, .path = "/early"}, n = {.port = s.port, .path = "/now"};
    int64_t t0 = mono_ms();
    do_post(&e);
    CHECK(mono_ms() - t0 >= 100);
    CHECK_INT(e.status, 200);
    CHECK(strstr(e.body, "\"early\"") != NULL);
    CHECK_INT(atomic_load(&then_runs), 1);
    do_post(&n);
    CHECK_INT(n.status, 200);
    CHECK(strstr(n.body, "\"now\"") != NULL);
    CHECK_INT(atomic_load(&then_runs), 1);
    server_stop(&s);
}

typedef struct drain_arg {
    mv_http_server *srv;
    bool ok;
} drain_arg;

static void *drain(void *arg) {
    drain_arg *d = arg;
    d->ok = mv_http_server_drain(d->srv, 3000);
    return NULL;
}

TEST(a_drain_waits_for_a_request_being_answered_later) {
    server s;
    REQUIRE(server_start(&s));
    post q = {.port = s.port, .path = "/later"};
    pthread_t c, d;
    pthread_create(&c, NULL, do_post, &q);
    mv_sleep_ms(100); /* admitted, its answer 200 ms away */
    drain_arg da = {.srv = s.srv};
    pthread_create(&d, NULL, drain, &da);
    pthread_join(c, NULL);
    pthread_join(d, NULL);
    CHECK(da.ok);
    CHECK_INT(q.status, 200);
    CHECK(strstr(q.body, "\"later\"") != NULL);
    mv_http_server_free(s.srv);
    mv_router_free(s.router);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc =
        RUN_TESTS(twenty_answers_made_later_do_not_hold_the_single_write_thread,
                  a_completion_before_the_handler_returns_and_a_cancelled_later_are_answered_once,
                  a_drain_waits_for_a_request_being_answered_later);
    curl_global_cleanup();
    return rc;
}
