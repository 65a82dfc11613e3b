/* jwt.c — compact JWS verification against a shared secret (HS256) or a JWKS (RS256, ES256,
 * EdDSA). The header is the only part read before the signature is checked, and only for alg and
 * kid; the algorithm must be both configured and fit the key's type, so a token cannot talk the
 * verifier into using an RSA public key as an HMAC secret, or into "none". */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "http/jwks.h"
#include "http/jwt.h"

/* Verified signatures, so that a client sending the same token with every request pays for one
 * public-key verification (RS256 ≈ 25 µs, ES256 and EdDSA more) rather than one per request: a
 * slot holds the SHA-256 of a whole token (header, claims and signature) whose signature verified
 * against the key set with that serial. A hit needs the same token bytes and the same key set
 * (a refresh makes a new set, so a rotated-out key is never trusted again); the claims — exp, nbf,
 * iss, aud — are checked on every request all the same. Fixed size, overwritten on collision. */
#define SIG_CACHE_SLOTS 1024

typedef struct sig_slot {
    unsigned char digest[32];
    uint64_t set_serial; /* 0: empty */
} sig_slot;

struct mv_jwt_verifier {
    pthread_mutex_t cache_mu;
    sig_slot cache[SIG_CACHE_SLOTS];
    unsigned long cache_hits;
    unsigned algorithms;
    unsigned char *secret;
    size_t secret_len;
    mv_jwks_source *jwks;
    char *issuer, *audience;
    int leeway_s;
    bool exp_optional;
    const mv_clock *clock;
};

#define ASYMMETRIC ((1u << MV_JWT_RS256) | (1u << MV_JWT_ES256) | (1u << MV_JWT_EDDSA))

void mv_jwt_verifier_free(mv_jwt_verifier *v) {
    if (!v) return;
    if (v->secret) {
        volatile unsigned char *p = v->secret;
        for (size_t i = 0; i < v->secret_len; i++)
            p[i] = 0;
        free(v->secret);
    }
    mv_jwks_source_close(v->jwks);
    pthread_mutex_destroy(&v->cache_mu);
    free(v->issuer);
    free(v->audience);
    free(v);
}

mv_code mv_jwt_verifier_new(const mv_jwt_options *o, mv_jwt_verifier **out, mv_err *err) {
    *out = NULL;
    bool has_secret = o->secret && o->secret_len > 0, has_jwks = o->jwks_file || o->jwks_url;
    unsigned algs = o->algorithms;
    if (algs == 0) algs = (has_secret ? 1u << MV_JWT_HS256 : 0) | (has_jwks ? ASYMMETRIC : 0);
    if (algs == 0)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "jwt authentication needs a secret or a JWKS");
    if ((algs & (1u << MV_JWT_HS256)) && !has_secret)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "algorithm HS256 needs a secret");
    if ((algs & ASYMMETRIC) && !has_jwks)
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "algorithms RS256, ES256 and EdDSA need a JWKS");
    if (o->jwks_file && o->jwks_url)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "give a JWKS file or a JWKS URL, not both");
    mv_jwt_verifier *v = calloc(1, sizeof *v);
    if (!v) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    pthread_mutex_init(&v->cache_mu, NULL);
    v->algorithms = algs;
    v->leeway_s = o->leeway_s < 0 ? 30 : o->leeway_s;
    v->exp_optional = o->exp_optional;
    v->clock = o->clock;
    mv_code rc = MV_OK;
    if (has_secret && (algs & (1u << MV_JWT_HS256))) {
        if ((v->secret = malloc(o->secret_len))) memcpy(v->secret, o->secret, o->secret_len);
        v->secret_len = o->secret_len;
    }
    if ((o->issuer && !(v->issuer = strdup(o->issuer))) ||
        (o->audience && !(v->audience = strdup(o->audience))) || (v->secret_len && !v->secret))
        rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (rc == MV_OK && has_jwks && (algs & ASYMMETRIC)) {
        mv_jwks_source_options so = {.file = o->jwks_file,
                                     .url = o->jwks_url,
                                     .refresh_s = o->jwks_refresh_s,
                                     .kid_interval_ms = o->jwks_kid_interval_ms,
                                     .http = o->http};
        rc = mv_jwks_source_open(&so, &v->jwks, err);
    }
    if (rc != MV_OK) {
        mv_jwt_verifier_free(v);
        return rc;
    }
    *out = v;
    return MV_OK;
}

static mv_code reject(mv_err *err, const char *fmt, const char *arg) {
    char why[200];
    if (arg)
        snprintf(why, sizeof why, fmt, arg);
    else
        mv_strlcpy(why, fmt, sizeof why); /* a reason without an argument is plain text */
    return mv_err_set(err, MV_UNAUTHENTICATED, "invalid bearer token: %s", why);
}

