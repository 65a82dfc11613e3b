/* auth_test.c — headers mode and HS256 JWTs: valid tokens, bad signatures, expiry and nbf with
 * the 30 s leeway, alg none / HS512 refused, claim types. */
#include "http/auth.h"
#include "http/request.h"
#include "missive/base.h"
#include "test.h"

static const char SECRET[] = "0123456789abcdef0123456789abcdef";
static int64_t now_ms = 1700000000000LL;

static void b64(const char *s, size_t n, char *out) { mv_b64url_encode(s, n, out); }

/* header and claims are JSON texts; secret NULL → signature "sig" literally. */
static char *make_jwt(const char *header, const char *claims, const char *secret) {
    static char tok[4096];
    char h[1024], c[2048];
    b64(header, strlen(header), h);
    b64(claims, strlen(claims), c);
    snprintf(tok, sizeof tok, "%s.%s", h, c);
    unsigned char mac[32];
    char sig[64];
    if (secret) {
        mv_hmac_sha256(secret, strlen(secret), tok, strlen(tok), mac);
        mv_b64url_encode(mac, 32, sig);
    } else {
        sig[0] = '\0';
    }
    size_t n = strlen(tok);
    snprintf(tok + n, sizeof tok - n, ".%s", sig);
    return tok;
}

typedef struct ctx {
    mv_arena *arena;
    mv_http_request req;
    mv_principal p;
    mv_err err;
    mv_auth *auth;
    mv_clock clock;
} ctx;

static void ctx_init(ctx *c, mv_auth_mode mode) {
    memset(c, 0, sizeof *c);
    c->arena = mv_arena_new();
    mv_http_request_init(&c->req, c->arena, "GET", "/", NULL);
    c->clock = mv_manual_clock(&now_ms);
    mv_auth_options o = {
        .mode = mode, .secret = SECRET, .secret_len = strlen(SECRET), .clock = &c->clock};
    mv_auth_new(&o, &c->auth, NULL);
}

static mv_code bearer(ctx *c, const char *token) {
    char h[4200];
    snprintf(h, sizeof h, "Bearer %s", token);
    mv_http_request_add_header(&c->req, "Authorization", h, NULL);
    return mv_auth_authenticate(c->auth, &c->req, &c->p, &c->err);
}

static void ctx_free(ctx *c) {
    mv_auth_free(c->auth);
    mv_arena_free(c->arena);
}

static const char HS256[] = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";

TEST(valid_jwt_gives_the_principal_from_its_claims) {
    ctx c;
    ctx_init(&c, MV_AUTH_JWT);
    CHECK_CODE(bearer(&c, make_jwt(HS256,
                                   "{\"sub\":\" u1 \",\"roles\":[\"host\",\" \",\"admin\"],"
                                   "\"permissions\":[\"is.admin\",\"approvals.decide\"],"
                                   "\"tenant\":\"acme\",\"exp\":1700000060,\"nbf\":1699999990}",
                                   SECRET)),
               MV_OK, &c.err);
    CHECK_STR(c.p.user_id, "u1");
    CHECK_INT(c.p.nroles, 2);
    CHECK(mv_principal_has_role(&c.p, "admin"));
    CHECK(!mv_principal_has_role(&c.p, "guest"));
    CHECK(mv_principal_has_permission(&c.p, "is.admin"));
    CHECK(mv_principal_has_permission(&c.p, "approvals.decide"));
    CHECK(!mv_principal_has_permission(&c.p, "other"));
    CHECK_STR(c.p.tenant, "acme");
    CHECK_STR(mv_json_str(c.p.identity, "tenant"), "acme");
    CHECK(mv_principal_identity(&c.p, c.arena) == c.p.identity); /* jwt: the claims */
    ctx_free(&c);
}

