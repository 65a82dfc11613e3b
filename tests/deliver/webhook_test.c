/* webhook_test.c — the signed webhook client against http_sink: headers and signature (recomputed
 * here with OpenSSL directly), outcome classification, timeouts, size limit, concurrency. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "missive/deliver.h"
#include "support/http_sink.h"
#include "support/loopback.h"
#include "test.h"

static const char SECRET[] = "a-webhook-secret-of-some-length";

static mv_webhook_config signed_cfg(void) {
    return (mv_webhook_config){.secret = SECRET, .secret_len = strlen(SECRET)};
}

static void hex_hmac(const char *body, size_t len, char out[72]) {
    unsigned char mac[32];
    unsigned int n = 32;
    HMAC(EVP_sha256(), SECRET, (int)strlen(SECRET), (const unsigned char *)body, len, mac, &n);
    strcpy(out, "sha256=");
    for (int i = 0; i < 32; i++)
        sprintf(out + 7 + 2 * i, "%02x", mac[i]);
}

static char *url_of(http_sink *s, const char *path) {
    static char buf[4][256];
    static int slot;
    char *b = buf[slot++ % 4];
    snprintf(b, 256, "%s%s", http_sink_url(s), path);
    return b;
}

TEST(post_sends_compact_json_with_key_and_a_signature_the_receiver_can_verify) {
    http_sink *s = http_sink_start();
    REQUIRE(s);
    http_sink_push(s, &(http_sink_response){.status = 201, .body = "{\"ok\": true}"});
    mv_webhook_config cfg = signed_cfg();
    json_t *body = json_pack("{s:i, s:s, s:[i,i]}", "a", 1, "b", "é x", "c", 1, 2);
    mv_webhook_response res;
    mv_err err = {0};
    CHECK_CODE(mv_webhook_post(&cfg, url_of(s, "/hooks/accept"), body, "key-123", &res, &err),
               MV_OK, &err);
    CHECK_INT(res.outcome, MV_WEBHOOK_OK);
    CHECK_INT(res.status, 201);
    CHECK(json_is_true(json_object_get(res.json, "ok")));
    CHECK(!res.json_invalid);
    http_sink_request r;
    REQUIRE(http_sink_get(s, 0, &r));
    CHECK_STR(r.method, "POST");
    CHECK_STR(r.path, "/hooks/accept");
    CHECK_STR(http_sink_header(&r, "Content-Type"), "application/json");
    CHECK_STR(http_sink_header(&r, "Idempotency-Key"), "key-123");
    CHECK_STR(r.body, "{\"a\":1,\"b\":\"é x\",\"c\":[1,2]}");
    char expect[72];
    hex_hmac(r.body, r.body_len, expect);
    CHECK_STR(http_sink_header(&r, "X-Missive-Signature"), expect);
    http_sink_request_free(&r);
    mv_webhook_response_free(&res);
    json_decref(body);
    http_sink_stop(s);
}

TEST(signature_helper_matches_openssl_and_changes_with_one_byte) {
    char a[72], b[72], c[72];
    mv_webhook_signature(SECRET, strlen(SECRET), "{\"x\":1}", 7, a);
    hex_hmac("{\"x\":1}", 7, b);
    CHECK_STR(a, b);
    mv_webhook_signature(SECRET, strlen(SECRET), "{\"x\":2}", 7, c);
    CHECK(strcmp(a, c) != 0);
}

TEST(without_a_secret_no_signature_header_is_sent) {
    http_sink *s = http_sink_start();
    REQUIRE(s);
    mv_err err = {0};
    json_t *body = json_object();
    CHECK_CODE(mv_webhook_post(NULL, url_of(s, "/x"), body, NULL, NULL, &err), MV_OK, &err);
    http_sink_request r;
    REQUIRE(http_sink_get(s, 0, &r));
    CHECK(http_sink_header(&r, "X-Missive-Signature") == NULL);
    CHECK(http_sink_header(&r, "Idempotency-Key") == NULL);
    CHECK_STR(r.body, "{}");
    http_sink_request_free(&r);
    json_decref(body);
    http_sink_stop(s);
}

TEST(statuses_classify_as_ok_rejected_or_ambiguous) {
    http_sink *s = http_sink_start();
    REQUIRE(s);
    struct {
        int status;
        mv_webhook_outcome outcome;
        mv_code code;
    } cases[] = {{200, MV_WEBHOOK_OK, MV_OK},
                 {204, MV_WEBHOOK_OK, MV_OK},
                 {400, MV_WEBHOOK_REJECTED, MV_UPSTREAM_FAILED},
                 {404, MV_WEBHOOK_REJECTED, MV_UPSTREAM_FAILED},
                 {409, MV_WEBHOOK_REJECTED, MV_UPSTREAM_FAILED},
                 {500, MV_WEBHOOK_AMBIGUOUS, MV_UPSTREAM_FAILED},
                 {503, MV_WEBHOOK_AMBIGUOUS, MV_UPSTREAM_FAILED},
                 {302, MV_WEBHOOK_AMBIGUOUS, MV_UPSTREAM_FAILED}};
    json_t *body = json_object();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        http_sink_push(s, &(http_sink_response){.status = cases[i].status,
                                                .body = cases[i].status == 204 ? "" : "{\"e\":1}"});
        mv_webhook_response res;
        mv_err err = {0};
        CHECK_CODE(mv_webhook_post(NULL, url_of(s, "/c"), body, "k", &res, &err), cases[i].code,
                   &err);
        CHECK_INT(res.outcome, cases[i].outcome);
        CHECK_INT(res.status, cases[i].status);
        if (cases[i].code != MV_OK) {
            char st[16];
            snprintf(st, sizeof st, "%d", cases[i].status);
            CHECK(strstr(err.message, st) != NULL);
            CHECK(strstr(err.message, url_of(s, "/c")) != NULL);
        }
        mv_webhook_response_free(&res);
    }
    json_decref(body);
    http_sink_stop(s);
}

TEST(server_slower_than_the_timeout_is_ambiguous_and_quick) {
    http_sink *s = http_sink_start();
    REQUIRE(s);
    http_sink_push(s, &(http_sink_response){.delay_ms = 5000});
    mv_webhook_config cfg = {.timeout_ms = 300};
    mv_webhook_response res;
    mv_err err = {0};
    json_t *body = json_object();
    int64_t t0 = mv_now_ms();
    CHECK_CODE(mv_webhook_post(&cfg, url_of(s, "/slow"), body, "k", &res, &err), MV_UPSTREAM_FAILED,
               &err);
    int64_t took = mv_now_ms() - t0;
    CHECK_INT(res.outcome, MV_WEBHOOK_AMBIGUOUS);
    CHECK(took < 2000);
    CHECK_INT(http_sink_count(s), 1); /* the request did arrive: ambiguous, not "not sent" */
    mv_webhook_response_free(&res);
    json_decref(body);
    http_sink_stop(s);
}

