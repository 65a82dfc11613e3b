/* snooze.c — per-viewer snooze: a message leaves one receiver's inbox until a time, then returns.
 *
 * The state is message_viewers.snoozed_until (migration 18); the tallies count a snoozed message
 * as hidden, like a dismissed one (tally.c), so the counts follow without a second counter. Each
 * (message, viewer) snooze has one `snooze` timer, id "snooze:<message>:<sha256 of the viewer>"
 * (a viewer id may be longer than a timer's ref), ref the message: snoozing again re-arms it,
 * unsnoozing cancels it. When one fires it returns every viewer of that message whose snooze has
 * ended by then (a return is a conditional UPDATE, so a second fire, or another viewer's timer
 * that found it first, changes nothing). Every return writes that viewer's change-log row in the
 * same transaction: the stream hub sends that viewer message.updated and counts, nobody else. */
#include <stdlib.h>
#include <string.h>

#include "message/inbox_internal.h"
#include "message/timers.h"

static const char SQL_SNOOZE[] =
    "UPDATE message_viewers SET snoozed_until = ?, viewer_changed_at = ? "
    "WHERE message_id = ? AND viewer_id = ? AND (snoozed_until IS NULL OR snoozed_until <> ?)";
static const char SQL_RETURN[] =
    "UPDATE message_viewers SET snoozed_until = NULL, viewer_changed_at = ? "
    "WHERE message_id = ? AND viewer_id = ? AND snoozed_until IS NOT NULL AND snoozed_until <= ?";
static const char SQL_ENDED[] =
    "SELECT viewer_id FROM message_viewers WHERE message_id = ? AND viewer_tenant = ? "
    "AND snoozed_until IS NOT NULL AND snoozed_until <= ? ORDER BY viewer_id";

static void timer_id(char out[MV__TIMER_ID_MAX], const char *message_id, const char *uid) {
    char hex[65];
    mv_sha256_hex(uid, strlen(uid), hex);
    snprintf(out, MV__TIMER_ID_MAX, "snooze:%s:%s", message_id, hex);
}

/* Sets (until > 0) or ends (until = 0: snoozes ended by `upto`) uid's snooze of message id, m
 * locked: the update, the tallies, the change-log row. *changed: whether the state moved. */
static mv_code set_one(mv_db *db, const char *tenant, const tally_message *m, const char *id,
                       const char *uid, int64_t until, int64_t upto, int64_t now, bool *changed,
                       mv_err *err) {
    tally_flags before, after;
    int64_t changes = 0;
    mv_code rc = mv__inbox_viewer_ensure(db, tenant, id, uid, now, err);
    if (rc == MV_OK) rc = mv__inbox_viewer_flags(db, id, uid, &before, err);
    if (rc == MV_OK)
        rc = until ? mv_db_execf(db, SQL_SNOOZE, &changes, err, "iissi", until, now, id, uid, until)
                   : mv_db_execf(db, SQL_RETURN, &changes, err, "issi", now, id, uid, upto);
    *changed = rc == MV_OK && changes > 0;
    if (!*changed) return rc;
    if ((rc = mv__inbox_viewer_flags(db, id, uid, &after, err)) != MV_OK) return rc;
    if ((rc = mv__tally_viewer_tx(db, tenant, m, uid, before, after, err)) != MV_OK) return rc;
    return mv__change_add_tx(db, tenant, id, MV_CHANGE_VIEWER, uid, now, err);
}

/* ---- snooze / unsnooze ------------------------------------------------------------------- */

typedef struct {
    mv_service *svc;
    const char *id, *uid;
    const mv_user *user;
    int64_t until; /* 0: unsnooze */
    json_t *doc;
} snooze_arg;

