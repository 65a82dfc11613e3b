/* schedule.c — scheduled send: a message created with "sendAt" waits, seen only by its sender,
 * and becomes active at sendAt.
 *
 * The message is inserted at create as any other (its deliveries written to the outbox then, due
 * at sendAt) but stored hidden: action_state 'scheduled', archived 2 on the message and its role
 * rows, so no receiver's list or count reaches it (they read archived 0 or 1), the tallies do not
 * count it, and mv_user_is_receiver refuses it (rules.c): receivers get 404. Its `send` timer, id
 * "send:<message>", fires at sendAt and makes it active in one transaction with its tallies and
 * its message.created change-log row — so receivers' streams and counts move when it is sent, not
 * before. A cancel before sendAt stores it 'cancelled' (archived 3: in no list at all), cancels
 * the timer and skips its pending deliveries, all in one transaction. */
#include <string.h>

#include "message/inbox_internal.h"
#include "message/time_internal.h"
#include "message/timers.h"

static const char SQL_SEND[] =
    "UPDATE messages SET action_state = 'active', archived = 0, updated_at = ? "
    "WHERE id = ? AND tenant_id = ? AND action_state = 'scheduled'";
static const char SQL_SEND_ROLES[] =
    "UPDATE message_roles SET archived = 0 WHERE message_id = ? AND archived = 2";
static const char SQL_CANCEL[] =
    "UPDATE messages SET action_state = 'cancelled', archived = 3, archived_by = ?, "
    "archived_at = ?, updated_at = ?, deliver_at = NULL, deliver_data = NULL "
    "WHERE id = ? AND tenant_id = ? AND action_state = 'scheduled' "
    "AND send_at > ?";
static const char SQL_CANCEL_ROLES[] =
    "UPDATE message_roles SET archived = 3 WHERE message_id = ? AND archived = 2";
/* Its deliveries were written due at its sendAt: the (state, next_attempt_at) index finds them. */
static const char SQL_SKIP_DELIVERIES[] =
    "UPDATE outbox SET state = 'skipped', last_error = 'cancelled before sending', updated_at = ? "
    "WHERE state = 'pending' AND next_attempt_at = ? AND payload LIKE ?";

mv_code mv__schedule_read(const json_t *payload, int64_t now, int64_t expires_at, int64_t *send_at,
                          mv_err *err) {
    *send_at = 0;
    const json_t *v = json_object_get(payload, "sendAt");
    if (!v || json_is_null(v)) return MV_OK;
    if (!json_is_integer(v) || json_integer_value(v) <= now ||
        json_integer_value(v) > now + MV_MAX_DELAY_MS)
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "sendAt must be a time in milliseconds since the epoch, in the future "
                          "and at most 365 days ahead");
    if (expires_at && expires_at <= json_integer_value(v))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "expiresAt must be after sendAt");
    *send_at = json_integer_value(v);
    return MV_OK;
}

void mv__schedule_doc(json_t *doc, int64_t send_at, int64_t after_ms, bool body_expires) {
    json_object_set_new(doc, "sendAt", json_integer((json_int_t)send_at));
    json_object_set_new(doc, "actionState", json_string("scheduled"));
    /* the template's expiry counts from when the message is sent */
    if (!body_expires && after_ms)
        json_object_set_new(doc, "expiresAt", json_integer((json_int_t)(send_at + after_ms)));
}

static void timer_id(char out[MV__TIMER_ID_MAX], const char *message_id) {
    snprintf(out, MV__TIMER_ID_MAX, "send:%s", message_id);
}

mv_code mv__schedule_inserted_tx(mv_db *db, const char *tenant, const json_t *doc, mv_err *err) {
    char tid[MV__TIMER_ID_MAX];
    timer_id(tid, mv_json_str(doc, "id"));
    return mv__timer_schedule(db, tid, tenant, "send", mv_json_str(doc, "id"),
                              json_integer_value(json_object_get(doc, "sendAt")),
                              json_integer_value(json_object_get(doc, "createdAt")), err);
}

int64_t mv__schedule_due(mv_service *svc, const json_t *doc) {
    int64_t now = mv__svc_now(svc);
    const json_t *at = json_object_get(doc, "sendAt");
    return json_is_integer(at) && json_integer_value(at) > now ? json_integer_value(at) : now;
}

bool mv__schedule_unsent(const json_t *doc) {
    const char *s = mv_json_str(doc, "actionState");
    return s && (strcmp(s, "scheduled") == 0 || strcmp(s, "cancelled") == 0);
}

/* ---- the timer: send ------------------------------------------------------------------- */

/* The template's reminders and escalation count from the send, as they count from a create. */
static mv_code schedule_time_steps(mv_service *svc, mv_db *db, const mv__timer *t,
                                   const json_t *doc, int64_t now, mv_err *err) {
    mv_template *tpl = mv_registry_find(svc->o.registry, mv_json_str(doc, "templateCd"));
    mv_code rc =
        tpl ? mv__message_time_schedule_tx(db, t->tenant, tpl, t->ref, now, now, err) : MV_OK;
    mv_template_release(tpl);
    return rc;
}

