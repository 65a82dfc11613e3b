/* jwt_test.c — JWT verification against keys, JWKS files and tokens made by Node's crypto
 * (tests/http/jwt_fixtures.mjs), never by the code under test: each algorithm, alg none,
 * algorithm confusion, key/alg mismatches, kid rules, expiry, issuer, audience, a 64 KiB token,
 * claim mapping with dotted paths, and a JWKS endpoint that rotates, returns garbage or hangs. */
#include <pthread.h>
#include <stdlib.h>

#include "http/auth.h"
#include "http/request.h"
#include "missive/base.h"
#include "support/http_sink.h"
#include "support/jwt_fixtures.h"
#include "test.h"

static const char HS_SECRET[] = "0123456789abcdef0123456789abcdef";

static bool fixtures(void) { return jwt_fixtures_make(test_tmp_path("jwt")); }

#define ALG(a) (1u << (a))
#define ALL_ALGS (ALG(MV_JWT_RS256) | ALG(MV_JWT_ES256) | ALG(MV_JWT_EDDSA) | ALG(MV_JWT_HS256))

/* One authentication of "Authorization: Bearer token". */
typedef struct attempt {
    mv_code rc;
    char message[512];
    char user[128], tenant[128], roles[256]; /* roles comma-joined */
} attempt;

static attempt try_token(mv_auth *auth, const char *token) {
    attempt r = {0};
    mv_arena *arena = mv_arena_new();
    mv_http_request req;
    mv_http_request_init(&req, arena, "GET", "/messages", NULL);
    size_t n = strlen(token) + 8;
    char *h = malloc(n);
    snprintf(h, n, "Bearer %s", token);
    mv_http_request_add_header(&req, "Authorization", h, NULL);
    free(h);
    mv_principal p;
    mv_err err = {0};
    r.rc = mv_auth_authenticate(auth, &req, &p, &err);
    snprintf(r.message, sizeof r.message, "%s", err.message);
    if (r.rc == MV_OK) {
        snprintf(r.user, sizeof r.user, "%s", p.user_id);
        snprintf(r.tenant, sizeof r.tenant, "%s", p.tenant);
        for (size_t i = 0; i < p.nroles; i++) {
            size_t k = strlen(r.roles);
            snprintf(r.roles + k, sizeof r.roles - k, "%s%s", i ? "," : "", p.roles[i]);
        }
    }
    mv_arena_free(arena);
    return r;
}

static mv_auth *new_auth(const mv_jwt_options *jo, mv_auth_claims claims) {
    mv_auth_options o = {.mode = MV_AUTH_JWT, .jwt = jo, .claims = claims};
    mv_auth *a = NULL;
    mv_err err = {0};
    if (mv_auth_new(&o, &a, &err) != MV_OK) fprintf(stderr, "mv_auth_new: %s\n", err.message);
    return a;
}

static mv_auth *file_auth(const char *jwks, unsigned algs) {
    mv_jwt_options jo = {.algorithms = algs,
                         .secret = HS_SECRET,
                         .secret_len = 32,
                         .jwks_file = jwt_fixture_path(jwks),
                         .issuer = "https://idp.example",
                         .audience = "missive",
                         .leeway_s = -1};
    return new_auth(&jo, (mv_auth_claims){0});
}

#define EXPECT_401(auth, name, why)                                                                \
    do {                                                                                           \
        attempt at_ = try_token(auth, jwt_fixture_token(name));                                    \
        CHECK_INT(at_.rc, MV_UNAUTHENTICATED);                                                     \
        if (!strstr(at_.message, why)) {                                                           \
            char m_[800];                                                                          \
            snprintf(m_, sizeof m_, "%s: \"%s\" lacks \"%s\"", name, at_.message, why);            \
            test_fail_(__FILE__, __LINE__, m_);                                                    \
        }                                                                                          \
    } while (0)

#define EXPECT_OK(auth, name)                                                                      \
    do {                                                                                           \
        attempt at_ = try_token(auth, jwt_fixture_token(name));                                    \
        if (at_.rc != MV_OK) {                                                                     \
            char m_[800];                                                                          \
            snprintf(m_, sizeof m_, "%s refused: %s", name, at_.message);                          \
            test_fail_(__FILE__, __LINE__, m_);                                                    \
        }                                                                                          \
    } while (0)

