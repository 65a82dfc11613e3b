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
#include "missive/reach.h"

static mv_code bad(mv_err *err, const char *source, const mv_template *t, const char *fmt,
                   const char *a, const char *b) {
    char what[800];
    /* fmt names at most a and b; one that uses fewer leaves the rest unread, which C allows */
    // cppcheck-suppress wrongPrintfScanfArgNum
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

/* Compiles o[key] (a Mustache string, or absent) into *out; where names o in errors. */
static mv_code compile_field(const json_t *o, const char *key, const char *source,
                             const mv_template *t, const char *where, mv_tpl **out, mv_err *err) {
    const json_t *v = json_object_get(o, key);
    char field[200];
    snprintf(field, sizeof field, "%s.%s", where, key);
    if (!v || json_is_null(v)) return MV_OK;
    if (!json_is_string(v)) return bad(err, source, t, "%s must be a string", field, "");
    mv_err e = {0};
    mv_code rc = mv_tpl_compile(json_string_value(v), json_string_length(v), out, &e);
    if (rc == MV_NO_MEMORY) return mv_err_set(err, rc, "%s: out of memory", source);
    if (rc != MV_OK) return bad(err, source, t, "%s: %s", field, e.message);
    return MV_OK;
}

/* Title, short and long of o (each a Mustache string or absent); where names o in errors. */
static mv_code read_content_fields(const json_t *o, const char *source, const mv_template *t,
                                   const char *where, mv_content_tpl *out, mv_err *err) {
    if (!o || json_is_null(o)) return MV_OK;
    if (!json_is_object(o)) return bad(err, source, t, "%s must be an object", where, "");
    const char *key;
    const json_t *x;
    json_object_foreach((json_t *)o, key, x) {
        if (strcmp(key, "title") && strcmp(key, "short") && strcmp(key, "long"))
            return bad(err, source, t, "%s has unknown key \"%.64s\"", where, key);
    }
    mv_code rc = compile_field(o, "title", source, t, where, &out->title, err);
    if (rc == MV_OK) rc = compile_field(o, "short", source, t, where, &out->short_text, err);
    if (rc == MV_OK) rc = compile_field(o, "long", source, t, where, &out->long_text, err);
    return rc;
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
    char where[64];
    snprintf(where, sizeof where, "channels.%s", name);
    return read_content_fields(v, source, t, where, &ch->content, err);
}

static mv_code read_locale_actions(const json_t *o, const char *source, const mv_template *t,
                                   const char *tag, mv_template_locale *loc, mv_err *err) {
    char where[96];
    snprintf(where, sizeof where, "locales.%s.actions", tag);
    if (!o || json_is_null(o)) return MV_OK;
    if (!json_is_object(o)) return bad(err, source, t, "%s must be an object", where, "");
    loc->actions = calloc(json_object_size(o) + 1, sizeof *loc->actions);
    if (!loc->actions) return mv_err_set(err, MV_NO_MEMORY, "%s: out of memory", source);
    const char *cd;
    const json_t *a;
    json_object_foreach((json_t *)o, cd, a) {
        if (!mv_template_action(t, cd))
            return bad(err, source, t, "%s: \"%.64s\" is not an action of the template", where, cd);
        if (!json_is_object(a) || json_object_size(a) != 1 ||
            !json_is_string(json_object_get(a, "name")))
            return bad(err, source, t, "%s.%.64s must be {\"name\": \"…\"}", where, cd);
        mv_template_locale_action *la = &loc->actions[loc->nactions++];
        if (!(la->action_cd = strdup(cd))) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
        char field[200];
        snprintf(field, sizeof field, "%s.%s", where, cd);
        mv_code rc = compile_field(a, "name", source, t, field, &la->name, err);
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}

static mv_code read_locale(const char *tag, const json_t *v, const char *source,
                           const mv_template *t, mv_template_locale *loc, mv_err *err) {
    if (!mv_valid_locale(tag))
        return bad(err, source, t, "locales: \"%.40s\" is not a BCP 47 language tag", tag, "");
    if (!json_is_object(v)) return bad(err, source, t, "locales.%s must be an object", tag, "");
    const char *key;
    const json_t *x;
    json_object_foreach((json_t *)v, key, x) {
        if (strcmp(key, "senderContent") && strcmp(key, "receiverContent") &&
            strcmp(key, "actions") && strcmp(key, "label"))
            return bad(err, source, t, "locales.%s has unknown key \"%.64s\"", tag, key);
    }
    /* the template's label in this language (listed by the actions listing as "labels") */
    const json_t *label = json_object_get(v, "label");
    if (label &&
        (!json_is_string(label) || !json_string_length(label) || json_string_length(label) > 200))
        return bad(err, source, t, "locales.%s.label must be a string of 1 to 200 bytes", tag, "");
    if (!(loc->tag = strdup(tag))) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    char where[96];
    snprintf(where, sizeof where, "locales.%s.senderContent", tag);
    mv_code rc = read_content_fields(json_object_get(v, "senderContent"), source, t, where,
                                     &loc->sender_content, err);
    snprintf(where, sizeof where, "locales.%s.receiverContent", tag);
    if (rc == MV_OK)
        rc = read_content_fields(json_object_get(v, "receiverContent"), source, t, where,
                                 &loc->receiver_content, err);
    if (rc == MV_OK)
        rc = read_locale_actions(json_object_get(v, "actions"), source, t, tag, loc, err);
    return rc;
}

static mv_code read_locales(const json_t *locales, const char *source, mv_template *t,
                            mv_err *err) {
    if (!locales || json_is_null(locales)) return MV_OK;
    if (!json_is_object(locales))
        return bad(err, source, t, "locales must be an object (BCP 47 tag → texts)", "", "");
    if (json_object_size(locales) > MV_TEMPLATE_MAX_LOCALES)
        return bad(err, source, t, "locales: at most %s locales", "16", "");
    t->locales = calloc(json_object_size(locales) + 1, sizeof *t->locales);
    if (!t->locales) return mv_err_set(err, MV_NO_MEMORY, "%s: out of memory", source);
    const char *tag;
    const json_t *v;
    json_object_foreach((json_t *)locales, tag, v) {
        mv_code rc = read_locale(tag, v, source, t, &t->locales[t->nlocales++], err);
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}

mv_code mv__template_read_reach(const json_t *json, const char *source, mv_template *t,
                                mv_err *err) {
    mv_code lrc = read_locales(json_object_get(json, "locales"), source, t, err);
    if (lrc != MV_OK) return lrc;
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
    for (size_t i = 0; i < t->nlocales; i++) {
        mv_template_locale *l = &t->locales[i];
        free(l->tag);
        mv_content_tpl *c[2] = {&l->sender_content, &l->receiver_content};
        for (int k = 0; k < 2; k++) {
            mv_tpl_free(c[k]->title);
            mv_tpl_free(c[k]->short_text);
            mv_tpl_free(c[k]->long_text);
        }
        for (size_t a = 0; a < l->nactions; a++) {
            free(l->actions[a].action_cd);
            mv_tpl_free(l->actions[a].name);
        }
        free(l->actions);
    }
    free(t->locales);
}
