/* http/jwt.h — verifying a compact JWS bearer token (RFC 7519) before anything reads its claims.
 *
 * Order: shape (three base64url parts, bounded size) → header (alg one of the configured
 * algorithms — never "none" —, no "crit", kid a string when present) → key (HS256: the shared
 * secret; others: the JWKS key named by kid, or the only key of the set; its type and its own
 * alg/use must fit the token's alg — which is what defeats algorithm confusion) → signature →
 * claims (exp required unless exp_optional, exp / nbf with leeway, iss and aud when
 * configured). Every failure is
 * MV_UNAUTHENTICATED with a reason fit for a log line; the token itself is never echoed. */
#ifndef MISSIVE_HTTP_JWT_H
#define MISSIVE_HTTP_JWT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "http/jwk.h"
#include "http/jwks.h"
#include "missive/base.h"
#include "missive/deliver.h"

#define MV_JWT_MAX_TOKEN 16384

typedef struct mv_jwt_options {
    unsigned algorithms; /* bit (1u << mv_jwt_alg) per accepted algorithm; 0 → HS256
                            when a secret is given, plus RS256/ES256/EdDSA with a JWKS */
    const void *secret;  /* HS256 key bytes (copied); may be NULL */
    size_t secret_len;
    const char *jwks_file; /* at most one of these two */
    const char *jwks_url;
    int jwks_refresh_s;            /* 0 → 300 */
    int64_t jwks_kid_interval_ms;  /* 0 → 10000 */
    const mv_webhook_config *http; /* JWKS fetch timeouts; NULL → defaults */
    const char *issuer;            /* checked when set */
    const char *audience;          /* checked when set: aud equals it or (array) contains it */
    int leeway_s;                  /* exp / nbf tolerance; negative → 30 */
    bool exp_optional;             /* false (the default): a token without exp is refused */
    const mv_clock *clock;         /* NULL → real clock */
} mv_jwt_options;

typedef struct mv_jwt_verifier mv_jwt_verifier;

/* Checks the options (an algorithm without its key material is MV_INVALID_ARGUMENT), loads
 * the JWKS file or fetches the URL (see jwks.h). Free with mv_jwt_verifier_free (NULL-safe). */
mv_code mv_jwt_verifier_new(const mv_jwt_options *o, mv_jwt_verifier **out, mv_err *err);
void mv_jwt_verifier_free(mv_jwt_verifier *v);

/* Verifies token (len bytes); *claims receives the verified claims object (new reference). A
 * token whose kid the key set lacks waits for the refresh that kid starts (jwks.h). */
mv_code mv_jwt_verify(mv_jwt_verifier *v, const char *token, size_t len, json_t **claims,
                      mv_err *err);
/* As mv_jwt_verify, but never waits: a token whose kid the key set lacks fails (401) at once, and
 * *refresh is the generation of the refresh that may bring the kid (0: none is under way), for
 * mv_jwt_when_refreshed; the caller may try again once it is done. */
mv_code mv_jwt_verify_nowait(mv_jwt_verifier *v, const char *token, size_t len, json_t **claims,
                             unsigned long *refresh, mv_err *err);
/* How many verifications found their token's signature verified before against the same key
 * set (the verifier keeps the last 1,024 such tokens; the claims are checked every time). */
unsigned long mv_jwt_cache_hits(mv_jwt_verifier *v);
/* Queues w (its generation from mv_jwt_verify_nowait) to be called when that refresh is done;
 * false when it is done already (try again now) or there is nothing to wait for. */
bool mv_jwt_when_refreshed(mv_jwt_verifier *v, mv_jwks_waiter *w);

#endif