TEST(rs256_es256_eddsa_and_hs256_tokens_made_by_node_verify) {
    REQUIRE(fixtures());
    mv_auth *auth = file_auth("jwks-a.json", ALL_ALGS);
    REQUIRE(auth);
    const char *names[] = {"rs256", "es256", "eddsa", "hs256", "audience_array"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        attempt a = try_token(auth, jwt_fixture_token(names[i]));
        CHECK_CODE(a.rc, MV_OK, NULL);
        CHECK_STR(a.user, "ana");
        CHECK_STR(a.tenant, "t1");
        CHECK_STR(a.roles, "staff");
    }
    mv_auth_free(auth);
}

TEST(alg_none_and_algorithms_left_out_of_the_configuration_are_refused) {
    REQUIRE(fixtures());
    mv_auth *auth = file_auth("jwks-a.json", ALL_ALGS);
    REQUIRE(auth);
    EXPECT_401(auth, "alg_none", "alg none is not accepted");
    EXPECT_401(auth, "alg_none_upper", "alg NONE is not accepted");
    EXPECT_401(auth, "crit_header", "critical header");
    mv_auth_free(auth);
    auth = file_auth("jwks-a.json", ALG(MV_JWT_RS256));
    REQUIRE(auth);
    EXPECT_OK(auth, "rs256");
    EXPECT_401(auth, "es256", "alg ES256 is not accepted");
    EXPECT_401(auth, "eddsa", "alg EdDSA is not accepted");
    EXPECT_401(auth, "hs256", "alg HS256 is not accepted");
    mv_auth_free(auth);
}

TEST(an_hs256_token_keyed_with_the_rsa_public_key_is_refused) {
    REQUIRE(fixtures());
    /* HS256 configured (with its own secret): the public key is no HMAC key here */
    mv_auth *auth = file_auth("jwks-a.json", ALL_ALGS);
    REQUIRE(auth);
    EXPECT_401(auth, "confusion_pem", "bad signature");
    mv_auth_free(auth);
    /* HS256 not configured: refused before any key is looked at */
    auth = file_auth("jwks-a.json", ALG(MV_JWT_RS256) | ALG(MV_JWT_ES256));
    REQUIRE(auth);
    EXPECT_401(auth, "confusion_pem", "alg HS256 is not accepted");
    mv_auth_free(auth);
}

TEST(a_key_whose_type_or_published_alg_does_not_fit_the_token_is_refused) {
    REQUIRE(fixtures());
    mv_auth *auth = file_auth("jwks-a.json", ALL_ALGS);
    REQUIRE(auth);
    EXPECT_401(auth, "es256_with_rsa_kid", "the key does not fit alg ES256");
    EXPECT_401(auth, "rs256_with_ec_kid", "the key does not fit alg RS256");
    mv_auth_free(auth);
    /* ec-1 published with "alg": "RS256": its own ES256 token no longer fits it */
    auth = file_auth("jwks-mislabelled.json", ALL_ALGS);
    REQUIRE(auth);
    EXPECT_401(auth, "es256", "the key does not fit alg ES256");
    mv_auth_free(auth);
}

TEST(an_unknown_kid_or_a_missing_kid_with_several_keys_is_refused) {
    REQUIRE(fixtures());
    mv_auth *auth = file_auth("jwks-a.json", ALL_ALGS);
    REQUIRE(auth);
    EXPECT_401(auth, "wrong_kid", "no key with this kid");
    EXPECT_401(auth, "no_kid", "no kid and the key set holds several keys");
    EXPECT_401(auth, "rotated", "no key with this kid");
    mv_auth_free(auth);
    auth = file_auth("jwks-one.json", ALL_ALGS); /* one key: a token without kid may use it */
    REQUIRE(auth);
    EXPECT_OK(auth, "no_kid");
    mv_auth_free(auth);
}

TEST(a_signature_by_another_key_or_over_other_claims_is_refused) {
    REQUIRE(fixtures());
    mv_auth *auth = file_auth("jwks-a.json", ALL_ALGS);
    REQUIRE(auth);
    EXPECT_401(auth, "rs256_signed_by_other_key", "bad signature");
    EXPECT_401(auth, "tampered", "bad signature");
    mv_auth_free(auth);
}

