/* jwk.c — JWK parameters → OpenSSL EVP keys, and JWS signature verification.
 *
 * Keys are built with EVP_PKEY_fromdata (RSA n/e, EC P-256 as an uncompressed point) or
 * EVP_PKEY_new_raw_public_key (Ed25519), then checked (EVP_PKEY_public_check for EC, a 2048-bit
 * floor for RSA). Only public parameters are read: a JWK carrying a private part is used for its
 * public half. A key's own "alg"/"use" restrict it, which is what stops a token from choosing an
 * algorithm its key was not published for. */
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "http/jwk.h"
#include "missive/base.h"

#define MAX_KEYS 100
#define MAX_PARAM 1024 /* decoded bytes of one parameter: 8192-bit RSA moduli */

struct mv_jwk {
    char *kid;       /* NULL when the JWK has none */
    mv_jwt_alg kind; /* the one algorithm family the key type allows */
    char *alg;       /* the JWK's "alg", NULL when absent */
    bool sig_use;    /* "use" absent or "sig" */
    EVP_PKEY *pkey;
};

struct mv_jwks {
    atomic_int refs;
    uint64_t serial; /* unique per parsed set, never 0 */
    size_t n;
    mv_jwk keys[];
};

static const char *const ALG_NAMES[] = {"RS256", "ES256", "EdDSA", "HS256"};

mv_jwt_alg mv_jwt_alg_parse(const char *alg) {
    for (int i = 0; alg && i < MV_JWT_NONE_; i++)
        if (strcmp(alg, ALG_NAMES[i]) == 0) return (mv_jwt_alg)i;
    return MV_JWT_NONE_;
}

const char *mv_jwt_alg_name(mv_jwt_alg alg) { return alg < MV_JWT_NONE_ ? ALG_NAMES[alg] : "none"; }

/* A base64url member decoded into a new buffer (caller frees); NULL when absent or malformed. */
static unsigned char *param(const json_t *jwk, const char *name, size_t *len) {
    const char *s = mv_json_str(jwk, name);
    size_t n = s ? strlen(s) : 0;
    if (!s || n == 0 || n > MAX_PARAM * 4 / 3 + 4) return NULL;
    unsigned char *out = malloc(n * 3 / 4 + 2);
    if (out && !mv_b64url_decode(s, n, out, len)) {
        free(out);
        return NULL;
    }
    return out;
}

static EVP_PKEY *from_params(const char *type, OSSL_PARAM_BLD *bld) {
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    EVP_PKEY *pkey = NULL;
    if (!params || !ctx || EVP_PKEY_fromdata_init(ctx) != 1 ||
        EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1)
        pkey = NULL;
    OSSL_PARAM_free(params);
    EVP_PKEY_CTX_free(ctx);
    return pkey;
}

static EVP_PKEY *rsa_key(const json_t *jwk) {
    size_t nl = 0, el = 0;
    unsigned char *n = param(jwk, "n", &nl), *e = param(jwk, "e", &el);
    BIGNUM *bn = n ? BN_bin2bn(n, (int)nl, NULL) : NULL,
           *be = e ? BN_bin2bn(e, (int)el, NULL) : NULL;
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    EVP_PKEY *pkey = NULL;
    if (bn && be && bld && BN_num_bits(bn) >= 2048 && !BN_is_zero(be) &&
        OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn) &&
        OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be))
        pkey = from_params("RSA", bld);
    OSSL_PARAM_BLD_free(bld);
    BN_free(bn);
    BN_free(be);
    free(n);
    free(e);
    return pkey;
}

static EVP_PKEY *ec_key(const json_t *jwk) {
    const char *crv = mv_json_str(jwk, "crv");
    if (!crv || strcmp(crv, "P-256") != 0) return NULL;
    size_t xl = 0, yl = 0;
    unsigned char *x = param(jwk, "x", &xl), *y = param(jwk, "y", &yl);
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    if (x && y && xl == 32 && yl == 32 && bld) {
        unsigned char point[65];
        point[0] = 0x04; /* uncompressed */
        memcpy(point + 1, x, 32);
        memcpy(point + 33, y, 32);
        if (OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) &&
            OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof point))
            pkey = from_params("EC", bld);
    }
    if (pkey) { /* the point must be on the curve */
        EVP_PKEY_CTX *cc = EVP_PKEY_CTX_new_from_pkey(NULL, pkey, NULL);
        if (!cc || EVP_PKEY_public_check(cc) != 1) {
            EVP_PKEY_free(pkey);
            pkey = NULL;
        }
        EVP_PKEY_CTX_free(cc);
    }
    OSSL_PARAM_BLD_free(bld);
    free(x);
    free(y);
    return pkey;
}

static EVP_PKEY *okp_key(const json_t *jwk) {
    const char *crv = mv_json_str(jwk, "crv");
    if (!crv || strcmp(crv, "Ed25519") != 0) return NULL;
    size_t xl = 0;
    unsigned char *x = param(jwk, "x", &xl);
    EVP_PKEY *pkey =
        x && xl == 32 ? EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, x, 32) : NULL;
    free(x);
    return pkey;
}

