/* channels.c — what a new message delivers besides the inbox, decided per recipient inside the
 * create's transaction: the email (the existing outbox row) and one outbox row per named webhook
 * channel, each only when the template lists the channel (no "channels": email only, as before)
 * and the recipient's preferences allow it (missive/reach.h; a critical template ignores them).
 *
 * Who is a recipient: the message's toUser. A message sent only to roles has no single user to
 * look up preferences or a contact for, so it delivers nowhere but the inbox (as its email never
 * did); a reminder (mv__doc_remind) goes to each user it reminds. A channel delivery is a signed
 * webhook outbox row whose Idempotency-Key is its deliveryId, so every retry carries the same id;
 * the contact is asked of the user directory when the row is sent (outbox.c), never inside this
 * transaction. */
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "deliver/outbox_text.h"
#include "message/reach_internal.h"
#include "message/service.h"
#include "missive/mustache.h"

static bool lists(const mv_template *t, const char *channel) {
    for (size_t i = 0; i < t->nchannels; i++)
        if (!strcmp(t->channels[i].name, channel)) return true;
    return false;
}

/* The content a channel gets: its override where the template has one, else the receiver's. */
static mv_code channel_content(const mv_template_channel *ch, const json_t *doc, const json_t *data,
                               json_t **out, mv_err *err) {
    static const char *const keys[] = {"title", "short", "long"};
    const mv_tpl *tpls[] = {ch ? ch->content.title : NULL, ch ? ch->content.short_text : NULL,
                            ch ? ch->content.long_text : NULL};
    const json_t *recv = json_object_get(doc, "receiverContent");
    json_t *o = json_object();
    if (!o) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    for (size_t i = 0; i < 3; i++) {
        if (!tpls[i]) {
            const char *s = mv_json_str(recv, keys[i]);
            json_object_set_new(o, keys[i], json_string(s ? s : ""));
            continue;
        }
        char *text = NULL;
        mv_code rc = mv_tpl_render(tpls[i], data, MV_ESCAPE_NONE, &text, NULL, err);
        if (rc != MV_OK) {
            json_decref(o);
            return rc;
        }
        json_object_set_new(o, keys[i], json_string(text));
        free(text);
    }
    *out = o;
    return MV_OK;
}

/* {actionCd: URL} for every action the recipient may run from outside the app: a receiver
 * action needing no permission (a link carries none) and no approval, allowed on doc now. */
static mv_code action_links(mv_service *svc, const mv_template *t, const json_t *doc,
                            const char *tenant, const char *to, json_t **out, mv_err *err) {
    *out = json_object();
    if (!*out) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (!mv_reach_links_enabled(mv_service_reach(svc))) return MV_OK;
    mv_user user = {.id = to, .tenant = tenant};
    for (size_t i = 0; i < t->nactions; i++) {
        const mv_action_def *a = &t->actions[i];
        if (!a->receiver || a->permission || a->approval_capability ||
            !mv_action_allowed(a, &user, doc))
            continue;
        char *url = NULL;
        mv_code rc = mv_link_url(mv_service_reach(svc), tenant, mv_json_str(doc, "id"),
                                 a->action_cd, to, mv__svc_now(svc), &url, err);
        if (rc != MV_OK) return rc;
        json_object_set_new(*out, a->action_cd, json_string(url));
        free(url);
    }
    return MV_OK;
}

/* The listing entry a digest holds for one message (digest.c); takes content and links. */
static mv_code hold(mv_service *svc, mv_db *db, const mv_template *t, const json_t *doc,
                    const char *tenant, const char *to, const char *channel, int64_t every,
                    json_t *content, json_t *links, mv_err *err) {
    json_t *item = json_pack("{s:s,s:s,s:s,s:o,s:o}", "messageId", mv_json_str(doc, "id"),
                             "templateCd", t->template_cd, "category", t->category, "content",
                             content, "links", links ? links : json_object());
    /* the window of the message's send (its deliveries may be decided a little later) */
    const json_t *at = json_object_get(doc, "sendAt");
    if (!json_is_integer(at)) at = json_object_get(doc, "createdAt");
    mv_code rc =
        item ? mv__digest_hold_tx(svc, db, tenant, to, channel, every,
                                  json_is_integer(at) ? json_integer_value(at) : mv__svc_now(svc),
                                  item, err)
             : mv_err_set(err, MV_NO_MEMORY, "out of memory");
    json_decref(item);
    return rc;
}