TEST(expired_not_yet_valid_wrong_issuer_and_wrong_audience_are_refused) {
    REQUIRE(fixtures());
    mv_auth *auth = file_auth("jwks-a.json", ALL_ALGS);
    REQUIRE(auth);
    EXPECT_401(auth, "expired", "expired");
    EXPECT_OK(auth, "expired_within_leeway"); /* 10 s late, leeway 30 s */
    EXPECT_401(auth, "not_yet_valid", "not valid yet");
    EXPECT_401(auth, "wrong_issuer", "wrong issuer");
    EXPECT_401(auth, "wrong_audience", "wrong audience");
    mv_auth_free(auth);
    mv_jwt_options jo = {.algorithms = ALL_ALGS & ~ALG(MV_JWT_HS256),
                         .jwks_file = jwt_fixture_path("jwks-a.json"),
                         .leeway_s = 0};
    auth = new_auth(&jo, (mv_auth_claims){0});
    REQUIRE(auth);
    EXPECT_401(auth, "expired_within_leeway", "expired"); /* no leeway */
    EXPECT_OK(auth, "wrong_issuer");                      /* issuer and audience not configured */
    EXPECT_OK(auth, "wrong_audience");
    mv_auth_free(auth);
}

TEST(a_64_kib_token_is_refused_by_its_length) {
    REQUIRE(fixtures());
    mv_auth *auth = file_auth("jwks-a.json", ALL_ALGS);
    REQUIRE(auth);
    CHECK(strlen(jwt_fixture_token("huge")) > 65536);
    EXPECT_401(auth, "huge", "wrong length");
    mv_auth_free(auth);
}

TEST(claims_map_through_dotted_paths_and_roles_may_be_a_space_separated_string) {
    REQUIRE(fixtures());
    mv_jwt_options jo = {.algorithms = ALG(MV_JWT_RS256),
                         .jwks_file = jwt_fixture_path("jwks-a.json"),
                         .leeway_s = -1};
    mv_auth *kc = new_auth(&jo, (mv_auth_claims){.roles = "realm_access.roles"});
    REQUIRE(kc);
    attempt a = try_token(kc, jwt_fixture_token("keycloak"));
    CHECK_CODE(a.rc, MV_OK, NULL);
    CHECK_STR(a.user, "f4c1-uuid");
    CHECK_STR(a.roles, "approver,offline_access");
    CHECK_STR(a.tenant, "default");
    mv_auth_free(kc);
    mv_auth *cg =
        new_auth(&jo, (mv_auth_claims){.roles = "cognito:groups", .tenant = "custom:tenant"});
    REQUIRE(cg);
    a = try_token(cg, jwt_fixture_token("cognito"));
    CHECK_CODE(a.rc, MV_OK, NULL);
    CHECK_STR(a.roles, "admins,staff");
    CHECK_STR(a.tenant, "t9");
    mv_auth_free(cg);
    mv_auth *a0 = new_auth(&jo, (mv_auth_claims){.roles = "https://missive.example.com/roles",
                                                 .tenant = "https://missive.example.com/tenant"});
    REQUIRE(a0);
    a = try_token(
        a0, jwt_fixture_token("auth0")); /* a claim name with dots is found by its full name */
    CHECK_CODE(a.rc, MV_OK, NULL);
    CHECK_STR(a.roles, "editor");
    CHECK_STR(a.tenant, "acme");
    mv_auth_free(a0);
    mv_auth *plain = new_auth(&jo, (mv_auth_claims){0});
    REQUIRE(plain);
    a = try_token(plain, jwt_fixture_token("space_roles"));
    CHECK_CODE(a.rc, MV_OK, NULL);
    CHECK_STR(a.roles, "reader,writer");
    a = try_token(plain,
                  jwt_fixture_token("keycloak")); /* default paths: no "roles" claim, no roles */
    CHECK_CODE(a.rc, MV_OK, NULL);
    CHECK_STR(a.roles, "");
    mv_auth_free(plain);
    mv_auth *bad = new_auth(&jo, (mv_auth_claims){.user = "preferred_username.missing"});
    REQUIRE(bad);
    a = try_token(bad, jwt_fixture_token("rs256"));
    CHECK_INT(a.rc, MV_UNAUTHENTICATED);
    CHECK(strstr(a.message, "claim preferred_username.missing must be a non-empty string") != NULL);
    mv_auth_free(bad);
}

/* ---- a JWKS endpoint ------------------------------------------------------------------------ */

typedef enum { SERVE_A, SERVE_B, SERVE_GARBAGE, SERVE_HANG, SERVE_500, SERVE_B_SLOW } serve_mode;
static pthread_mutex_t serve_mu = PTHREAD_MUTEX_INITIALIZER;
static serve_mode serving;
static int served;
static char *jwks_a_text, *jwks_b_text;

