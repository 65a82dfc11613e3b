/* server_test.c — the libmicrohttpd layer over real sockets on 127.0.0.1 with libcurl and raw
 * sockets: body limits (Content-Length and chunked), keep-alive, raw path parameters, the graceful
 * drain, and hostile clients (slow heads, malformed heads, connection limits, slow handlers). */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

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
    mv_http_json(res, 200,
                 json_pack("{s:I,s:s?}", "bodyBytes", (json_int_t)req->body_len, "id",
                           mv_http_param(req, "id")));
}

static atomic_int slow_running;

static void slow(mv_http_request *req, mv_http_response *res, void *app) {
    (void)req;
    (void)app;
    atomic_store(&slow_started, 1);
    atomic_fetch_add(&slow_running, 1);
    mv_sleep_ms(atomic_load(&slow_ms));
    atomic_fetch_sub(&slow_running, 1);
    mv_http_json(res, 200, json_pack("{s:b}", "slow", 1));
}

typedef struct fixture {
    mv_router *router;
    mv_auth *auth;
    mv_http_ops ops;
    mv_http_server *server;
    int port;
    char base[64];
} fixture;

static bool fixture_start_with(fixture *f, mv_http_server_options so) {
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
        {.method = "POST", .pattern = "/slow", .handler = slow, .public_route = true},
    };
    for (size_t i = 0; i < 4; i++)
        mv_router_add(f->router, &routes[i], NULL);
    so.listen = "127.0.0.1:0";
    mv_err err = {0};
    if (mv_http_server_start(&so, f->router, &f->server, &err) != MV_OK) {
        fprintf(stderr, "server start: %s\n", err.message);
        return false;
    }
    f->port = mv_http_server_port(f->server);
    snprintf(f->base, sizeof f->base, "http://127.0.0.1:%d", f->port);
    return true;
}

static bool fixture_start(fixture *f) {
    return fixture_start_with(f, (mv_http_server_options){.threads = 2});
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
        while (v && (p[14 + v - 1] == '\r' || p[14 + v - 1] == '\n'))
            v--;
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

/* ---- raw sockets ------------------------------------------------------------------------- */

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A connection to the fixture from source address src (NULL: the kernel's choice). */
static int raw_connect(fixture *f, const char *src) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    if (src) {
        struct sockaddr_in sa = {.sin_family = AF_INET};
        inet_pton(AF_INET, src, &sa.sin_addr);
        if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
            close(fd);
            return -1;
        }
    }
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->port)};
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    if (connect(fd, (struct sockaddr *)&to, sizeof to) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static bool send_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* Reads one response (head + Content-Length body) within timeout_ms into buf; returns the status,
 * 0 on close/timeout before a whole response. */
static int read_response(int fd, char *buf, size_t size, int timeout_ms) {
    size_t len = 0;
    int64_t end = now_ms() + timeout_ms;
    buf[0] = '\0';
    for (;;) {
        char *head_end = strstr(buf, "\r\n\r\n");
        if (head_end) {
            const char *cl = strcasestr(buf, "Content-Length:");
            size_t want = (size_t)(head_end + 4 - buf) + (cl ? strtoul(cl + 15, NULL, 10) : 0);
            if (len >= want) return atoi(buf + 9);
        }
        int left = (int)(end - now_ms());
        if (left <= 0 || len + 1 >= size) return 0;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, left) <= 0) return 0;
        ssize_t r = recv(fd, buf + len, size - 1 - len, 0);
        if (r <= 0) return 0;
        len += (size_t)r;
        buf[len] = '\0';
    }
}

static bool is_closed(int fd, int timeout_ms) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, timeout_ms) <= 0) return false;
    char c;
    return recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

/* Sends a raw request on a fresh connection (or, with keep_alive_first, after one good request on
 * the same connection) and returns the status; the body goes to out. */
static int raw_exchange(fixture *f, const char *req, size_t n, bool keep_alive_first, char *out,
                        size_t size) {
    int fd = raw_connect(f, NULL);
    if (fd < 0) return -1;
    if (keep_alive_first) {
        const char *ok = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";
        if (!send_all(fd, ok, strlen(ok)) || read_response(fd, out, size, 2000) != 200) {
            close(fd);
            return -2;
        }
    }
    int status = send_all(fd, req, n) ? read_response(fd, out, size, 2000) : -3;
    close(fd);
    return status;
}