static bool put_str(mv_strbuf *b, const char *key, const char *value) {
    return value && mv_strbuf_adds(b, key) && mv_json_write_string(b, value, strlen(value));
}

/* A channel delivery's webhook outbox payload, as the compact JSON text of
 * {"url", "body": {"channel", "deliveryId", "to": {"userId", "contact": null}, "messageId",
 * "templateCd", "category", "kind", "content", "links"}, "idempotencyKey", "contactOf",
 * "channel"}, written straight into one buffer: a delivery is queued inside the create's
 * transaction, on the store's one writer, where a jansson tree per row (built, dumped, freed)
 * cost more than the row's insert. NULL when out of memory or a string is not UTF-8. */
static char *channel_row_text(const char *url, const char *channel, const char *id, const char *to,
                              const json_t *doc, const mv_template *t, const char *kind,
                              const json_t *content, const json_t *links) {
    mv_strbuf b = {0};
    bool ok = put_str(&b, "{\"url\":", url) && put_str(&b, ",\"body\":{\"channel\":", channel) &&
              put_str(&b, ",\"deliveryId\":", id) && put_str(&b, ",\"to\":{\"userId\":", to) &&
              put_str(&b, ",\"contact\":null},\"messageId\":", mv_json_str(doc, "id")) &&
              put_str(&b, ",\"templateCd\":", t->template_cd) &&
              put_str(&b, ",\"category\":", t->category) && put_str(&b, ",\"kind\":", kind) &&
              mv_strbuf_adds(&b, ",\"content\":") && mv_json_write(&b, content) &&
              mv_strbuf_adds(&b, ",\"links\":") && mv_json_write(&b, links) &&
              put_str(&b, "},\"idempotencyKey\":", id) && put_str(&b, ",\"contactOf\":", to) &&
              put_str(&b, ",\"channel\":", channel) && mv_strbuf_adds(&b, "}");
    char *text = mv_strbuf_take(&b, NULL);
    if (ok) return text;
    free(text);
    return NULL;
}

/* One delivery row of kind ("message" or "reminder"), or its digest entry when every > 0;
 * content NULL: the channel's own. */
static mv_code queue_channel(mv_service *svc, mv_db *db, const mv_template *t,
                             const mv_template_channel *ch, const json_t *doc, const char *tenant,
                             const char *to, const json_t *data, const char *kind,
                             const json_t *fixed, int64_t every, mv_err *err) {
    const char *url = mv_reach_webhook(mv_service_reach(svc), ch->name);
    if (!url) return MV_OK; /* checked at start; a reload may have removed it since */
    char id[37];
    json_t *content = NULL, *links = NULL;
    mv_code rc = every ? MV_OK : mv_id_uuid(id, err);
    if (rc == MV_OK && fixed && every && !(content = json_deep_copy(fixed))) /* hold takes it */
        rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (rc == MV_OK && !fixed) rc = channel_content(ch, doc, data, &content, err);
    if (rc == MV_OK) rc = action_links(svc, t, doc, tenant, to, &links, err);
    if (rc != MV_OK) {
        json_decref(content);
        json_decref(links);
        return rc;
    }
    if (every) return hold(svc, db, t, doc, tenant, to, ch->name, every, content, links, err);
    char *row =
        channel_row_text(url, ch->name, id, to, doc, t, kind, content ? content : fixed, links);
    rc = row ? mv__outbox_add_text_tx(db, MV_OUTBOX_WEBHOOK, row, mv__schedule_due(svc, doc), err)
             : mv_err_set(err, MV_NO_MEMORY, "out of memory");
    free(row);
    json_decref(content);
    json_decref(links);
    return rc;
}

