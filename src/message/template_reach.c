/* template_reach.c — a template's reach: "channels" (where its messages go, each with optional
 * Mustache content overrides), "category" (what preferences switch; default the templateCd) and
 * "critical" (deliver whatever the preferences say). Whether a named channel is configured is the
 * daemon's question (mv_reach_check_template), asked once the config is known. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "message/reach_internal.h"
#include "missive/base.h"
#include "missive/mustache.h"

static mv_code bad(mv_err *err, const char *source, const mv_template *t, const char *fmt,
                   const char *a, const char *b) {
    char what[800];
    snprintf(what, sizeof what, fmt, a, b);
    return mv_err_set(err, MV_INVALID_TEMPLATE, "%s: template \"%s\" %s", source, t->template_cd,
                      what);
}

/* [a-z][a-z0-9_-]{0,31} */
static bool channel_name_ok(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > 32 || s[0] < 'a' || s[0] > 'z') return false;
    for (size_t i = 1; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
              s[i] == '-'))
            return false;
    return true;
}

static mv_code compile_field(const json_t *o, const char *key, const char *source,
                             const mv_template *t, const char *channel, mv_tpl **out, mv_err *err) {
    const json_t *v = json_object_get(o, key);
    char field[96];
    snprintf(field, sizeof field, "channels.%s.%s", channel, key);
    if (!v || json_is_null(v)) return MV_OK;
    if (!json_is_string(v)) return bad(err, source, t, "%s must be a string", field, "");
    mv_err e = {0};
    mv_code rc = mv_tpl_compile(json_string_value(v), json_string_length(v), out, &e);
    if (rc == MV_NO_MEMORY) return mv_err_set(err, rc, "%s: out of memory", source);
    if (rc != MV_OK) return bad(err, source, t, "%s: %s", field, e.message);
    return MV_OK;
}

static mv_code read_channel(const char *name, const json_t *v, const char *source, mv_template *t,
                            mv_template_channel *ch, mv_err *err) {
    if (!channel_name_ok(name))
        return bad(err, source, t,
                   "channels: \"%.40s\" is not a channel name ([a-z][a-z0-9_-]{0,31})", name, "");
    if (!(ch->name = strdup(name)))
        return mv_err_set(err, MV_NO_MEMORY, "%s: out of memory", source);
    if (json_is_true(v)) return MV_OK;
    if (!json_is_object(v))
        return bad(err, source, t, "channels.%s must be true or a content object", name, "");
    const char *key;
    const json_t *x;
    json_object_foreach((json_t *)v, key, x) {
        if (strcmp(key, "title") && strcmp(key, "short") && strcmp(key, "long"))
            return bad(err, source, t, "channels.%s has unknown key \"%.64s\"", name, key);
    }
    mv_code rc = compile_field(v, "title", source, t, name, &ch->content.title, err);
    if (rc == MV_OK) rc = compile_field(v, "short", source, t, name, &ch->content.short_text, err);
    if (rc == MV_OK) rc = compile_field(v, "long", source, t, name, &ch->content.long_text, err);
    return rc;
}

mv_code mv__template_read_reach(const json_t *json, const char *source, mv_template *t,
                                mv_err *err) {
    const json_t *channels = json_object_get(json, "channels");
    const json_t *category = json_object_get(json, "category");
    const json_t *critical = json_object_get(json, "critical");
    if (critical && !json_is_null(critical) && !json_is_boolean(critical))
        return bad(err, source, t, "critical must be true or false", "", "");
    t->critical = json_is_true(critical);
    if (category && !json_is_null(category) &&
        !(json_is_string(category) && mv_valid_template_cd(json_string_value(category))))
        return bad(err, source, t, "category must match [A-Za-z0-9_.-]{1,128}", "", "");
    const char *cat = json_is_string(category) ? json_string_value(category) : t->template_cd;
    if (!(t->category = strdup(cat)))
        return mv_err_set(err, MV_NO_MEMORY, "%s: out of memory", source);
    if (!channels || json_is_null(channels)) return MV_OK;
    if (!json_is_object(channels))
        return bad(err, source, t, "channels must be an object (channel → true or content)", "",
                   "");
    if (json_object_size(channels) > MV_REACH_MAX_CHANNELS + 2)
        return bad(err, source, t, "channels: at most %s entries", "34", "");
    t->has_channels = true;
    t->channels = calloc(json_object_size(channels) + 1, sizeof *t->channels);
    if (!t->channels) return mv_err_set(err, MV_NO_MEMORY, "%s: out of memory", source);
    const char *name;
    const json_t *v;
    json_object_foreach((json_t *)channels, name, v) {
        if (json_is_false(v)) continue; /* said explicitly: not this channel */
        mv_code rc = read_channel(name, v, source, t, &t->channels[t->nchannels++], err);
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}

void mv__template_free_reach(mv_template *t) {
    for (size_t i = 0; i < t->nchannels; i++) {
        free(t->channels[i].name);
        mv_tpl_free(t->channels[i].content.title);
        mv_tpl_free(t->channels[i].content.short_text);
        mv_tpl_free(t->channels[i].content.long_text);
    }
    free(t->channels);
    free(t->category);
}