/* Decodes one base64url part as a JSON object (new reference) or NULL. */
static json_t *decode_json_part(const char *s, size_t n) {
    unsigned char *buf = malloc(n * 3 / 4 + 2);
    if (!buf) return NULL;
    size_t len;
    json_t *v = NULL;
    if (mv_b64url_decode(s, n, buf, &len) &&
        mv_json_parse((const char *)buf, len, &v, NULL) == MV_OK && !json_is_object(v)) {
        json_decref(v);
        v = NULL;
    }
    free(buf);
    return v;
}

/* Reads alg and kid from the header. kid_out is a copy (caller frees) or NULL. */
static mv_code read_header(const mv_jwt_verifier *v, const char *s, size_t n, mv_jwt_alg *alg,
                           char **kid_out, mv_err *err) {
    *kid_out = NULL;
    json_t *h = decode_json_part(s, n);
    if (!h) return reject(err, "malformed header", NULL);
    mv_code rc = MV_OK;
    const char *name = mv_json_str(h, "alg");
    json_t *kid = json_object_get(h, "kid");
    *alg = mv_jwt_alg_parse(name);
    if (!name)
        rc = reject(err, "the header has no alg", NULL);
    else if (*alg == MV_JWT_NONE_ || !(v->algorithms & (1u << *alg)))
        rc = reject(err, "alg %s is not accepted",
                    json_string_length(json_object_get(h, "alg")) < 32 ? name : "(long)");
    else if (json_object_get(h, "crit"))
        rc = reject(err, "unsupported critical header", NULL);
    else if (kid && (!json_is_string(kid) || json_string_length(kid) > 256))
        rc = reject(err, "kid must be a short string", NULL);
    else if (kid && !(*kid_out = strdup(json_string_value(kid))))
        rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    json_decref(h);
    return rc;
}

static sig_slot *slot_of(mv_jwt_verifier *v, const unsigned char digest[32]) {
    return &v->cache[(digest[0] | (unsigned)digest[1] << 8) % SIG_CACHE_SLOTS];
}

static bool verified_before(mv_jwt_verifier *v, const unsigned char digest[32], uint64_t serial) {
    pthread_mutex_lock(&v->cache_mu);
    const sig_slot *s = slot_of(v, digest);
    bool hit = s->set_serial == serial && memcmp(s->digest, digest, 32) == 0;
    if (hit) v->cache_hits++;
    pthread_mutex_unlock(&v->cache_mu);
    return hit;
}

static void remember(mv_jwt_verifier *v, const unsigned char digest[32], uint64_t serial) {
    pthread_mutex_lock(&v->cache_mu);
    sig_slot *s = slot_of(v, digest);
    memcpy(s->digest, digest, 32);
    s->set_serial = serial;
    pthread_mutex_unlock(&v->cache_mu);
}

unsigned long mv_jwt_cache_hits(mv_jwt_verifier *v) {
    pthread_mutex_lock(&v->cache_mu);
    unsigned long n = v->cache_hits;
    pthread_mutex_unlock(&v->cache_mu);
    return n;
}

/* refresh NULL: an unknown kid waits for the refresh it starts (or joins); else it does not wait,
 * and *refresh is the refresh to wait for before trying again (0: none). digest: the SHA-256 of
 * the whole token (the cache's key). */
static mv_code check_signature(mv_jwt_verifier *v, mv_jwt_alg alg, const char *kid,
                               const char *signed_part, size_t signed_len, const unsigned char *sig,
                               size_t siglen, const unsigned char digest[32],
                               unsigned long *refresh, mv_err *err) {
    if (alg == MV_JWT_HS256) {
        unsigned char mac[32];
        mv_hmac_sha256(v->secret, v->secret_len, signed_part, signed_len, mac);
        return mv_ct_equal(mac, sizeof mac, sig, siglen) ? MV_OK
                                                         : reject(err, "bad signature", NULL);
    }
    mv_jwks *set = mv_jwks_source_get(v->jwks);
    if (verified_before(v, digest, mv_jwks_serial(set))) {
        mv_jwks_release(set);
        return MV_OK;
    }
    if (!kid && mv_jwks_count(set) > 1) {
        mv_jwks_release(set);
        return reject(err, "the token has no kid and the key set holds several keys", NULL);
    }
    const mv_jwk *key = mv_jwks_find(set, kid);
    if (!key && kid && refresh) { /* perhaps the provider rotated its keys */
        *refresh = mv_jwks_source_request(v->jwks);
    } else if (!key && kid) {
        mv_jwks_release(set);
        set = mv_jwks_source_refresh(v->jwks);
        key = mv_jwks_find(set, kid);
    }
    mv_code rc = MV_OK;
    if (!key)
        rc = reject(err, kid ? "no key with this kid" : "no key to verify with", NULL);
    else if (!mv_jwk_fits(key, alg))
        rc = reject(err, "the key does not fit alg %s", mv_jwt_alg_name(alg));
    else if (!mv_jwk_verify(key, alg, signed_part, signed_len, sig, siglen))
        rc = reject(err, "bad signature", NULL);
    if (rc == MV_OK) remember(v, digest, mv_jwks_serial(set));
    mv_jwks_release(set);
    return rc;
}