/* Appends "\n\n<action name>: <url>" per link to short and long (the email body is the longer
 * of the two), so an email carries the same links as every other delivery. */
static mv_code append_links(json_t *content, const mv_template *t, const json_t *doc,
                            const json_t *links, mv_err *err) {
    mv_strbuf b = {0};
    const char *cd;
    json_t *url;
    json_object_foreach((json_t *)links, cd, url) {
        const mv_action_def *a = mv_template_action(t, cd);
        char *name = NULL;
        mv_code rc = mv_tpl_render(a->name, json_object_get(doc, "payload"), MV_ESCAPE_NONE, &name,
                                   NULL, err);
        if (rc != MV_OK) {
            free(mv_strbuf_take(&b, NULL));
            return rc;
        }
        mv_strbuf_adds(&b, "\n\n");
        mv_strbuf_adds(&b, name);
        mv_strbuf_adds(&b, ": ");
        mv_strbuf_adds(&b, json_string_value(url));
        free(name);
    }
    char *tail = mv_strbuf_take(&b, NULL);
    if (!tail) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    static const char *const keys[] = {"short", "long"};
    for (size_t i = 0; i < 2; i++) {
        const char *was = mv_json_str(content, keys[i]);
        size_t n = strlen(was ? was : "");
        char *joined = malloc(n + strlen(tail) + 1);
        if (!joined) {
            free(tail);
            return mv_err_set(err, MV_NO_MEMORY, "out of memory");
        }
        memcpy(joined, was ? was : "", n);
        strcpy(joined + n, tail);
        json_object_set_new(content, keys[i], json_string(joined));
        free(joined);
    }
    free(tail);
    return MV_OK;
}

/* The email: the template's email override, and the recipient's action links, applied to a copy
 * of doc (doc itself when neither applies); held for the recipient's digest when every > 0. */
static mv_code queue_email(mv_service *svc, mv_db *db, const mv_template *t, const json_t *doc,
                           const char *tenant, const char *to, const json_t *data, int64_t every,
                           mv_err *err) {
    const mv_template_channel *ch = NULL;
    for (size_t i = 0; t && i < t->nchannels; i++)
        if (!strcmp(t->channels[i].name, "email")) ch = &t->channels[i];
    bool override = ch && (ch->content.title || ch->content.short_text || ch->content.long_text);
    json_t *links = NULL, *content = NULL, *copy = NULL;
    mv_code rc = t ? action_links(svc, t, doc, tenant, to, &links, err) : MV_OK;
    if (rc != MV_OK || (!every && !override && !json_object_size(links))) {
        json_decref(links);
        return rc != MV_OK ? rc : mv__doc_enqueue_email(svc, db, doc, err);
    }
    if (!(copy = json_copy((json_t *)doc))) rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (rc == MV_OK && override) rc = channel_content(ch, doc, data, &content, err);
    if (rc == MV_OK && !override &&
        !(content = json_deep_copy(json_object_get(doc, "receiverContent"))))
        rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (rc == MV_OK && json_object_size(links)) rc = append_links(content, t, doc, links, err);
    if (rc == MV_OK && every) {
        json_decref(copy);
        if (!mv_email_should_send(to, mv_json_str(content, "title"), svc->email_exclusions)) {
            json_decref(content);
            json_decref(links);
            return MV_OK;
        }
        return hold(svc, db, t, doc, tenant, to, "email", every, content, links, err);
    }
    if (rc == MV_OK) {
        json_object_set_new(copy, "receiverContent", content);
        content = NULL;
        rc = mv__doc_enqueue_email(svc, db, copy, err);
    }
    json_decref(content);
    json_decref(copy);
    json_decref(links);
    return rc;
}

/* Whether any of t's channels renders content of its own (from the create's template data). */
static bool overrides(const mv_template *t) {
    for (size_t i = 0; i < t->nchannels; i++) {
        const mv_content_tpl *c = &t->channels[i].content;
        if (c->title || c->short_text || c->long_text) return true;
    }
    return false;
}

