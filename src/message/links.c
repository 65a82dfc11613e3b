/* links.c — action links (missive/reach.h): tokens signed with HMAC-SHA256 that bind tenant,
 * message, action, recipient and expiry, and their single use. The token is the payload and its
 * signature, both base64url, so a receiver can neither read a different binding into it nor
 * stretch its expiry without the secret. A use is a row keyed by the hash of the payload, written
 * by the action's claim transaction (claim.c): the link is spent exactly when the attempt is
 * durable — never before, so a crash between the click and the claim leaves it usable. The row
 * keeps the token's expiry: past it the token is refused as expired anyway, so retention
 * (mv_links_gc) may forget the use. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "message/reach_internal.h"
#include "missive/base.h"

static const char SQL_USE_LINK[] =
    "INSERT INTO link_uses (token_id, tenant_id, message_id, action_cd, user_id, used_at, "
    "expires_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (token_id) DO NOTHING";
static const char SQL_LINK_USED[] = "SELECT 1 FROM link_uses WHERE token_id = ?";
static const char SQL_PRUNE_USES[] = "DELETE FROM link_uses WHERE expires_at < ?";

#define MAX_TOKEN 2048

mv_code mv_reach_set_links(mv_reach *r, const char *base_url, const void *secret, size_t secret_len,
                           int64_t ttl_ms, mv_err *err) {
    if (!base_url || (strncmp(base_url, "http://", 7) && strncmp(base_url, "https://", 8)))
        return mv_err_set(err, MV_INVALID_CONFIG,
                          "links.baseUrl must be an http:// or https:// URL");
    if (!secret || secret_len < MV_LINK_MIN_SECRET)
        return mv_err_set(err, MV_INVALID_CONFIG, "links.secretEnv must hold at least %d bytes",
                          MV_LINK_MIN_SECRET);
    if (ttl_ms < 1000) return mv_err_set(err, MV_INVALID_CONFIG, "links.ttlMs must be >= 1000");
    size_t n = strlen(base_url);
    while (n && base_url[n - 1] == '/')
        n--;
    free(r->link_base);
    free(r->link_secret);
    r->link_base = strndup(base_url, n);
    r->link_secret = malloc(secret_len);
    if (!r->link_base || !r->link_secret) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    memcpy(r->link_secret, secret, secret_len);
    r->link_secret_len = secret_len;
    r->link_ttl_ms = ttl_ms;
    return MV_OK;
}

bool mv_reach_links_enabled(const mv_reach *r) { return r && r->link_base; }

/* base64url of HMAC-SHA256("missive-link." payload) into sig (44 bytes). */
static void sign(const mv_reach *r, const char *payload, size_t n, char sig[44]) {
    char *msg = malloc(n + 14);
    unsigned char mac[32];
    if (!msg) {
        sig[0] = '\0';
        return;
    }
    memcpy(msg, "missive-link.", 13);
    memcpy(msg + 13, payload, n);
    mv_hmac_sha256(r->link_secret, r->link_secret_len, msg, n + 13, mac);
    free(msg);
    mv_b64url_encode(mac, 32, sig);
}