TEST(jwt_permissions_may_be_an_object_of_flags) {
    ctx c;
    ctx_init(&c, MV_AUTH_JWT);
    CHECK_CODE(bearer(&c, make_jwt(HS256,
                                   "{\"sub\":\"u1\",\"permissions\":{\"is.admin\":true,\"x\":false,"
                                   "\"y\":1},\"exp\":1700000060}",
                                   SECRET)),
               MV_OK, &c.err);
    CHECK(mv_principal_has_permission(&c.p, "is.admin"));
    CHECK(!mv_principal_has_permission(&c.p, "x"));
    CHECK(mv_principal_has_permission(&c.p, "y"));
    CHECK_STR(c.p.tenant, "default");
    CHECK_INT(c.p.nroles, 0);
    ctx_free(&c);
}

TEST(jwt_with_a_bad_signature_is_401) {
    ctx c;
    ctx_init(&c, MV_AUTH_JWT);
    CHECK_CODE(bearer(&c, make_jwt(HS256, "{\"sub\":\"u1\"}", "another-secret-another-secret!!!")),
               MV_UNAUTHENTICATED, &c.err);
    CHECK(strstr(c.err.message, "signature") != NULL);
    ctx_free(&c);
    /* claims changed after signing */
    ctx_init(&c, MV_AUTH_JWT);
    char *t = make_jwt(HS256, "{\"sub\":\"u1\"}", SECRET);
    char forged[4096], claims[64];
    b64("{\"sub\":\"u2\"}", 12, claims);
    const char *d1 = strchr(t, '.'), *d2 = strrchr(t, '.');
    snprintf(forged, sizeof forged, "%.*s.%s%s", (int)(d1 - t), t, claims, d2);
    CHECK_CODE(bearer(&c, forged), MV_UNAUTHENTICATED, &c.err);
    ctx_free(&c);
}

TEST(expired_jwt_is_401_beyond_the_30_second_leeway) {
    ctx c;
    ctx_init(&c, MV_AUTH_JWT);
    CHECK_CODE(bearer(&c, make_jwt(HS256, "{\"sub\":\"u1\",\"exp\":1699999969}", SECRET)),
               MV_UNAUTHENTICATED, &c.err);
    CHECK(strstr(c.err.message, "expired") != NULL);
    ctx_free(&c);
    ctx_init(&c, MV_AUTH_JWT);
    CHECK_CODE(bearer(&c, make_jwt(HS256, "{\"sub\":\"u1\",\"exp\":1699999971}", SECRET)), MV_OK,
               &c.err);
    ctx_free(&c);
}

TEST(jwt_not_valid_yet_is_401_beyond_the_leeway) {
    ctx c;
    ctx_init(&c, MV_AUTH_JWT);
    CHECK_CODE(bearer(&c, make_jwt(HS256, "{\"sub\":\"u1\",\"nbf\":1700000031,\"exp\":1700000060}",
                                   SECRET)),
               MV_UNAUTHENTICATED, &c.err);
    CHECK(strstr(c.err.message, "not valid yet") != NULL);
    ctx_free(&c);
    ctx_init(&c, MV_AUTH_JWT);
    CHECK_CODE(bearer(&c, make_jwt(HS256, "{\"sub\":\"u1\",\"nbf\":1700000029,\"exp\":1700000060}",
                                   SECRET)),
               MV_OK, &c.err);
    ctx_free(&c);
}