/* Every delivery of doc but the inbox, decided now: its recipient's preferences and locale, the
 * template's channels, digests. */
static mv_code deliver_tx(mv_service *svc, mv_db *db, const json_t *doc, const char *tenant,
                          const mv_template *t, const json_t *data, const json_t *localized,
                          bool email, size_t named, mv_err *err) {
    const char *to = mv_json_str(doc, "toUser");
    json_t *prefs = NULL;
    bool critical = t && t->critical;
    const char *category = t ? t->category : mv_json_str(doc, "templateCd");
    mv_code rc =
        critical && !localized ? MV_OK : mv__preferences_load_tx(db, tenant, to, &prefs, err);
    /* the recipient's stored locale, where the template renders it */
    const char *tag = mv__locale_pick(localized, mv_json_str(prefs, "locale"));
    json_t *in_locale = NULL;
    if (rc == MV_OK && tag && !(in_locale = json_copy((json_t *)doc)))
        rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (in_locale) {
        json_object_set(in_locale, "receiverContent",
                        json_object_get(json_object_get(localized, tag), "receiverContent"));
        doc = in_locale;
    }
    const mv_reach *reach = mv_service_reach(svc);
    /* a notification (no template) and a critical message are never held for a digest */
    bool digests = t && !critical;
    if (rc == MV_OK && email &&
        mv_reach_allows(reach, tenant, prefs, category, "email", true, critical))
        rc = queue_email(svc, db, t, doc, tenant, to, data,
                         digests ? mv__digest_every(reach, tenant, prefs, "email") : 0, err);
    for (size_t i = 0; rc == MV_OK && named && i < t->nchannels; i++) {
        const mv_template_channel *ch = &t->channels[i];
        if (!strcmp(ch->name, "email") || !strcmp(ch->name, "inbox")) continue;
        if (mv_reach_allows(reach, tenant, prefs, category, ch->name, true, critical))
            rc = queue_channel(svc, db, t, ch, doc, tenant, to, data, "message", NULL,
                               digests ? mv__digest_every(reach, tenant, prefs, ch->name) : 0, err);
    }
    json_decref(prefs);
    json_decref(in_locale);
    return rc;
}

/* The channels of doc that are named webhooks (configured now), and whether it gets an email. */
static size_t named_channels(mv_service *svc, const mv_template *t, bool *email) {
    *email = svc->o.email && (!t || !t->has_channels || lists(t, "email"));
    size_t named = 0;
    for (size_t i = 0; t && i < t->nchannels; i++)
        named += mv_reach_webhook(mv_service_reach(svc), t->channels[i].name) != NULL;
    return named;
}

mv_code mv__doc_plan(mv_service *svc, const json_t *doc, const mv_template *t, const json_t *data,
                     char **plan, mv_err *err) {
    *plan = NULL;
    const char *to = mv_json_str(doc, "toUser");
    bool email;
    if (!to || !*to || !named_channels(svc, t, &email)) return MV_OK;
    mv_strbuf b = {0};
    bool ok =
        mv_strbuf_adds(&b, "{") &&
        (!data || !overrides(t) || (mv_strbuf_adds(&b, "\"data\":") && mv_json_write(&b, data))) &&
        mv_strbuf_adds(&b, "}");
    char *text = mv_strbuf_take(&b, NULL);
    if (ok && text) {
        *plan = text;
        return MV_OK;
    }
    free(text);
    return mv_err_set(err, MV_NO_MEMORY, "out of memory");
}

mv_code mv__doc_deliver(mv_service *svc, mv_db *db, const json_t *doc, const char *tenant,
                        const mv_template *t, const json_t *data, const json_t *localized,
                        mv_err *err) {
    mv_code rc = mv__locales_insert_tx(db, mv_json_str(doc, "id"), localized, err);
    if (rc != MV_OK) return rc;
    const char *to = mv_json_str(doc, "toUser");
    if (!to || !*to) return MV_OK; /* roles only: the inbox (see the top of this file) */
    bool email;
    size_t named = named_channels(svc, t, &email);
    if (named) return MV_OK; /* planned: the message row carries its plan (mv__doc_plan) */
    return email ? deliver_tx(svc, db, doc, tenant, t, data, localized, email, 0, err) : MV_OK;
}

