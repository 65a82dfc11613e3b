/* locales.c — messages in the reader's language. A template's "locales" are rendered when the
 * message is created (so a reader never waits on rendering and the stored message is bounded by
 * limits.messageBytes like its default content) and kept in one row beside the message; a read
 * that names a language (Accept-Language, X-User-Locale) gets the best match — de-AT falls back
 * to de, then to the template's default — and "locale" says which was used (null: the default). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "message/reach_internal.h"
#include "message/service.h"
#include "missive/mustache.h"

static const char SQL_INSERT_LOCALES[] =
    "INSERT INTO message_locales (message_id, locales) VALUES (?, ?)";
static const char SQL_LOAD_LOCALES[] = "SELECT locales FROM message_locales WHERE message_id = ?";

/* One content block: each field from the locale's template where it has one, else the default
 * rendering in fallback. */
static mv_code render_content(const mv_content_tpl *c, const json_t *data, const json_t *fallback,
                              json_t **out, mv_err *err) {
    static const char *const keys[] = {"title", "short", "long"};
    const mv_tpl *tpls[] = {c->title, c->short_text, c->long_text};
    json_t *o = json_object();
    if (!o) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    for (size_t i = 0; i < 3; i++) {
        char *text = NULL;
        if (tpls[i]) {
            mv_code rc = mv_tpl_render(tpls[i], data, MV_ESCAPE_NONE, &text, NULL, err);
            if (rc != MV_OK) {
                json_decref(o);
                return rc;
            }
        }
        const char *s = text ? text : mv_json_str(fallback, keys[i]);
        json_object_set_new(o, keys[i], json_string(s ? s : ""));
        free(text);
    }
    *out = o;
    return MV_OK;
}

static mv_code render_locale(const mv_template_locale *l, const json_t *data, const json_t *doc,
                             json_t **out, mv_err *err) {
    json_t *sender = NULL, *receiver = NULL, *actions = json_object();
    mv_code rc = render_content(&l->sender_content, data, json_object_get(doc, "senderContent"),
                                &sender, err);
    if (rc == MV_OK)
        rc = render_content(&l->receiver_content, data, json_object_get(doc, "receiverContent"),
                            &receiver, err);
    for (size_t i = 0; rc == MV_OK && i < l->nactions; i++) {
        char *name = NULL;
        rc = mv_tpl_render(l->actions[i].name, json_object_get(doc, "payload"), MV_ESCAPE_NONE,
                           &name, NULL, err);
        if (rc == MV_OK) json_object_set_new(actions, l->actions[i].action_cd, json_string(name));
        free(name);
    }
    if (rc != MV_OK) {
        json_decref(sender);
        json_decref(receiver);
        json_decref(actions);
        return rc;
    }
    *out = json_pack("{s:o,s:o,s:o}", "senderContent", sender, "receiverContent", receiver,
                     "actions", actions);
    return *out ? MV_OK : mv_err_set(err, MV_NO_MEMORY, "out of memory");
}

mv_code mv__locales_render(const mv_template *t, const json_t *data, const json_t *doc,
                           json_t **out, mv_err *err) {
    *out = NULL;
    if (!t->nlocales) return MV_OK;
    json_t *all = json_object();
    if (!all) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    for (size_t i = 0; i < t->nlocales; i++) {
        json_t *one = NULL;
        mv_code rc = render_locale(&t->locales[i], data, doc, &one, err);
        if (rc != MV_OK) {
            json_decref(all);
            return rc;
        }
        json_object_set_new(all, t->locales[i].tag, one);
    }
    *out = all;
    return MV_OK;
}

/* Every string's length, as limits.messageBytes counts rendered content. */
int64_t mv__locales_bytes(const json_t *v) {
    if (json_is_string(v)) return (int64_t)json_string_length(v);
    int64_t n = 0;
    const char *k;
    json_t *x;
    if (json_is_object(v)) json_object_foreach((json_t *)v, k, x) n += mv__locales_bytes(x);
    return n;
}

mv_code mv__locales_insert_tx(mv_db *db, const char *message_id, const json_t *rendered,
                              mv_err *err) {
    if (!rendered) return MV_OK;
    char *text = mv_json_compact(rendered);
    if (!text) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    mv_code rc = mv_db_execf_later(db, SQL_INSERT_LOCALES, err, "ss", message_id, text);
    free(text);
    return rc;
}