TEST(a_jwt_without_exp_is_401_unless_exp_is_optional_and_the_principal_carries_exp) {
    ctx c;
    ctx_init(&c, MV_AUTH_JWT);
    CHECK_CODE(bearer(&c, make_jwt(HS256, "{\"sub\":\"u1\"}", SECRET)), MV_UNAUTHENTICATED, &c.err);
    CHECK(strstr(c.err.message, "invalid bearer token: the token has no exp") != NULL);
    ctx_free(&c);
    ctx_init(&c, MV_AUTH_JWT);
    CHECK_CODE(bearer(&c, make_jwt(HS256, "{\"sub\":\"u1\",\"exp\":1700000060}", SECRET)), MV_OK,
               &c.err);
    CHECK(c.p.exp_ms == 1700000060000LL);
    ctx_free(&c);
    /* exp optional: the same token without exp is accepted; its principal has no expiry */
    ctx_init(&c, MV_AUTH_JWT);
    mv_auth_free(c.auth);
    mv_jwt_options jo = {.secret = SECRET,
                         .secret_len = strlen(SECRET),
                         .clock = &c.clock,
                         .leeway_s = -1,
                         .exp_optional = true};
    mv_auth_options o = {.mode = MV_AUTH_JWT, .jwt = &jo};
    REQUIRE(mv_auth_new(&o, &c.auth, NULL) == MV_OK);
    CHECK_CODE(bearer(&c, make_jwt(HS256, "{\"sub\":\"u1\"}", SECRET)), MV_OK, &c.err);
    CHECK(c.p.exp_ms == 0);
    ctx_free(&c);
    /* headers mode has no expiry */
    ctx_init(&c, MV_AUTH_HEADERS);
    mv_http_request_add_header(&c.req, "X-User-Id", "u1", NULL);
    CHECK_CODE(mv_auth_authenticate(c.auth, &c.req, &c.p, &c.err), MV_OK, &c.err);
    CHECK(c.p.exp_ms == 0);
    ctx_free(&c);
}

TEST(alg_none_and_other_algorithms_are_401) {
    const char *headers[] = {"{\"alg\":\"none\"}", "{\"alg\":\"HS512\"}", "{\"alg\":\"hs256\"}",
                             "{\"alg\":\"RS256\"}", "{\"typ\":\"JWT\"}"};
    for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++) {
        ctx c;
        ctx_init(&c, MV_AUTH_JWT);
        /* signed with the right key, and unsigned, both refused */
        CHECK_CODE(bearer(&c, make_jwt(headers[i], "{\"sub\":\"u1\"}", SECRET)), MV_UNAUTHENTICATED,
                   &c.err);
        CHECK(strstr(c.err.message, "is not accepted") != NULL ||
              strstr(c.err.message, "has no alg") != NULL);
        ctx_free(&c);
        ctx_init(&c, MV_AUTH_JWT);
        CHECK_CODE(bearer(&c, make_jwt(headers[i], "{\"sub\":\"u1\"}", NULL)), MV_UNAUTHENTICATED,
                   &c.err);
        ctx_free(&c);
    }
}

TEST(malformed_tokens_and_claims_are_401) {
    const char *tokens[] = {"",        "abc",      "a.b",
                            "a.b.c.d", "!!.??.##", make_jwt(HS256, "{\"roles\":[]}", SECRET)};
    for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++) {
        ctx c;
        ctx_init(&c, MV_AUTH_JWT);
        CHECK_CODE(bearer(&c, tokens[i]), MV_UNAUTHENTICATED, &c.err);
        ctx_free(&c);
    }
    /* each with an exp, so that nothing but the named fault refuses it */
    const char *claims[] = {"{\"exp\":1700000060,\"sub\":\"\"}",
                            "{\"exp\":1700000060,\"sub\":7}",
                            "{\"exp\":1700000060,\"sub\":\"u\",\"roles\":{\"a\":1}}",
                            "{\"exp\":1700000060,\"sub\":\"u\",\"roles\":[1]}",
                            "{\"exp\":1700000060,\"sub\":\"u\",\"permissions\":\"x\"}",
                            "{\"sub\":\"u\",\"exp\":\"soon\"}",
                            "{\"exp\":1700000060,\"sub\":\"u\",\"tenant\":5}",
                            "{\"exp\":1700000060,\"sub\":\"u\",\"tenant\":\"a b\"}",
                            "[1,2]"};
    for (size_t i = 0; i < sizeof claims / sizeof claims[0]; i++) {
        ctx c;
        ctx_init(&c, MV_AUTH_JWT);
        CHECK_CODE(bearer(&c, make_jwt(HS256, claims[i], SECRET)), MV_UNAUTHENTICATED, &c.err);
        ctx_free(&c);
    }
}