static mv_code numeric_date(json_t *claims, const char *name, bool *present, double *out,
                            mv_err *err) {
    json_t *v = json_object_get(claims, name);
    *present = v != NULL;
    if (!v) return MV_OK;
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return reject(err, "claim %s must be a number of seconds", name);
    *out = json_number_value(v);
    return MV_OK;
}

static bool audience_ok(const json_t *aud, const char *want) {
    if (json_is_string(aud)) return strcmp(json_string_value(aud), want) == 0;
    size_t i;
    json_t *a;
    json_array_foreach(aud, i, a) if (json_is_string(a) &&
                                      strcmp(json_string_value(a), want) == 0) return true;
    return false;
}

static mv_code check_claims(const mv_jwt_verifier *v, json_t *claims, mv_err *err) {
    double now_s = (double)mv_clock_now(v->clock) / 1000.0, t = 0;
    bool present;
    mv_code rc = numeric_date(claims, "exp", &present, &t, err);
    if (rc != MV_OK) return rc;
    if (!present && !v->exp_optional) return reject(err, "the token has no exp", NULL);
    if (present && now_s > t + v->leeway_s) return reject(err, "the token has expired", NULL);
    if ((rc = numeric_date(claims, "nbf", &present, &t, err)) != MV_OK) return rc;
    if (present && now_s + v->leeway_s < t) return reject(err, "the token is not valid yet", NULL);
    if (v->issuer) {
        const char *iss = mv_json_str(claims, "iss");
        if (!iss || strcmp(iss, v->issuer) != 0) return reject(err, "wrong issuer", NULL);
    }
    if (v->audience && !audience_ok(json_object_get(claims, "aud"), v->audience))
        return reject(err, "wrong audience", NULL);
    return MV_OK;
}

static mv_code verify(mv_jwt_verifier *v, const char *tok, size_t len, json_t **claims,
                      unsigned long *refresh, mv_err *err) {
    *claims = NULL;
    if (len == 0 || len > MV_JWT_MAX_TOKEN) return reject(err, "wrong length", NULL);
    const char *d1 = memchr(tok, '.', len);
    const char *d2 = d1 ? memchr(d1 + 1, '.', (size_t)(tok + len - d1 - 1)) : NULL;
    if (!d1 || !d2 || memchr(d2 + 1, '.', (size_t)(tok + len - d2 - 1)))
        return reject(err, "expected three dot-separated parts", NULL);
    mv_jwt_alg alg = MV_JWT_NONE_;
    char *kid = NULL;
    mv_code rc = read_header(v, tok, (size_t)(d1 - tok), &alg, &kid, err);
    if (rc != MV_OK) return rc;
    size_t sig_in = (size_t)(tok + len - d2 - 1), siglen = 0;
    unsigned char *sig = malloc(sig_in * 3 / 4 + 2);
    if (!sig)
        rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    else if (!mv_b64url_decode(d2 + 1, sig_in, sig, &siglen))
        rc = reject(err, "malformed signature", NULL);
    else {
        unsigned char digest[32];
        if (alg != MV_JWT_HS256) mv_sha256(tok, len, digest);
        rc = check_signature(v, alg, kid, tok, (size_t)(d2 - tok), sig, siglen, digest, refresh,
                             err);
    }
    free(sig);
    free(kid);
    if (rc != MV_OK) return rc;
    json_t *c = decode_json_part(d1 + 1, (size_t)(d2 - d1 - 1));
    if (!c) return reject(err, "malformed claims", NULL);
    if ((rc = check_claims(v, c, err)) != MV_OK) {
        json_decref(c);
        return rc;
    }
    *claims = c;
    return MV_OK;
}

mv_code mv_jwt_verify(mv_jwt_verifier *v, const char *tok, size_t len, json_t **claims,
                      mv_err *err) {
    return verify(v, tok, len, claims, NULL, err);
}

mv_code mv_jwt_verify_nowait(mv_jwt_verifier *v, const char *tok, size_t len, json_t **claims,
                             unsigned long *refresh, mv_err *err) {
    *refresh = 0;
    return verify(v, tok, len, claims, refresh, err);
}

bool mv_jwt_when_refreshed(mv_jwt_verifier *v, mv_jwks_waiter *w) {
    return v->jwks && w->generation && mv_jwks_source_when(v->jwks, w);
}
