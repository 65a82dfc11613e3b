/* server_test.c — the libmicrohttpd layer over real sockets on 127.0.0.1 with libcurl: body limits
 * (Content-Length and chunked), keep-alive, raw path parameters, and the graceful drain. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "http/auth.h"
#include "http/ops.h"
#include "http/request.h"
#include "http/router.h"
#include "missive/base.h"
#include "test.h"

/* ---- the server under test --------------------------------------------------------------- */

static atomic_int slow_started;
static atomic_int slow_ms = 300;

static void echo_len(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_http_json(res, 200, json_pack("{s:I,s:s?}", "bodyBytes", (json_int_t)req->body_len, "id",
                                     mv_http_param(req, "id")));
}

static void slow(mv_http_request *req, mv_http_response *res, void *app) {
    (void)req;
    (void)app;
    atomic_store(&slow_started, 1);
    mv_sleep_ms(atomic_load(&slow_ms));
    mv_http_json(res, 200, json_pack("{s:b}", "slow", 1));
}

typedef struct fixture {
    mv_router *router;
    mv_auth *auth;
    mv_http_ops ops;
    mv_http_server *server;
    char base[64];
} fixture;

static bool fixture_start(fixture *f) {
    memset(f, 0, sizeof *f);
    f->router = mv_router_new(NULL);
    mv_auth_options ao = {.mode = MV_AUTH_HEADERS};
    mv_auth_new(&ao, &f->auth, NULL);
    mv_router_set_auth(f->router, f->auth);
    mv_http_ops_routes(f->router, &f->ops, NULL);
    mv_route routes[] = {
        {.method = "POST", .pattern = "/echo", .handler = echo_len, .json_body = true},
        {.method = "GET", .pattern = "/things/{id}", .handler = echo_len},
        {.method = "GET", .pattern = "/slow", .handler = slow, .public_route = true},
    };
    for (size_t i = 0; i < 3; i++) mv_router_add(f->router, &routes[i], NULL);
    mv_http_server_options so = {.listen = "127.0.0.1:0", .threads = 2};
    mv_err err = {0};
    if (mv_http_server_start(&so, f->router, &f->server, &err) != MV_OK) {
        fprintf(stderr, "server start: %s\n", err.message);
        return false;
    }
    snprintf(f->base, sizeof f->base, "http://127.0.0.1:%d", mv_http_server_port(f->server));
    return true;
}

static void fixture_stop(fixture *f) {
    if (f->server) mv_http_server_drain(f->server, 2000);
    mv_http_server_free(f->server);
    mv_router_free(f->router);
    mv_auth_free(f->auth);
}

/* ---- a small curl client ----------------------------------------------------------------- */

typedef struct reply {
    long status;
    char body[4096];
    size_t len;
    CURLcode rc;
    char request_id[64];
} reply;

static size_t on_body(char *p, size_t sz, size_t n, void *ud) {
    reply *r = ud;
    size_t k = sz * n;
    size_t room = sizeof r->body - 1 - r->len;
    memcpy(r->body + r->len, p, k < room ? k : room);
    r->len += k < room ? k : room;
    r->body[r->len] = '\0';
    return k;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud) {
    reply *r = ud;
    size_t k = sz * n;
    if (k > 14 && strncasecmp(p, "X-Request-Id: ", 14) == 0) {
        size_t v = k - 14;
        while (v && (p[14 + v - 1] == '\r' || p[14 + v - 1] == '\n')) v--;
        snprintf(r->request_id, sizeof r->request_id, "%.*s", (int)v, p + 14);
    }
    return k;
}

typedef struct chunked_src {
    size_t left;
} chunked_src;

static size_t read_chunked(char *buf, size_t sz, size_t n, void *ud) {
    chunked_src *s = ud;
    size_t k = sz * n;
    if (k > s->left) k = s->left;
    if (k > 65536) k = 65536;
    memset(buf, ' ', k);
    s->left -= k;
    return k;
}

/* method GET/POST; body may be NULL; chunked_bytes > 0 sends that many bytes chunked. */
static void request(CURL *c, const char *url, const char *body, size_t body_len,
                    size_t chunked_bytes, struct curl_slist *headers, long timeout_ms, reply *r) {
    memset(r, 0, sizeof *r);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms ? timeout_ms : 10000L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    chunked_src src = {.left = chunked_bytes};
    if (chunked_bytes) {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, read_chunked);
        curl_easy_setopt(c, CURLOPT_READDATA, &src);
    } else if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    } else {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    }
    r->rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
}

static struct curl_slist *user_headers(const char *extra) {
    struct curl_slist *h = curl_slist_append(NULL, "X-User-Id: u1");
    h = curl_slist_append(h, "Content-Type: application/json");
    if (extra) h = curl_slist_append(h, extra);
    return h;
}

static char *json_string_of(size_t total) {
    /* "xxxx…" with exactly total bytes including the quotes */
    char *b = malloc(total + 1);
    memset(b, 'x', total);
    b[0] = b[total - 1] = '"';
    b[total] = '\0';
    return b;
}

