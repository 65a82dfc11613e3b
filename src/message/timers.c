/* timers.c — what a message's timers do when they fire: expiry (reminders.c and escalation.c
 * register theirs here too).
 *
 * An expiry timer is scheduled in the transaction that inserts its message (document.c), at the
 * message's expiresAt. When it fires and the message is still active:
 * - with the template's expiry.actionCd, that action runs through the normal claim (claim.c) as
 *   system:expiry, in the timer's call (outside any transaction; a webhook handler waits on the
 *   service's outgoing-call loop, every expiry of a claim at once, holding no thread). The
 *   message claim is what makes it once: a second fire after a lost lease finds the message
 *   archived, or its own attempt to retry with the same attempt id (the same Idempotency-Key).
 * - without, the message is archived by system:expiry in the fire's own transaction, with its
 *   roles, counts and change-log row — the fire and the archive commit together.
 * Either way the expiry's sender notification is inserted in the fire's transaction, only when
 * the expiry archived the message (archivedBy system:expiry), so it is sent exactly once. A
 * message processing or retryable for a user's press is left to that attempt. */
#include <stdlib.h>
#include <string.h>

#include "message/inbox_internal.h"
#include "message/time_internal.h"
#include "message/timers.h"

static const char SQL_EXPIRY_STATE[] =
    "SELECT action_state, action_cd, action_claimed_by, template_cd FROM messages "
    "WHERE id = ? AND tenant_id = ?";
static const char SQL_EXPIRE_ARCHIVE[] =
    "UPDATE messages SET action_state = 'archived', archived = 1, archived_by = ?, "
    "archived_at = ?, updated_at = ? WHERE id = ? AND tenant_id = ? AND action_state = 'active'";
static const char SQL_EXPIRE_ROLES[] = "UPDATE message_roles SET archived = 1 WHERE message_id = ?";

mv_code mv__expiry_schedule_tx(mv_db *db, const char *tenant, const char *message_id,
                               int64_t expires_at, int64_t now, mv_err *err) {
    char id[MV__TIMER_ID_MAX];
    snprintf(id, sizeof id, "expiry:%s", message_id);
    return mv__timer_schedule(db, id, tenant, "expiry", message_id, expires_at, now, err);
}

/* ---- the call: the expiry's action ----------------------------------------------------------- */

typedef struct {
    const mv__timer *t;
    char state[16], action_cd[129], claimed_by[256], template_cd[129];
    bool found;
} expiry_state;

static mv_code state_fn(mv_db *db, void *ctx, mv_err *err) {
    expiry_state *s = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_EXPIRY_STATE, &st, err, "ss", s->t->ref, s->t->tenant);
    if (rc != MV_OK || !st) return rc;
    s->found = true;
    const char *v[4] = {mv_stmt_text(st, 0), mv_stmt_text(st, 1), mv_stmt_text(st, 2),
                        mv_stmt_text(st, 3)};
    mv_strlcpy(s->state, v[0] ? v[0] : "", sizeof s->state);
    mv_strlcpy(s->action_cd, v[1] ? v[1] : "", sizeof s->action_cd);
    mv_strlcpy(s->claimed_by, v[2] ? v[2] : "", sizeof s->claimed_by);
    mv_strlcpy(s->template_cd, v[3] ? v[3] : "", sizeof s->template_cd);
    mv_stmt_done(st);
    return MV_OK;
}

/* The action to run now: the expiry's, on an active message or on the expiry's own attempt that a
 * lost lease or a failure left (retried with its attempt id); NULL: nothing to run. */
static const char *action_to_run(const expiry_state *s, const mv_template *tpl) {
    const char *cd = tpl && tpl->expiry ? tpl->expiry->action_cd : NULL;
    if (!cd || !s->found) return NULL;
    if (strcmp(s->state, "active") == 0) return cd;
    bool ours = strcmp(s->claimed_by, MV_EXPIRY_PRINCIPAL) == 0 && strcmp(s->action_cd, cd) == 0;
    bool open = strcmp(s->state, "processing") == 0 || strcmp(s->state, "retryable") == 0;
    return ours && open ? cd : NULL;
}

/* What the action's outcome means for the timer: the store is gone, or the attempt runs elsewhere
 * (its lease brings the timer back); anything else is the attempt's own outcome (archived,
 * retryable, left for review), and the timer is done. */
static mv_code call_outcome(mv_code rc, const mv_err *e, mv_err *err) {
    return rc == MV_STORE_UNAVAILABLE || rc == MV_ACTION_CONFLICT ? mv_err_copy(err, e) : MV_OK;
}

/* One expiry action in flight: the request and what it points to live until it is finished. */
typedef struct {
    mv_service *svc;
    mv_user user;
    mv_action_request req;
    mv_action_pending *pending;
    char tenant[MV__TIMER_TENANT_MAX], ref[MV__TIMER_REF_MAX], action_cd[129];
} expiry_run;

/* Starts the expiry's action on the service's loop (a webhook handler waits there, holding no
 * thread); an action without a handler, or one that cannot wait on the loop, ends here. */