TEST(missing_or_non_bearer_authorization_is_401) {
    ctx c;
    ctx_init(&c, MV_AUTH_JWT);
    CHECK_CODE(mv_auth_authenticate(c.auth, &c.req, &c.p, &c.err), MV_UNAUTHENTICATED, &c.err);
    mv_http_request_add_header(&c.req, "Authorization", "Basic dTpw", NULL);
    CHECK_CODE(mv_auth_authenticate(c.auth, &c.req, &c.p, &c.err), MV_UNAUTHENTICATED, &c.err);
    /* headers-mode headers mean nothing in jwt mode */
    mv_http_request_add_header(&c.req, "X-User-Id", "u1", NULL);
    CHECK_CODE(mv_auth_authenticate(c.auth, &c.req, &c.p, &c.err), MV_UNAUTHENTICATED, &c.err);
    ctx_free(&c);
}

TEST(jwt_mode_needs_a_secret) {
    mv_auth *a = NULL;
    mv_err err = {0};
    mv_auth_options o = {.mode = MV_AUTH_JWT};
    CHECK_CODE(mv_auth_new(&o, &a, &err), MV_INVALID_ARGUMENT, &err);
    CHECK(a == NULL);
}

TEST(headers_mode_trims_lists_and_drops_empties) {
    ctx c;
    ctx_init(&c, MV_AUTH_HEADERS);
    mv_http_request_add_header(&c.req, "x-user-id", "  u1 ", NULL);
    mv_http_request_add_header(&c.req, "X-User-Roles", " host, ,admin ,,", NULL);
    mv_http_request_add_header(&c.req, "X-User-Permissions", "is.admin , approvals.decide", NULL);
    CHECK_CODE(mv_auth_authenticate(c.auth, &c.req, &c.p, &c.err), MV_OK, &c.err);
    CHECK_STR(c.p.user_id, "u1");
    CHECK_INT(c.p.nroles, 2);
    CHECK_STR(c.p.roles[0], "host");
    CHECK_STR(c.p.roles[1], "admin");
    CHECK(mv_principal_has_permission(&c.p, "is.admin"));
    CHECK(mv_principal_has_permission(&c.p, "approvals.decide"));
    CHECK_INT(json_object_size(c.p.permissions), 2);
    CHECK_STR(c.p.tenant, "default");
    json_t *roles = mv_principal_roles_json(&c.p);
    CHECK_INT(json_array_size(roles), 2);
    json_decref(roles);
    /* the identity prepare hooks see, built only when asked for (into the request's arena) */
    CHECK(c.p.identity == NULL);
    char *identity = json_dumps(mv_principal_identity(&c.p, c.arena), JSON_COMPACT);
    CHECK_STR(identity, "{\"id\":\"u1\",\"roles\":[\"host\",\"admin\"],\"tenant\":\"default\"}");
    free(identity);
    ctx_free(&c);
}

TEST(headers_mode_reads_the_tenant_and_needs_a_user) {
    ctx c;
    ctx_init(&c, MV_AUTH_HEADERS);
    mv_http_request_add_header(&c.req, "X-User-Id", "   ", NULL);
    CHECK_CODE(mv_auth_authenticate(c.auth, &c.req, &c.p, &c.err), MV_UNAUTHENTICATED, &c.err);
    ctx_free(&c);
    ctx_init(&c, MV_AUTH_HEADERS);
    CHECK_CODE(mv_auth_authenticate(c.auth, &c.req, &c.p, &c.err), MV_UNAUTHENTICATED, &c.err);
    ctx_free(&c);
    ctx_init(&c, MV_AUTH_HEADERS);
    mv_http_request_add_header(&c.req, "X-User-Id", "u1", NULL);
    mv_http_request_add_header(&c.req, "X-Tenant-Id", "acme", NULL);
    CHECK_CODE(mv_auth_authenticate(c.auth, &c.req, &c.p, &c.err), MV_OK, &c.err);
    CHECK_STR(c.p.tenant, "acme");
    CHECK_INT(c.p.nroles, 0);
    CHECK(!mv_principal_has_permission(&c.p, "is.admin"));
    ctx_free(&c);
    ctx_init(&c, MV_AUTH_HEADERS);
    mv_http_request_add_header(&c.req, "X-User-Id", "\xff\xfe", NULL);
    CHECK_CODE(mv_auth_authenticate(c.auth, &c.req, &c.p, &c.err), MV_UNAUTHENTICATED, &c.err);
    ctx_free(&c);
}