/* ---- tests ------------------------------------------------------------------------------- */

TEST(healthz_answers_json_with_a_request_id_over_a_socket) {
    fixture f;
    REQUIRE(fixture_start(&f));
    CURL *c = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "%s/healthz", f.base);
    reply r;
    request(c, url, NULL, 0, 0, NULL, 0, &r);
    CHECK_INT(r.rc, CURLE_OK);
    CHECK_INT(r.status, 200);
    CHECK_STR(r.body, "{\"status\":\"ok\"}");
    CHECK(mv_valid_uuid(r.request_id));
    curl_easy_cleanup(c);
    fixture_stop(&f);
}

TEST(a_body_of_exactly_one_mebibyte_is_accepted) {
    fixture f;
    REQUIRE(fixture_start(&f));
    CURL *c = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "%s/echo", f.base);
    char *body = json_string_of(MV_HTTP_MAX_BODY);
    struct curl_slist *h = user_headers(NULL);
    reply r;
    request(c, url, body, MV_HTTP_MAX_BODY, 0, h, 0, &r);
    CHECK_INT(r.status, 200);
    CHECK(strstr(r.body, "\"bodyBytes\":1048576") != NULL);
    curl_slist_free_all(h);
    free(body);
    curl_easy_cleanup(c);
    fixture_stop(&f);
}

TEST(an_oversized_body_with_content_length_is_413) {
    fixture f;
    REQUIRE(fixture_start(&f));
    char url[128];
    snprintf(url, sizeof url, "%s/echo", f.base);
    char *body = json_string_of(MV_HTTP_MAX_BODY + 1);
    /* with curl's Expect: 100-continue (the body is never sent) and without it */
    const char *expect[] = {NULL, "Expect:"};
    for (int i = 0; i < 2; i++) {
        CURL *c = curl_easy_init();
        struct curl_slist *h = user_headers(expect[i]);
        reply r;
        request(c, url, body, MV_HTTP_MAX_BODY + 1, 0, h, 0, &r);
        CHECK_INT(r.status, 413);
        CHECK(strstr(r.body, "\"code\":\"payload_too_large\"") != NULL);
        curl_slist_free_all(h);
        curl_easy_cleanup(c);
    }
    free(body);
    fixture_stop(&f);
}

TEST(an_oversized_chunked_body_is_413) {
    fixture f;
    REQUIRE(fixture_start(&f));
    char url[128];
    snprintf(url, sizeof url, "%s/echo", f.base);
    const char *expect[] = {NULL, "Expect:"};
    for (int i = 0; i < 2; i++) {
        CURL *c = curl_easy_init();
        struct curl_slist *h = user_headers("Transfer-Encoding: chunked");
        if (expect[i]) h = curl_slist_append(h, expect[i]);
        reply r;
        request(c, url, NULL, 0, 3 * MV_HTTP_MAX_BODY, h, 0, &r);
        CHECK_INT(r.rc, CURLE_OK);
        CHECK_INT(r.status, 413);
        CHECK(strstr(r.body, "\"code\":\"payload_too_large\"") != NULL);
        /* a small chunked body on the same connection still works */
        reply r2;
        request(c, url, NULL, 0, 100, h, 0, &r2);
        CHECK_INT(r2.status, 400); /* 100 spaces: empty JSON text */
        curl_slist_free_all(h);
        curl_easy_cleanup(c);
    }
    fixture_stop(&f);
}

TEST(authentication_is_checked_before_the_body_size) {
    fixture f;
    REQUIRE(fixture_start(&f));
    char url[128];
    snprintf(url, sizeof url, "%s/echo", f.base);
    char *body = json_string_of(MV_HTTP_MAX_BODY + 10);
    CURL *c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    reply r;
    request(c, url, body, MV_HTTP_MAX_BODY + 10, 0, h, 0, &r);
    CHECK_INT(r.status, 401);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    free(body);
    fixture_stop(&f);
}

TEST(keep_alive_reuses_the_connection) {
    fixture f;
    REQUIRE(fixture_start(&f));
    CURL *c = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "%s/healthz", f.base);
    long connects = -1;
    for (int i = 0; i < 3; i++) {
        reply r;
        request(c, url, NULL, 0, 0, NULL, 0, &r);
        CHECK_INT(r.status, 200);
        curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &connects);
        CHECK_INT(connects, i == 0 ? 1 : 0);
    }
    curl_easy_cleanup(c);
    fixture_stop(&f);
}

TEST(path_parameters_arrive_percent_decoded_without_changing_the_route) {
    fixture f;
    REQUIRE(fixture_start(&f));
    CURL *c = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "%s/things/a%%2Fb%%20c?x=1", f.base);
    struct curl_slist *h = user_headers(NULL);
    reply r;
    request(c, url, NULL, 0, 0, h, 0, &r);
    CHECK_INT(r.status, 200);
    CHECK(strstr(r.body, "\"id\":\"a/b c\"") != NULL);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    fixture_stop(&f);
}