static char *repeat(const char *prefix, const char *unit, size_t times, const char *suffix) {
    size_t pl = strlen(prefix), ul = strlen(unit), sl = strlen(suffix);
    char *b = malloc(pl + ul * times + sl + 1);
    memcpy(b, prefix, pl);
    for (size_t i = 0; i < times; i++)
        memcpy(b + pl + i * ul, unit, ul);
    memcpy(b + pl + ul * times, suffix, sl + 1);
    return b;
}

TEST(malformed_and_oversized_heads_are_answered_promptly_in_the_json_error_shape) {
    fixture f;
    REQUIRE(fixture_start(&f));
    struct {
        char *req;
        int status;
    } cases[] = {
        {repeat("GET /healthz?x=", "a", 9000, " HTTP/1.1\r\nHost: t\r\n\r\n"), 414},
        {repeat("GET /healthz HTTP/1.1\r\nHost: t\r\n", "X-Filler: aaaaaaaaaaaaaaaaaaaaaaaa\r\n",
                600, "\r\n"),
         431},
        {strdup("GET /healthz HTTP/2.0\r\nHost: t\r\n\r\n"), 505},
        {strdup("POST /echo HTTP/1.1\r\nHost: t\r\nX-User-Id: u1\r\nTransfer-Encoding: "
                "gzip\r\n\r\nxx"),
         501},
        {repeat("GET /healthz?", "&", 2500, " HTTP/1.1\r\nHost: t\r\n\r\n"), 400},
        {strdup("GET /healthz HTTP/1.1\r\nHost: t\r\nBad Header\r\n\r\n"), 400},
        {strdup(
             "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}"),
         400},
    };
    char out[4096];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int ka = 0; ka < 2; ka++) {
            int64_t t0 = now_ms();
            int st = raw_exchange(&f, cases[i].req, strlen(cases[i].req), ka, out, sizeof out);
            if (st != cases[i].status)
                fprintf(stderr, "case %zu (keep-alive %d): status %d, reply %.300s\n", i, ka, st,
                        out);
            /* after a first request libmicrohttpd parses the head itself: its answer is
             * rewritten into the same shape */
            CHECK_INT(st, cases[i].status);
            CHECK(strstr(out, "<html") == NULL);
            CHECK(strstr(out, "Content-Type: application/json") != NULL);
            CHECK(strstr(out, "{\"error\":{\"code\":\"") != NULL);
            if (i == 6) CHECK(strstr(out, "conflicting") != NULL);
            CHECK(now_ms() - t0 < 1000);
        }
        free(cases[i].req);
    }
    fixture_stop(&f);
}

TEST(bodies_and_heads_libmicrohttpd_refuses_itself_are_answered_in_the_json_error_shape) {
    fixture f;
    REQUIRE(fixture_start(&f));
    const char *chunked = "POST /echo HTTP/1.1\r\nHost: t\r\nX-User-Id: u1\r\n"
                          "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    struct {
        const char *body; /* after `chunked`, or NULL: head is the whole request */
        const char *head;
        int status;
        const char *code, *message;
        bool fresh_too; /* a first request's head is the gate's: only its body reaches MHD */
    } cases[] = {
        {"zz\r\n{}\r\n0\r\n\r\n", NULL, 400, "invalid_argument", "malformed chunked", true},
        {"2\r\n{}XX0\r\n\r\n", NULL, 400, "invalid_argument", "malformed chunked", true},
        {"fffffffffffffffffffff\r\n{}\r\n0\r\n\r\n", NULL, 413, "payload_too_large", "larger than",
         true},
        {NULL, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1x\r\n\r\n{}", 400,
         "invalid_argument", "Content-Length", false},
        {NULL, "GET /healthz HTTP/1.1\r\nHost: t\r\nBad Header\r\n\r\n", 400, "invalid_argument",
         "malformed", false},
        {NULL, "GET /healthz HTTP/1.1 extra\r\nHost: t\r\n\r\n", 400, "invalid_argument",
         "malformed request line", false},
    };
    char out[4096], req[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(req, sizeof req, "%s%s", cases[i].body ? chunked : cases[i].head,
                 cases[i].body ? cases[i].body : "");
        for (int ka = cases[i].fresh_too ? 0 : 1; ka < 2; ka++) {
            int st = raw_exchange(&f, req, strlen(req), ka, out, sizeof out);
            if (st != cases[i].status)
                fprintf(stderr, "case %zu (keep-alive %d): status %d, reply %.300s\n", i, ka, st,
                        out);
            CHECK_INT(st, cases[i].status);
            CHECK(strstr(out, "Content-Type: application/json") != NULL);
            CHECK(strstr(out, "X-Request-Id: ") != NULL);
            CHECK(strstr(out, "<html") == NULL);
            /* (libmicrohttpd 0.9.75 writes its head twice after a Content-Length it cannot
             * parse; the body is what matters here) */
            char *body = NULL;
            for (char *p = strstr(out, "\r\n\r\n"); p; p = strstr(p + 4, "\r\n\r\n"))
                body = p;
            json_t *j = body ? json_loads(body + 4, 0, NULL) : NULL;
            CHECK_STR(mv_json_str(json_object_get(j, "error"), "code"), cases[i].code);
            const char *m = mv_json_str(json_object_get(j, "error"), "message");
            CHECK(m && strstr(m, cases[i].message));
            json_decref(j);
        }
    }
    /* a request libmicrohttpd refused never reaches a handler */
    atomic_store(&slow_started, 0);
    const char *bad_cl = "POST /slow HTTP/1.1\r\nHost: t\r\nContent-Length: 1x\r\n\r\n";
    CHECK_INT(raw_exchange(&f, bad_cl, strlen(bad_cl), true, out, sizeof out), 400);
    mv_sleep_ms(400);
    CHECK_INT(atomic_load(&slow_started), 0);
    /* the connection is not reused after such an answer, and the server goes on */
    const char *ok = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";
    CHECK_INT(raw_exchange(&f, ok, strlen(ok), false, out, sizeof out), 200);
    fixture_stop(&f);
}

