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
#include "message/op_wait.h"
#include "store/write_async.h"

static const char SQL_VIEWER_OF[] = "SELECT seen_at, read_at, dismissed_at, snoozed_until, "
                                    "reminded_at FROM message_viewers WHERE message_id = ? AND "
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

void mv__inbox_filter_bind(mv_stmt *st, int *idx, const mv_inbox_filter *f) {
    static const mv_inbox_filter defaults = {0};
    if (!f) f = &defaults;
    int64_t flags[4] = {flag_value(f->read, MV_FLAG_ANY), flag_value(f->seen, MV_FLAG_ANY),
                        flag_value(f->dismissed, MV_FLAG_FALSE),
                        flag_value(f->snoozed, MV_FLAG_FALSE)};
    mv_stmt_bind_text(st, (*idx)++, f->template_cd);
    mv_stmt_bind_text(st, (*idx)++, f->template_cd);
    mv_stmt_bind_text(st, (*idx)++, f->type);
    mv_stmt_bind_text(st, (*idx)++, f->type);
    for (int i = 0; i < 4; i++) {
        mv_stmt_bind_int64(st, (*idx)++, flags[i]);
        mv_stmt_bind_int64(st, (*idx)++, flags[i]);
    }
}

static json_t *int_or_null(mv_stmt *st, int col) {
    return !st || mv_stmt_is_null(st, col) ? json_null() : json_integer(mv_stmt_int64(st, col));
}

json_t *mv__inbox_viewer_from_row(mv_stmt *st, int col) {
    return json_pack("{s:o,s:o,s:o,s:o,s:o}", "seenAt", int_or_null(st, col), "readAt",
                     int_or_null(st, col + 1), "dismissedAt", int_or_null(st, col + 2),
                     "snoozedUntil", int_or_null(st, col + 3), "remindedAt",
                     int_or_null(st, col + 4));
}

mv_code mv__inbox_viewer_attach(mv_db *db, json_t *doc, const char *user_id, mv_err *err) {
    mv_stmt *st = NULL;
    mv_code rc = MV_OK;
    if (user_id) rc = mv_db_row(db, SQL_VIEWER_OF, &st, err, "ss", mv_json_str(doc, "id"), user_id);
    if (rc == MV_OK) json_object_set_new(doc, "viewer", mv__inbox_viewer_from_row(st, 0));
    mv_stmt_done(st);
    return rc;
}

mv_code mv__inbox_viewer_ensure(mv_db *db, const char *tenant, const char *id, const char *uid,
                                int64_t now, mv_err *err) {
    return mv_db_execf(db, SQL_VIEWER_ENSURE, NULL, err, "sssi", id, uid, tenant, now);
}

/* ---- one message ------------------------------------------------------------------------ */

typedef struct {
    mv_service *svc;
    const char *id, *uid;
    const mv_user *user;
    mv_mark mark;
    json_t *doc;
} mark_arg;

static mv_code apply_mark(mv_db *db, const char *id, const char *uid, mv_mark mark, int64_t now,
                          int64_t *changes, mv_err *err) {
    switch (mark) {
    case MV_MARK_SEEN:
        return mv_db_execf(db, SQL_MARK_SEEN, changes, err, "iiss", now, now, id, uid);
    case MV_MARK_READ:
        return mv_db_execf(db, SQL_MARK_READ, changes, err, "iiiss", now, now, now, id, uid);
    case MV_MARK_UNREAD: return mv_db_execf(db, SQL_MARK_UNREAD, changes, err, "iss", now, id, uid);
    case MV_MARK_DISMISS:
        return mv_db_execf(db, SQL_MARK_DISMISS, changes, err, "iiss", now, now, id, uid);
    case MV_MARK_UNDISMISS:
        return mv_db_execf(db, SQL_MARK_UNDISMISS, changes, err, "iss", now, id, uid);
    }
    return mv_err_set(err, MV_INVALID_ARGUMENT, "unknown mark");
}

mv_code mv__inbox_viewer_flags(mv_db *db, const char *id, const char *uid, tally_flags *f,
                               mv_err *err) {
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_VIEWER_OF, &st, err, "ss", id, uid);
    *f = st ? mv__tally_flags_from_row(st, 0) : (tally_flags){0};
    mv_stmt_done(st);
    return rc;
}

