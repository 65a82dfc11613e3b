/* auth.c — the principal of a request, from trusted headers or a JWT.
 *
 * JWT: http/jwt.c verifies the token (signature, alg, exp / nbf, iss, aud) before anything here
 * reads a claim; this file then maps the claims found at the configured paths to the principal
 * (user required; roles, permissions, tenant typed). Error messages never echo the token. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/strbuf.h"
#include "http/auth.h"
#include "http/request.h"

struct mv_auth {
    mv_auth_mode mode;
    mv_jwt_verifier *jwt;
    char *claim_user, *claim_roles, *claim_permissions, *claim_tenant;
};

#define MAX_ROLES 256

static char *path_or(const char *path, const char *dflt) {
    return strdup(path && *path ? path : dflt);
}

mv_auth_mode mv_auth_mode_of(const mv_auth *auth) { return auth->mode; }

mv_code mv_auth_new(const mv_auth_options *opts, mv_auth **out, mv_err *err) {
    *out = NULL;
    mv_auth *a = calloc(1, sizeof *a);
    if (!a) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    a->mode = opts->mode;
    a->claim_user = path_or(opts->claims.user, "sub");
    a->claim_roles = path_or(opts->claims.roles, "roles");
    a->claim_permissions = path_or(opts->claims.permissions, "permissions");
    a->claim_tenant = path_or(opts->claims.tenant, "tenant");
    mv_code rc = MV_OK;
    if (!a->claim_user || !a->claim_roles || !a->claim_permissions || !a->claim_tenant)
        rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (rc == MV_OK && opts->mode == MV_AUTH_JWT) {
        mv_jwt_options jo = {.secret = opts->secret,
                             .secret_len = opts->secret_len,
                             .clock = opts->clock,
                             .leeway_s = MV_AUTH_LEEWAY_S};
        if (opts->jwt) {
            jo = *opts->jwt;
            if (!jo.clock) jo.clock = opts->clock;
            if (!jo.secret) jo.secret = opts->secret, jo.secret_len = opts->secret_len;
        }
        if (!opts->jwt && (!opts->secret || opts->secret_len == 0))
            rc = mv_err_set(err, MV_INVALID_ARGUMENT, "jwt authentication needs a secret");
        else
            rc = mv_jwt_verifier_new(&jo, &a->jwt, err);
    }
    if (rc != MV_OK) {
        mv_auth_free(a);
        return rc;
    }
    *out = a;
    return MV_OK;
}

void mv_auth_free(mv_auth *auth) {
    if (!auth) return;
    mv_jwt_verifier_free(auth->jwt);
    free(auth->claim_user);
    free(auth->claim_roles);
    free(auth->claim_permissions);
    free(auth->claim_tenant);
    free(auth);
}

/* ---- helpers ----------------------------------------------------------------------------- */

static bool is_space(char c) { return c == ' ' || c == '\t'; }

/* Splits a comma-separated list into trimmed, non-empty items in the arena. */
static mv_code split_list(mv_arena *arena, const char *s, const char ***items, size_t *n,
                          mv_err *err) {
    *items = NULL;
    *n = 0;
    if (!s) return MV_OK;
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    if (cap > MAX_ROLES)
        return mv_err_set(err, MV_UNAUTHENTICATED, "too many comma-separated items (at most %d)",
                          MAX_ROLES);
    const char **arr = mv_arena_alloc(arena, cap * sizeof *arr);
    if (!arr) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    const char *p = s;
    while (true) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        const char *b = p;
        while (b < end && is_space(*b))
            b++;
        const char *e = end;
        while (e > b && is_space(e[-1]))
            e--;
        if (e > b) {
            arr[*n] = mv_arena_strndup(arena, b, (size_t)(e - b));
            if (!arr[*n]) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
            (*n)++;
        }
        if (!comma) break;
        p = comma + 1;
    }
    *items = arr;
    return MV_OK;
}