/* ---- plans (deliver/outbox_text.h) -------------------------------------------------------
 * A message with named channels is stored with deliver_at (when its deliveries are due: its
 * creation, or its sendAt) and deliver_data (the template data its channels render, when one
 * renders content of its own). Each outbox run first decides the due ones: found through the
 * partial index messages_deliveries_due, each taken by a conditional UPDATE that clears the two
 * columns — so two runs never decide one message twice — and planned in the same transaction from
 * the message as stored, its template as loaded now (a template removed since: nothing is
 * delivered) and its rendered locales. When that transaction fails for a reason of one plan's
 * own, each is tried alone, and one that still fails is put off by PLAN_RETRY_MS. */

#define PLAN_RETRY_MS 60000

static const char SQL_DUE_PLANS[] =
    "SELECT id, tenant_id, deliver_data FROM messages WHERE deliver_at IS NOT NULL AND "
    "deliver_at <= ? ORDER BY deliver_at LIMIT ?";
static const char SQL_TAKE_PLAN[] = "UPDATE messages SET deliver_at = NULL, deliver_data = NULL "
                                    "WHERE id = ? AND deliver_at IS NOT NULL";
static const char SQL_PUT_OFF_PLAN[] =
    "UPDATE messages SET deliver_at = ? WHERE id = ? AND deliver_at IS NOT NULL";

typedef struct plan_row {
    char id[MV_MAX_ID_BYTES + 1], tenant[MV_MAX_ID_BYTES + 1];
    json_t *data; /* NULL: none */
} plan_row;

typedef struct plans_ctx {
    mv_service *svc;
    int64_t now;
    int limit, n, from, to;
    plan_row *rows;
} plans_ctx;

static mv_code find_plans(mv_db *db, void *ctx, mv_err *err) {
    plans_ctx *c = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, SQL_DUE_PLANS, &st, err);
    if (rc != MV_OK) return rc;
    mv_stmt_bindf(st, "ii", c->now, (int64_t)c->limit);
    int r = 0;
    while (c->n < c->limit && (r = mv_stmt_step(st, err)) == 1) {
        plan_row *p = &c->rows[c->n++];
        mv_strlcpy(p->id, mv_stmt_text(st, 0), sizeof p->id);
        mv_strlcpy(p->tenant, mv_stmt_text(st, 1), sizeof p->tenant);
        const char *data = mv_stmt_text(st, 2);
        json_t *d = data ? json_loads(data, 0, NULL) : NULL;
        p->data = json_incref(json_object_get(d, "data"));
        json_decref(d);
    }
    mv_stmt_done(st);
    return r < 0 ? err->code : MV_OK;
}

static mv_code plan_one(mv_service *svc, mv_db *db, const plan_row *p, mv_err *err) {
    json_t *doc = NULL, *localized = NULL;
    mv_code rc = mv__doc_load(db, p->id, p->tenant, &doc, err);
    mv_template *t = doc ? mv_registry_find(svc->o.registry, mv_json_str(doc, "templateCd")) : NULL;
    const char *to = mv_json_str(doc, "toUser");
    bool email = false;
    size_t named = t ? named_channels(svc, t, &email) : 0;
    if (rc == MV_OK && t && to && *to && (email || named))
        rc = mv__locales_load_tx(db, p->id, &localized, err);
    if (rc == MV_OK && t && to && *to && (email || named))
        rc = deliver_tx(svc, db, doc, p->tenant, t, p->data, localized, email, named, err);
    mv_template_release(t);
    json_decref(localized);
    json_decref(doc);
    return rc;
}