TEST(connection_closed_without_an_answer_is_ambiguous) {
    http_sink *s = http_sink_start();
    REQUIRE(s);
    http_sink_push(s, &(http_sink_response){.close_without_answer = true});
    mv_webhook_response res;
    mv_err err = {0};
    json_t *body = json_object();
    CHECK_CODE(mv_webhook_post(NULL, url_of(s, "/drop"), body, "k", &res, &err), MV_UPSTREAM_FAILED,
               &err);
    CHECK_INT(res.outcome, MV_WEBHOOK_AMBIGUOUS);
    CHECK_INT(res.status, 0);
    mv_webhook_response_free(&res);
    json_decref(body);
    http_sink_stop(s);
}

TEST(connection_refused_is_not_sent_and_names_the_url) {
    http_sink *s = http_sink_start();
    REQUIRE(s);
    char url[128];
    snprintf(url, sizeof url, "%s/gone", http_sink_url(s));
    http_sink_stop(s); /* the port now refuses */
    mv_webhook_response res;
    mv_err err = {0};
    json_t *body = json_object();
    CHECK_CODE(mv_webhook_post(NULL, url, body, "k", &res, &err), MV_UPSTREAM_FAILED, &err);
    CHECK_INT(res.outcome, MV_WEBHOOK_NOT_SENT);
    CHECK(strstr(err.message, url) != NULL);
    mv_webhook_response_free(&res);
    json_decref(body);
}