/* Marks one message the caller already knows is visible to uid, after its row lock (m loaded
 * with lock = true): the viewer row, the conditional update, the tallies. *changed: whether the
 * state moved. */
static mv_code mark_one(mv_db *db, const char *tenant, const tally_message *m, const char *id,
                        const char *uid, mv_mark mark, int64_t now, bool *changed, mv_err *err) {
    tally_flags before, after;
    int64_t changes = 0;
    mv_code rc = mv__inbox_viewer_ensure(db, tenant, id, uid, now, err);
    if (rc == MV_OK) rc = mv__inbox_viewer_flags(db, id, uid, &before, err);
    if (rc == MV_OK) rc = apply_mark(db, id, uid, mark, now, &changes, err);
    *changed = rc == MV_OK && changes > 0;
    if (!*changed) return rc;
    if ((rc = mv__inbox_viewer_flags(db, id, uid, &after, err)) != MV_OK) return rc;
    return mv__tally_viewer_tx(db, tenant, m, uid, before, after, err);
}

static mv_code mark_tx(mv_db *db, void *ctx, mv_err *err) {
    mark_arg *a = ctx;
    int64_t now = mv__svc_now(a->svc);
    const char *tenant = mv__svc_tenant(a->user);
    json_decref(a->doc); /* a group-commit retry runs the callback again */
    a->doc = NULL;
    tally_message m;
    mv_code rc = mv__tally_message_load(db, tenant, a->id, true, &m, err);
    if (rc == MV_OK) rc = mv__doc_load(db, a->id, tenant, &a->doc, err);
    if (rc == MV_OK &&
        (!a->doc || (!mv_user_is_sender(a->user, a->doc) && !mv_user_is_receiver(a->user, a->doc))))
        rc = mv_err_set(err, MV_MESSAGE_NOT_FOUND, "message \"%s\" not found", a->id);
    bool changed = false;
    if (rc == MV_OK) rc = mark_one(db, tenant, &m, a->id, a->uid, a->mark, now, &changed, err);
    mv__tally_message_clear(&m);
    if (rc == MV_OK) rc = mv__inbox_viewer_attach(db, a->doc, a->uid, err);
    if (rc != MV_OK || !changed) return rc;
    return mv__change_add_tx(db, tenant, a->id, MV_CHANGE_VIEWER, a->uid, now, err);
}

/* A mark: its checks on the caller's thread, then one write queued on the group commit; the
 * committing thread ends it (inbox_internal.h). */
typedef struct mark_op {
    mark_arg a;
    mv__mark_done done;
    void *done_ctx;
    char uid[256];
} mark_op;

static void mark_written(mv_code rc, const mv_err *err, void *ctx) {
    mark_op *o = ctx;
    json_t *doc = o->a.doc; /* handed over: done's side owns it */
    if (rc != MV_OK) {
        json_decref(doc);
        doc = NULL;
    }
    o->done(o->done_ctx, rc, doc, err);
    free(o);
}

void mv__mark_begin(mv_service *svc, const char *id, const mv_user *user, mv_mark mark,
                    mv__mark_done done, void *done_ctx) {
    mv_err err = {0};
    mark_op *o = calloc(1, sizeof *o);
    mv_code rc = o ? mv__svc_require_user(user, o->uid, &err)
                   : mv_err_set(&err, MV_NO_MEMORY, "out of memory");
    if (rc == MV_OK && (unsigned)mark > MV_MARK_UNDISMISS)
        rc = mv_err_set(&err, MV_INVALID_ARGUMENT, "unknown mark");
    if (rc == MV_OK && !mv_valid_message_id(id))
        rc = mv_err_set(&err, MV_MESSAGE_NOT_FOUND, "message \"%s\" not found", id ? id : "");
    if (rc != MV_OK) {
        free(o);
        done(done_ctx, rc, NULL, &err);
        return;
    }
    o->a = (mark_arg){.svc = svc, .id = id, .uid = o->uid, .user = user, .mark = mark};
    o->done = done;
    o->done_ctx = done_ctx;
    mv__store_write_async(svc->o.store, mark_tx, &o->a, mark_written, o);
}

typedef struct mark_wait {
    mv__waiter w;
    mv_code rc;
    json_t *doc;
    mv_err *err;
} mark_wait;

static void mark_waited(void *ctx, mv_code rc, json_t *message, const mv_err *err) {
    mark_wait *m = ctx;
    m->rc = rc;
    m->doc = message;
    if (rc != MV_OK) mv_err_copy(m->err, err);
    mv__waiter_finish(&m->w);
}