TEST(head_on_a_get_route_answers_its_status_and_headers_without_the_body) {
    fixture f;
    REQUIRE(fixture_start(&f));
    char get[4096], head[4096] = "";
    /* GET then HEAD then GET on one connection: the HEAD answer has no body bytes, or the third
     * answer would not parse */
    int fd = raw_connect(&f, NULL);
    REQUIRE(fd >= 0);
    const char *g = "GET /things/abc HTTP/1.1\r\nHost: t\r\nX-User-Id: u1\r\n\r\n";
    const char *h = "HEAD /things/abc HTTP/1.1\r\nHost: t\r\nX-User-Id: u1\r\n\r\n";
    CHECK(send_all(fd, g, strlen(g)));
    CHECK_INT(read_response(fd, get, sizeof get, 2000), 200);
    CHECK(send_all(fd, h, strlen(h)));
    /* read just the head: read_response would wait for Content-Length bytes */
    size_t len = 0;
    int64_t end = now_ms() + 2000;
    while (!strstr(head, "\r\n\r\n") && now_ms() < end && len + 1 < sizeof head) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0) continue;
        ssize_t r = recv(fd, head + len, sizeof head - 1 - len, 0);
        if (r <= 0) break;
        len += (size_t)r;
        head[len] = '\0';
    }
    CHECK(strncmp(head, "HTTP/1.1 200", 12) == 0);
    char *head_end = strstr(head, "\r\n\r\n");
    REQUIRE(head_end);
    CHECK(head_end[4] == '\0'); /* nothing after the head */
    const char *gl = strcasestr(get, "Content-Length:"), *hl = strcasestr(head, "Content-Length:");
    REQUIRE(gl && hl);
    CHECK_INT(atoi(hl + 15), atoi(gl + 15)); /* the GET body's length */
    CHECK(atoi(gl + 15) > 0);
    CHECK(strstr(head, "Content-Type: application/json") != NULL);
    CHECK(send_all(fd, g, strlen(g)));
    CHECK_INT(read_response(fd, get, sizeof get, 2000), 200);
    CHECK(strstr(get, "\"id\":\"abc\"") != NULL);
    close(fd);
    /* HEAD runs the GET route's checks too, and another method on a known path is 404 with Allow */
    const char *anon = "HEAD /things/abc HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    fd = raw_connect(&f, NULL);
    REQUIRE(fd >= 0);
    CHECK(send_all(fd, anon, strlen(anon)));
    memset(head, 0, sizeof head);
    len = 0;
    while (len + 1 < sizeof head) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 2000) <= 0) break;
        ssize_t r = recv(fd, head + len, sizeof head - 1 - len, 0);
        if (r <= 0) break;
        len += (size_t)r;
    }
    close(fd);
    CHECK(strncmp(head, "HTTP/1.1 401", 12) == 0);
    head_end = strstr(head, "\r\n\r\n");
    CHECK(head_end && head_end[4] == '\0');
    const char *del = "DELETE /things/abc HTTP/1.1\r\nHost: t\r\nX-User-Id: u1\r\n\r\n";
    CHECK_INT(raw_exchange(&f, del, strlen(del), false, get, sizeof get), 404);
    CHECK(strstr(get, "Allow: GET, HEAD\r\n") != NULL);
    CHECK(strstr(get, "\"code\":\"not_found\"") != NULL);
    const char *post = "POST /healthz HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n";
    CHECK_INT(raw_exchange(&f, post, strlen(post), false, get, sizeof get), 404);
    CHECK(strstr(get, "Allow: GET, HEAD\r\n") != NULL);
    const char *none = "GET /nowhere HTTP/1.1\r\nHost: t\r\n\r\n";
    CHECK_INT(raw_exchange(&f, none, strlen(none), false, get, sizeof get), 404);
    CHECK(strstr(get, "Allow:") == NULL);
    fixture_stop(&f);
}

