/* reach.c — the config side of reach (missive/reach.h): the named webhook channels, the tenant
 * preference defaults, the check of one preference set, and the resolution rule that decides
 * whether a channel delivers to one recipient. Built once from the config and read-only after, so
 * every thread reads it without a lock and a reload builds a new one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "message/reach_internal.h"
#include "missive/base.h"

static bool name_ok(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > 32 || s[0] < 'a' || s[0] > 'z') return false;
    for (size_t i = 1; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
              s[i] == '-'))
            return false;
    return true;
}

static mv_code add_channel(mv_reach *r, const char *name, const json_t *v, mv_err *err) {
    if (!name_ok(name) || !strcmp(name, "inbox") || !strcmp(name, "email"))
        return mv_err_set(err, MV_INVALID_CONFIG,
                          "channels.%.40s: a channel name is [a-z][a-z0-9_-]{0,31}, not inbox or "
                          "email",
                          name);
    if (r->nchannels == MV_REACH_MAX_CHANNELS)
        return mv_err_set(err, MV_INVALID_CONFIG, "channels: at most %d channels",
                          MV_REACH_MAX_CHANNELS);
    const char *key;
    const json_t *x;
    if (!json_is_object(v))
        return mv_err_set(err, MV_INVALID_CONFIG, "channels.%s must be an object", name);
    json_object_foreach((json_t *)v, key, x) {
        if (strcmp(key, "webhook"))
            return mv_err_set(err, MV_INVALID_CONFIG, "unknown key \"channels.%s.%.64s\"", name,
                              key);
    }
    const char *url = mv_json_str(v, "webhook");
    if (!url || (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)))
        return mv_err_set(err, MV_INVALID_CONFIG,
                          "channels.%s.webhook must be an http:// or https:// URL", name);
    mv__reach_channel *c = &r->channels[r->nchannels];
    if (!(c->name = strdup(name)) || !(c->webhook = strdup(url)))
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    r->nchannels++;
    return MV_OK;
}

static mv_code read_preferences(mv_reach *r, const json_t *p, mv_err *err) {
    if (!json_is_object(p))
        return mv_err_set(err, MV_INVALID_CONFIG, "preferences must be an object");
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)p, key, v) {
        if (strcmp(key, "defaults") && strcmp(key, "tenants"))
            return mv_err_set(err, MV_INVALID_CONFIG, "unknown key \"preferences.%.64s\"", key);
    }
    mv_err e = {0};
    const json_t *d = json_object_get(p, "defaults");
    if (d && mv_preferences_check(r, d, "preferences.defaults.", &e) != MV_OK)
        return mv_err_set(err, MV_INVALID_CONFIG, "%s", e.message);
    const json_t *tenants = json_object_get(p, "tenants");
    if (tenants && !json_is_object(tenants))
        return mv_err_set(err, MV_INVALID_CONFIG, "preferences.tenants must be an object");
    json_object_foreach((json_t *)tenants, key, v) {
        char prefix[200];
        snprintf(prefix, sizeof prefix, "preferences.tenants.%.128s.", key);
        if (mv_preferences_check(r, v, prefix, &e) != MV_OK)
            return mv_err_set(err, MV_INVALID_CONFIG, "%s", e.message);
    }
    r->defaults = d ? json_deep_copy(d) : NULL;
    r->tenants = tenants ? json_deep_copy(tenants) : NULL;
    return MV_OK;
}

mv_code mv_reach_new(const json_t *channels, const json_t *preferences, bool email_enabled,
                     mv_reach **out, mv_err *err) {
    *out = NULL;
    mv_reach *r = calloc(1, sizeof *r);
    if (!r) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    r->email = email_enabled;
    mv_code rc = MV_OK;
    if (channels && !json_is_object(channels))
        rc = mv_err_set(err, MV_INVALID_CONFIG, "channels must be an object");
    const char *name;
    const json_t *v;
    if (json_is_object(channels)) json_object_foreach((json_t *)channels, name, v) {
            if (rc == MV_OK) rc = add_channel(r, name, v, err);
        }
    if (rc == MV_OK && preferences) rc = read_preferences(r, preferences, err);
    if (rc != MV_OK) {
        mv_reach_free(r);
        return rc;
    }
    *out = r;
    return MV_OK;
}

void mv_reach_free(mv_reach *r) {
    if (!r) return;
    for (size_t i = 0; i < r->nchannels; i++) {
        free(r->channels[i].name);
        free(r->channels[i].webhook);
    }
    json_decref(r->defaults);
    json_decref(r->tenants);
    free(r->link_base);
    if (r->link_secret) {
        volatile unsigned char *p = r->link_secret;
        for (size_t i = 0; i < r->link_secret_len; i++)
            p[i] = 0;
        free(r->link_secret);
    }
    free(r);
}

bool mv_reach_knows(const mv_reach *r, const char *channel) {
    if (!channel) return false;
    if (!strcmp(channel, "inbox")) return true;
    if (!strcmp(channel, "email")) return r ? r->email : true;
    return mv_reach_webhook(r, channel) != NULL;
}

const char *mv_reach_webhook(const mv_reach *r, const char *channel) {
    for (size_t i = 0; r && channel && i < r->nchannels; i++)
        if (!strcmp(r->channels[i].name, channel)) return r->channels[i].webhook;
    return NULL;
}

size_t mv_reach_channel_count(const mv_reach *r) { return r ? r->nchannels : 0; }
const char *mv_reach_channel_name(const mv_reach *r, size_t i) {
    return r && i < r->nchannels ? r->channels[i].name : NULL;
}

mv_code mv_reach_check_template(const mv_reach *r, const mv_template *t, mv_err *err) {
    for (size_t i = 0; t && i < t->nchannels; i++) {
        const char *c = t->channels[i].name;
        if (!strcmp(c, "inbox") || !strcmp(c, "email") || mv_reach_webhook(r, c)) continue;
        return mv_err_set(err, MV_INVALID_TEMPLATE,
                          "template \"%s\" names channel \"%s\", which the config does not "
                          "configure (\"channels\")",
                          t->template_cd, c);
    }
    return MV_OK;
}

/* ---- one preference set ----------------------------------------------------------------- */