mv_code mv_message_mark(mv_service *svc, const char *id, const mv_user *user, mv_mark mark,
                        json_t **message, mv_err *err) {
    if (message) *message = NULL;
    mark_wait m = {.err = err};
    mv__waiter_init(&m.w);
    mv__mark_begin(svc, id, user, mark, mark_waited, &m);
    mv__waiter_run(&m.w);
    if (message)
        *message = m.doc;
    else
        json_decref(m.doc);
    return m.rc;
}

/* ---- every message ---------------------------------------------------------------------- */

/* seen-all / read-all run in batches of MARK_BATCH messages, one transaction each, so the work
 * and the locks of one transaction stay bounded however many messages are unread. */
#define MARK_BATCH 200

typedef struct {
    mv_service *svc;
    const char *uid;
    const mv_user *user;
    mv_mark mark;
    const mv_inbox_filter *filter;
    int64_t before, updated, batch_changed;
} mark_all_arg;

static mv_code mark_batch_tx(mv_db *db, void *ctx, mv_err *err) {
    mark_all_arg *a = ctx;
    int64_t now = mv__svc_now(a->svc);
    const char *tenant = mv__svc_tenant(a->user);
    bool read = a->mark == MV_MARK_READ;
    mv_inbox_filter f = {.template_cd = a->filter ? a->filter->template_cd : NULL,
                         .type = a->filter ? a->filter->type : NULL,
                         .read = read ? MV_FLAG_FALSE : MV_FLAG_ANY,
                         .seen = read ? MV_FLAG_ANY : MV_FLAG_FALSE,
                         .dismissed = MV_FLAG_FALSE};
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, mv__message_mark_candidates_sql(), &st, err);
    if (rc != MV_OK) return rc;
    int idx = 1;
    mv_stmt_bind_text(st, idx++, a->uid); /* the viewer join */
    mv__visibility_bind(st, &idx, a->uid, a->user, false);
    mv__inbox_filter_bind(st, &idx, &f);
    mv_stmt_bind_int64(st, idx++, a->before);
    mv_stmt_bind_int64(st, idx++, a->before);
    mv_stmt_bind_int64(st, idx++, MARK_BATCH);
    char ids[MARK_BATCH][25];
    int n = 0, r = 0;
    while (n < MARK_BATCH && (r = mv_stmt_step(st, err)) == 1)
        mv_strlcpy(ids[n++], mv_stmt_text(st, 0), 25);
    mv_stmt_done(st);
    if (r < 0) return err ? err->code : MV_INTERNAL;
    a->batch_changed = 0;
    for (int i = 0; i < n && rc == MV_OK; i++) {
        tally_message m;
        bool changed = false;
        rc = mv__tally_message_load(db, tenant, ids[i], true, &m, err);
        if (rc == MV_OK && m.found && !m.archived)
            rc = mark_one(db, tenant, &m, ids[i], a->uid, a->mark, now, &changed, err);
        mv__tally_message_clear(&m);
        a->batch_changed += changed;
    }
    if (rc != MV_OK || a->batch_changed == 0) return rc;
    return mv__change_add_tx(db, tenant, "", MV_CHANGE_VIEWER, a->uid, now, err);
}

mv_code mv_message_mark_all(mv_service *svc, const mv_user *user, mv_mark mark,
                            const mv_inbox_filter *filter, int64_t before, int64_t *updated,
                            mv_err *err) {
    if (updated) *updated = 0;
    char uid[256];
    mv_code rc = mv__svc_require_user(user, uid, err);
    if (rc != MV_OK) return rc;
    if (mark != MV_MARK_SEEN && mark != MV_MARK_READ)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "only seen and read apply to every message");
    if (user->nroles > MV_MAX_ROLES)
        return mv_err_set(err, MV_INVALID_ARGUMENT, "at most %d roles per user", MV_MAX_ROLES);
    mark_all_arg a = {svc, uid, user, mark, filter, before < 0 ? -1 : before, 0, 0};
    do {
        rc = mv_store_write(svc->o.store, mark_batch_tx, &a, err);
        if (rc == MV_OK) a.updated += a.batch_changed;
    } while (rc == MV_OK && a.batch_changed > 0);
    if (updated) *updated = a.updated;
    return rc;
}