TEST(a_head_that_does_not_arrive_in_time_is_answered_408_and_closed) {
    fixture f;
    REQUIRE(
        fixture_start_with(&f, (mv_http_server_options){.threads = 2, .header_timeout_ms = 300}));
    int fd = raw_connect(&f, NULL);
    REQUIRE(fd >= 0);
    const char *part = "GET /healthz HTTP/1.1\r\nHost: t\r\n";
    CHECK(send_all(fd, part, strlen(part)));
    char out[2048];
    int64_t t0 = now_ms();
    /* trickle bytes, as a slowloris client does: each byte must not extend the deadline */
    for (int i = 0; i < 4; i++) {
        mv_sleep_ms(100);
        send(fd, "X", 1, MSG_NOSIGNAL);
    }
    CHECK_INT(read_response(fd, out, sizeof out, 2000), 408);
    CHECK(strstr(out, "\"code\":\"invalid_argument\"") != NULL);
    CHECK(now_ms() - t0 < 1500);
    CHECK(is_closed(fd, 2000));
    close(fd);
    fixture_stop(&f);
}

TEST(slow_heads_neither_delay_nor_lock_out_a_fresh_client) {
    /* 300 connections that never finish their head, from three addresses, against a server
     * that holds at most 200: the oldest are dropped to make room, and a fresh client is
     * answered at once, every time. */
    fixture f;
    REQUIRE(fixture_start_with(&f, (mv_http_server_options){.threads = 2, .max_connections = 200}));
    int slow_fds[300];
    const char *srcs[] = {"127.0.0.2", "127.0.0.3", "127.0.0.4"};
    int opened = 0;
    for (int i = 0; i < 300; i++) {
        slow_fds[i] = raw_connect(&f, srcs[i % 3]);
        if (slow_fds[i] >= 0) {
            send_all(slow_fds[i], "GET /healthz HTTP/1.1\r\nHost:", 28);
            opened++;
        }
    }
    CHECK_INT(opened, 300);
    mv_sleep_ms(100);
    int64_t worst = 0;
    char out[2048];
    for (int i = 0; i < 20; i++) {
        int64_t t0 = now_ms();
        const char *req = "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
        CHECK_INT(raw_exchange(&f, req, strlen(req), false, out, sizeof out), 200);
        int64_t d = now_ms() - t0;
        if (d > worst) worst = d;
    }
    CHECK(worst < 200);
    /* the first slow connections were dropped to make room */
    CHECK(is_closed(slow_fds[0], 1000));
    for (int i = 0; i < 300; i++)
        if (slow_fds[i] >= 0) close(slow_fds[i]);
    fixture_stop(&f);
}