bool mv_valid_locale(const char *tag) {
    if (!tag) return false;
    size_t n = strlen(tag), i = 0, run = 0;
    if (n < 2 || n > 35) return false;
    for (; i < n && ((tag[i] | 32) >= 'a' && (tag[i] | 32) <= 'z'); i++)
        ;
    if (i < 2 || i > 3) return false;
    for (; i < n; i++) {
        char c = tag[i];
        if (c == '-') {
            if (run == 0 && i > 3) return false;
            if (i + 1 == n) return false;
            run = 0;
            if (tag[i + 1] == '-') return false;
            continue;
        }
        bool alnum = (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z');
        if (!alnum || ++run > 8) return false;
    }
    return true;
}

/* A channel a person may have a preference for: the built-in ones (a preference for email may be
 * stored before the operator configures email) and every configured webhook channel. */
static bool preference_channel(const mv_reach *r, const char *channel) {
    return channel && (!strcmp(channel, "email") || mv_reach_knows(r, channel));
}

/* channel → boolean for every entry; `where` names the object ("channels",
 * "categories.bookings"). */
static mv_code check_switches(const mv_reach *r, const json_t *o, const char *prefix,
                              const char *where, mv_err *err) {
    if (!json_is_object(o))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "%s%s must be an object", prefix, where);
    const char *ch;
    const json_t *v;
    json_object_foreach((json_t *)o, ch, v) {
        if (!preference_channel(r, ch))
            return mv_err_set(err, MV_INVALID_ARGUMENT, "%s%s.%.64s: unknown channel", prefix,
                              where, ch);
        if (!json_is_boolean(v))
            return mv_err_set(err, MV_INVALID_ARGUMENT, "%s%s.%s must be true or false", prefix,
                              where, ch);
        if (!strcmp(ch, "inbox") && json_is_false(v))
            return mv_err_set(err, MV_INVALID_ARGUMENT,
                              "%s%s.inbox: the inbox cannot be turned off", prefix, where);
    }
    return MV_OK;
}

