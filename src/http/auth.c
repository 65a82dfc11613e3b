/* auth.c — the principal of a request, from trusted headers or an HS256 JWT.
 *
 * JWT verification order: shape (three base64url parts) → header JSON with alg exactly "HS256"
 * → HMAC-SHA256 over "header.payload" compared in constant time → claims (sub required; roles,
 * permissions, tenant typed; exp / nbf with a 30 s leeway). Nothing is read from the claims
 * before the signature has been checked. Error messages never echo the token. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http/auth.h"
#include "http/request.h"

struct mv_auth {
    mv_auth_mode mode;
    unsigned char *secret;
    size_t secret_len;
    const mv_clock *clock;
};

#define MAX_TOKEN 8192
#define MAX_ROLES 256

mv_code mv_auth_new(const mv_auth_options *opts, mv_auth **out, mv_err *err) {
    *out = NULL;
    if (opts->mode == MV_AUTH_JWT && (!opts->secret || opts->secret_len == 0))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "jwt authentication needs a secret");
    mv_auth *a = calloc(1, sizeof *a);
    if (!a) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    a->mode = opts->mode;
    a->clock = opts->clock;
    if (opts->mode == MV_AUTH_JWT) {
        a->secret = malloc(opts->secret_len);
        if (!a->secret) {
            free(a);
            return mv_err_set(err, MV_NO_MEMORY, "out of memory");
        }
        memcpy(a->secret, opts->secret, opts->secret_len);
        a->secret_len = opts->secret_len;
    }
    *out = a;
    return MV_OK;
}

void mv_auth_free(mv_auth *auth) {
    if (!auth) return;
    if (auth->secret) {
        volatile unsigned char *p = auth->secret;
        for (size_t i = 0; i < auth->secret_len; i++) p[i] = 0;
        free(auth->secret);
    }
    free(auth);
}

/* ---- helpers ----------------------------------------------------------------------------- */

static bool is_space(char c) {
    return c == ' ' || c == '\t';
}

/* Splits a comma-separated list into trimmed, non-empty items in the arena. */
static mv_code split_list(mv_arena *arena, const char *s, const char ***items, size_t *n,
                          mv_err *err) {
    *items = NULL;
    *n = 0;
    if (!s) return MV_OK;
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
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
        while (b < end && is_space(*b)) b++;
        const char *e = end;
        while (e > b && is_space(e[-1])) e--;
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
    while (is_space(*s)) s++;
    size_t n = strlen(s);
    while (n > 0 && is_space(s[n - 1])) n--;
    return n ? mv_arena_strndup(arena, s, n) : NULL;
}

/* Valid UTF-8 (everything that reaches JSON must be). */
static bool utf8_ok(const char *s) {
    json_t *t = json_string(s);
    json_decref(t);
    return t != NULL;
}

static mv_code check_tenant(const char *tenant, mv_err *err) {
    if (!mv_valid_token(tenant, 128))
        return mv_err_set(err, MV_UNAUTHENTICATED,
                          "tenant must be 1 to 128 printable characters without spaces");
    return MV_OK;
}

