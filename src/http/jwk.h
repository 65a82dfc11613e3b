/* http/jwk.h — JSON Web Keys (RFC 7517) as OpenSSL keys, and JWS signature checks (RFC 7518).
 *
 * A key set is parsed once into immutable keys (RSA ≥ 2048 bits, EC P-256, Ed25519) built from
 * the JWK parameters with OpenSSL 3's EVP interfaces; keys missive cannot use (encryption keys,
 * other curves, symmetric keys) are skipped, so a provider's full JWKS loads. A set is shared by
 * reference count, so a refresh can replace it while requests still verify with the old one. */
#ifndef MISSIVE_HTTP_JWK_H
#define MISSIVE_HTTP_JWK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "missive/error.h"

/* The algorithms missive verifies. */
typedef enum mv_jwt_alg {
    MV_JWT_RS256,
    MV_JWT_ES256,
    MV_JWT_EDDSA,
    MV_JWT_HS256,
    MV_JWT_NONE_
} mv_jwt_alg;

/* The algorithm named alg, or MV_JWT_NONE_ for anything else ("none" included). */
mv_jwt_alg mv_jwt_alg_parse(const char *alg);
const char *mv_jwt_alg_name(mv_jwt_alg alg);

typedef struct mv_jwks mv_jwks;
typedef struct mv_jwk mv_jwk;

/* Parses {"keys": [...]}: at most 100 keys, each usable one kept. A value that is not a key
 * set, or a set without one usable key, is MV_INVALID_ARGUMENT naming the problem. *out has one
 * reference: release with mv_jwks_release (NULL-safe). */
mv_code mv_jwks_parse(const json_t *doc, mv_jwks **out, mv_err *err);
mv_jwks *mv_jwks_retain(mv_jwks *set);
void mv_jwks_release(mv_jwks *set);
/* Number of usable keys. */
/* A number no other set parsed by this process has (0 for NULL): a set is immutable, so two
 * lookups that see the same serial see the same keys. */
uint64_t mv_jwks_serial(const mv_jwks *set);
size_t mv_jwks_count(const mv_jwks *set);

/* The key for a token: with kid, the key of that kid; without, the only key of the set (NULL
 * when it has several). Borrowed from set. */
const mv_jwk *mv_jwks_find(const mv_jwks *set, const char *kid);
/* True when key can verify alg: its type fits (RSA/RS256, EC P-256/ES256, OKP Ed25519/EdDSA)
 * and its own "alg" and "use" members, when present, agree. */
bool mv_jwk_fits(const mv_jwk *key, mv_jwt_alg alg);
/* Checks sig (the raw JWS signature bytes; ES256 is R||S, 64 bytes) over data. */
bool mv_jwk_verify(const mv_jwk *key, mv_jwt_alg alg, const void *data, size_t len,
                   const unsigned char *sig, size_t siglen);

#endif