/* The tag of rendered (an object keyed by tag) matching range case-insensitively, or NULL. */
static const char *match(const json_t *rendered, const char *range, size_t n) {
    const char *tag;
    json_t *v;
    json_object_foreach((json_t *)rendered, tag, v) {
        if (strlen(tag) == n && !strncasecmp(tag, range, n)) return tag;
    }
    return NULL;
}

/* RFC 4647 lookup of one range: de-AT-x, then de-AT, then de. */
static const char *lookup(const json_t *rendered, const char *range, size_t n) {
    while (n > 0) {
        const char *tag = match(rendered, range, n);
        if (tag) return tag;
        while (n > 0 && range[n - 1] != '-')
            n--;
        if (n > 0) n--; /* drop the '-' */
    }
    return NULL;
}

const char *mv__locale_pick(const json_t *rendered, const char *accept) {
    if (!rendered || !accept) return NULL;
    /* ranges in order of q (highest first; equal q keep their order) */
    const char *best = NULL;
    double best_q = 0;
    for (const char *p = accept; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *start = p;
        while (*p && *p != ',' && *p != ';' && *p != ' ')
            p++;
        size_t n = (size_t)(p - start);
        double q = 1;
        while (*p && *p != ',') {
            if (!strncmp(p, ";q=", 3)) q = atof(p + 3);
            p++;
        }
        if (n == 0 || q <= best_q || (n == 1 && *start == '*')) continue;
        const char *tag = lookup(rendered, start, n);
        if (tag) {
            best = tag;
            best_q = q;
        }
    }
    return best;
}

typedef struct {
    const char *id;
    json_t *rendered;
} load_arg;

static mv_code load_tx(mv_db *db, void *ctx, mv_err *err) {
    load_arg *a = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_LOAD_LOCALES, &st, err, "s", a->id);
    json_decref(a->rendered);
    a->rendered = st && mv_stmt_text(st, 0) ? json_loads(mv_stmt_text(st, 0), 0, NULL) : NULL;
    mv_stmt_done(st);
    return rc;
}

mv_code mv__locales_load_tx(mv_db *db, const char *message_id, json_t **out, mv_err *err) {
    load_arg a = {message_id, NULL};
    mv_code rc = load_tx(db, &a, err);
    *out = rc == MV_OK ? a.rendered : NULL;
    if (rc != MV_OK) json_decref(a.rendered);
    return rc;
}

/* Puts msg into the tag of rendered that accept picks ("locale": null when none). */
static void apply(json_t *msg, const json_t *rendered, const char *accept) {
    const char *tag = mv__locale_pick(rendered, accept);
    json_object_set_new(msg, "locale", tag ? json_string(tag) : json_null());
    if (!tag) return;
    json_t *l = json_object_get(rendered, tag);
    json_object_set(msg, "senderContent", json_object_get(l, "senderContent"));
    json_object_set(msg, "receiverContent", json_object_get(l, "receiverContent"));
}

mv_code mv_message_localize(mv_service *svc, json_t *message, const char *accept, mv_err *err) {
    load_arg a = {mv_json_str(message, "id"), NULL};
    json_object_set_new(message, "locale", json_null());
    if (!a.id || !accept || !*accept) return MV_OK;
    mv_code rc = mv_store_read(svc->o.store, load_tx, &a, err);
    if (rc == MV_OK) apply(message, a.rendered, accept);
    json_decref(a.rendered);
    return rc;
}

typedef struct {
    json_t *messages;
    const char *accept;
} page_arg;

static mv_code page_tx(mv_db *db, void *ctx, mv_err *err) {
    page_arg *p = ctx;
    size_t i;
    json_t *m;
    json_array_foreach(p->messages, i, m) {
        load_arg a = {mv_json_str(m, "id"), NULL};
        json_object_set_new(m, "locale", json_null());
        if (!a.id) continue;
        mv_code rc = load_tx(db, &a, err);
        if (rc == MV_OK) apply(m, a.rendered, p->accept);
        json_decref(a.rendered);
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}

mv_code mv_messages_localize(mv_service *svc, json_t *messages, const char *accept, mv_err *err) {
    page_arg p = {messages, accept};
    if (!accept || !*accept) {
        size_t i;
        json_t *m;
        json_array_foreach(messages, i, m) json_object_set_new(m, "locale", json_null());
        return MV_OK;
    }
    return mv_store_read(svc->o.store, page_tx, &p, err);
}
