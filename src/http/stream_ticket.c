/* stream_ticket.c — the tickets a browser's EventSource authenticates GET /messages/stream with
 * (it cannot send headers): `v1.<base64url claims>.<base64url HMAC-SHA256>`, the claims carrying
 * user, roles, permissions, tenant, language and expiry. The MAC is checked in constant time
 * before the claims are read; the claims say `"use": "stream"`, and no other route accepts a
 * ticket (router.c asks the stream hub, which asks here). */
#include <stdlib.h>
#include <string.h>

#include "http/stream_ticket.h"

static void ticket_mac(const unsigned char *key, size_t key_len, const char *signed_part, size_t n,
                       char out[44]) {
    unsigned char mac[32];
    mv_hmac_sha256(key, key_len, signed_part, n, mac);
    mv_b64url_encode(mac, 32, out);
}

char *mv__stream_ticket_new(const unsigned char *key, size_t key_len, const mv_principal *p,
                            const char *locale, int64_t expires_at) {
    json_t *claims =
        json_pack("{s:s,s:o,s:O,s:s,s:I,s:s,s:s?}", "sub", p->user_id, "roles",
                  mv_principal_roles_json(p), "perms", p->permissions, "tenant", p->tenant, "exp",
                  (json_int_t)expires_at, "use", "stream", "locale", locale);
    char *text = claims ? json_dumps(claims, JSON_COMPACT) : NULL;
    json_decref(claims);
    if (!text) return NULL;
    size_t tn = strlen(text), bn = mv_b64url_len(tn);
    char *out = malloc(3 + bn + 1 + 44 + 1);
    if (out) {
        memcpy(out, "v1.", 3);
        mv_b64url_encode(text, tn, out + 3);
        char mac[44];
        ticket_mac(key, key_len, out, 3 + bn, mac);
        out[3 + bn] = '.';
        strcpy(out + 3 + bn + 1, mac);
    }
    free(text);
    return out;
}

static mv_code bad_ticket(mv_err *err, const char *why) {
    return mv_err_set(err, MV_UNAUTHENTICATED, "stream ticket %s", why);
}

mv_code mv__stream_ticket_check(const unsigned char *key, size_t key_len, int64_t now,
                                mv_http_request *req, const char *ticket, mv_principal *p,
                                mv_err *err) {
    size_t len = strlen(ticket);
    const char *dot =
        len > 3 && len < 8192 && strncmp(ticket, "v1.", 3) == 0 ? strrchr(ticket, '.') : NULL;
    if (!dot || dot < ticket + 3) return bad_ticket(err, "is malformed");
    char mac[44];
    ticket_mac(key, key_len, ticket, (size_t)(dot - ticket), mac);
    if (!mv_ct_equal(mac, strlen(mac), dot + 1, strlen(dot + 1)))
        return bad_ticket(err, "is not valid");
    size_t bn = (size_t)(dot - ticket - 3);
    unsigned char *raw = mv_arena_alloc(req->arena, bn * 3 / 4 + 2);
    size_t rn = 0;
    if (!raw || !mv_b64url_decode(ticket + 3, bn, raw, &rn)) return bad_ticket(err, "is malformed");
    json_t *claims = mv_arena_json(req->arena, json_loadb((const char *)raw, rn, 0, NULL));
    json_t *exp = json_object_get(claims, "exp"), *roles = json_object_get(claims, "roles");
    const char *use = mv_json_str(claims, "use"), *user = mv_json_str(claims, "sub"),
               *tenant = mv_json_str(claims, "tenant");
    if (!claims || !use || strcmp(use, "stream") != 0 || !user || !tenant ||
        !json_is_integer(exp) || !json_is_array(roles))
        return bad_ticket(err, "is malformed");
    if (json_integer_value(exp) <= now) return bad_ticket(err, "has expired");
    *p = (mv_principal){.user_id = mv_arena_strdup(req->arena, user),
                        .tenant = mv_arena_strdup(req->arena, tenant)};
    p->roles = mv_arena_alloc(req->arena, (json_array_size(roles) + 1) * sizeof *p->roles);
    if (!p->roles) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    size_t i;
    json_t *r;
    json_array_foreach(roles, i, r) {
        if (json_is_string(r))
            p->roles[p->nroles++] = mv_arena_strdup(req->arena, json_string_value(r));
    }
    json_t *perms = json_object_get(claims, "perms");
    p->permissions = json_is_object(perms) ? perms : mv_arena_json(req->arena, json_object());
    p->identity = claims;
    return MV_OK;
}