static mv_code check_categories(const mv_reach *r, const json_t *o, const char *prefix,
                                mv_err *err) {
    if (!json_is_object(o))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "%scategories must be an object", prefix);
    if (json_object_size(o) > MV_REACH_MAX_CATEGORIES)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "%scategories: at most %d categories", prefix,
                          MV_REACH_MAX_CATEGORIES);
    const char *cat;
    const json_t *v;
    json_object_foreach((json_t *)o, cat, v) {
        char where[160];
        if (!mv_valid_template_cd(cat))
            return mv_err_set(err, MV_INVALID_ARGUMENT,
                              "%scategories: \"%.64s\" is not a category name "
                              "([A-Za-z0-9_.-]{1,128})",
                              prefix, cat);
        snprintf(where, sizeof where, "categories.%s", cat);
        mv_code rc = check_switches(r, v, prefix, where, err);
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}

static mv_code check_digest(const mv_reach *r, const json_t *o, const char *prefix, mv_err *err) {
    if (!json_is_object(o))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "%sdigest must be an object", prefix);
    const char *ch;
    const json_t *v;
    json_object_foreach((json_t *)o, ch, v) {
        if (!preference_channel(r, ch) || !strcmp(ch, "inbox"))
            return mv_err_set(err, MV_INVALID_ARGUMENT, "%sdigest.%.64s: unknown channel", prefix,
                              ch);
        const json_t *every = json_object_get(v, "everyMs");
        if (!json_is_object(v) || json_object_size(v) != 1 || !json_is_integer(every) ||
            json_integer_value(every) < MV_REACH_MIN_DIGEST_MS)
            return mv_err_set(err, MV_INVALID_ARGUMENT,
                              "%sdigest.%s must be {\"everyMs\": N} with N an integer >= %d",
                              prefix, ch, MV_REACH_MIN_DIGEST_MS);
    }
    return MV_OK;
}

mv_code mv_preferences_check(const mv_reach *r, const json_t *p, const char *prefix, mv_err *err) {
    if (!prefix) prefix = "";
    if (!json_is_object(p))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "%s%s must be a JSON object", prefix,
                          *prefix ? "(preferences)" : "body");
    const char *key;
    const json_t *v;
    mv_code rc = MV_OK;
    json_object_foreach((json_t *)p, key, v) {
        if (!strcmp(key, "channels"))
            rc = check_switches(r, v, prefix, "channels", err);
        else if (!strcmp(key, "categories"))
            rc = check_categories(r, v, prefix, err);
        else if (!strcmp(key, "digest"))
            rc = check_digest(r, v, prefix, err);
        else if (!strcmp(key, "locale")) {
            if (!json_is_null(v) && !mv_valid_locale(json_string_value(v)))
                rc = mv_err_set(err, MV_INVALID_ARGUMENT,
                                "%slocale must be a BCP 47 language tag (\"de\", \"de-AT\") or "
                                "null",
                                prefix);
        } else
            rc = mv_err_set(err, MV_INVALID_ARGUMENT,
                            "%s%.64s: unknown field (allowed: channels, categories, digest, "
                            "locale)",
                            prefix, key);
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}

/* ---- resolution -------------------------------------------------------------------------- */

/* 1 on, 0 off, -1 the set does not say. */
static int says(const json_t *set, const char *category, const char *channel) {
    const json_t *v =
        json_object_get(json_object_get(json_object_get(set, "categories"), category), channel);
    if (json_is_boolean(v)) return json_is_true(v);
    v = json_object_get(json_object_get(set, "channels"), channel);
    return json_is_boolean(v) ? json_is_true(v) : -1;
}

bool mv_reach_allows(const mv_reach *r, const char *tenant, const json_t *user_prefs,
                     const char *category, const char *channel, bool template_on, bool critical) {
    if (!strcmp(channel, "inbox")) return true;
    if (critical) return template_on;
    int s = says(user_prefs, category, channel);
    if (s >= 0) return s;
    const json_t *d = r ? json_object_get(r->tenants, tenant ? tenant : "default") : NULL;
    if (!d && r) d = r->defaults;
    s = says(d, category, channel);
    return s >= 0 ? s : template_on;
}