typedef struct client_arg {
    const char *url;
    reply r;
} client_arg;

static void *client_thread(void *p) {
    client_arg *a = p;
    CURL *c = curl_easy_init();
    request(c, a->url, NULL, 0, 0, NULL, 0, &a->r);
    curl_easy_cleanup(c);
    return NULL;
}

TEST(graceful_stop_waits_for_an_in_flight_request_and_accepts_no_more) {
    fixture f;
    REQUIRE(fixture_start(&f));
    atomic_store(&slow_started, 0);
    atomic_store(&slow_ms, 300);
    char url[128];
    snprintf(url, sizeof url, "%s/slow", f.base);
    client_arg a = {.url = url};
    pthread_t th;
    pthread_create(&th, NULL, client_thread, &a);
    while (!atomic_load(&slow_started)) mv_sleep_ms(2);
    CHECK_INT(mv_http_server_in_flight(f.server), 1);
    CHECK(mv_http_server_drain(f.server, 5000));
    pthread_join(th, NULL);
    CHECK_INT(a.r.rc, CURLE_OK);
    CHECK_INT(a.r.status, 200);
    CHECK_STR(a.r.body, "{\"slow\":true}");
    /* no longer accepting: a new request gets no answer */
    CURL *c = curl_easy_init();
    char hz[128];
    snprintf(hz, sizeof hz, "%s/healthz", f.base);
    reply r;
    request(c, hz, NULL, 0, 0, NULL, 300, &r);
    CHECK(r.rc != CURLE_OK);
    CHECK(r.status != 200);
    curl_easy_cleanup(c);
    fixture_stop(&f);
}

TEST(drain_reports_requests_still_running_at_the_timeout) {
    fixture f;
    REQUIRE(fixture_start(&f));
    atomic_store(&slow_started, 0);
    atomic_store(&slow_ms, 600);
    char url[128];
    snprintf(url, sizeof url, "%s/slow", f.base);
    client_arg a = {.url = url};
    pthread_t th;
    pthread_create(&th, NULL, client_thread, &a);
    while (!atomic_load(&slow_started)) mv_sleep_ms(2);
    CHECK(!mv_http_server_drain(f.server, 50));
    CHECK_INT(mv_http_server_in_flight(f.server), 1);
    pthread_join(th, NULL);
    CHECK_INT(a.r.status, 200);
    fixture_stop(&f);
    atomic_store(&slow_ms, 300);
}

TEST(listen_addresses_parse_and_loopback_is_recognised) {
    char host[64];
    int port;
    mv_err err = {0};
    CHECK_CODE(mv_http_parse_listen("127.0.0.1:8080", host, sizeof host, &port, &err), MV_OK, &err);
    CHECK_STR(host, "127.0.0.1");
    CHECK_INT(port, 8080);
    CHECK_CODE(mv_http_parse_listen("[::1]:0", host, sizeof host, &port, &err), MV_OK, &err);
    CHECK_STR(host, "::1");
    CHECK_INT(port, 0);
    const char *bad[] = {"", "8080", "host:", "host:70000", "host:-1", ":80", "::1:80", "[::1]80",
                         "h:8x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_CODE(mv_http_parse_listen(bad[i], host, sizeof host, &port, &err), MV_INVALID_ARGUMENT,
                   &err);
    CHECK(mv_http_host_is_loopback("127.0.0.1"));
    CHECK(mv_http_host_is_loopback("127.8.9.10"));
    CHECK(mv_http_host_is_loopback("::1"));
    CHECK(mv_http_host_is_loopback("localhost"));
    CHECK(!mv_http_host_is_loopback("0.0.0.0"));
    CHECK(!mv_http_host_is_loopback("10.0.0.1"));
    CHECK(!mv_http_host_is_loopback("::"));
    CHECK(!mv_http_host_is_loopback("example.com"));
}

TEST(a_port_in_use_fails_with_an_io_error) {
    fixture f;
    REQUIRE(fixture_start(&f));
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", mv_http_server_port(f.server));
    mv_http_server_options so = {.listen = listen};
    mv_http_server *s2 = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_http_server_start(&so, f.router, &s2, &err), MV_IO, &err);
    CHECK(s2 == NULL);
    fixture_stop(&f);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = RUN_TESTS(healthz_answers_json_with_a_request_id_over_a_socket,
                       a_body_of_exactly_one_mebibyte_is_accepted,
                       an_oversized_body_with_content_length_is_413, an_oversized_chunked_body_is_413,
                       authentication_is_checked_before_the_body_size,
                       keep_alive_reuses_the_connection,
                       path_parameters_arrive_percent_decoded_without_changing_the_route,
                       graceful_stop_waits_for_an_in_flight_request_and_accepts_no_more,
                       drain_reports_requests_still_running_at_the_timeout,
                       listen_addresses_parse_and_loopback_is_recognised,
                       a_port_in_use_fails_with_an_io_error);
    curl_global_cleanup();
    return rc;
}