mv_code mv_link_url(const mv_reach *r, const char *tenant, const char *message_id,
                    const char *action_cd, const char *user_id, int64_t now, char **out,
                    mv_err *err) {
    *out = NULL;
    if (!mv_reach_links_enabled(r)) return mv_err_set(err, MV_INVALID_CONFIG, "links are off");
    json_t *claims = json_pack("[s,s,s,s,s,I]", "v1", tenant ? tenant : "default", message_id,
                               action_cd, user_id, (json_int_t)(now + r->link_ttl_ms));
    char *text = claims ? mv_json_compact(claims) : NULL;
    json_decref(claims);
    if (!text) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    size_t n = strlen(text), bn = mv_b64url_len(n), ul = strlen(r->link_base);
    char *url = malloc(ul + 3 + bn + 1 + 44 + 1);
    if (!url) {
        free(text);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    memcpy(url, r->link_base, ul);
    memcpy(url + ul, "/a/", 3);
    char *payload = url + ul + 3;
    mv_b64url_encode(text, n, payload);
    free(text);
    size_t pn = strlen(payload);
    payload[pn] = '.';
    sign(r, payload, pn, payload + pn + 1);
    *out = url;
    return MV_OK;
}

static mv_code invalid(mv_err *err) {
    return mv_err_set(err, MV_LINK_INVALID, "this link is not valid (altered, or expired)");
}

static bool copy(char *dst, size_t n, const json_t *v) {
    const char *s = json_string_value(v);
    if (!s || !*s || strlen(s) >= n) return false;
    memcpy(dst, s, strlen(s) + 1);
    return true;
}

mv_code mv_link_verify(const mv_reach *r, const char *token, int64_t now, mv_link *out,
                       mv_err *err) {
    memset(out, 0, sizeof *out);
    if (!mv_reach_links_enabled(r) || !token || strlen(token) > MAX_TOKEN) return invalid(err);
    const char *dot = strchr(token, '.');
    if (!dot || strlen(dot + 1) != 43) return invalid(err);
    size_t pn = (size_t)(dot - token);
    char want[44] = {0};
    sign(r, token, pn, want);
    if (!mv_ct_equal(want, 43, dot + 1, 43)) return invalid(err);
    unsigned char raw[MAX_TOKEN];
    size_t rn = 0;
    if (!mv_b64url_decode(token, pn, raw, &rn)) return invalid(err);
    json_t *c = NULL;
    mv_err ignore = {0};
    if (mv_json_parse((const char *)raw, rn, &c, &ignore) != MV_OK) return invalid(err);
    json_t *exp = json_array_get(c, 5);
    bool ok = json_array_size(c) == 6 &&
              !strcmp(json_string_value(json_array_get(c, 0)) ?: "", "v1") &&
              copy(out->tenant, sizeof out->tenant, json_array_get(c, 1)) &&
              copy(out->message_id, sizeof out->message_id, json_array_get(c, 2)) &&
              copy(out->action_cd, sizeof out->action_cd, json_array_get(c, 3)) &&
              copy(out->user_id, sizeof out->user_id, json_array_get(c, 4)) && json_is_integer(exp);
    out->expires_at = ok ? json_integer_value(exp) : 0;
    json_decref(c);
    if (!ok || now >= out->expires_at) return invalid(err);
    mv_sha256_hex(token, pn, out->token_id);
    return MV_OK;
}

mv_code mv__link_consume_tx(mv_db *db, const mv_link *l, int64_t now, mv_err *err) {
    int64_t changes = 0;
    mv_code rc = mv_db_execf(db, SQL_USE_LINK, &changes, err, "sssssii", l->token_id, l->tenant,
                             l->message_id, l->action_cd, l->user_id, now, l->expires_at);
    if (rc == MV_OK && changes == 0)
        rc = mv_err_set(err, MV_MESSAGE_ARCHIVED, "this link was already used");
    return rc;
}

typedef struct {
    const char *token_id;
    bool used;
} used_arg;

static mv_code used_tx(mv_db *db, void *ctx, mv_err *err) {
    used_arg *a = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_LINK_USED, &st, err, "s", a->token_id);
    a->used = st != NULL;
    mv_stmt_done(st);
    return rc;
}

mv_code mv_link_used(mv_store *store, const mv_link *link, bool *used, mv_err *err) {
    used_arg a = {link->token_id, false};
    mv_code rc = mv_store_read(store, used_tx, &a, err);
    *used = a.used;
    return rc;
}

typedef struct {
    int64_t before, removed;
} gc_arg;

static mv_code gc_tx(mv_db *db, void *ctx, mv_err *err) {
    gc_arg *a = ctx;
    return mv_db_execf(db, SQL_PRUNE_USES, &a->removed, err, "i", a->before);
}

mv_code mv_links_gc(mv_store *store, int64_t before, int64_t *removed, mv_err *err) {
    gc_arg a = {before, 0};
    mv_code rc = mv_store_write(store, gc_tx, &a, err);
    if (removed) *removed = rc == MV_OK ? a.removed : 0;
    return rc;
}