/* Fills k from one JWK; false when missive cannot use it (the key is then skipped). */
static bool load_key(const json_t *jwk, mv_jwk *k) {
    memset(k, 0, sizeof *k);
    const char *kty = mv_json_str(jwk, "kty");
    if (!json_is_object(jwk) || !kty) return false;
    const json_t *kid = json_object_get(jwk, "kid"), *alg = json_object_get(jwk, "alg");
    const json_t *use = json_object_get(jwk, "use");
    if ((kid && !json_is_string(kid)) || (alg && !json_is_string(alg)) ||
        (use && !json_is_string(use)))
        return false;
    if (strcmp(kty, "RSA") == 0) {
        k->kind = MV_JWT_RS256;
        k->pkey = rsa_key(jwk);
    } else if (strcmp(kty, "EC") == 0) {
        k->kind = MV_JWT_ES256;
        k->pkey = ec_key(jwk);
    } else if (strcmp(kty, "OKP") == 0) {
        k->kind = MV_JWT_EDDSA;
        k->pkey = okp_key(jwk);
    }
    if (!k->pkey) return false;
    k->sig_use = !use || strcmp(json_string_value(use), "sig") == 0;
    k->kid = kid ? strdup(json_string_value(kid)) : NULL;
    k->alg = alg ? strdup(json_string_value(alg)) : NULL;
    if ((kid && !k->kid) || (alg && !k->alg)) {
        EVP_PKEY_free(k->pkey);
        free(k->kid);
        free(k->alg);
        return false;
    }
    return true;
}

mv_code mv_jwks_parse(const json_t *doc, mv_jwks **out, mv_err *err) {
    *out = NULL;
    const json_t *keys = json_object_get(doc, "keys");
    if (!json_is_object(doc) || !json_is_array(keys))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "a JWKS must be an object with a \"keys\" array");
    size_t n = json_array_size(keys);
    if (n > MAX_KEYS)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "a JWKS may hold at most %d keys", MAX_KEYS);
    mv_jwks *set = calloc(1, sizeof *set + n * sizeof set->keys[0]);
    if (!set) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    atomic_init(&set->refs, 1);
    static atomic_uint_fast64_t serials;
    set->serial = (uint64_t)atomic_fetch_add(&serials, 1) + 1;
    for (size_t i = 0; i < n; i++)
        if (load_key(json_array_get(keys, i), &set->keys[set->n])) set->n++;
    if (set->n == 0) {
        mv_jwks_release(set);
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "the JWKS holds no usable key (RSA ≥ 2048 bits, EC P-256, Ed25519)");
    }
    *out = set;
    return MV_OK;
}

mv_jwks *mv_jwks_retain(mv_jwks *set) {
    if (set) atomic_fetch_add(&set->refs, 1);
    return set;
}

void mv_jwks_release(mv_jwks *set) {
    if (!set || atomic_fetch_sub(&set->refs, 1) != 1) return;
    for (size_t i = 0; i < set->n; i++) {
        EVP_PKEY_free(set->keys[i].pkey);
        free(set->keys[i].kid);
        free(set->keys[i].alg);
    }
    free(set);
}

uint64_t mv_jwks_serial(const mv_jwks *set) { return set ? set->serial : 0; }

size_t mv_jwks_count(const mv_jwks *set) { return set ? set->n : 0; }

const mv_jwk *mv_jwks_find(const mv_jwks *set, const char *kid) {
    if (!set) return NULL;
    if (!kid) return set->n == 1 ? &set->keys[0] : NULL;
    for (size_t i = 0; i < set->n; i++)
        if (set->keys[i].kid && strcmp(set->keys[i].kid, kid) == 0) return &set->keys[i];
    return NULL;
}

bool mv_jwk_fits(const mv_jwk *key, mv_jwt_alg alg) {
    return key && alg != MV_JWT_HS256 && alg == key->kind && key->sig_use &&
           (!key->alg || strcmp(key->alg, mv_jwt_alg_name(alg)) == 0);
}

/* JWS ES256 signatures are R||S (32 bytes each); OpenSSL wants DER. Returns a new buffer. */
static unsigned char *es256_der(const unsigned char *sig, size_t *len) {
    ECDSA_SIG *es = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(sig, 32, NULL), *s = BN_bin2bn(sig + 32, 32, NULL);
    unsigned char *der = NULL;
    if (es && r && s && ECDSA_SIG_set0(es, r, s) == 1) {
        r = s = NULL; /* owned by es now */
        int n = i2d_ECDSA_SIG(es, &der);
        *len = n > 0 ? (size_t)n : 0;
        if (n <= 0) der = NULL;
    }
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(es);
    return der;
}

bool mv_jwk_verify(const mv_jwk *key, mv_jwt_alg alg, const void *data, size_t len,
                   const unsigned char *sig, size_t siglen) {
    if (!mv_jwk_fits(key, alg)) return false;
    unsigned char *der = NULL;
    if (alg == MV_JWT_ES256) {
        if (siglen != 64 || !(der = es256_der(sig, &siglen))) return false;
        sig = der;
    }
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    const EVP_MD *digest = alg == MV_JWT_EDDSA ? NULL : EVP_sha256();
    bool ok = md && EVP_DigestVerifyInit(md, NULL, digest, NULL, key->pkey) == 1 &&
              EVP_DigestVerify(md, sig, siglen, data, len) == 1;
    EVP_MD_CTX_free(md);
    OPENSSL_free(der);
    return ok;
}