static void serve_jwks(void *ctx, const http_sink_request *req, http_sink_response *res) {
    (void)ctx;
    (void)req;
    pthread_mutex_lock(&serve_mu);
    served++;
    switch (serving) {
    case SERVE_A: res->body = jwks_a_text; break;
    case SERVE_B: res->body = jwks_b_text; break;
    case SERVE_GARBAGE: res->body = "<html>not a key set"; break;
    case SERVE_HANG:
        res->delay_ms = 4000;
        res->body = jwks_b_text;
        break;
    case SERVE_500:
        res->status = 500;
        res->body = "{}";
        break;
    case SERVE_B_SLOW:
        res->delay_ms = 300;
        res->body = jwks_b_text;
        break;
    }
    pthread_mutex_unlock(&serve_mu);
}

static void set_serving(serve_mode m) {
    pthread_mutex_lock(&serve_mu);
    serving = m;
    pthread_mutex_unlock(&serve_mu);
}

static int served_count(void) {
    pthread_mutex_lock(&serve_mu);
    int n = served;
    pthread_mutex_unlock(&serve_mu);
    return n;
}

/* Waits until the endpoint served more than n requests (up to ms). */
static bool wait_served(int n, int ms) {
    for (int waited = 0; waited < ms; waited += 20) {
        if (served_count() > n) return true;
        mv_sleep_ms(20);
    }
    return false;
}

TEST(
    a_jwks_url_rotates_on_unknown_kid_at_most_every_interval_and_keeps_keys_through_garbage_and_hangs) {
    REQUIRE(fixtures());
    jwks_a_text = jwt_fixture_text("jwks-a.json");
    jwks_b_text = jwt_fixture_text("jwks-b.json");
    REQUIRE(jwks_a_text && jwks_b_text);
    http_sink *s = http_sink_start();
    REQUIRE(s);
    http_sink_set_handler(s, serve_jwks, NULL);
    set_serving(SERVE_A);
    char url[256];
    snprintf(url, sizeof url, "%s/.well-known/jwks.json?x=1", http_sink_url(s));
    mv_webhook_config http = {.connect_timeout_ms = 500, .timeout_ms = 700};
    mv_jwt_options jo = {.algorithms = ALL_ALGS & ~ALG(MV_JWT_HS256),
                         .jwks_url = url,
                         .jwks_refresh_s = 1,
                         .http = &http,
                         .leeway_s = -1};
    mv_auth *auth = new_auth(&jo, (mv_auth_claims){0});
    REQUIRE(auth);
    CHECK_INT(served_count(), 1); /* fetched once at start */
    EXPECT_OK(auth, "rs256");
    EXPECT_OK(auth, "eddsa");

    /* the provider rotates: a token with the new kid triggers one refresh and verifies */
    set_serving(SERVE_B);
    int before = served_count();
    EXPECT_OK(auth, "rotated");
    CHECK(served_count() >= before + 1);
    EXPECT_401(auth, "rs256", "no key with this kid"); /* the old key is gone */
    /* another unknown kid right away: no second unknown-kid refresh within 10 s */
    before = served_count();
    EXPECT_401(auth, "rotated_again", "no key with this kid");
    EXPECT_401(auth, "wrong_kid", "no key with this kid");
    CHECK_INT(served_count(), before);

    /* garbage and 500 answers: the periodic refresh fails, the last good keys stay */
    set_serving(SERVE_GARBAGE);
    before = served_count();
    CHECK(wait_served(before, 3000));
    EXPECT_OK(auth, "rotated");
    set_serving(SERVE_500);
    before = served_count();
    CHECK(wait_served(before, 3000));
    EXPECT_OK(auth, "rotated");

    /* a hanging endpoint: requests keep verifying, quickly, while the refresh times out */
    set_serving(SERVE_HANG);
    before = served_count();
    CHECK(wait_served(before, 3000));
    int64_t t0 = mv_now_ms();
    for (int i = 0; i < 20; i++)
        EXPECT_OK(auth, "rotated");
    CHECK(mv_now_ms() - t0 < 500);
    mv_auth_free(auth);
    http_sink_stop(s);
    free(jwks_a_text);
    free(jwks_b_text);
}