static const char *trimmed(mv_arena *arena, const char *s) {
    if (!s) return NULL;
    while (is_space(*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && is_space(s[n - 1]))
        n--;
    return n ? mv_arena_strndup(arena, s, n) : NULL;
}

/* Valid UTF-8 (everything that reaches JSON must be): json_string's check, counted, not copied. */
static bool utf8_ok(const char *s) {
    mv_strbuf count = {.count_only = true};
    return mv_json_write_string(&count, s, strlen(s));
}

/* The principal's user id, roles and tenant within MV_MAX_ID_BYTES (400 invalid_argument naming
 * where each came from: "X-User-Roles[2]", "claim roles[2]"), then a tenant that is a token. */
static mv_code check_principal(const mv_principal *p, const char *user, const char *roles,
                               const char *tenant, mv_err *err) {
    char field[160];
    mv_code rc = mv_check_id_length(user, strlen(p->user_id), err);
    for (size_t i = 0; rc == MV_OK && i < p->nroles; i++) {
        snprintf(field, sizeof field, "%.100s[%zu]", roles, i);
        rc = mv_check_id_length(field, strlen(p->roles[i]), err);
    }
    if (rc == MV_OK) rc = mv_check_id_length(tenant, strlen(p->tenant), err);
    if (rc == MV_OK && !mv_valid_token(p->tenant, MV_MAX_ID_BYTES))
        rc = mv_err_set(err, MV_UNAUTHENTICATED,
                        "tenant must be 1 to %d printable characters without spaces",
                        MV_MAX_ID_BYTES);
    return rc;
}

static mv_code finish_principal(mv_arena *arena, mv_principal *out, bool identity, mv_err *err) {
    /* both calls always run: each either hands its value to the arena or releases it */
    out->permissions = mv_arena_json(arena, out->permissions);
    if (identity) out->identity = mv_arena_json(arena, out->identity);
    if (!out->permissions || (identity && !out->identity))
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    return MV_OK;
}

/* ---- headers mode ------------------------------------------------------------------------ */

static mv_code auth_headers(mv_http_request *req, mv_principal *out, mv_err *err) {
    mv_arena *a = req->arena;
    /* A repeated identity header is ambiguous (which one did the proxy set?): refused whole. */
    static const char *const identity[] = {"X-User-Id", "X-User-Roles", "X-User-Permissions",
                                           "X-Tenant-Id"};
    for (size_t i = 0; i < sizeof identity / sizeof identity[0]; i++)
        if (mv_http_header_count(req, identity[i]) > 1)
            return mv_err_set(err, MV_INVALID_ARGUMENT, "header %s must not be repeated",
                              identity[i]);
    out->user_id = trimmed(a, mv_http_header_get(req, "X-User-Id"));
    if (!out->user_id)
        return mv_err_set(err, MV_UNAUTHENTICATED, "authentication required: X-User-Id is missing");
    mv_code rc =
        split_list(a, mv_http_header_get(req, "X-User-Roles"), &out->roles, &out->nroles, err);
    if (rc != MV_OK) return rc;
    const char **perms;
    size_t nperms;
    rc = split_list(a, mv_http_header_get(req, "X-User-Permissions"), &perms, &nperms, err);
    if (rc != MV_OK) return rc;
    if (!utf8_ok(out->user_id))
        return mv_err_set(err, MV_UNAUTHENTICATED, "X-User-Id must be UTF-8 text");
    for (size_t i = 0; i < out->nroles; i++)
        if (!utf8_ok(out->roles[i]))
            return mv_err_set(err, MV_UNAUTHENTICATED, "X-User-Roles must be UTF-8 text");
    for (size_t i = 0; i < nperms; i++)
        if (!utf8_ok(perms[i]))
            return mv_err_set(err, MV_UNAUTHENTICATED, "X-User-Permissions must be UTF-8 text");
    const char *tenant = trimmed(a, mv_http_header_get(req, "X-Tenant-Id"));
    out->tenant = tenant ? tenant : "default";
    if ((rc = check_principal(out, "X-User-Id", "X-User-Roles", "X-Tenant-Id", err)) != MV_OK)
        return rc;

    /* the identity ({"id", "roles", "tenant"}) is built only by the routes that hand it on
     * (mv_principal_identity): most requests never need it */
    out->permissions = json_object();
    if (!out->permissions) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    for (size_t i = 0; i < nperms; i++)
        json_object_set_new(out->permissions, perms[i], json_true());
    return finish_principal(a, out, false, err);
}

/* ---- jwt mode ---------------------------------------------------------------------------- */

static mv_code bad_claim(mv_err *err, const char *path, const char *what) {
    return mv_err_set(err, MV_UNAUTHENTICATED, "invalid bearer token: claim %s must be %s", path,
                      what);
}

/* Roles: an array of strings, or one string of space-separated names (OAuth scope style). */
static mv_code claim_roles(const mv_auth *auth, mv_arena *a, json_t *roles, mv_principal *out,
                           mv_err *err) {
    if (!roles || json_is_null(roles)) return MV_OK;
    const char *path = auth->claim_roles;
    if (json_is_string(roles)) {
        const char *s = json_string_value(roles);
        size_t cap = 1;
        for (const char *p = s; *p; p++)
            cap += *p == ' ';
        if (cap > MAX_ROLES) return bad_claim(err, path, "at most 256 names");
        out->roles = mv_arena_alloc(a, cap * sizeof *out->roles);
        if (!out->roles) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
        for (const char *p = s; *p;) {
            while (*p == ' ')
                p++;
            const char *e = p;
            while (*e && *e != ' ')
                e++;
            if (e > p && !(out->roles[out->nroles++] = mv_arena_strndup(a, p, (size_t)(e - p))))
                return mv_err_set(err, MV_NO_MEMORY, "out of memory");
            p = e;
        }
        return MV_OK;
    }
    if (!json_is_array(roles) || json_array_size(roles) > MAX_ROLES)
        return bad_claim(err, path, "an array of strings or a space-separated string");
    out->roles = mv_arena_alloc(a, (json_array_size(roles) + 1) * sizeof *out->roles);
    if (!out->roles) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    size_t i;
    json_t *r;
    json_array_foreach(roles, i, r) {
        if (!json_is_string(r))
            return bad_claim(err, path, "an array of strings or a space-separated string");
        const char *t2 = trimmed(a, json_string_value(r));
        if (t2) out->roles[out->nroles++] = t2;
    }
    return MV_OK;
}

static mv_code claim_permissions(const mv_auth *auth, json_t *perms, json_t *into, mv_err *err) {
    const char *what = "an array of strings or an object";
    if (json_is_array(perms)) {
        size_t i;
        json_t *p;
        json_array_foreach(perms, i, p) {
            if (!json_is_string(p)) return bad_claim(err, auth->claim_permissions, what);
            json_object_set_new(into, json_string_value(p), json_true());
        }
    } else if (json_is_object(perms)) {
        const char *k;
        json_t *v;
        json_object_foreach(perms, k, v) {
            bool truthy = !(json_is_false(v) || json_is_null(v) ||
                            (json_is_number(v) && json_number_value(v) == 0) ||
                            (json_is_string(v) && json_string_length(v) == 0));
            if (truthy) json_object_set_new(into, k, json_true());
        }
    } else if (perms && !json_is_null(perms)) {
        return bad_claim(err, auth->claim_permissions, what);
    }
    return MV_OK;
}

/* The claim at path: a member of that exact name first (Auth0's namespaced claims are URLs with
 * dots: "https://example.com/roles"), else the dotted path ("realm_access.roles"). */
static json_t *claim_at(json_t *claims, const char *path) {
    json_t *v = json_object_get(claims, path);
    return v ? v : mv_json_path(claims, path);
}

static mv_code jwt_claims(const mv_auth *auth, mv_arena *a, json_t *claims, mv_principal *out,
                          mv_err *err) {
    const char *sub = json_string_value(claim_at(claims, auth->claim_user));
    out->user_id = trimmed(a, sub);
    if (!out->user_id) return bad_claim(err, auth->claim_user, "a non-empty string");
    if (!utf8_ok(out->user_id)) return bad_claim(err, auth->claim_user, "UTF-8 text");
    mv_code rc = claim_roles(auth, a, claim_at(claims, auth->claim_roles), out, err);
    if (rc != MV_OK) return rc;

    const char *tenant = NULL;
    json_t *tj = claim_at(claims, auth->claim_tenant);
    if (tj && !json_is_null(tj)) {
        if (!json_is_string(tj)) return bad_claim(err, auth->claim_tenant, "a string");
        tenant = trimmed(a, json_string_value(tj));
    }
    out->tenant = tenant ? tenant : "default";
    char user[80], roles[80], tenant_field[80];
    snprintf(user, sizeof user, "claim %.60s", auth->claim_user);
    snprintf(roles, sizeof roles, "claim %.60s", auth->claim_roles);
    snprintf(tenant_field, sizeof tenant_field, "claim %.60s", auth->claim_tenant);
    if ((rc = check_principal(out, user, roles, tenant_field, err)) != MV_OK) return rc;

    out->permissions = json_object();
    if (!out->permissions) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    rc = claim_permissions(auth, claim_at(claims, auth->claim_permissions), out->permissions, err);
    if (rc != MV_OK) {
        json_decref(out->permissions);
        out->permissions = NULL;
        return rc;
    }
    json_t *exp = json_object_get(claims, "exp"); /* a finite number: jwt.c checked it */
    if (json_is_number(exp)) out->exp_ms = (int64_t)(json_number_value(exp) * 1000.0);
    out->identity = json_incref(claims);
    return finish_principal(a, out, true, err);
}

static mv_code auth_jwt(const mv_auth *auth, mv_http_request *req, mv_principal *out,
                        unsigned long *refresh, mv_err *err) {
    const char *h = mv_http_header_get(req, "Authorization");
    if (!h)
        return mv_err_set(err, MV_UNAUTHENTICATED,
                          "authentication required: Authorization: Bearer <token> is missing");
    while (is_space(*h))
        h++;
    if (strncasecmp(h, "Bearer", 6) != 0 || !is_space(h[6]))
        return mv_err_set(err, MV_UNAUTHENTICATED, "Authorization must be \"Bearer <token>\"");
    const char *tok = h + 7;
    while (is_space(*tok))
        tok++;
    size_t len = strlen(tok);
    while (len > 0 && is_space(tok[len - 1]))
        len--;
    json_t *claims = NULL;
    mv_code rc = refresh ? mv_jwt_verify_nowait(auth->jwt, tok, len, &claims, refresh, err)
                         : mv_jwt_verify(auth->jwt, tok, len, &claims, err);
    if (rc != MV_OK) return rc;
    rc = jwt_claims(auth, req->arena, claims, out, err);
    json_decref(claims);
    return rc;
}

static mv_code authenticate(const mv_auth *auth, mv_http_request *req, mv_principal *out,
                            unsigned long *refresh, mv_err *err) {
    memset(out, 0, sizeof *out);
    if (!auth) return mv_err_set(err, MV_UNAUTHENTICATED, "authentication required");
    return auth->mode == MV_AUTH_JWT ? auth_jwt(auth, req, out, refresh, err)
                                     : auth_headers(req, out, err);
}

mv_code mv_auth_authenticate(const mv_auth *auth, mv_http_request *req, mv_principal *out,
                             mv_err *err) {
    return authenticate(auth, req, out, NULL, err);
}

mv_code mv_auth_authenticate_nowait(const mv_auth *auth, mv_http_request *req, mv_principal *out,
                                    unsigned long *refresh, mv_err *err) {
    *refresh = 0;
    return authenticate(auth, req, out, refresh, err);
}

bool mv_auth_when_refreshed(const mv_auth *auth, mv_jwks_waiter *w) {
    return auth && auth->jwt && mv_jwt_when_refreshed(auth->jwt, w);
}

bool mv_principal_has_permission(const mv_principal *p, const char *key) {
    if (!p || !key || !p->permissions) return false;
    json_t *v = json_object_get(p->permissions, key);
    return v && !json_is_false(v) && !json_is_null(v);
}

bool mv_principal_has_role(const mv_principal *p, const char *role) {
    if (!p || !role) return false;
    for (size_t i = 0; i < p->nroles; i++)
        if (strcmp(p->roles[i], role) == 0) return true;
    return false;
}

json_t *mv_principal_identity(const mv_principal *p, mv_arena *arena) {
    if (!p || p->identity) return p ? p->identity : NULL;
    return mv_arena_json(arena, json_pack("{s:s,s:o,s:s}", "id", p->user_id, "roles",
                                          mv_principal_roles_json(p), "tenant", p->tenant));
}

json_t *mv_principal_roles_json(const mv_principal *p) {
    json_t *a = json_array();
    for (size_t i = 0; p && a && i < p->nroles; i++)
        json_array_append_new(a, json_string(p->roles[i]));
    return a;
}