static mv_code expiry_start(void *ctx, const mv__timer *t, int64_t now, void (*wake)(void *),
                            void *wake_ctx, void **pending, mv_err *err) {
    (void)now;
    mv_service *svc = ctx;
    *pending = NULL;
    expiry_state s = {.t = t};
    mv_code rc = mv_store_read(svc->o.store, state_fn, &s, err);
    if (rc != MV_OK) return rc;
    mv_template *tpl = s.found ? mv_registry_find(svc->o.registry, s.template_cd) : NULL;
    const char *cd = action_to_run(&s, tpl);
    expiry_run *run = cd ? calloc(1, sizeof *run) : NULL;
    if (cd && !run) rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (run) {
        run->svc = svc;
        mv_strlcpy(run->tenant, t->tenant, sizeof run->tenant);
        mv_strlcpy(run->ref, t->ref, sizeof run->ref);
        mv_strlcpy(run->action_cd, cd, sizeof run->action_cd);
        run->user = (mv_user){.id = MV_EXPIRY_PRINCIPAL, .tenant = run->tenant};
        run->req = (mv_action_request){.message_id = run->ref,
                                       .action_cd = run->action_cd,
                                       .user = &run->user,
                                       .trigger = "expiry"};
        json_t *result = NULL;
        mv_err e = {0};
        rc = mv_action_start(svc, &run->req, wake, wake_ctx, &run->pending, &result, &e);
        json_decref(result);
        if (rc == MV_OK && run->pending) {
            *pending = run;
        } else {
            rc = call_outcome(rc, &e, err);
            free(run);
        }
    }
    mv_template_release(tpl);
    return rc;
}

static mv_code expiry_finish(void *ctx, void *pending, mv_err *err) {
    (void)ctx;
    expiry_run *run = pending;
    json_t *result = NULL;
    mv_err e = {0};
    mv_code rc = call_outcome(mv_action_finish(run->pending, &result, &e), &e, err);
    json_decref(result);
    free(run);
    return rc;
}

/* ---- the local effect: archive, notify ---------------------------------------------------------
 */

static mv_code archive_expired(mv_db *db, const mv__timer *t, const json_t *doc, int64_t now,
                               mv_err *err) {
    int64_t changes = 0;
    mv_code rc = mv_db_execf(db, SQL_EXPIRE_ARCHIVE, &changes, err, "siiss", MV_EXPIRY_PRINCIPAL,
                             now, now, t->ref, t->tenant);
    if (rc != MV_OK || changes == 0) return rc;
    if (json_array_size(json_object_get(doc, "toRoles")) &&
        (rc = mv_db_execf(db, SQL_EXPIRE_ROLES, NULL, err, "s", t->ref)) != MV_OK)
        return rc;
    if ((rc = mv__tally_archived_doc_tx(db, t->tenant, doc, err)) != MV_OK) return rc;
    return mv__change_add_tx(db, t->tenant, t->ref, MV_CHANGE_UPDATED, NULL, now, err);
}

static mv_code notify_expired(mv_service *svc, mv_db *db, const mv__timer *t,
                              const mv_expiry_def *e, const json_t *doc, int64_t now, mv_err *err) {
    json_t *n = NULL;
    mv_code rc = mv__sender_notification(svc, doc, e->notify_title, e->notify_short, e->notify_long,
                                         NULL, &n, err);
    if (rc == MV_OK && n) rc = mv__doc_insert(db, n, t->tenant, NULL, -1, err);
    if (rc == MV_OK && n) rc = mv__doc_enqueue_email(svc, db, n, err);
    if (rc == MV_OK && n)
        rc = mv__change_add_tx(db, t->tenant, mv_json_str(n, "id"), MV_CHANGE_CREATED, NULL, now,
                               err);
    json_decref(n);
    return rc;
}

static mv_code expiry_local(void *ctx, mv_db *db, const mv__timer *t, int64_t now, mv_err *err) {
    mv_service *svc = ctx;
    json_t *doc = NULL;
    mv_code rc = mv__doc_load(db, t->ref, t->tenant, &doc, err);
    if (rc != MV_OK || !doc) return rc;
    mv_template *tpl = mv_registry_find(svc->o.registry, mv_json_str(doc, "templateCd"));
    const mv_expiry_def *e = tpl ? tpl->expiry : NULL;
    bool archived_here = false;
    if (!e || !e->action_cd) {
        archived_here = strcmp(mv_json_str(doc, "actionState"), "active") == 0;
        if (archived_here) rc = archive_expired(db, t, doc, now, err);
    } else {
        const char *by = mv_json_str(doc, "archivedBy");
        archived_here = by && strcmp(by, MV_EXPIRY_PRINCIPAL) == 0;
    }
    if (rc == MV_OK && archived_here && e && e->has_sender_notification)
        rc = notify_expired(svc, db, t, e, doc, now, err);
    mv_template_release(tpl);
    json_decref(doc);
    return rc;
}

mv_code mv__service_register_timers(mv_service *svc, mv__timer_engine *engine, mv_err *err) {
    mv_code rc = mv__timer_engine_register_async(engine, "expiry", expiry_start, expiry_finish,
                                                 expiry_local, svc, err);
    if (rc == MV_OK) rc = mv__schedule_register(svc, engine, err);
    if (rc == MV_OK) rc = mv__snooze_register(svc, engine, err);
    if (rc == MV_OK) rc = mv__register_reminders(svc, engine, err);
    if (rc == MV_OK) rc = mv__digest_register(svc, engine, err);
    return rc == MV_OK ? mv__register_escalation(svc, engine, err) : rc;
}