static mv_code send_local(void *ctx, mv_db *db, const mv__timer *t, int64_t now, mv_err *err) {
    mv_service *svc = ctx;
    int64_t changes = 0;
    mv_code rc = mv_db_execf(db, SQL_SEND, &changes, err, "iss", now, t->ref, t->tenant);
    if (rc != MV_OK || changes == 0) return rc; /* cancelled, or sent by an earlier fire */
    json_t *doc = NULL;
    if ((rc = mv_db_execf(db, SQL_SEND_ROLES, NULL, err, "s", t->ref)) == MV_OK)
        rc = mv__doc_load(db, t->ref, t->tenant, &doc, err);
    if (rc == MV_OK && doc) rc = mv__tally_created_tx(db, t->tenant, doc, err);
    if (rc == MV_OK && doc) rc = schedule_time_steps(svc, db, t, doc, now, err);
    if (rc == MV_OK)
        rc = mv__change_add_tx(db, t->tenant, t->ref, MV_CHANGE_CREATED, NULL, now, err);
    json_decref(doc);
    return rc;
}

mv_code mv__schedule_register(mv_service *svc, mv__timer_engine *engine, mv_err *err) {
    return mv__timer_engine_register(engine, "send", NULL, send_local, svc, err);
}

/* ---- cancel ------------------------------------------------------------------------------ */

typedef struct {
    mv_service *svc;
    const char *id, *uid;
    const mv_user *user;
    json_t *doc;
} cancel_arg;

static mv_code skip_deliveries(mv_db *db, const char *id, int64_t send_at, int64_t now,
                               mv_err *err) {
    char like[64];
    snprintf(like, sizeof like, "%%\"messageId\":\"%s\"%%", id);
    return mv_db_execf(db, SQL_SKIP_DELIVERIES, NULL, err, "iis", now, send_at, like);
}

static mv_code cancel_tx(mv_db *db, void *ctx, mv_err *err) {
    cancel_arg *a = ctx;
    int64_t now = mv__svc_now(a->svc);
    const char *tenant = mv__svc_tenant(a->user);
    json_decref(a->doc); /* a group-commit retry runs the callback again */
    a->doc = NULL;
    mv_code rc = mv__doc_load(db, a->id, tenant, &a->doc, err);
    if (rc != MV_OK) return rc;
    if (!a->doc || !mv_user_is_sender(a->user, a->doc))
        return mv_err_set(err, MV_MESSAGE_NOT_FOUND, "message \"%s\" not found", a->id);
    const char *state = mv_json_str(a->doc, "actionState");
    if (state && strcmp(state, "cancelled") == 0) /* cancelled already: the same answer */
        return mv__inbox_viewer_attach(db, a->doc, a->uid, err);
    int64_t changes = 0, send_at = json_integer_value(json_object_get(a->doc, "sendAt"));
    rc = mv_db_execf(db, SQL_CANCEL, &changes, err, "siissi", a->uid, now, now, a->id, tenant, now);
    if (rc != MV_OK) return rc;
    if (changes == 0)
        return mv_err_set(err, MV_MESSAGE_ALREADY_SENT, "message \"%s\" was already sent", a->id);
    char tid[MV__TIMER_ID_MAX];
    timer_id(tid, a->id);
    if ((rc = mv_db_execf(db, SQL_CANCEL_ROLES, NULL, err, "s", a->id)) == MV_OK)
        rc = mv__timer_cancel(db, tid, now, NULL, err);
    if (rc == MV_OK) rc = skip_deliveries(db, a->id, send_at, now, err);
    json_decref(a->doc);
    a->doc = NULL;
    if (rc == MV_OK) rc = mv__doc_load(db, a->id, tenant, &a->doc, err);
    return rc == MV_OK && a->doc ? mv__inbox_viewer_attach(db, a->doc, a->uid, err) : rc;
}

mv_code mv_message_cancel(mv_service *svc, const char *id, const mv_user *user, json_t **message,
                          mv_err *err) {
    if (message) *message = NULL;
    char uid[256];
    mv_code rc = mv__svc_require_user(user, uid, err);
    if (rc != MV_OK) return rc;
    if (!mv_valid_message_id(id))
        return mv_err_set(err, MV_MESSAGE_NOT_FOUND, "message \"%s\" not found", id ? id : "");
    cancel_arg a = {.svc = svc, .id = id, .uid = uid, .user = user};
    rc = mv_store_write(svc->o.store, cancel_tx, &a, err);
    if (rc == MV_OK && message)
        *message = a.doc;
    else
        json_decref(a.doc);
    return rc;
}