TEST(a_jwks_url_down_at_start_refuses_tokens_until_a_refresh_succeeds) {
    REQUIRE(fixtures());
    jwks_b_text = jwt_fixture_text("jwks-b.json");
    http_sink *s = http_sink_start();
    REQUIRE(s && jwks_b_text);
    http_sink_set_handler(s, serve_jwks, NULL);
    set_serving(SERVE_500);
    char url[256];
    snprintf(url, sizeof url, "%s/jwks", http_sink_url(s));
    mv_webhook_config http = {.connect_timeout_ms = 500, .timeout_ms = 700};
    mv_jwt_options jo = {.algorithms = ALG(MV_JWT_RS256),
                         .jwks_url = url,
                         .http = &http,
                         .jwks_kid_interval_ms = 200,
                         .leeway_s = -1};
    mv_auth *auth = new_auth(&jo, (mv_auth_claims){0});
    REQUIRE(auth);
    EXPECT_401(auth, "rotated", "no key with this kid");
    set_serving(SERVE_B);
    mv_sleep_ms(250);
    EXPECT_OK(auth, "rotated"); /* unknown kid → refresh (interval 200 ms here) */
    mv_auth_free(auth);
    http_sink_stop(s);
    free(jwks_b_text);
}

typedef struct {
    mv_auth *auth;
    mv_code rc;
} burst_job;

static void *burst(void *arg) {
    burst_job *j = arg;
    j->rc = try_token(j->auth, jwt_fixture_token("rotated")).rc;
    return NULL;
}

TEST(a_burst_of_tokens_with_a_new_kid_waits_for_one_refresh_and_all_verify) {
    REQUIRE(fixtures());
    jwks_a_text = jwt_fixture_text("jwks-a.json");
    jwks_b_text = jwt_fixture_text("jwks-b.json");
    http_sink *s = http_sink_start();
    REQUIRE(s && jwks_a_text && jwks_b_text);
    http_sink_set_handler(s, serve_jwks, NULL);
    set_serving(SERVE_A);
    char url[256];
    snprintf(url, sizeof url, "%s/jwks", http_sink_url(s));
    mv_webhook_config http = {.connect_timeout_ms = 500, .timeout_ms = 2000};
    mv_jwt_options jo = {
        .algorithms = ALG(MV_JWT_RS256), .jwks_url = url, .http = &http, .leeway_s = -1};
    mv_auth *auth = new_auth(&jo, (mv_auth_claims){0});
    REQUIRE(auth);
    set_serving(SERVE_B_SLOW); /* the provider rotated; its answer takes 300 ms */
    int before = served_count();
    burst_job jobs[6];
    pthread_t t[6];
    for (int i = 0; i < 6; i++) {
        jobs[i] = (burst_job){.auth = auth, .rc = -1};
        pthread_create(&t[i], NULL, burst, &jobs[i]);
    }
    for (int i = 0; i < 6; i++) {
        pthread_join(t[i], NULL);
        CHECK_INT(jobs[i].rc, MV_OK);
    }
    CHECK_INT(served_count(), before + 1); /* one refresh for all of them */
    mv_auth_free(auth);
    http_sink_stop(s);
    free(jwks_a_text);
    free(jwks_b_text);
}

TEST(unusable_key_sets_and_options_without_key_material_are_refused) {
    REQUIRE(fixtures());
    const char *bad[] = {"{}",
                         "{\"keys\": 3}",
                         "{\"keys\": [{\"kty\": \"oct\", \"k\": \"c2VjcmV0\"}]}",
                         "{\"keys\": [{\"kty\": \"RSA\", \"n\": \"AQAB\", \"e\": \"AQAB\"}]}",
                         "{\"keys\": [{\"kty\": \"EC\", \"crv\": \"P-256\", \"x\": "
                         "\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\", \"y\": "
                         "\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"}]}",
                         "[1]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *path = test_tmp_path("bad-jwks.json");
        FILE *f = fopen(path, "w");
        fputs(bad[i], f);
        fclose(f);
        mv_jwt_options jo = {.algorithms = ALG(MV_JWT_RS256), .jwks_file = path};
        mv_auth_options o = {.mode = MV_AUTH_JWT, .jwt = &jo};
        mv_auth *a = NULL;
        mv_err err = {0};
        CHECK_CODE(mv_auth_new(&o, &a, &err), MV_INVALID_ARGUMENT, &err);
        CHECK(a == NULL);
        CHECK(strstr(err.message, "bad-jwks.json") != NULL);
    }
    mv_jwt_options hs_only_without_secret = {.algorithms = ALG(MV_JWT_HS256)};
    mv_auth_options o = {.mode = MV_AUTH_JWT, .jwt = &hs_only_without_secret};
    mv_auth *a = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_auth_new(&o, &a, &err), MV_INVALID_ARGUMENT, &err);
    mv_jwt_options rs_without_jwks = {
        .algorithms = ALG(MV_JWT_RS256), .secret = HS_SECRET, .secret_len = 32};
    o.jwt = &rs_without_jwks;
    CHECK_CODE(mv_auth_new(&o, &a, &err), MV_INVALID_ARGUMENT, &err);
    CHECK(strstr(err.message, "need a JWKS") != NULL);
}

