/* digest.c — digests (missive/reach.h): with `digest.<channel>.everyMs` in a user's preferences
 * (or their tenant's defaults), that user's deliveries on the channel are held and sent as one
 * delivery of kind "digest" per window, listing the messages still unread when it closes.
 *
 * Windows are aligned to multiples of everyMs since the epoch, so every daemon computes the same
 * window for the same instant without reading anything. A held delivery is a digest_items row
 * written in the create's transaction, together with the window's timer (the timer engine,
 * durable/timer.h) due when the window closes; the timer's id names the window (a hash of tenant,
 * user and channel, and the window's number), so every message of one window arms the same timer
 * at the same due time. The fire is the timer's local effect: in the one transaction that moves
 * the timer `pending → fired` under its lease it reads the window's rows, keeps the messages the
 * user has not read (and that still exist and were not cancelled), inserts the digest's outbox
 * row and deletes the window's rows — so a digest is sent once per window whichever daemon fires
 * it, and a daemon killed mid-fire leaves the window whole to the lease. Reminders are not held:
 * a digest lists messages, a reminder is about one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "message/reach_internal.h"
#include "message/service.h"
#include "message/timers.h"

static const char SQL_HOLD[] =
    "INSERT INTO digest_items (window_id, message_id, tenant_id, user_id, channel, item, "
    "created_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (window_id, message_id) DO NOTHING";
static const char SQL_WINDOW_ITEMS[] =
    "SELECT message_id, user_id, channel, item FROM digest_items WHERE window_id = ? "
    "ORDER BY created_at, message_id";
static const char SQL_STILL_UNREAD[] =
    "SELECT 1 FROM messages m WHERE m.id = ? AND m.tenant_id = ? AND m.action_state <> "
    "'cancelled' AND NOT EXISTS (SELECT 1 FROM message_viewers v WHERE v.message_id = m.id AND "
    "v.viewer_id = ? AND v.read_at IS NOT NULL)";
static const char SQL_DROP_WINDOW[] = "DELETE FROM digest_items WHERE window_id = ?";

/* A window longer than this closes after it (keeps the window arithmetic far from overflow). */
#define MAX_WINDOW_MS (366LL * 24 * 3600 * 1000)
/* The most messages one digest lists (the rest are counted in its title). */
#define MAX_LISTED 100

static int64_t every_in(const json_t *set, const char *channel) {
    const json_t *v =
        json_object_get(json_object_get(json_object_get(set, "digest"), channel), "everyMs");
    return json_is_integer(v) && json_integer_value(v) >= MV_REACH_MIN_DIGEST_MS
               ? json_integer_value(v)
               : 0;
}

int64_t mv__digest_every(const mv_reach *r, const char *tenant, const json_t *prefs,
                         const char *channel) {
    int64_t every = every_in(prefs, channel);
    if (!every && r) {
        const json_t *d = json_object_get(r->tenants, tenant ? tenant : MV_DEFAULT_TENANT);
        every = every_in(d ? d : r->defaults, channel);
    }
    return every > MAX_WINDOW_MS ? MAX_WINDOW_MS : every;
}

mv_code mv__digest_hold_tx(mv_service *svc, mv_db *db, const char *tenant, const char *user,
                           const char *channel, int64_t every, int64_t at, const json_t *item,
                           mv_err *err) {
    if (!tenant) tenant = MV_DEFAULT_TENANT;
    int64_t window = at / every, due = (window + 1) * every;
    char key[512], hash[65], id[MV__TIMER_ID_MAX];
    int kn = snprintf(key, sizeof key, "%s\n%s\n%s", tenant, user, channel);
    mv_sha256_hex(key, kn < (int)sizeof key ? (size_t)kn : sizeof key - 1, hash);
    hash[40] = '\0';
    snprintf(id, sizeof id, "digest:%s:%lld", hash, (long long)window);
    char *text = mv_json_compact(item);
    if (!text) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    mv_code rc = mv_db_execf_later(db, SQL_HOLD, err, "ssssssi", id, mv_json_str(item, "messageId"),
                                   tenant, user, channel, text, mv__svc_now(svc));
    free(text);
    if (rc != MV_OK) return rc;
    return mv__timer_schedule(db, id, tenant, "digest", channel, due, mv__svc_now(svc), err);
}

/* ---- the fire -------------------------------------------------------------------------------- */

typedef struct window {
    json_t *listed; /* the entries still unread, in the order they were held */
    char user[512], channel[64];
    int64_t unread; /* listed or not (beyond MAX_LISTED) */
} window;

static mv_code read_window(mv_db *db, const mv__timer *t, window *w, json_t **held, mv_err *err) {
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, SQL_WINDOW_ITEMS, &st, err);
    if (rc != MV_OK) return rc;
    mv_stmt_bindf(st, "s", t->id);
    *held = json_array();
    int s = 0;
    while (*held && (s = mv_stmt_step(st, err)) == 1) {
        mv_strlcpy(w->user, mv_stmt_text(st, 1), sizeof w->user);
        mv_strlcpy(w->channel, mv_stmt_text(st, 2), sizeof w->channel);
        json_t *item = json_loads(mv_stmt_text(st, 3), 0, NULL);
        if (json_is_object(item)) json_array_append(*held, item);
        json_decref(item);
    }
    mv_stmt_done(st);
    if (!*held) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    return s < 0 ? (err ? err->code : MV_INTERNAL) : MV_OK;
}