static mv_code snooze_tx(mv_db *db, void *ctx, mv_err *err) {
    snooze_arg *a = ctx;
    int64_t now = mv__svc_now(a->svc);
    const char *tenant = mv__svc_tenant(a->user);
    json_decref(a->doc); /* a group-commit retry runs the callback again */
    a->doc = NULL;
    tally_message m;
    mv_code rc = mv__tally_message_load(db, tenant, a->id, true, &m, err);
    if (rc == MV_OK) rc = mv__doc_load(db, a->id, tenant, &a->doc, err);
    if (rc == MV_OK && (!a->doc || !mv_user_is_receiver(a->user, a->doc)))
        rc = mv_err_set(err, MV_MESSAGE_NOT_FOUND, "message \"%s\" not found", a->id);
    bool changed = false;
    if (rc == MV_OK)
        rc = set_one(db, tenant, &m, a->id, a->uid, a->until, INT64_MAX, now, &changed, err);
    mv__tally_message_clear(&m);
    char tid[MV__TIMER_ID_MAX];
    timer_id(tid, a->id, a->uid);
    if (rc == MV_OK && changed)
        rc = a->until ? mv__timer_schedule(db, tid, tenant, "snooze", a->id, a->until, now, err)
                      : mv__timer_cancel(db, tid, now, NULL, err);
    if (rc == MV_OK) rc = mv__inbox_viewer_attach(db, a->doc, a->uid, err);
    return rc;
}

static mv_code run(mv_service *svc, const char *id, const mv_user *user, int64_t until,
                   json_t **message, mv_err *err) {
    if (message) *message = NULL;
    char uid[256];
    mv_code rc = mv__svc_require_user(user, uid, err);
    if (rc != MV_OK) return rc;
    if (!mv_valid_message_id(id))
        return mv_err_set(err, MV_MESSAGE_NOT_FOUND, "message \"%s\" not found", id ? id : "");
    snooze_arg a = {.svc = svc, .id = id, .uid = uid, .user = user, .until = until};
    rc = mv_store_write(svc->o.store, snooze_tx, &a, err);
    if (rc == MV_OK && message)
        *message = a.doc;
    else
        json_decref(a.doc);
    return rc;
}

mv_code mv_message_snooze(mv_service *svc, const char *id, const mv_user *user, int64_t until,
                          json_t **message, mv_err *err) {
    if (message) *message = NULL;
    int64_t now = mv__svc_now(svc);
    if (until <= now || until > now + MV_MAX_DELAY_MS)
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "until must be a time in milliseconds since the epoch, in the future and "
                          "at most 365 days ahead");
    return run(svc, id, user, until, message, err);
}

mv_code mv_message_unsnooze(mv_service *svc, const char *id, const mv_user *user, json_t **message,
                            mv_err *err) {
    return run(svc, id, user, 0, message, err);
}

/* ---- the timer: snoozes that ended return ------------------------------------------------ */

static mv_code snooze_local(void *ctx, mv_db *db, const mv__timer *t, int64_t now, mv_err *err) {
    (void)ctx;
    tally_message m;
    mv_code rc = mv__tally_message_load(db, t->tenant, t->ref, true, &m, err);
    mv_stmt *st = NULL;
    if (rc == MV_OK && m.found) rc = mv_db_prepare(db, SQL_ENDED, &st, err);
    /* the viewers are collected first: no statement may run while this one is still stepping */
    char **who = NULL;
    size_t n = 0, cap = 0;
    if (st) {
        mv_stmt_bindf(st, "ssi", t->ref, t->tenant, now);
        int r;
        while ((r = mv_stmt_step(st, err)) == 1) {
            if (n == cap) {
                cap = cap ? cap * 2 : 4;
                char **nw = realloc(who, cap * sizeof *who);
                if (!nw) {
                    r = -1;
                    mv_err_set(err, MV_NO_MEMORY, "out of memory");
                    break;
                }
                who = nw;
            }
            who[n] = strdup(mv_stmt_text(st, 0) ? mv_stmt_text(st, 0) : "");
            if (who[n++] == NULL) rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
        }
        mv_stmt_done(st);
        if (r < 0 && rc == MV_OK) rc = err ? err->code : MV_INTERNAL;
    }
    for (size_t i = 0; i < n; i++) {
        bool changed;
        if (rc == MV_OK && who[i])
            rc = set_one(db, t->tenant, &m, t->ref, who[i], 0, now, now, &changed, err);
        free(who[i]);
    }
    free(who);
    mv__tally_message_clear(&m);
    return rc;
}

mv_code mv__snooze_register(mv_service *svc, mv__timer_engine *engine, mv_err *err) {
    return mv__timer_engine_register(engine, "snooze", NULL, snooze_local, svc, err);
}