TEST(connections_beyond_the_per_address_limit_are_closed_at_once) {
    fixture f;
    REQUIRE(fixture_start_with(
        &f, (mv_http_server_options){.threads = 2, .max_connections_per_ip = 5}));
    int fds[6];
    for (int i = 0; i < 6; i++) {
        fds[i] = raw_connect(&f, "127.0.0.5");
        REQUIRE(fds[i] >= 0);
        mv_sleep_ms(20); /* in order */
    }
    CHECK(is_closed(fds[5], 1000));
    CHECK(!is_closed(fds[0], 100));
    /* another address is not affected, and a closed connection frees its place */
    char out[2048];
    const char *req = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";
    CHECK_INT(raw_exchange(&f, req, strlen(req), false, out, sizeof out), 200);
    close(fds[0]);
    close(fds[5]);
    mv_sleep_ms(50);
    int again = raw_connect(&f, "127.0.0.5");
    REQUIRE(again >= 0);
    CHECK(send_all(again, req, strlen(req)));
    CHECK_INT(read_response(again, out, sizeof out, 2000), 200);
    close(again);
    for (int i = 1; i < 5; i++)
        close(fds[i]);
    fixture_stop(&f);
}

typedef struct slow_post {
    fixture *f;
    int status;
} slow_post;

static void *slow_post_thread(void *p) {
    slow_post *sp = p;
    char out[2048];
    const char *req = "POST /slow HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n";
    sp->status = raw_exchange(sp->f, req, strlen(req), false, out, sizeof out);
    return NULL;
}

TEST(twelve_slow_handlers_run_at_once_and_never_delay_a_health_check) {
    fixture f;
    REQUIRE(fixture_start_with(&f, (mv_http_server_options){.threads = 16}));
    atomic_store(&slow_ms, 800);
    atomic_store(&slow_running, 0);
    slow_post sp[12];
    pthread_t th[12];
    int64_t t0 = now_ms();
    for (int i = 0; i < 12; i++) {
        sp[i].f = &f;
        pthread_create(&th[i], NULL, slow_post_thread, &sp[i]);
    }
    while (atomic_load(&slow_running) < 12 && now_ms() - t0 < 2000)
        mv_sleep_ms(5);
    CHECK_INT(atomic_load(&slow_running), 12);
    int64_t worst = 0;
    char out[2048];
    for (int i = 0; i < 10; i++) {
        int64_t a = now_ms();
        const char *req = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";
        CHECK_INT(raw_exchange(&f, req, strlen(req), false, out, sizeof out), 200);
        if (now_ms() - a > worst) worst = now_ms() - a;
    }
    CHECK(worst < 100);
    for (int i = 0; i < 12; i++) {
        pthread_join(th[i], NULL);
        CHECK_INT(sp[i].status, 200);
    }
    CHECK(now_ms() - t0 < 1800); /* together, not one after another */
    atomic_store(&slow_ms, 300);
    fixture_stop(&f);
}

typedef struct drain_arg {
    mv_http_server *s;
    bool ok;
} drain_arg;

static void *drain_thread(void *p) {
    drain_arg *d = p;
    d->ok = mv_http_server_drain(d->s, 5000);
    return NULL;
}

TEST(a_request_arriving_during_the_drain_is_answered_503_draining) {
    fixture f;
    REQUIRE(fixture_start(&f));
    atomic_store(&slow_started, 0);
    atomic_store(&slow_ms, 500);
    /* a keep-alive connection opened before the drain */
    int fd = raw_connect(&f, NULL);
    REQUIRE(fd >= 0);
    char out[2048];
    const char *hz = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";
    CHECK(send_all(fd, hz, strlen(hz)));
    CHECK_INT(read_response(fd, out, sizeof out, 2000), 200);
    char url[128];
    snprintf(url, sizeof url, "%s/slow", f.base);
    client_arg a = {.url = url};
    pthread_t th;
    pthread_create(&th, NULL, client_thread, &a);
    while (!atomic_load(&slow_started))
        mv_sleep_ms(2);
    drain_arg d = {.s = f.server};
    pthread_t dt;
    pthread_create(&dt, NULL, drain_thread, &d);
    mv_sleep_ms(100); /* the drain has begun; the slow request is still running */
    CHECK(send_all(fd, hz, strlen(hz)));
    CHECK_INT(read_response(fd, out, sizeof out, 2000), 503);
    CHECK(strstr(out, "\"code\":\"draining\"") != NULL);
    CHECK(strcasestr(out, "Connection: close") != NULL);
    close(fd);
    pthread_join(th, NULL);
    CHECK_INT(a.r.status, 200);
    pthread_join(dt, NULL);
    CHECK(d.ok);
    CHECK(raw_connect(&f, NULL) < 0); /* refused once drained */
    atomic_store(&slow_ms, 300);
    fixture_stop(&f);
}

typedef struct hammer {
    fixture *f;
    atomic_bool *go;
    int answered, draining, resets;
} hammer;