static mv_code keep_unread(mv_db *db, const mv__timer *t, window *w, const json_t *held,
                           mv_err *err) {
    size_t i;
    json_t *item;
    json_array_foreach(held, i, item) {
        mv_stmt *st;
        mv_code rc = mv_db_row(db, SQL_STILL_UNREAD, &st, err, "sss",
                               mv_json_str(item, "messageId"), t->tenant, w->user);
        if (rc != MV_OK) return rc;
        if (!st) continue;
        mv_stmt_done(st);
        if (w->unread++ < MAX_LISTED) json_array_append(w->listed, item);
    }
    return MV_OK;
}

/* The digest's own content: a title counting the messages, the titles as short, and each
 * message's title and short text as long. */
static json_t *summary(const window *w) {
    char title[64];
    snprintf(title, sizeof title, "%lld unread message%s", (long long)w->unread,
             w->unread == 1 ? "" : "s");
    mv_strbuf s = {0}, l = {0};
    size_t i;
    json_t *item;
    json_array_foreach(w->listed, i, item) {
        const json_t *c = json_object_get(item, "content");
        const char *ti = mv_json_str(c, "title"), *sh = mv_json_str(c, "short");
        mv_strbuf_adds(&s, i ? "\n" : "");
        mv_strbuf_adds(&s, ti ? ti : "");
        mv_strbuf_adds(&l, i ? "\n\n" : "");
        mv_strbuf_adds(&l, ti ? ti : "");
        if (sh && *sh) {
            mv_strbuf_adds(&l, "\n");
            mv_strbuf_adds(&l, sh);
        }
    }
    char *st = mv_strbuf_take(&s, NULL), *lt = mv_strbuf_take(&l, NULL);
    json_t *o =
        st && lt ? json_pack("{s:s,s:s,s:s}", "title", title, "short", st, "long", lt) : NULL;
    free(st);
    free(lt);
    return o;
}

static mv_code send_email(mv_service *svc, mv_db *db, const window *w, const json_t *content,
                          int64_t now, mv_err *err) {
    const char *title = mv_json_str(content, "title");
    if (!svc->o.email || !mv_email_should_send(w->user, title, svc->email_exclusions)) return MV_OK;
    json_t *row = json_pack("{s:s,s:s,s:s,s:s}", "messageId",
                            mv_json_str(json_array_get(w->listed, 0), "messageId"), "toUser",
                            w->user, "title", title, "body", mv_json_str(content, "long"));
    mv_code rc = row ? mv_outbox_add_tx(db, MV_OUTBOX_EMAIL, row, now, err)
                     : mv_err_set(err, MV_NO_MEMORY, "out of memory");
    json_decref(row);
    return rc;
}

static mv_code send_webhook(mv_service *svc, mv_db *db, const mv__timer *t, const window *w,
                            json_t *content, int64_t now, mv_err *err) {
    const char *url = mv_reach_webhook(mv_service_reach(svc), w->channel);
    if (!url) {
        json_decref(content);
        return MV_OK; /* the channel was removed from the config since */
    }
    char id[37];
    mv_code rc = mv_id_uuid(id, err);
    if (rc != MV_OK) {
        json_decref(content);
        return rc;
    }
    /* the window's number ends the timer's id, and it closes at (number + 1) * everyMs */
    const char *colon = strrchr(t->id, ':');
    int64_t number = colon ? strtoll(colon + 1, NULL, 10) : 0;
    int64_t every = number >= 0 ? t->due_at / (number + 1) : 0;
    json_t *body =
        json_pack("{s:s,s:s,s:{s:s,s:n},s:n,s:n,s:n,s:s,s:o,s:{},s:I,s:I,s:I,s:O}", "channel",
                  w->channel, "deliveryId", id, "to", "userId", w->user, "contact", "messageId",
                  "templateCd", "category", "kind", "digest", "content", content, "links",
                  "windowStart", (json_int_t)(t->due_at - every), "windowEnd",
                  (json_int_t)t->due_at, "unread", (json_int_t)w->unread, "messages", w->listed);
    json_t *row = body
                      ? json_pack("{s:s,s:o,s:s,s:s,s:s}", "url", url, "body", body,
                                  "idempotencyKey", id, "contactOf", w->user, "channel", w->channel)
                      : NULL;
    rc = row ? mv_outbox_add_tx(db, MV_OUTBOX_WEBHOOK, row, now, err)
             : mv_err_set(err, MV_NO_MEMORY, "out of memory");
    json_decref(row);
    return rc;
}

static mv_code digest_local(void *ctx, mv_db *db, const mv__timer *t, int64_t now, mv_err *err) {
    mv_service *svc = ctx;
    window w = {.listed = json_array()};
    json_t *held = NULL;
    mv_code rc = w.listed ? read_window(db, t, &w, &held, err)
                          : mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (rc == MV_OK && json_array_size(held)) rc = keep_unread(db, t, &w, held, err);
    if (rc == MV_OK && w.unread) {
        json_t *content = summary(&w);
        if (!content)
            rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
        else if (!strcmp(w.channel, "email")) {
            rc = send_email(svc, db, &w, content, now, err);
            json_decref(content);
        } else
            rc = send_webhook(svc, db, t, &w, content, now, err);
    }
    if (rc == MV_OK && json_array_size(held))
        rc = mv_db_execf(db, SQL_DROP_WINDOW, NULL, err, "s", t->id);
    json_decref(held);
    json_decref(w.listed);
    return rc;
}

mv_code mv__digest_register(mv_service *svc, mv__timer_engine *engine, mv_err *err) {
    return mv__timer_engine_register(engine, "digest", NULL, digest_local, svc, err);
}
