/* config_reach.c — the config's reach sections ("channels", "preferences", "links";
 * docs/channels.md) parsed apart from the rest of the file, so the daemon can build a new reach
 * on a reload and swap it in while the old one finishes the requests that hold it. The links
 * secret is read from the environment variable the file names, never from the file. */
#include <stdlib.h>
#include <string.h>

#include "cmd/config.h"
#include "missive/base.h"

#define DEFAULT_LINK_TTL_MS INT64_C(604800000) /* 7 days */

static mv_code load_links(const json_t *links, mv_reach *r, mv_err *err) {
    if (!links) return MV_OK;
    if (!json_is_object(links))
        return mv_err_set(err, MV_INVALID_CONFIG, "links must be an object");
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)links, key, v) {
        if (strcmp(key, "baseUrl") && strcmp(key, "secretEnv") && strcmp(key, "ttlMs"))
            return mv_err_set(err, MV_INVALID_CONFIG, "unknown key \"links.%.64s\"", key);
    }
    const char *base = mv_json_str(links, "baseUrl"), *env = mv_json_str(links, "secretEnv");
    const json_t *ttl = json_object_get(links, "ttlMs");
    if (!base) return mv_err_set(err, MV_INVALID_CONFIG, "links.baseUrl is required (a URL)");
    if (!env) return mv_err_set(err, MV_INVALID_CONFIG, "links.secretEnv is required");
    if (ttl && (!json_is_integer(ttl) || json_integer_value(ttl) < 1000))
        return mv_err_set(err, MV_INVALID_CONFIG, "links.ttlMs must be an integer >= 1000");
    const char *secret = getenv(env);
    if (!secret || strlen(secret) < MV_LINK_MIN_SECRET)
        return mv_err_set(err, MV_INVALID_CONFIG,
                          "links.secretEnv: the environment variable %.64s must hold at least %d "
                          "bytes",
                          env, MV_LINK_MIN_SECRET);
    return mv_reach_set_links(r, base, secret, strlen(secret),
                              ttl ? json_integer_value(ttl) : DEFAULT_LINK_TTL_MS, err);
}

mv_code mv_config_load_reach(const json_t *root, bool email_enabled, mv_reach **out, mv_err *err) {
    mv_code rc = mv_reach_new(json_object_get(root, "channels"),
                              json_object_get(root, "preferences"), email_enabled, out, err);
    if (rc == MV_OK && (rc = load_links(json_object_get(root, "links"), *out, err)) != MV_OK) {
        mv_reach_free(*out);
        *out = NULL;
    }
    return rc;
}
