/* reminders.c — a template's reminders (docs/time.md), and where a visible message's reminder and
 * escalation timers are scheduled.
 *
 * Each reminder is one timer ("reminder:<message>:<n>", the message as its ref), scheduled in the
 * transaction that made the message visible, due afterMs after visibleAt. Its fire is local only:
 * in the fire's transaction, for each receiver who has not read the still-active message, the
 * viewer's reminded_at is set and a `reminded` change is logged for that viewer alone (the stream
 * hub sends it as `message.reminded`), and the reminder's title is queued on the viewer's channels
 * (channels.c, kind "reminder"), so the reminder, its events and its deliveries commit together,
 * once.
 *
 * Who the receivers are: the message's toUser, and for role messages every user with a viewer row
 * (someone who saw, read or was reminded of it) other than the sender — the store knows no role's
 * members, only the viewers the message met. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "message/inbox_internal.h"
#include "message/reach_internal.h"
#include "message/time_internal.h"
#include "missive/mustache.h"

static const char SQL_VIEWERS[] =
    "SELECT viewer_id, read_at FROM message_viewers WHERE message_id = ? ORDER BY viewer_id";
/* A viewer row made or updated by the reminder, only while the viewer has not read it. */
static const char SQL_REMIND[] =
    "INSERT INTO message_viewers (message_id, viewer_id, viewer_tenant, reminded_at, "
    "viewer_changed_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (message_id, viewer_id) DO UPDATE "
    "SET reminded_at = excluded.reminded_at, viewer_changed_at = excluded.viewer_changed_at "
    "WHERE message_viewers.read_at IS NULL";

static mv_code schedule_steps(mv_db *db, const char *tenant, const char *kind,
                              const char *message_id, const int64_t *after, size_t n,
                              int64_t visible_at, int64_t now, mv_err *err) {
    mv_code rc = MV_OK;
    for (size_t i = 0; rc == MV_OK && i < n; i++) {
        char id[MV__TIMER_ID_MAX];
        snprintf(id, sizeof id, "%s:%s:%zu", kind, message_id, i);
        rc = mv__timer_schedule(db, id, tenant, kind, message_id, visible_at + after[i], now, err);
    }
    return rc;
}

mv_code mv__message_time_schedule_tx(mv_db *db, const char *tenant, const mv_template *tpl,
                                     const char *message_id, int64_t visible_at, int64_t now,
                                     mv_err *err) {
    int64_t after[MV_TEMPLATE_MAX_REMINDERS + MV_TEMPLATE_MAX_ESCALATIONS];
    if (!tpl) return MV_OK;
    for (size_t i = 0; i < tpl->nreminders; i++)
        after[i] = tpl->reminders[i].after_ms;
    mv_code rc = schedule_steps(db, tenant, "reminder", message_id, after, tpl->nreminders,
                                visible_at, now, err);
    for (size_t i = 0; i < tpl->nescalations; i++)
        after[i] = tpl->escalations[i].after_ms;
    if (rc == MV_OK)
        rc = schedule_steps(db, tenant, "escalation", message_id, after, tpl->nescalations,
                            visible_at, now, err);
    return rc;
}

/* The receivers to remind: toUser unless read, and (role messages) every unread viewer but the
 * sender. Collected before any write: no statement runs while another steps on every driver. */
typedef struct {
    char **ids;
    size_t n;
} who;

static void who_free(who *w) {
    for (size_t i = 0; i < w->n; i++)
        free(w->ids[i]);
    free(w->ids);
}

static bool who_add(who *w, const char *id) {
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->ids[i], id) == 0) return true;
    char **ids = realloc(w->ids, (w->n + 1) * sizeof *ids);
    if (!ids) return false;
    w->ids = ids;
    return (w->ids[w->n] = strdup(id)) && ++w->n;
}

static mv_code receivers(mv_db *db, const json_t *doc, who *w, mv_err *err) {
    const char *to = mv_json_str(doc, "toUser"), *from = mv_json_str(doc, "fromUser");
    bool roles = json_array_size(json_object_get(doc, "toRoles")) > 0, to_read = false;
    mv_stmt *st = NULL;
    mv_code rc = mv_db_prepare(db, SQL_VIEWERS, &st, err);
    bool ok = true;
    if (st) {
        mv_stmt_bindf(st, "s", mv_json_str(doc, "id"));
        int r;
        while ((r = mv_stmt_step(st, err)) == 1) {
            const char *v = mv_stmt_text(st, 0);
            bool read = !mv_stmt_is_null(st, 1);
            if (v && to && strcmp(v, to) == 0) to_read = read;
            if (v && roles && !read && (!from || strcmp(v, from) != 0)) ok = ok && who_add(w, v);
        }
        mv_stmt_done(st);
        if (r < 0) rc = err ? err->code : MV_INTERNAL;
    }
    if (rc == MV_OK && to && to[0] && !to_read) ok = ok && who_add(w, to);
    if (rc == MV_OK && !ok) rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    return rc;
}

/* The reminder's title for doc (NULL: the template no longer has this reminder). */
static mv_code title_of(const mv_template *tpl, const mv__timer *t, const json_t *doc, char **out,
                        mv_err *err) {
    const char *n = strrchr(t->id, ':');
    long i = n ? strtol(n + 1, NULL, 10) : -1;
    *out = NULL;
    if (!tpl || i < 0 || (size_t)i >= tpl->nreminders) return MV_OK;
    return mv_tpl_render(tpl->reminders[i].title, json_object_get(doc, "payload"), MV_ESCAPE_NONE,
                         out, NULL, err);
}

static mv_code reminder_local(void *ctx, mv_db *db, const mv__timer *t, int64_t now, mv_err *err) {
    mv_service *svc = ctx;
    json_t *doc = NULL;
    mv_code rc = mv__doc_load(db, t->ref, t->tenant, &doc, err);
    if (rc != MV_OK || !doc || strcmp(mv_json_str(doc, "actionState"), "active") != 0) {
        json_decref(doc);
        return rc;
    }
    mv_template *tpl = mv_registry_find(svc->o.registry, mv_json_str(doc, "templateCd"));
    char *title = NULL;
    who w = {0};
    rc = title_of(tpl, t, doc, &title, err);
    if (rc == MV_OK) rc = receivers(db, doc, &w, err);
    for (size_t i = 0; rc == MV_OK && i < w.n; i++) {
        int64_t changed = 0;
        rc = mv_db_execf(db, SQL_REMIND, &changed, err, "sssii", t->ref, w.ids[i], t->tenant, now,
                         now);
        if (rc == MV_OK && changed > 0)
            rc = mv__change_add_tx(db, t->tenant, t->ref, MV_CHANGE_REMINDED, w.ids[i], now, err);
        if (rc == MV_OK && changed > 0 && title)
            rc = mv__doc_remind(svc, db, doc, t->tenant, tpl, w.ids[i], title, err);
    }
    who_free(&w);
    free(title);
    mv_template_release(tpl);
    json_decref(doc);
    return rc;
}

mv_code mv__register_reminders(mv_service *svc, mv__timer_engine *engine, mv_err *err) {
    return mv__timer_engine_register(engine, "reminder", NULL, reminder_local, svc, err);
}