TEST(unknown_host_is_not_sent) {
    mv_webhook_response res;
    mv_err err = {0};
    CHECK_CODE(mv_webhook_get(NULL, "http://no-such-host.invalid/x", &res, &err),
               MV_UPSTREAM_FAILED, &err);
    CHECK_INT(res.outcome, MV_WEBHOOK_NOT_SENT);
    mv_webhook_response_free(&res);
}

/* A listener whose accept queue is full drops new SYNs, so connecting hangs until the connect
 * timeout: the request never left. */
TEST(connect_timeout_is_not_sent_and_quick) {
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    REQUIRE(bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(lfd, 0) == 0);
    REQUIRE(getsockname(lfd, (struct sockaddr *)&a, &alen) == 0);
    int fillers[4];
    for (int i = 0; i < 4; i++) {
        fillers[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        connect(fillers[i], (struct sockaddr *)&a, sizeof a);
    }
    mv_sleep_ms(100);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/x", ntohs(a.sin_port));
    mv_webhook_config cfg = {.connect_timeout_ms = 300, .timeout_ms = 5000};
    mv_webhook_response res;
    mv_err err = {0};
    int64_t t0 = mv_now_ms();
    CHECK_CODE(mv_webhook_get(&cfg, url, &res, &err), MV_UPSTREAM_FAILED, &err);
    CHECK_INT(res.outcome, MV_WEBHOOK_NOT_SENT);
    CHECK(mv_now_ms() - t0 < 3000);
    mv_webhook_response_free(&res);
    for (int i = 0; i < 4; i++)
        close(fillers[i]);
    close(lfd);
}

TEST(response_larger_than_the_limit_is_an_error) {
    http_sink *s = http_sink_start();
    REQUIRE(s);
    char *big = malloc(5001);
    memset(big, 'x', 5000);
    big[0] = '"';
    big[4999] = '"';
    big[5000] = '\0';
    http_sink_push(s, &(http_sink_response){.body = big});
    http_sink_push(s, &(http_sink_response){.body = big});
    free(big);
    mv_webhook_config cfg = {.max_response_bytes = 1000};
    mv_webhook_response res;
    mv_err err = {0};
    json_t *body = json_object();
    CHECK_CODE(mv_webhook_post(&cfg, url_of(s, "/big"), body, "k", &res, &err), MV_UPSTREAM_FAILED,
               &err);
    CHECK(strstr(err.message, "1000") != NULL);
    CHECK_INT(res.outcome, MV_WEBHOOK_AMBIGUOUS);
    CHECK(res.body == NULL);
    mv_webhook_response_free(&res);
    cfg.max_response_bytes = 5000; /* exactly the size is fine */
    CHECK_CODE(mv_webhook_post(&cfg, url_of(s, "/big"), body, "k", &res, &err), MV_OK, &err);
    CHECK_INT(res.body_len, 5000);
    CHECK(json_is_string(res.json));
    mv_webhook_response_free(&res);
    json_decref(body);
    http_sink_stop(s);
}

TEST(non_json_success_body_is_flagged_and_empty_body_is_null) {
    http_sink *s = http_sink_start();
    REQUIRE(s);
    http_sink_push(s, &(http_sink_response){.body = "hello"});
    http_sink_push(s, &(http_sink_response){.body = ""});
    http_sink_push(s, &(http_sink_response){.body = "null"});
    mv_webhook_response res;
    mv_err err = {0};
    CHECK_CODE(mv_webhook_get(NULL, url_of(s, "/a"), &res, &err), MV_OK, &err);
    CHECK(res.json == NULL && res.json_invalid);
    CHECK_STR(res.body, "hello");
    mv_webhook_response_free(&res);
    CHECK_CODE(mv_webhook_get(NULL, url_of(s, "/b"), &res, &err), MV_OK, &err);
    CHECK(res.json == NULL && !res.json_invalid);
    CHECK_STR(res.body, "");
    mv_webhook_response_free(&res);
    CHECK_CODE(mv_webhook_get(NULL, url_of(s, "/c"), &res, &err), MV_OK, &err);
    CHECK(json_is_null(res.json) && !res.json_invalid);
    mv_webhook_response_free(&res);
    http_sink_request r;
    REQUIRE(http_sink_get(s, 0, &r));
    CHECK_STR(r.method, "GET");
    CHECK_INT(r.body_len, 0);
    http_sink_request_free(&r);
    http_sink_stop(s);
}

TEST(errors_never_show_url_credentials_or_the_secret) {
    http_sink *s = http_sink_start();
    REQUIRE(s);
    http_sink_push(s, &(http_sink_response){.status = 500});
    char url[200];
    snprintf(url, sizeof url, "http://bob:hunter2@127.0.0.1:%d/x", http_sink_port(s));
    mv_webhook_config cfg = signed_cfg();
    mv_err err = {0};
    json_t *body = json_object();
    CHECK_CODE(mv_webhook_post(&cfg, url, body, "k", NULL, &err), MV_UPSTREAM_FAILED, &err);
    CHECK(strstr(err.message, "hunter2") == NULL);
    CHECK(strstr(err.message, SECRET) == NULL);
    CHECK(strstr(err.message, "127.0.0.1") != NULL);
    json_decref(body);
    http_sink_stop(s);
}

TEST(non_http_urls_are_refused_before_any_call) {
    mv_err err = {0};
    json_t *body = json_object();
    CHECK_CODE(mv_webhook_post(NULL, "file:///etc/passwd", body, "k", NULL, &err),
               MV_INVALID_ARGUMENT, &err);
    CHECK_CODE(mv_webhook_post(NULL, NULL, body, "k", NULL, &err), MV_INVALID_ARGUMENT, &err);
    json_decref(body);
}

typedef struct {
    http_sink *s;
    int idx, ok;
} post_job;

static void *poster(void *arg) {
    post_job *j = arg;
    mv_webhook_config cfg = signed_cfg();
    for (int i = 0; i < 10; i++) {
        char key[32];
        snprintf(key, sizeof key, "t%d-%d", j->idx, i);
        json_t *body = json_pack("{s:s}", "key", key);
        if (mv_webhook_post(&cfg, url_of(j->s, "/p"), body, key, NULL, NULL) == MV_OK) j->ok++;
        json_decref(body);
    }
    return NULL;
}

TEST(posts_from_many_threads_all_arrive_with_matching_keys_and_signatures) {
    http_sink *s = http_sink_start();
    REQUIRE(s);
    pthread_t t[6];
    post_job jobs[6];
    for (int i = 0; i < 6; i++) {
        jobs[i] = (post_job){.s = s, .idx = i};
        pthread_create(&t[i], NULL, poster, &jobs[i]);
    }
    int ok = 0;
    for (int i = 0; i < 6; i++) {
        pthread_join(t[i], NULL);
        ok += jobs[i].ok;
    }
    CHECK_INT(ok, 60);
    CHECK_INT(http_sink_count(s), 60);
    for (int i = 0; i < http_sink_count(s); i++) {
        http_sink_request r;
        REQUIRE(http_sink_get(s, i, &r));
        json_t *b = json_loads(r.body, 0, NULL);
        CHECK_STR(mv_json_str(b, "key"), http_sink_header(&r, "Idempotency-Key"));
        char expect[72];
        hex_hmac(r.body, r.body_len, expect);
        CHECK_STR(http_sink_header(&r, "X-Missive-Signature"), expect);
        json_decref(b);
        http_sink_request_free(&r);
    }
    http_sink_stop(s);
}

TEST(sink_matches_queued_answers_by_path_prefix) {
    http_sink *s = http_sink_start();
    REQUIRE(s);
    http_sink_push(s, &(http_sink_response){.path = "/charge", .status = 500});
    mv_err err = {0};
    mv_webhook_response res;
    CHECK_CODE(mv_webhook_get(NULL, url_of(s, "/reserve"), &res, &err), MV_OK, &err);
    mv_webhook_response_free(&res);
    CHECK_CODE(mv_webhook_get(NULL, url_of(s, "/charge/1"), &res, &err), MV_UPSTREAM_FAILED, &err);
    CHECK_INT(res.status, 500);
    mv_webhook_response_free(&res);
    CHECK_CODE(mv_webhook_get(NULL, url_of(s, "/charge/2"), &res, &err), MV_OK, &err);
    mv_webhook_response_free(&res);
    http_sink_stop(s);
}

/* A server that reads the whole request, acts on it, then answers without an HTTP status line
 * (HTTP/0.9 style). libcurl refuses such an answer with CURLE_UNSUPPORTED_PROTOCOL — the same code
 * it uses for a URL it cannot send — but here the request was delivered. */
static int http09_seen;
static void http09_serve(void *ctx, int fd, loopback *srv) {
    (void)ctx;
    (void)srv;
    loopback_reader r = {.fd = fd};
    char line[1024];
    long n;
    while ((n = loopback_read_line(&r, line, sizeof line)) > 0) {
    }
    if (n == 0) __atomic_add_fetch(&http09_seen, 1, __ATOMIC_SEQ_CST);
    loopback_write(fd, "done, no status line\n", 21);
}

TEST(answer_without_a_status_line_after_the_request_arrived_is_ambiguous_not_unsent) {
    loopback *srv = loopback_start(http09_serve, NULL);
    REQUIRE(srv);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/x", loopback_port(srv));
    mv_webhook_response res;
    mv_err err = {0};
    CHECK_CODE(mv_webhook_get(NULL, url, &res, &err), MV_UPSTREAM_FAILED, &err);
    CHECK_INT(__atomic_load_n(&http09_seen, __ATOMIC_SEQ_CST), 1); /* the far side got it */
    CHECK_INT(res.outcome, MV_WEBHOOK_AMBIGUOUS);
    mv_webhook_response_free(&res);
    loopback_stop(srv);
}

/* Standard Webhooks, recomputed here with OpenSSL: base64 HMAC-SHA256 of "{id}.{ts}.{body}". */
static void std_sig(const char *key, const char *id, const char *ts, const char *body, size_t len,
                    char out[64]) {
    char *msg = malloc(strlen(id) + strlen(ts) + len + 3);
    size_t n = (size_t)sprintf(msg, "%s.%s.", id, ts);
    memcpy(msg + n, body, len);
    unsigned char mac[32];
    unsigned int ml = 32;
    HMAC(EVP_sha256(), key, (int)strlen(key), (unsigned char *)msg, n + len, mac, &ml);
    strcpy(out, "v1,");
    EVP_EncodeBlock((unsigned char *)out + 3, mac, 32);
    free(msg);
}

/* True when the space-separated signature header holds an entry for key. */
static bool receiver_verifies(const http_sink_request *r, const char *key) {
    const char *id = http_sink_header(r, "webhook-id"),
               *ts = http_sink_header(r, "webhook-timestamp");
    const char *sigs = http_sink_header(r, "webhook-signature");
    if (!id || !ts || !sigs) return false;
    char want[64];
    std_sig(key, id, ts, r->body, r->body_len, want);
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", sigs);
    for (char *save, *e = strtok_r(copy, " ", &save); e; e = strtok_r(NULL, " ", &save))
        if (strcmp(e, want) == 0) return true;
    return false;
}

TEST(standard_webhook_headers_carry_one_signature_per_secret_so_old_receivers_still_verify) {
    http_sink *s = http_sink_start();
    REQUIRE(s);
    static const char NEW[] = "the-new-secret", OLD[] = "the-old-secret";
    mv_webhook_secret keys[] = {{NEW, sizeof NEW - 1}, {OLD, sizeof OLD - 1}};
    int64_t now = 1700000000123;
    mv_clock clock = mv_manual_clock(&now);
    mv_webhook_config cfg = {.secrets = keys, .nsecrets = 2, .clock = &clock};
    json_t *body = json_pack("{s:s}", "a", "b");
    mv_err err = {0};
    CHECK_CODE(mv_webhook_post(&cfg, url_of(s, "/h"), body, "attempt-1", NULL, &err), MV_OK, &err);
    http_sink_request r;
    REQUIRE(http_sink_get(s, 0, &r));
    CHECK_STR(http_sink_header(&r, "webhook-id"), "attempt-1");
    CHECK_STR(http_sink_header(&r, "webhook-id"), http_sink_header(&r, "Idempotency-Key"));
    CHECK_STR(http_sink_header(&r, "webhook-timestamp"), "1700000000");
    const char *sigs = http_sink_header(&r, "webhook-signature");
    REQUIRE(sigs);
    char a[64], b[64], both[160];
    std_sig(NEW, "attempt-1", "1700000000", r.body, r.body_len, a);
    std_sig(OLD, "attempt-1", "1700000000", r.body, r.body_len, b);
    snprintf(both, sizeof both, "%s %s", a, b); /* the new secret first */
    CHECK_STR(sigs, both);
    CHECK(receiver_verifies(&r, OLD)); /* a receiver still holding only the old secret */
    CHECK(receiver_verifies(&r, NEW));
    CHECK(!receiver_verifies(&r, "another-secret"));
    /* X-Missive-Signature stays, keyed with the first secret */
    char hex[72];
    mv_webhook_signature(NEW, sizeof NEW - 1, r.body, r.body_len, hex);
    CHECK_STR(http_sink_header(&r, "X-Missive-Signature"), hex);
    http_sink_request_free(&r);
    json_decref(body);
    http_sink_stop(s);
}

TEST(a_retried_call_keeps_its_webhook_id_and_gets_a_new_timestamp_and_signature) {
    http_sink *s = http_sink_start();
    REQUIRE(s);
    http_sink_push(s, &(http_sink_response){.status = 503});
    int64_t now = 1700000000000;
    mv_clock clock = mv_manual_clock(&now);
    mv_webhook_config cfg = {.secret = SECRET, .secret_len = strlen(SECRET), .clock = &clock};
    json_t *body = json_pack("{s:i}", "n", 1);
    mv_err err = {0};
    CHECK_CODE(mv_webhook_post(&cfg, url_of(s, "/r"), body, "same-key", NULL, &err),
               MV_UPSTREAM_FAILED, &err);
    now += 90000;
    CHECK_CODE(mv_webhook_post(&cfg, url_of(s, "/r"), body, "same-key", NULL, &err), MV_OK, &err);
    http_sink_request r1, r2;
    REQUIRE(http_sink_get(s, 0, &r1));
    REQUIRE(http_sink_get(s, 1, &r2));
    CHECK_STR(http_sink_header(&r1, "webhook-id"), "same-key");
    CHECK_STR(http_sink_header(&r2, "webhook-id"), "same-key");
    CHECK_STR(http_sink_header(&r1, "webhook-timestamp"), "1700000000");
    CHECK_STR(http_sink_header(&r2, "webhook-timestamp"), "1700000090");
    CHECK(strcmp(http_sink_header(&r1, "webhook-signature"),
                 http_sink_header(&r2, "webhook-signature")) != 0);
    CHECK(receiver_verifies(&r1, SECRET));
    CHECK(receiver_verifies(&r2, SECRET));
    http_sink_request_free(&r1);
    http_sink_request_free(&r2);
    json_decref(body);
    http_sink_stop(s);
}

TEST(a_call_without_key_gets_a_fresh_uuid_webhook_id_and_gets_are_signed_over_the_empty_body) {
    http_sink *s = http_sink_start();
    REQUIRE(s);
    mv_webhook_config cfg = signed_cfg();
    mv_err err = {0};
    json_t *body = json_object();
    CHECK_CODE(mv_webhook_post(&cfg, url_of(s, "/p"), body, NULL, NULL, &err), MV_OK, &err);
    CHECK_CODE(mv_webhook_get(&cfg, url_of(s, "/users/u1"), NULL, &err), MV_OK, &err);
    http_sink_request r1, r2;
    REQUIRE(http_sink_get(s, 0, &r1));
    REQUIRE(http_sink_get(s, 1, &r2));
    CHECK(mv_valid_uuid(http_sink_header(&r1, "webhook-id")));
    CHECK(http_sink_header(&r1, "Idempotency-Key") == NULL);
    CHECK(receiver_verifies(&r1, SECRET));
    CHECK(mv_valid_uuid(http_sink_header(&r2, "webhook-id")));
    CHECK(strcmp(http_sink_header(&r1, "webhook-id"), http_sink_header(&r2, "webhook-id")) != 0);
    CHECK_INT(r2.body_len, 0);
    CHECK(receiver_verifies(&r2, SECRET));
    CHECK(http_sink_header(&r2, "X-Missive-Signature") == NULL);
    http_sink_request_free(&r1);
    http_sink_request_free(&r2);
    json_decref(body);
    http_sink_stop(s);
}

TEST(sign_v1_matches_the_standard_webhooks_example_and_is_empty_without_secrets) {
    /* the example of the Standard Webhooks specification (whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw)
     */
    unsigned char key[64];
    size_t klen = 0;
    REQUIRE(mv_b64url_decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", 32, key, &klen));
    mv_webhook_config cfg = {.secret = key, .secret_len = klen};
    const char *body = "{\"test\": 2432232314}";
    char *sig =
        mv_webhook_sign_v1(&cfg, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body, strlen(body));
    CHECK_STR(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    free(sig);
    sig = mv_webhook_sign_v1(NULL, "x", 1, "", 0);
    CHECK_STR(sig, "");
    free(sig);
}

int main(void) {
    return RUN_TESTS(
        answer_without_a_status_line_after_the_request_arrived_is_ambiguous_not_unsent,
        standard_webhook_headers_carry_one_signature_per_secret_so_old_receivers_still_verify,
        a_retried_call_keeps_its_webhook_id_and_gets_a_new_timestamp_and_signature,
        a_call_without_key_gets_a_fresh_uuid_webhook_id_and_gets_are_signed_over_the_empty_body,
        sign_v1_matches_the_standard_webhooks_example_and_is_empty_without_secrets,
        post_sends_compact_json_with_key_and_a_signature_the_receiver_can_verify,
        signature_helper_matches_openssl_and_changes_with_one_byte,
        without_a_secret_no_signature_header_is_sent, statuses_classify_as_ok_rejected_or_ambiguous,
        server_slower_than_the_timeout_is_ambiguous_and_quick,
        connection_closed_without_an_answer_is_ambiguous,
        connection_refused_is_not_sent_and_names_the_url, unknown_host_is_not_sent,
        connect_timeout_is_not_sent_and_quick, response_larger_than_the_limit_is_an_error,
        non_json_success_body_is_flagged_and_empty_body_is_null,
        errors_never_show_url_credentials_or_the_secret, non_http_urls_are_refused_before_any_call,
        posts_from_many_threads_all_arrive_with_matching_keys_and_signatures,
        sink_matches_queued_answers_by_path_prefix);
}