/* n bytes of printable text starting with tag (ids, roles and tenants of a given length) */
static const char *long_id(size_t n, char tag) {
    static char buf[4][1024];
    static int next;
    char *s = buf[next++ % 4];
    memset(s, 'x', n);
    s[0] = tag;
    s[n] = '\0';
    return s;
}

TEST(ids_roles_and_tenants_past_255_bytes_are_400_naming_the_header_or_claim) {
    static const struct {
        const char *header, *value, *field;
    } headers[] = {{"X-User-Id", NULL, "X-User-Id"},
                   {"X-User-Roles", NULL, "X-User-Roles[1]"},
                   {"X-Tenant-Id", NULL, "X-Tenant-Id"}};
    for (size_t i = 0; i < 3; i++) {
        for (size_t n = 255; n <= 256; n++) { /* the limit passes, one byte more does not */
            ctx c;
            ctx_init(&c, MV_AUTH_HEADERS);
            char roles[600];
            snprintf(roles, sizeof roles, "host, %s", long_id(n, 'r'));
            mv_http_request_add_header(&c.req, "X-User-Id", i == 0 ? long_id(n, 'u') : "u1", NULL);
            if (i == 1) mv_http_request_add_header(&c.req, "X-User-Roles", roles, NULL);
            if (i == 2) mv_http_request_add_header(&c.req, "X-Tenant-Id", long_id(n, 't'), NULL);
            mv_code rc = mv_auth_authenticate(c.auth, &c.req, &c.p, &c.err);
            if (n == 255) {
                CHECK_CODE(rc, MV_OK, &c.err);
            } else {
                CHECK_CODE(rc, MV_INVALID_ARGUMENT, &c.err);
                char want[160];
                snprintf(want, sizeof want, "%s must be at most 255 bytes (it has 256)",
                         headers[i].field);
                CHECK_STR(c.err.message, want);
            }
            ctx_free(&c);
        }
    }
    static const char *const fields[] = {"claim sub", "claim roles[1]", "claim tenant"};
    for (int i = 0; i < 3; i++) {
        for (size_t n = 255; n <= 256; n++) {
            ctx c;
            ctx_init(&c, MV_AUTH_JWT);
            char claims[1200];
            snprintf(claims, sizeof claims,
                     "{\"sub\":\"%s\",\"roles\":[\"host\",\"%s\"],\"tenant\":\"%s\","
                     "\"exp\":1700000060}",
                     i == 0 ? long_id(n, 'u') : "u1", i == 1 ? long_id(n, 'r') : "r",
                     i == 2 ? long_id(n, 't') : "acme");
            mv_code rc = bearer(&c, make_jwt(HS256, claims, SECRET));
            if (n == 255) {
                CHECK_CODE(rc, MV_OK, &c.err);
            } else {
                CHECK_CODE(rc, MV_INVALID_ARGUMENT, &c.err);
                char want[160];
                snprintf(want, sizeof want, "%s must be at most 255 bytes (it has 256)", fields[i]);
                CHECK_STR(c.err.message, want);
            }
            ctx_free(&c);
        }
    }
}

int main(void) {
    return RUN_TESTS(
        valid_jwt_gives_the_principal_from_its_claims, jwt_permissions_may_be_an_object_of_flags,
        jwt_with_a_bad_signature_is_401, expired_jwt_is_401_beyond_the_30_second_leeway,
        jwt_not_valid_yet_is_401_beyond_the_leeway,
        a_jwt_without_exp_is_401_unless_exp_is_optional_and_the_principal_carries_exp,
        alg_none_and_other_algorithms_are_401, malformed_tokens_and_claims_are_401,
        missing_or_non_bearer_authorization_is_401, jwt_mode_needs_a_secret,
        headers_mode_trims_lists_and_drops_empties, headers_mode_reads_the_tenant_and_needs_a_user,
        ids_roles_and_tenants_past_255_bytes_are_400_naming_the_header_or_claim);
}
