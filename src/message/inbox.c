/* inbox.c — per-viewer state: marking one message, marking all, counting, and the "viewer" of
 * the message JSON.
 *
 * A viewer row exists once a user touched a message; no row means never seen. Every mark is a
 * conditional UPDATE (`… AND read_at IS NULL`), so marking twice keeps the first timestamp and
 * only a real change writes a change-log row — the stream tells other devices about changes,
 * never about no-ops. Visibility is checked on the stored message inside the marking transaction
 * (invisible = MV_MESSAGE_NOT_FOUND); the action state is never touched. */
#include <stdlib.h>
#include <string.h>

#include "message/inbox_internal.h"

static const char SQL_VIEWER_OF[] =
    "SELECT seen_at, read_at, dismissed_at FROM message_viewers WHERE message_id = ? AND "
    "viewer_id = ?";
static const char SQL_VIEWER_ENSURE[] =
    "INSERT INTO message_viewers (message_id, viewer_id, viewer_tenant, viewer_changed_at) "
    "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING";
static const char SQL_MARK_SEEN[] = "UPDATE message_viewers SET seen_at = ?, viewer_changed_at = ? "
                                    "WHERE message_id = ? AND viewer_id = ? AND seen_at IS NULL";
static const char SQL_MARK_READ[] =
    "UPDATE message_viewers SET read_at = ?, seen_at = COALESCE(seen_at, ?), viewer_changed_at = ? "
    "WHERE message_id = ? AND viewer_id = ? AND read_at IS NULL";
static const char SQL_MARK_UNREAD[] =
    "UPDATE message_viewers SET read_at = NULL, viewer_changed_at = ? "
    "WHERE message_id = ? AND viewer_id = ? AND read_at IS NOT NULL";
static const char SQL_MARK_DISMISS[] =
    "UPDATE message_viewers SET dismissed_at = ?, viewer_changed_at = ? "
    "WHERE message_id = ? AND viewer_id = ? AND dismissed_at IS NULL";
static const char SQL_MARK_UNDISMISS[] =
    "UPDATE message_viewers SET dismissed_at = NULL, viewer_changed_at = ? "
    "WHERE message_id = ? AND viewer_id = ? AND dismissed_at IS NOT NULL";

/* ---- filter and viewer helpers ---------------------------------------------------------- */

static int64_t flag_value(mv_flag f, mv_flag unset_means) {
    if (f == MV_FLAG_UNSET) f = unset_means;
    return f == MV_FLAG_TRUE ? 1 : f == MV_FLAG_FALSE ? 0 : -1;
}

void inbox_filter_bind(mv_stmt *st, int *idx, const mv_inbox_filter *f) {
    static const mv_inbox_filter defaults = {0};
    if (!f) f = &defaults;
    int64_t flags[3] = {flag_value(f->read, MV_FLAG_ANY), flag_value(f->seen, MV_FLAG_ANY),
                        flag_value(f->dismissed, MV_FLAG_FALSE)};
    mv_stmt_bind_text(st, (*idx)++, f->template_cd);
    mv_stmt_bind_text(st, (*idx)++, f->template_cd);
    mv_stmt_bind_text(st, (*idx)++, f->type);
    mv_stmt_bind_text(st, (*idx)++, f->type);
    for (int i = 0; i < 3; i++) {
        mv_stmt_bind_int64(st, (*idx)++, flags[i]);
        mv_stmt_bind_int64(st, (*idx)++, flags[i]);
    }
}

static json_t *int_or_null(mv_stmt *st, int col) {
    return !st || mv_stmt_is_null(st, col) ? json_null() : json_integer(mv_stmt_int64(st, col));
}

json_t *inbox_viewer_from_row(mv_stmt *st, int col) {
    return json_pack("{s:o,s:o,s:o}", "seenAt", int_or_null(st, col), "readAt",
                     int_or_null(st, col + 1), "dismissedAt", int_or_null(st, col + 2));
}

mv_code inbox_viewer_attach(mv_db *db, json_t *doc, const char *user_id, mv_err *err) {
    mv_stmt *st = NULL;
    mv_code rc = MV_OK;
    if (user_id) rc = mv_db_row(db, SQL_VIEWER_OF, &st, err, "ss", mv_json_str(doc, "id"), user_id);
    if (rc == MV_OK) json_object_set_new(doc, "viewer", inbox_viewer_from_row(st, 0));
    mv_stmt_done(st);
    return rc;
}

/* ---- one message ------------------------------------------------------------------------ */

typedef struct {
    mv_service *svc;
    const char *id, *uid;
    const mv_user *user;
    mv_mark mark;
    json_t *doc;
} mark_arg;

static mv_code apply_mark(mv_db *db, mark_arg *a, int64_t now, int64_t *changes, mv_err *err) {
    switch (a->mark) {
    case MV_MARK_SEEN:
        return mv_db_execf(db, SQL_MARK_SEEN, changes, err, "iiss", now, now, a->id, a->uid);
    case MV_MARK_READ:
        return mv_db_execf(db, SQL_MARK_READ, changes, err, "iiiss", now, now, now, a->id, a->uid);
    case MV_MARK_UNREAD:
        return mv_db_execf(db, SQL_MARK_UNREAD, changes, err, "iss", now, a->id, a->uid);
    case MV_MARK_DISMISS:
        return mv_db_execf(db, SQL_MARK_DISMISS, changes, err, "iiss", now, now, a->id, a->uid);
    case MV_MARK_UNDISMISS:
        return mv_db_execf(db, SQL_MARK_UNDISMISS, changes, err, "iss", now, a->id, a->uid);
    }
    return mv_err_set(err, MV_INVALID_ARGUMENT, "unknown mark");
}

