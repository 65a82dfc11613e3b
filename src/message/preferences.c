/* preferences.c — each user's delivery preferences in the store (missive/reach.h): one row per
 * tenant and user, replaced whole by PUT /preferences (an upsert: the last writer wins, as a
 * settings page expects), read by GET /preferences and inside a create's transaction by the
 * deliveries (channels.c). The locale lives in its own column so a reader of the locale alone
 * (link pages) never parses the set. */
#include <stdlib.h>
#include <string.h>

#include "message/reach_internal.h"
#include "missive/base.h"
#include "store/db.h"

static const char SQL_GET_PREFS[] =
    "SELECT prefs, locale FROM preferences WHERE tenant_id = ? AND user_id = ?";
static const char SQL_PUT_PREFS[] =
    "INSERT INTO preferences (tenant_id, user_id, prefs, locale, updated_at) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant_id, user_id) DO UPDATE SET "
    "prefs = excluded.prefs, locale = excluded.locale, updated_at = excluded.updated_at";

static const char *tenant_of(const mv_user *u) {
    return u && u->tenant && *u->tenant ? u->tenant : "default";
}

/* The stored shape with every key present. Steals nothing; *out new. */
static json_t *complete(const json_t *stored, const char *locale) {
    json_t *o = json_object();
    static const char *const keys[] = {"channels", "categories", "digest"};
    for (size_t i = 0; i < 3; i++) {
        const json_t *v = json_object_get(stored, keys[i]);
        json_object_set_new(o, keys[i], v ? json_deep_copy(v) : json_object());
    }
    json_object_set_new(o, "locale", locale ? json_string(locale) : json_null());
    return o;
}

mv_code mv__preferences_load_tx(mv_db *db, const char *tenant, const char *user, json_t **out,
                                mv_err *err) {
    *out = NULL;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_GET_PREFS, &st, err, "ss", tenant ? tenant : "default", user);
    if (rc != MV_OK || !st) return rc;
    json_t *stored = NULL;
    const char *text = mv_stmt_text(st, 0);
    if (text) stored = json_loads(text, 0, NULL);
    *out = complete(stored, mv_stmt_text(st, 1));
    json_decref(stored);
    mv_stmt_done(st);
    return MV_OK;
}

typedef struct {
    const char *tenant, *user;
    const char *text, *locale; /* put */
    int64_t now;
    json_t *out;
} prefs_job;

static mv_code get_tx(mv_db *db, void *ctx, mv_err *err) {
    prefs_job *j = ctx;
    json_decref(j->out);
    return mv__preferences_load_tx(db, j->tenant, j->user, &j->out, err);
}

static mv_code put_tx(mv_db *db, void *ctx, mv_err *err) {
    prefs_job *j = ctx;
    return mv_db_execf(db, SQL_PUT_PREFS, NULL, err, "ssssi", j->tenant, j->user, j->text,
                       j->locale, j->now);
}

static mv_code user_of(const mv_user *user, char id[256], mv_err *err) {
    if (!mv_user_id(user, id, 256))
        return mv_err_set(err, MV_INVALID_USER, "a user id is required");
    return MV_OK;
}

mv_code mv_preferences_get(mv_store *store, const mv_user *user, json_t **out, mv_err *err) {
    *out = NULL;
    char id[256];
    mv_code rc = user_of(user, id, err);
    if (rc != MV_OK) return rc;
    prefs_job j = {.tenant = tenant_of(user), .user = id};
    if ((rc = mv_store_read(store, get_tx, &j, err)) != MV_OK) {
        json_decref(j.out);
        return rc;
    }
    *out = j.out ? j.out : complete(NULL, NULL);
    return MV_OK;
}

mv_code mv_preferences_put(mv_store *store, const mv_reach *r, const mv_user *user,
                           const json_t *prefs, json_t **out, mv_err *err) {
    if (out) *out = NULL;
    char id[256];
    mv_code rc = user_of(user, id, err);
    if (rc == MV_OK) rc = mv_preferences_check(r, prefs, "", err);
    if (rc != MV_OK) return rc;
    json_t *set = complete(prefs, json_string_value(json_object_get(prefs, "locale")));
    json_t *stored =
        json_pack("{s:O,s:O,s:O}", "channels", json_object_get(set, "channels"), "categories",
                  json_object_get(set, "categories"), "digest", json_object_get(set, "digest"));
    char *text = stored ? mv_json_compact(stored) : NULL;
    json_decref(stored);
    if (!text) {
        json_decref(set);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    prefs_job j = {.tenant = tenant_of(user),
                   .user = id,
                   .text = text,
                   .locale = json_string_value(json_object_get(set, "locale")),
                   .now = mv_now_ms()};
    rc = mv_store_write(store, put_tx, &j, err);
    free(text);
    if (rc == MV_OK && out)
        *out = set;
    else
        json_decref(set);
    return rc;
}
