/* http/auth.h — who is calling: the principal of a request, from trusted proxy headers or from
 * a JWT (HS256 with a shared secret; RS256, ES256, EdDSA with keys from a JWKS — see jwt.h).
 *
 * headers mode trusts X-User-Id, X-User-Roles, X-User-Permissions (comma-separated, trimmed,
 * empties dropped) and X-Tenant-Id; it is only safe behind a proxy that sets them, which is why
 * the daemon refuses it on a non-loopback address unless trustProxyHeaders is set. jwt mode
 * accepts `Authorization: Bearer <jwt>` verified by http/jwt.c, then maps claims to the principal
 * through configurable dotted paths (Keycloak's realm_access.roles, Cognito's cognito:groups);
 * roles may be an array or a space-separated string. */
#ifndef MISSIVE_HTTP_AUTH_H
#define MISSIVE_HTTP_AUTH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "http/http_server.h"
#include "http/jwt.h"
#include "missive/base.h"

typedef enum mv_auth_mode { MV_AUTH_HEADERS, MV_AUTH_JWT } mv_auth_mode;
typedef struct mv_auth mv_auth;

#define MV_AUTH_LEEWAY_S 30

/* The caller of a request. Everything lives in the request's arena. */
struct mv_principal {
    const char *user_id; /* trimmed, non-empty */
    const char **roles;  /* trimmed, non-empty */
    size_t nroles;
    json_t *permissions; /* object: permission key → true */
    const char *tenant;  /* "default" unless given */
    json_t *identity;    /* jwt: the verified claims; headers: NULL (mv_principal_identity) */
    int64_t exp_ms;      /* jwt: the token's exp (ms since the epoch); 0: none (headers mode, or
                          * a token without exp where auth.requireExp is false) */
};

/* Where the principal's fields are in the claims: dotted paths; NULL → the default name. */
typedef struct mv_auth_claims {
    const char *user;        /* "sub" */
    const char *roles;       /* "roles": an array of strings or one space-separated string */
    const char *permissions; /* "permissions": an array of strings or an object of flags */
    const char *tenant;      /* "tenant" */
} mv_auth_claims;

typedef struct mv_auth_options {
    mv_auth_mode mode;
    const void *secret; /* jwt: HMAC key bytes (copied); used when jwt is NULL (HS256 only) */
    size_t secret_len;
    const mv_clock *clock;     /* NULL → real clock (exp / nbf) */
    const mv_jwt_options *jwt; /* jwt mode: algorithms, JWKS, issuer, audience, leeway */
    mv_auth_claims claims;
} mv_auth_options;

/* A new authenticator. jwt mode needs a secret or a JWKS (MV_INVALID_ARGUMENT otherwise).
 * Free with mv_auth_free (NULL-safe). */
mv_code mv_auth_new(const mv_auth_options *opts, mv_auth **out, mv_err *err);
void mv_auth_free(mv_auth *auth);

/* The mode (headers mode never waits; jwt mode may wait for a JWKS refresh). */
mv_auth_mode mv_auth_mode_of(const mv_auth *auth);

/* Authenticates req: fills *out (arena-owned) or fails with MV_UNAUTHENTICATED and a message
 * saying what is missing or wrong (never echoing the token). */
mv_code mv_auth_authenticate(const mv_auth *auth, mv_http_request *req, mv_principal *out,
                             mv_err *err);

/* As mv_auth_authenticate, but never waits for a JWKS refresh: when the token names a kid the
 * keys lack and a refresh is under way, it fails (401) with *refresh set to that refresh (0
 * otherwise); the caller may park the request with mv_auth_when_refreshed and try again. */
mv_code mv_auth_authenticate_nowait(const mv_auth *auth, mv_http_request *req, mv_principal *out,
                                    unsigned long *refresh, mv_err *err);
/* Calls w->fn(w->ctx) once the refresh w->generation is done (on the refresher's thread); false
 * when it is done already, or nothing is to be waited for. */
bool mv_auth_when_refreshed(const mv_auth *auth, mv_jwks_waiter *w);

/* permissions[key] is truthy. NULL-safe. */
bool mv_principal_has_permission(const mv_principal *p, const char *key);
bool mv_principal_has_role(const mv_principal *p, const char *role);
/* What prepare hooks see of the caller: jwt, the verified claims; headers mode, {"id", "roles",
 * "tenant"}, built into arena (the request's) by each call. NULL when out of memory. */
json_t *mv_principal_identity(const mv_principal *p, mv_arena *arena);
/* The roles as a new JSON array of strings. */
json_t *mv_principal_roles_json(const mv_principal *p);

#endif