static mv_code take_plans(mv_db *db, void *ctx, mv_err *err) {
    plans_ctx *c = ctx;
    for (int i = c->from; i < c->to; i++) {
        int64_t changes = 0;
        mv_code rc = mv_db_execf(db, SQL_TAKE_PLAN, &changes, err, "s", c->rows[i].id);
        if (rc == MV_OK && changes == 1) rc = plan_one(c->svc, db, &c->rows[i], err);
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}

static mv_code put_off(mv_db *db, void *ctx, mv_err *err) {
    plans_ctx *c = ctx;
    return mv_db_execf(db, SQL_PUT_OFF_PLAN, NULL, err, "is", c->now + PLAN_RETRY_MS,
                       c->rows[c->from].id);
}

static bool store_failure(mv_code rc) {
    return rc == MV_STORE_UNAVAILABLE || rc == MV_IO || rc == MV_NO_MEMORY;
}

static mv_code plans_run(void *ctx, mv_store *store, int64_t now, int max, mv_err *err) {
    plans_ctx c = {.svc = ctx, .now = now, .limit = max};
    c.rows = calloc((size_t)max, sizeof *c.rows);
    mv_code rc = c.rows ? mv_store_read(store, find_plans, &c, err)
                        : mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (rc == MV_OK && c.n > 0) {
        c.from = 0;
        c.to = c.n;
        rc = mv_store_write(store, take_plans, &c, err);
        for (int i = 0; rc != MV_OK && !store_failure(rc) && i < c.n; i++) {
            c.from = i;
            c.to = i + 1;
            mv_err one = {0};
            mv_code r1 = mv_store_write(store, take_plans, &c, &one);
            if (r1 != MV_OK && !store_failure(r1)) mv_store_write(store, put_off, &c, &one);
        }
        if (rc != MV_OK && !store_failure(rc)) rc = MV_OK; /* put off, one by one */
    }
    for (int i = 0; c.rows && i < c.n; i++)
        json_decref(c.rows[i].data);
    free(c.rows);
    return rc;
}

void mv__channels_attach(mv_service *svc, bool attach) {
    mv__outbox_set_planner(svc->o.store, attach ? plans_run : NULL, svc);
}

mv_code mv__doc_remind(mv_service *svc, mv_db *db, const json_t *doc, const char *tenant,
                       const mv_template *t, const char *to, const char *title, mv_err *err) {
    bool email = svc->o.email && (!t->has_channels || lists(t, "email"));
    size_t named = 0;
    for (size_t i = 0; i < t->nchannels; i++)
        named += mv_reach_webhook(mv_service_reach(svc), t->channels[i].name) != NULL;
    if (!email && !named) return MV_OK;
    json_t *prefs = NULL, *copy = json_copy((json_t *)doc);
    json_t *content = json_deep_copy(json_object_get(doc, "receiverContent"));
    mv_code rc =
        copy && json_is_object(content) ? MV_OK : mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (rc == MV_OK) {
        json_object_set_new(content, "title", json_string(title));
        json_object_set(copy, "receiverContent", content);
        json_object_set_new(copy, "toUser", json_string(to));
        if (!t->critical) rc = mv__preferences_load_tx(db, tenant, to, &prefs, err);
    }
    if (rc == MV_OK && email &&
        mv_reach_allows(mv_service_reach(svc), tenant, prefs, t->category, "email", true,
                        t->critical))
        rc = mv__doc_enqueue_email(svc, db, copy, err);
    for (size_t i = 0; rc == MV_OK && named && i < t->nchannels; i++) {
        const mv_template_channel *ch = &t->channels[i];
        if (!strcmp(ch->name, "email") || !strcmp(ch->name, "inbox")) continue;
        if (mv_reach_allows(mv_service_reach(svc), tenant, prefs, t->category, ch->name, true,
                            t->critical))
            rc = queue_channel(svc, db, t, ch, copy, tenant, to, NULL, "reminder", content, 0, err);
    }
    json_decref(content);
    json_decref(copy);
    json_decref(prefs);
    return rc;
}
