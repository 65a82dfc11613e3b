/* http/auth.h — who is calling: the principal of a request, from trusted proxy headers or from
 * an HS256 JWT.
 *
 * headers mode trusts X-User-Id, X-User-Roles, X-User-Permissions (comma-separated, trimmed,
 * empties dropped) and X-Tenant-Id; it is only safe behind a proxy that sets them, which is why
 * the daemon refuses it on a non-loopback address unless trustProxyHeaders is set. jwt mode
 * accepts `Authorization: Bearer <jwt>` signed with HS256 only (the header's alg must be exactly
 * "HS256": no "none", no algorithm confusion), verified in constant time. */
#ifndef MISSIVE_HTTP_AUTH_H
#define MISSIVE_HTTP_AUTH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "http/http_server.h"
#include "missive/base.h"

typedef enum mv_auth_mode { MV_AUTH_HEADERS, MV_AUTH_JWT } mv_auth_mode;
typedef struct mv_auth mv_auth;

#define MV_AUTH_LEEWAY_S 30

/* The caller of a request. Everything lives in the request's arena. */
struct mv_principal {
    const char *user_id;     /* trimmed, non-empty */
    const char **roles;      /* trimmed, non-empty */
    size_t nroles;
    json_t *permissions;     /* object: permission key → true */
    const char *tenant;      /* "default" unless given */
    json_t *identity;        /* jwt: the verified claims; headers: {"id", "roles", "tenant"} */
};

typedef struct mv_auth_options {
    mv_auth_mode mode;
    const void *secret;      /* jwt: HMAC key bytes (copied) */
    size_t secret_len;
    const mv_clock *clock;   /* NULL → real clock (exp / nbf) */
} mv_auth_options;

/* A new authenticator. jwt mode needs a non-empty secret (MV_INVALID_ARGUMENT otherwise).
 * Free with mv_auth_free (NULL-safe). */
mv_code mv_auth_new(const mv_auth_options *opts, mv_auth **out, mv_err *err);
void mv_auth_free(mv_auth *auth);

/* Authenticates req: fills *out (arena-owned) or fails with MV_UNAUTHENTICATED and a message
 * saying what is missing or wrong (never echoing the token). */
mv_code mv_auth_authenticate(const mv_auth *auth, mv_http_request *req, mv_principal *out,
                             mv_err *err);

/* permissions[key] is truthy. NULL-safe. */
bool mv_principal_has_permission(const mv_principal *p, const char *key);
bool mv_principal_has_role(const mv_principal *p, const char *role);
/* The roles as a new JSON array of strings. */
json_t *mv_principal_roles_json(const mv_principal *p);

#endif