static mv_code mark_tx(mv_db *db, void *ctx, mv_err *err) {
    mark_arg *a = ctx;
    int64_t now = svc_now(a->svc), changes = 0;
    json_decref(a->doc); /* a group-commit retry runs the callback again */
    a->doc = NULL;
    mv_code rc = doc_load(db, a->id, svc_tenant(a->user), &a->doc, err);
    if (rc != MV_OK) return rc;
    if (!a->doc || (!mv_user_is_sender(a->user, a->doc) && !mv_user_is_receiver(a->user, a->doc)))
        return mv_err_set(err, MV_MESSAGE_NOT_FOUND, "message \"%s\" not found", a->id);
    const char *tenant = svc_tenant(a->user);
    if ((rc = mv_db_execf(db, SQL_VIEWER_ENSURE, NULL, err, "sssi", a->id, a->uid, tenant, now)))
        return rc;
    if ((rc = apply_mark(db, a, now, &changes, err)) != MV_OK) return rc;
    if ((rc = inbox_viewer_attach(db, a->doc, a->uid, err)) != MV_OK) return rc;
    if (changes == 0) return MV_OK;
    return change_add_tx(db, tenant, a->id, MV_CHANGE_VIEWER, a->uid, now, err);
}

mv_code mv_message_mark(mv_service *svc, const char *id, const mv_user *user, mv_mark mark,
                        json_t **message, mv_err *err) {
    if (message) *message = NULL;
    char uid[256];
    mv_code rc = svc_require_user(user, uid, err);
    if (rc != MV_OK) return rc;
    if ((unsigned)mark > MV_MARK_UNDISMISS)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "unknown mark");
    if (!mv_valid_message_id(id))
        return mv_err_set(err, MV_MESSAGE_NOT_FOUND, "message \"%s\" not found", id ? id : "");
    mark_arg a = {.svc = svc, .id = id, .uid = uid, .user = user, .mark = mark};
    rc = mv_store_write(svc->o.store, mark_tx, &a, err);
    if (rc == MV_OK && message)
        *message = a.doc;
    else
        json_decref(a.doc);
    return rc;
}

/* ---- every message ---------------------------------------------------------------------- */

typedef struct {
    mv_service *svc;
    const char *uid;
    const mv_user *user;
    bool read;
    const mv_inbox_filter *filter;
    int64_t before, updated;
} mark_all_arg;

static mv_code mark_all_tx(mv_db *db, void *ctx, mv_err *err) {
    mark_all_arg *a = ctx;
    int64_t now = svc_now(a->svc);
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, message_mark_all_sql(a->read), &st, err);
    if (rc != MV_OK) return rc;
    const char *tenant = svc_tenant(a->user);
    mv_inbox_filter f = {.template_cd = a->filter ? a->filter->template_cd : NULL,
                         .type = a->filter ? a->filter->type : NULL,
                         .read = a->read ? MV_FLAG_FALSE : MV_FLAG_ANY,
                         .seen = a->read ? MV_FLAG_ANY : MV_FLAG_FALSE,
                         .dismissed = MV_FLAG_FALSE};
    int idx = 1;
    mv_stmt_bind_text(st, idx++, a->uid);
    mv_stmt_bind_text(st, idx++, tenant);
    for (int i = a->read ? 3 : 2; i > 0; i--)
        mv_stmt_bind_int64(st, idx++, now);
    mv_stmt_bind_text(st, idx++, a->uid); /* the viewer join */
    visibility_bind(st, &idx, a->uid, a->user, false);
    inbox_filter_bind(st, &idx, &f);
    mv_stmt_bind_int64(st, idx++, a->before);
    mv_stmt_bind_int64(st, idx++, a->before);
    int r = mv_stmt_step(st, err);
    a->updated = mv_stmt_changes(st);
    mv_stmt_done(st);
    if (r < 0) return err ? err->code : MV_INTERNAL;
    if (a->updated == 0) return MV_OK;
    return change_add_tx(db, tenant, "", MV_CHANGE_VIEWER, a->uid, now, err);
}

mv_code mv_message_mark_all(mv_service *svc, const mv_user *user, mv_mark mark,
                            const mv_inbox_filter *filter, int64_t before, int64_t *updated,
                            mv_err *err) {
    if (updated) *updated = 0;
    char uid[256];
    mv_code rc = svc_require_user(user, uid, err);
    if (rc != MV_OK) return rc;
    if (mark != MV_MARK_SEEN && mark != MV_MARK_READ)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "only seen and read apply to every message");
    if (user->nroles > MV_MAX_ROLES)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "at most %d roles per user", MV_MAX_ROLES);
    mark_all_arg a = {svc, uid, user, mark == MV_MARK_READ, filter, before < 0 ? -1 : before, 0};
    rc = mv_store_write(svc->o.store, mark_all_tx, &a, err);
    if (rc == MV_OK && updated) *updated = a.updated;
    return rc;
}
