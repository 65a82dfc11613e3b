/* daemon_identity_test.c — missived in jwt mode behind a local JWKS endpoint, with keys and
 * tokens made by Node's crypto (tests/http/jwt_fixtures.mjs): an RS256 token is served, the
 * configured claim paths reach the principal, every rejection is 401 unauthenticated with the
 * reason in the request log, and a 64 KiB token is refused without harm. */
#include <curl/curl.h>
#include <limits.h>

#include "missive/base.h"
#include "support/daemon_proc.h"
#include "support/http_sink.h"
#include "test.h"

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = calloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static size_t discard(char *p, size_t size, size_t n, void *ud) {
    (void)p;
    (void)ud;
    return size * n;
}

/* GET with one header of any length (test_http keeps header lines short). */
static long get_with_header(int port, const char *path, const char *header) {
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    CURL *h = curl_easy_init();
    struct curl_slist *hdrs = curl_slist_append(NULL, header);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
    long status = 0;
    if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    return status;
}

TEST(the_daemon_verifies_tokens_from_a_jwks_url_and_logs_each_rejection_with_its_reason) {
    char dir[512], cmd[1200], path[700], templates[PATH_MAX], config[600], log[600];
    mv_strlcpy(dir, test_tmp_path("idp"), sizeof dir);
    mkdir(dir, 0700);
    snprintf(cmd, sizeof cmd, "node tests/http/jwt_fixtures.mjs %s %lld", dir,
             (long long)(mv_now_ms() / 1000));
    REQUIRE(system(cmd) == 0);
    snprintf(path, sizeof path, "%s/tokens.json", dir);
    json_t *tokens = json_load_file(path, 0, NULL);
    snprintf(path, sizeof path, "%s/jwks-a.json", dir);
    char *jwks = slurp(path);
    REQUIRE(tokens && jwks);
    http_sink *idp = http_sink_start();
    REQUIRE(idp);
    http_sink_set_default(idp, &(http_sink_response){.body = jwks});

    REQUIRE(realpath("examples/templates", templates));
    mv_strlcpy(config, test_tmp_path("identity.json"), sizeof config);
    mv_strlcpy(log, test_tmp_path("identity.log"), sizeof log);
    REQUIRE(test_write_file(
        config,
        "{\"store\": \"sqlite:%s\", \"templates\": \"%s\", \"auth\": {\"mode\": \"jwt\", "
        "\"algorithms\": [\"RS256\", \"ES256\", \"EdDSA\"], \"jwksUrl\": \"%s/certs\", "
        "\"jwksRefreshS\": 1, "
        "\"issuer\": \"https://idp.example\", \"audience\": \"missive\", \"leewaySeconds\": 30, "
        "\"claims\": {\"user\": \"sub\", \"roles\": \"realm_access.roles\"}}, "
        "\"webhooks\": {\"connectTimeoutMs\": 500, \"timeoutMs\": 800}}",
        test_tmp_path("identity.db"), templates, http_sink_url(idp)));
    int port = test_free_port();
    pid_t pid = test_daemon_start(config, port, NULL, log);
    REQUIRE(pid > 0);
    CHECK(http_sink_count(idp) >= 1);

    char hdr[70000];
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s",
             json_string_value(json_object_get(tokens, "es256")));
    const char *body = "{\"hostId\": \"bob\", \"guestName\": \"Ana\", \"listing\": \"Flat\", "
                       "\"status\": \"open\"}";
    test_reply r = test_http(port, "POST", "/messages/new/booking-request", hdr, body);
    CHECK_INT(r.status, 201);
    CHECK_STR(mv_json_str(json_array_get(json_object_get(r.json, "messages"), 0), "fromUser"),
              "ana");
    test_reply_free(&r);
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s",
             json_string_value(json_object_get(tokens, "keycloak")));
    r = test_http(port, "GET", "/messages/count", hdr, NULL);
    CHECK_INT(r.status, 200);
    test_reply_free(&r);

    const char *refused[][2] = {
        {"alg_none", "alg none is not accepted"},       {"huge", "wrong length"},
        {"confusion_pem", "alg HS256 is not accepted"}, {"wrong_kid", "no key with this kid"},
        {"expired", "the token has expired"},           {"wrong_issuer", "wrong issuer"},
        {"wrong_audience", "wrong audience"},           {"tampered", "bad signature"}};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        if (strcmp(refused[i][0], "huge") == 0) continue; /* below */
        snprintf(hdr, sizeof hdr, "Authorization: Bearer %s",
                 json_string_value(json_object_get(tokens, refused[i][0])));
        r = test_http(port, "GET", "/messages", hdr, NULL);
        CHECK_INT(r.status, 401);
        CHECK_STR(test_reply_code(&r), "unauthenticated");
        test_reply_free(&r);
    }
    /* 64 KiB: refused (the server reads at most 64 KiB of request head), and still serving */
    const char *huge = json_string_value(json_object_get(tokens, "huge"));
    CHECK(strlen(huge) > 65536);
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s", huge);
    long st = get_with_header(port, "/messages", hdr);
    CHECK(st == 401 || st == 431);
    /* 20 KiB: read by the server, refused by its length before anything is decoded */
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %.*s", 20000, huge);
    CHECK_INT(get_with_header(port, "/messages", hdr), 401);
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s",
             json_string_value(json_object_get(tokens, "rs256")));
    CHECK_INT(get_with_header(port, "/messages/count", hdr), 200);

    /* the provider answers garbage, then hangs: the periodic refresh (every second) fails and
     * the daemon keeps serving with the last good keys, without making requests wait */
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s",
             json_string_value(json_object_get(tokens, "rs256")));
    http_sink_set_default(idp, &(http_sink_response){.body = "<html>garbage"});
    int fetched = http_sink_count(idp);
    for (int i = 0; i < 40 && http_sink_count(idp) == fetched; i++)
        mv_sleep_ms(50);
    CHECK(http_sink_count(idp) > fetched);
    CHECK_INT(get_with_header(port, "/messages/count", hdr), 200);
    http_sink_set_default(idp, &(http_sink_response){.body = jwks, .delay_ms = 3000});
    fetched = http_sink_count(idp);
    for (int i = 0; i < 40 && http_sink_count(idp) == fetched; i++)
        mv_sleep_ms(50);
    CHECK(http_sink_count(idp) > fetched); /* a refresh is hanging now */
    int64_t t0 = mv_now_ms();
    for (int i = 0; i < 10; i++)
        CHECK_INT(get_with_header(port, "/messages/count", hdr), 200);
    CHECK(mv_now_ms() - t0 < 1000);

    CHECK_INT(test_daemon_stop(pid), 0);
    char *text = slurp(log);
    REQUIRE(text);
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        if (!strstr(text, refused[i][1])) {
            char m[300];
            snprintf(m, sizeof m, "the log lacks the reason \"%s\"", refused[i][1]);
            test_fail_(__FILE__, __LINE__, m);
        }
    }
    CHECK(strstr(text, json_string_value(json_object_get(tokens, "tampered"))) == NULL);
    CHECK(strstr(text, "jwks refresh failed; keeping the last good keys") != NULL);
    free(text);
    http_sink_stop(idp);
    free(jwks);
    json_decref(tokens);
}

int main(void) {
    return RUN_TESTS(
        the_daemon_verifies_tokens_from_a_jwks_url_and_logs_each_rejection_with_its_reason);
}