static int64_t test_now_ms;
static int64_t test_now(void *ctx) {
    (void)ctx;
    return test_now_ms;
}

static mv_code verify_named(mv_jwt_verifier *v, const char *name, mv_err *err) {
    const char *tok = jwt_fixture_token(name);
    json_t *claims = NULL;
    mv_code rc = mv_jwt_verify(v, tok, strlen(tok), &claims, err);
    json_decref(claims);
    return rc;
}

TEST(a_token_sent_again_skips_the_signature_check_but_not_its_claims_or_its_bytes) {
    REQUIRE(fixtures());
    mv_clock clock = {.now = test_now};
    test_now_ms = mv_now_ms();
    mv_jwt_options jo = {.algorithms = ALL_ALGS & ~ALG(MV_JWT_HS256),
                         .jwks_file = jwt_fixture_path("jwks-a.json"),
                         .leeway_s = 0,
                         .clock = &clock};
    mv_jwt_verifier *v = NULL;
    mv_err err = {0};
    REQUIRE(mv_jwt_verifier_new(&jo, &v, &err) == MV_OK);
    CHECK_CODE(verify_named(v, "rs256", &err), MV_OK, &err);
    CHECK_INT((long)mv_jwt_cache_hits(v), 0);
    for (int i = 0; i < 3; i++)
        CHECK_CODE(verify_named(v, "rs256", &err), MV_OK, &err);
    CHECK_INT((long)mv_jwt_cache_hits(v), 3);
    CHECK_CODE(verify_named(v, "es256", &err), MV_OK, &err); /* another token: verified anew */
    CHECK_INT((long)mv_jwt_cache_hits(v), 3);

    /* a token that differs in its last byte only is not the cached one */
    const char *good = jwt_fixture_token("rs256");
    size_t n = strlen(good);
    char *bent = strdup(good);
    REQUIRE(bent);
    bent[n - 1] = bent[n - 1] == 'A' ? 'B' : 'A';
    json_t *claims = NULL;
    CHECK_CODE(mv_jwt_verify(v, bent, n, &claims, &err), MV_UNAUTHENTICATED, &err);
    CHECK(claims == NULL);
    CHECK_INT((long)mv_jwt_cache_hits(v), 3);
    free(bent);

    /* the cached token still expires: exp is checked on every request (fixture exp: now + 600) */
    test_now_ms += 700 * 1000;
    CHECK_CODE(verify_named(v, "rs256", &err), MV_UNAUTHENTICATED, &err);
    CHECK(strstr(err.message, "expired") != NULL);
    mv_jwt_verifier_free(v);
}

int main(void) {
    mv_log_set_fd(-1);
    int rc = RUN_TESTS(
        rs256_es256_eddsa_and_hs256_tokens_made_by_node_verify,
        alg_none_and_algorithms_left_out_of_the_configuration_are_refused,
        an_hs256_token_keyed_with_the_rsa_public_key_is_refused,
        a_key_whose_type_or_published_alg_does_not_fit_the_token_is_refused,
        an_unknown_kid_or_a_missing_kid_with_several_keys_is_refused,
        a_signature_by_another_key_or_over_other_claims_is_refused,
        expired_not_yet_valid_wrong_issuer_and_wrong_audience_are_refused,
        a_64_kib_token_is_refused_by_its_length,
        claims_map_through_dotted_paths_and_roles_may_be_a_space_separated_string,
        a_jwks_url_rotates_on_unknown_kid_at_most_every_interval_and_keeps_keys_through_garbage_and_hangs,
        a_jwks_url_down_at_start_refuses_tokens_until_a_refresh_succeeds,
        a_burst_of_tokens_with_a_new_kid_waits_for_one_refresh_and_all_verify,
        unusable_key_sets_and_options_without_key_material_are_refused,
        a_token_sent_again_skips_the_signature_check_but_not_its_claims_or_its_bytes);
    jwt_fixtures_free();
    return rc;
}