/* A client that sends requests back to back — over one connection while the server keeps it,
 * over a new one when told "Connection: close" — until connecting is refused. */
static void *hammer_thread(void *p) {
    hammer *h = p;
    const char *req = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";
    char out[2048];
    int fd = -1;
    while (atomic_load(h->go)) {
        if (fd < 0 && (fd = raw_connect(h->f, NULL)) < 0) break; /* refused: the server is gone */
        int st = send_all(fd, req, strlen(req)) ? read_response(fd, out, sizeof out, 3000) : 0;
        if (st == 200)
            h->answered++;
        else if (st == 503 && strstr(out, "\"draining\""))
            h->draining++;
        else
            h->resets++;
        if (st == 0 || strcasestr(out, "Connection: close")) {
            close(fd);
            fd = -1;
        }
    }
    if (fd >= 0) close(fd);
    return NULL;
}

TEST(a_drain_under_load_answers_every_request_it_received) {
    fixture f;
    REQUIRE(fixture_start(&f));
    atomic_bool go = true;
    hammer h[8];
    pthread_t th[8];
    for (int i = 0; i < 8; i++) {
        h[i] = (hammer){.f = &f, .go = &go};
        pthread_create(&th[i], NULL, hammer_thread, &h[i]);
    }
    /* a slow request keeps the drain going while the others are answered 503 and reconnect,
     * so connections are arriving at the moment the server stops accepting */
    atomic_store(&slow_started, 0);
    atomic_store(&slow_ms, 400);
    char url[128];
    snprintf(url, sizeof url, "%s/slow", f.base);
    client_arg a = {.url = url};
    pthread_t slow_th;
    pthread_create(&slow_th, NULL, client_thread, &a);
    while (!atomic_load(&slow_started))
        mv_sleep_ms(2);
    CHECK(mv_http_server_drain(f.server, 5000));
    mv_http_server_free(f.server); /* at once, as missived does, while the clients still run */
    f.server = NULL;
    pthread_join(slow_th, NULL);
    CHECK_INT(a.r.status, 200);
    atomic_store(&slow_ms, 300);
    int answered = 0, draining = 0, resets = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL); /* each ends when its connect is refused */
        answered += h[i].answered;
        draining += h[i].draining;
        resets += h[i].resets;
    }
    atomic_store(&go, false);
    CHECK(answered > 0);
    CHECK(draining > 0);
    CHECK_INT(resets, 0);
    fixture_stop(&f);
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
    while (!atomic_load(&slow_started))
        mv_sleep_ms(2);
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
    while (!atomic_load(&slow_started))
        mv_sleep_ms(2);
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
    const char *bad[] = {"",    "8080",   "host:",   "host:70000", "host:-1",
                         ":80", "::1:80", "[::1]80", "h:8x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_CODE(mv_http_parse_listen(bad[i], host, sizeof host, &port, &err),
                   MV_INVALID_ARGUMENT, &err);
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
    int rc = RUN_TESTS(
        healthz_answers_json_with_a_request_id_over_a_socket,
        a_body_of_exactly_one_mebibyte_is_accepted, an_oversized_body_with_content_length_is_413,
        an_oversized_chunked_body_is_413, authentication_is_checked_before_the_body_size,
        keep_alive_reuses_the_connection,
        path_parameters_arrive_percent_decoded_without_changing_the_route,
        graceful_stop_waits_for_an_in_flight_request_and_accepts_no_more,
        drain_reports_requests_still_running_at_the_timeout,
        listen_addresses_parse_and_loopback_is_recognised,
        malformed_and_oversized_heads_are_answered_promptly_in_the_json_error_shape,
        bodies_and_heads_libmicrohttpd_refuses_itself_are_answered_in_the_json_error_shape,
        head_on_a_get_route_answers_its_status_and_headers_without_the_body,
        a_head_that_does_not_arrive_in_time_is_answered_408_and_closed,
        slow_heads_neither_delay_nor_lock_out_a_fresh_client,
        connections_beyond_the_per_address_limit_are_closed_at_once,
        twelve_slow_handlers_run_at_once_and_never_delay_a_health_check,
        a_request_arriving_during_the_drain_is_answered_503_draining,
        a_drain_under_load_answers_every_request_it_received, a_port_in_use_fails_with_an_io_error);
    curl_global_cleanup();
    return rc;
}