static mv_code finish_principal(mv_arena *arena, mv_principal *out, mv_err *err) {
    /* both calls always run: each either hands its value to the arena or releases it */
    out->permissions = mv_arena_json(arena, out->permissions);
    out->identity = mv_arena_json(arena, out->identity);
    if (!out->permissions || !out->identity) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
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
    mv_code rc = split_list(a, mv_http_header_get(req, "X-User-Roles"), &out->roles, &out->nroles,
                            err);
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
    if ((rc = check_tenant(out->tenant, err)) != MV_OK) return rc;

    out->permissions = json_object();
    out->identity = json_object();
    if (!out->permissions || !out->identity) {
        json_decref(out->permissions);
        json_decref(out->identity);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    for (size_t i = 0; i < nperms; i++) json_object_set_new(out->permissions, perms[i], json_true());
    json_object_set_new(out->identity, "id", json_string(out->user_id));
    json_object_set_new(out->identity, "roles", mv_principal_roles_json(out));
    json_object_set_new(out->identity, "tenant", json_string(out->tenant));
    return finish_principal(a, out, err);
}

/* ---- jwt mode ---------------------------------------------------------------------------- */

/* Decodes one base64url part as a JSON object. The result is a new reference. */
static json_t *decode_json_part(const char *s, size_t n) {
    unsigned char *buf = malloc(n * 3 / 4 + 2);
    if (!buf) return NULL;
    size_t len;
    json_t *v = NULL;
    if (mv_b64url_decode(s, n, buf, &len) && mv_json_parse((const char *)buf, len, &v, NULL) == MV_OK &&
        !json_is_object(v)) {
        json_decref(v);
        v = NULL;
    }
    free(buf);
    return v;
}

static mv_code bad_token(mv_err *err, const char *why) {
    return mv_err_set(err, MV_UNAUTHENTICATED, "invalid bearer token: %s", why);
}

/* Reads a NumericDate claim (seconds) when present. */
static mv_code numeric_date(json_t *claims, const char *name, bool *present, double *out,
                            mv_err *err) {
    json_t *v = json_object_get(claims, name);
    *present = v != NULL;
    if (!v) return MV_OK;
    if (!json_is_number(v) || !isfinite(json_number_value(v))) {
        char why[64];
        snprintf(why, sizeof why, "claim %s must be a number of seconds", name);
        return bad_token(err, why);
    }
    *out = json_number_value(v);
    return MV_OK;
}

static mv_code jwt_claims(const mv_auth *auth, mv_arena *a, json_t *claims, mv_principal *out,
                          mv_err *err) {
    const char *sub = json_string_value(json_object_get(claims, "sub"));
    out->user_id = trimmed(a, sub);
    if (!out->user_id) return bad_token(err, "claim sub must be a non-empty string");

    double now_s = (double)mv_clock_now(auth->clock) / 1000.0, t = 0;
    bool present;
    mv_code rc = numeric_date(claims, "exp", &present, &t, err);
    if (rc != MV_OK) return rc;
    if (present && now_s > t + MV_AUTH_LEEWAY_S) return bad_token(err, "the token has expired");
    rc = numeric_date(claims, "nbf", &present, &t, err);
    if (rc != MV_OK) return rc;
    if (present && now_s + MV_AUTH_LEEWAY_S < t) return bad_token(err, "the token is not valid yet");

    json_t *roles = json_object_get(claims, "roles");
    if (roles && !json_is_null(roles)) {
        if (!json_is_array(roles) || json_array_size(roles) > MAX_ROLES)
            return bad_token(err, "claim roles must be an array of strings");
        out->roles = mv_arena_alloc(a, (json_array_size(roles) + 1) * sizeof *out->roles);
        if (!out->roles) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
        size_t i;
        json_t *r;
        json_array_foreach(roles, i, r) {
            if (!json_is_string(r)) return bad_token(err, "claim roles must be an array of strings");
            const char *t2 = trimmed(a, json_string_value(r));
            if (t2) out->roles[out->nroles++] = t2;
        }
    }

    const char *tenant = NULL;
    json_t *tj = json_object_get(claims, "tenant");
    if (tj && !json_is_null(tj)) {
        if (!json_is_string(tj)) return bad_token(err, "claim tenant must be a string");
        tenant = trimmed(a, json_string_value(tj));
    }
    out->tenant = tenant ? tenant : "default";
    if ((rc = check_tenant(out->tenant, err)) != MV_OK) return rc;

    out->permissions = json_object();
    if (!out->permissions) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    json_t *perms = json_object_get(claims, "permissions");
    if (json_is_array(perms)) {
        size_t i;
        json_t *p;
        json_array_foreach(perms, i, p) {
            if (!json_is_string(p)) {
                json_decref(out->permissions);
                return bad_token(err, "claim permissions must be an array of strings or an object");
            }
            json_object_set_new(out->permissions, json_string_value(p), json_true());
        }
    } else if (json_is_object(perms)) {
        const char *k;
        json_t *v;
        json_object_foreach(perms, k, v) {
            bool truthy = !(json_is_false(v) || json_is_null(v) ||
                            (json_is_number(v) && json_number_value(v) == 0) ||
                            (json_is_string(v) && json_string_length(v) == 0));
            if (truthy) json_object_set_new(out->permissions, k, json_true());
        }
    } else if (perms && !json_is_null(perms)) {
        json_decref(out->permissions);
        return bad_token(err, "claim permissions must be an array of strings or an object");
    }
    out->identity = json_incref(claims);
    return finish_principal(a, out, err);
}

static mv_code auth_jwt(const mv_auth *auth, mv_http_request *req, mv_principal *out,
                        mv_err *err) {
    const char *h = mv_http_header_get(req, "Authorization");
    if (!h)
        return mv_err_set(err, MV_UNAUTHENTICATED,
                          "authentication required: Authorization: Bearer <token> is missing");
    while (is_space(*h)) h++;
    if (strncasecmp(h, "Bearer", 6) != 0 || !is_space(h[6]))
        return mv_err_set(err, MV_UNAUTHENTICATED, "Authorization must be \"Bearer <token>\"");
    const char *tok = h + 7;
    while (is_space(*tok)) tok++;
    size_t len = strlen(tok);
    while (len > 0 && is_space(tok[len - 1])) len--;
    if (len == 0 || len > MAX_TOKEN) return bad_token(err, "wrong length");
    const char *d1 = memchr(tok, '.', len);
    const char *d2 = d1 ? memchr(d1 + 1, '.', (size_t)(tok + len - d1 - 1)) : NULL;
    if (!d1 || !d2 || memchr(d2 + 1, '.', (size_t)(tok + len - d2 - 1)))
        return bad_token(err, "expected three dot-separated parts");

    json_t *header = decode_json_part(tok, (size_t)(d1 - tok));
    if (!header) return bad_token(err, "malformed header");
    const char *alg = json_string_value(json_object_get(header, "alg"));
    bool hs256 = alg && strcmp(alg, "HS256") == 0;
    json_decref(header);
    if (!hs256) return bad_token(err, "only alg HS256 is accepted");

    size_t siglen_in = (size_t)(tok + len - d2 - 1);
    unsigned char sig[MAX_TOKEN], mac[32];
    size_t siglen;
    if (!mv_b64url_decode(d2 + 1, siglen_in, sig, &siglen)) return bad_token(err, "malformed signature");
    mv_hmac_sha256(auth->secret, auth->secret_len, tok, (size_t)(d2 - tok), mac);
    if (!mv_ct_equal(mac, sizeof mac, sig, siglen)) return bad_token(err, "bad signature");

    json_t *claims = decode_json_part(d1 + 1, (size_t)(d2 - d1 - 1));
    if (!claims) return bad_token(err, "malformed claims");
    mv_code rc = jwt_claims(auth, req->arena, claims, out, err);
    json_decref(claims);
    return rc;
}

mv_code mv_auth_authenticate(const mv_auth *auth, mv_http_request *req, mv_principal *out,
                             mv_err *err) {
    memset(out, 0, sizeof *out);
    if (!auth) return mv_err_set(err, MV_UNAUTHENTICATED, "authentication required");
    return auth->mode == MV_AUTH_JWT ? auth_jwt(auth, req, out, err) : auth_headers(req, out, err);
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

json_t *mv_principal_roles_json(const mv_principal *p) {
    json_t *a = json_array();
    for (size_t i = 0; p && a && i < p->nroles; i++) json_array_append_new(a, json_string(p->roles[i]));
    return a;
}
