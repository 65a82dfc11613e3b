/* claim.c — handleAction: the message action state machine and the exactly-once protocol.
 *
 *   active ──claim──▶ processing ──handler ok, archive txn (owner only)──▶ archived
 *                      │    ▲
 *      handler failed  ▼    │ re-claim: same actionCd, attempt id kept
 *                    retryable (or processing whose lease expired)
 *
 * Every arrow is one conditional UPDATE; its row count decides who won, so two presses, two
 * servers or a crashed server can never run the effect twice under one attempt. The handler runs
 * between transactions; external systems receive the attempt id as Idempotency-Key and the same
 * id on every retry, so they can deduplicate what missive cannot see. The archiving transaction
 * also inserts the sender notification and queues emails, so nothing is ever half-done. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/callctx.h"
#include "message/action_async.h"
#include "message/inbox_internal.h"
#include "message/reach_internal.h"
#include "message/service.h"
#include "store/write_async.h"

static const char SQL_CLAIM_ACTIVE[] =
    "UPDATE messages SET action_state = 'processing', action_cd = ?, action_attempt_id = ?, "
    "action_claimed_by = ?, action_claimed_at = ?, action_lease_expires_at = ?, "
    "action_failure_message = NULL, action_failure_code = NULL, action_failed_at = NULL, "
    "action_approval_id = ?, updated_at = ? "
    "WHERE id = ? AND action_state = 'active'";
static const char SQL_CLAIM_RETRY[] =
    "UPDATE messages SET action_state = 'processing', action_claimed_by = ?, "
    "action_claimed_at = ?, action_lease_expires_at = ?, action_failure_message = NULL, "
    "action_failure_code = NULL, action_failed_at = NULL, updated_at = ? "
    "WHERE id = ? AND action_cd = ? AND action_attempt_id IS NOT NULL "
    "AND (action_state = 'retryable' OR (action_state = 'processing' AND "
    "action_lease_expires_at <= ?))";
static const char SQL_ATTEMPT_OF[] =
    "SELECT action_attempt_id, action_state, action_cd, action_approval_id, "
    "action_lease_expires_at FROM messages WHERE id = ?";
static const char SQL_RESET_COMPENSATED[] =
    "UPDATE messages SET action_state = 'active', action_cd = NULL, action_attempt_id = NULL, "
    "action_claimed_by = NULL, action_claimed_at = NULL, action_lease_expires_at = NULL, "
    "action_failure_message = NULL, action_failure_code = NULL, action_failed_at = NULL, "
    "action_approval_id = NULL, updated_at = ? "
    "WHERE id = ? AND action_state = 'processing' AND action_attempt_id = ?";
static const char SQL_MARK_RETRYABLE[] =
    "UPDATE messages SET action_state = 'retryable', action_failure_message = ?, "
    "action_failure_code = ?, action_failed_at = ?, action_lease_expires_at = NULL, updated_at = ? "
    "WHERE id = ? AND action_state = 'processing' AND action_attempt_id = ?";
static const char SQL_ARCHIVE[] =
    "UPDATE messages SET action_state = 'archived', archived = 1, archived_by = ?, "
    "archived_at = ?, action_lease_expires_at = NULL, updated_at = ? "
    "WHERE id = ? AND action_state = 'processing' AND action_attempt_id = ?";
/* An action without a handler on an active message: claimed and archived by one statement, as
 * SQL_CLAIM_ACTIVE then SQL_ARCHIVE would leave it (the claim's lease ends with the archive). */
static const char SQL_CLAIM_ARCHIVE_ACTIVE[] =
    "UPDATE messages SET action_state = 'archived', action_cd = ?, action_attempt_id = ?, "
    "action_claimed_by = ?, action_claimed_at = ?, action_lease_expires_at = NULL, "
    "action_failure_message = NULL, action_failure_code = NULL, action_failed_at = NULL, "
    "action_approval_id = ?, archived = 1, archived_by = ?, archived_at = ?, updated_at = ? "
    "WHERE id = ? AND action_state = 'active'";
static const char SQL_ARCHIVE_ROLES[] =
    "UPDATE message_roles SET archived = 1 WHERE message_id = ?";
/* The message and its claim columns in one statement (MESSAGE_COLUMNS has them all). */
static const char SQL_LOAD_FOR_ACTION[] =
    "SELECT " MESSAGE_COLUMNS " FROM messages WHERE id = ? AND tenant_id = ?";
enum { /* the claim columns' places in MESSAGE_COLUMNS */
       COL_ACTION_STATE = 16,
       COL_ACTION_CD = 17,
       COL_ATTEMPT_ID = 18,
       COL_LEASE_EXPIRES_AT = 21,
       COL_APPROVAL_ID = 23
};
static const char SQL_EXTEND_LEASE[] =
    "UPDATE messages SET action_lease_expires_at = ? "
    "WHERE id = ? AND action_state = 'processing' AND action_attempt_id = ?";

/* The claim columns of a message (not part of its JSON shape). */
typedef struct attempt_info {
    char attempt_id[64], state[16], action_cd[129], approval_id[64];
    int64_t lease_expires_at;
} attempt_info;

typedef struct action_job {
    mv_service *svc;
    const mv_action_request *req;
    const char *user_id; /* uid */
    char uid[256];
    json_t *message;  /* as loaded */
    mv_template *tpl; /* a reference, released at the end */
    const mv_action_def *action;
    char attempt_id[64];
    char approval_id[64];
    bool new_attempt;
    json_t *result;
    json_t *notification;         /* sender notification document, when any */
    mv_abort abort;               /* fired by the lease keeper when the claim is lost */
    attempt_info stored;          /* the claim columns as loaded */
    bool consume_approval;        /* consume the resume token inside the claim transaction */
    mv_approval_request approval; /* what the approval is bound to */
    char digest[65];
    char effect_id[37]; /* the approval's effect id */
} action_job;

/* ---- claim ------------------------------------------------------------------------------- */

static mv_code read_attempt(mv_db *db, const char *id, attempt_info *a, mv_err *err) {
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_ATTEMPT_OF, &st, err, "s", id);
    memset(a, 0, sizeof *a);
    if (st) {
        mv_strlcpy(a->attempt_id, mv_stmt_text(st, 0), sizeof a->attempt_id);
        mv_strlcpy(a->state, mv_stmt_text(st, 1), sizeof a->state);
        mv_strlcpy(a->action_cd, mv_stmt_text(st, 2), sizeof a->action_cd);
        mv_strlcpy(a->approval_id, mv_stmt_text(st, 3), sizeof a->approval_id);
        a->lease_expires_at = mv_stmt_int64(st, 4);
    }
    mv_stmt_done(st);
    return rc;
}

/* Every action-state change is a change-log row in its own transaction (streams). */
static mv_code message_changed(mv_db *db, action_job *j, int64_t now, mv_err *err) {
    return mv__change_add_tx(db, mv__svc_tenant(j->req->user), j->req->message_id,
                             MV_CHANGE_UPDATED, NULL, now, err);
}

/* The claim of a retryable attempt, or of one whose lease expired (same attempt id). */
static mv_code claim_retry(mv_db *db, action_job *j, int64_t now, int64_t lease, bool log,
                           mv_err *err) {
    const char *id = j->req->message_id;
    int64_t changes = 0;
    mv_code rc = mv_db_execf(db, SQL_CLAIM_RETRY, &changes, err, "siiissi", j->user_id, now, lease,
                             now, id, j->action->action_cd, now);
    if (rc != MV_OK) return rc;
    attempt_info a;
    if ((rc = read_attempt(db, id, &a, err)) != MV_OK) return rc;
    mv_strlcpy(j->attempt_id, a.attempt_id, sizeof j->attempt_id);
    if (changes == 1) return log ? message_changed(db, j, now, err) : MV_OK;
    if (strcmp(a.state, "archived") == 0 || strcmp(a.state, "cancelled") == 0)
        return mv_err_set(err, MV_MESSAGE_ARCHIVED, "message \"%s\" is archived", id);
    return mv_err_set(err, MV_ACTION_CONFLICT, "message \"%s\" already has an action in progress",
                      id);
}

static mv_code consume_approval(mv_db *db, action_job *j, mv_err *err) {
    return j->consume_approval ? mv_approval_consume_tx(j->svc->o.approvals, db, &j->approval, err)
                               : MV_OK;
}

/* What the handler's request says pressed the action: an action link, the message's expiry, or
 * a user. */
static const char *action_trigger(const mv_action_request *req) {
    if (req->link) return "link";
    return req->trigger ? req->trigger : "user";
}

static mv_code claim_tx(mv_db *db, void *ctx, mv_err *err) {
    action_job *j = ctx;
    const char *id = j->req->message_id;
    int64_t now = mv__svc_now(j->svc), lease = now + j->svc->o.action_lease_ms;
    char attempt[37];
    mv_code rc = mv_id_uuid(attempt, err);
    if (rc != MV_OK || (rc = consume_approval(db, j, err)) != MV_OK) return rc;
    if (j->req->link && (rc = mv__link_consume_tx(db, j->req->link, now, err)) != MV_OK) return rc;
    int64_t changes = 0;
    rc = mv_db_execf(db, SQL_CLAIM_ACTIVE, &changes, err, "sssiisis", j->action->action_cd, attempt,
                     j->user_id, now, lease, j->approval_id[0] ? j->approval_id : NULL, now, id);
    if (rc != MV_OK) return rc;
    if (changes == 1) {
        mv_strlcpy(j->attempt_id, attempt, sizeof j->attempt_id);
        j->new_attempt = true;
        return message_changed(db, j, now, err);
    }
    return claim_retry(db, j, now, lease, true, err);
}

/* ---- handler ----------------------------------------------------------------------------- */

/* A payment handler's result: {paymentSession, operation}. */
static void payment_result(action_job *j) {
    j->result = json_pack("{s:s,s:s}", "paymentSession", mv_json_str(j->message, "paymentSession"),
                          "operation", j->action->handler_target);
}

static mv_code run_payment(action_job *j, mv_err *err) {
    const mv_payment_provider *p = j->svc->o.payment;
    const char *session = mv_json_str(j->message, "paymentSession");
    if (!p || !session) return MV_OK; /* nothing was charged: nothing to refund or expire */
    bool refund = strcmp(j->action->handler_target, "refund") == 0;
    mv_code rc = refund ? (p->refund_payment ? p->refund_payment(p->ctx, session, err) : MV_OK)
                        : (p->expire_session ? p->expire_session(p->ctx, session, err) : MV_OK);
    if (rc == MV_OK) payment_result(j);
    return rc;
}

static mv_code run_handler(action_job *j, mv_err *err) {
    mv_action_fn fn = NULL;
    void *ctx = NULL;
    char *name = NULL;
    json_t *empty = json_object();
    mv_code rc = mv_tpl_render(j->action->name, json_object_get(j->message, "payload"),
                               MV_ESCAPE_NONE, &name, NULL, err);
    if (rc != MV_OK) goto done;
    mv_action_input in = {j->message,    j->action,
                          name,          j->req->user,
                          j->attempt_id, j->req->input ? j->req->input : empty,
                          &j->abort,     action_trigger(j->req)};
    /* the calls the handler makes (a webhook, a saga's steps) are logged with these ids */
    mv__callctx_call("handler", j->req->message_id, j->attempt_id, NULL);
    if (mv__svc_find_handler(j->svc, j->tpl->template_cd, j->action->action_cd, &fn, &ctx)) {
        rc = fn(ctx, &in, &j->result, err);
    } else if (j->action->handler == MV_HANDLER_NONE) {
        rc = MV_OK;
    } else if (j->action->handler == MV_HANDLER_PAYMENT) {
        rc = run_payment(j, err);
    } else if (j->action->handler == MV_HANDLER_WEBHOOK) {
        rc = mv__webhook_handler(j->svc, j->action->handler_target, &in, &j->result, err);
    } else if (j->action->handler == MV_HANDLER_SAGA) {
        rc = mv__saga_action_run(j->svc, j->action->handler_target, &in, &j->result, err);
    } else if (j->svc->o.handlers.run) {
        rc = j->svc->o.handlers.run(j->svc->o.handlers.ctx, &in, &j->result, err);
    } else {
        rc = mv_err_set(err, MV_INTERNAL, "no runner for the handler of action \"%s\"",
                        j->action->action_cd);
    }
done:
    free(name);
    json_decref(empty);
    return rc;
}

/* While a handler runs, its claim's lease is extended every lease/3, so a slow but healthy
 * handler is never taken over; a crashed server stops extending and its lease ends. With a loop
 * the loop's timer thread does it (claim_run_archive, claim_and_start); without one, a single
 * keeper thread serves every handler running in the process: an entry per handler, the thread
 * started by the first and ending when none is left. */
typedef struct keep_entry {
    action_job *j;
    int64_t due; /* CLOCK_REALTIME ms of the next extension; INT64_MAX: none (lease lost) */
    bool busy;   /* being extended: not removed until done */
    struct keep_entry *next;
} keep_entry;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* an entry added or removed, an extension done */
    keep_entry *head;
    bool running;
} keeper = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, false};

static int64_t realtime_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t keep_period(const action_job *j) {
    int64_t period = j->svc->o.action_lease_ms / 3;
    return period > 0 ? period : 1;
}

static void *keep_leases(void *arg) {
    (void)arg;
    pthread_mutex_lock(&keeper.mu);
    while (keeper.head) {
        int64_t now = realtime_ms(), next = INT64_MAX;
        keep_entry *due = NULL;
        for (keep_entry *e = keeper.head; e; e = e->next)
            if (!e->busy && e->due <= now)
                due = e;
            else if (!e->busy && e->due < next)
                next = e->due;
        if (due) { /* the store write without the lock; the entry stays until it is done */
            due->busy = true;
            pthread_mutex_unlock(&keeper.mu);
            action_job *j = due->j;
            bool held = mv_action_extend_lease(j->svc, j->req->message_id, j->attempt_id);
            if (!held) mv_abort_fire(&j->abort, "the action's lease was lost");
            pthread_mutex_lock(&keeper.mu);
            due->due = held ? realtime_ms() + keep_period(j) : INT64_MAX;
            due->busy = false;
            pthread_cond_broadcast(&keeper.cv);
            continue;
        }
        if (next == INT64_MAX) {
            pthread_cond_wait(&keeper.cv, &keeper.mu);
            continue;
        }
        struct timespec ts = {.tv_sec = (time_t)(next / 1000),
                              .tv_nsec = (long)(next % 1000) * 1000000};
        pthread_cond_timedwait(&keeper.cv, &keeper.mu, &ts);
    }
    keeper.running = false;
    pthread_mutex_unlock(&keeper.mu);
    return NULL;
}

static bool keep_add(keep_entry *e, action_job *j) {
    *e = (keep_entry){.j = j, .due = realtime_ms() + keep_period(j)};
    pthread_mutex_lock(&keeper.mu);
    e->next = keeper.head;
    keeper.head = e;
    bool ok = true;
    if (!keeper.running) {
        pthread_attr_t attr;
        pthread_t t;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        ok = pthread_create(&t, &attr, keep_leases, NULL) == 0;
        pthread_attr_destroy(&attr);
        if (ok)
            keeper.running = true;
        else
            keeper.head = e->next;
    }
    pthread_cond_broadcast(&keeper.cv);
    pthread_mutex_unlock(&keeper.mu);
    return ok;
}

static void keep_remove(keep_entry *e) {
    pthread_mutex_lock(&keeper.mu);
    while (e->busy)
        pthread_cond_wait(&keeper.cv, &keeper.mu);
    for (keep_entry **p = &keeper.head; *p; p = &(*p)->next)
        if (*p == e) {
            *p = e->next;
            break;
        }
    pthread_cond_broadcast(&keeper.cv);
    pthread_mutex_unlock(&keeper.mu);
}

typedef struct {
    action_job *j;
    const char *failure;
    const char *code;
} retry_arg;

/* The handler's words as lastFailure shows them: never a URL or control characters. */
static mv_code mark_retryable_tx(mv_db *db, void *ctx, mv_err *err) {
    retry_arg *a = ctx;
    char words[256];
    mv_webhook_public_text(a->failure, words, sizeof words);
    int64_t now = mv__svc_now(a->j->svc), changes = 0;
    mv_code rc = mv_db_execf(db, SQL_MARK_RETRYABLE, &changes, err, "ssiiss", words,
                             a->code ? a->code : "handler_failed", now, now, a->j->req->message_id,
                             a->j->attempt_id);
    return rc == MV_OK && changes == 1 ? message_changed(db, a->j, now, err) : rc;
}

static mv_code reset_tx(mv_db *db, void *ctx, mv_err *err) {
    action_job *j = ctx;
    int64_t now = mv__svc_now(j->svc), changes = 0;
    mv_code rc = mv_db_execf(db, SQL_RESET_COMPENSATED, &changes, err, "iss", now,
                             j->req->message_id, j->attempt_id);
    return rc == MV_OK && changes == 1 ? message_changed(db, j, now, err) : rc;
}

/* ---- archive + notify --------------------------------------------------------------------- */

mv_code mv__sender_notification(mv_service *svc, const json_t *message, const mv_tpl *title_tpl,
                                const mv_tpl *short_tpl, const mv_tpl *long_tpl,
                                const json_t *result, json_t **out, mv_err *err) {
    *out = NULL;
    const char *from = mv_json_str(message, "fromUser");
    if (!from || !*from) return MV_OK;
    json_t *data = json_deep_copy(json_object_get(message, "payload"));
    if (!json_is_object(data)) {
        json_decref(data);
        data = json_object();
    }
    json_object_set(data, "result", result ? (json_t *)result : json_null());
    char *title = NULL, *shrt = NULL, *lng = NULL;
    mv_code rc = MV_OK;
    if (title_tpl) rc = mv_tpl_render(title_tpl, data, MV_ESCAPE_NONE, &title, NULL, err);
    if (rc == MV_OK && long_tpl)
        rc = mv_tpl_render(long_tpl, data, MV_ESCAPE_NONE, &lng, NULL, err);
    if (rc == MV_OK && short_tpl)
        rc = mv_tpl_render(short_tpl, data, MV_ESCAPE_NONE, &shrt, NULL, err);
    if (rc == MV_OK) {
        const char *sender_title = mv_json_str(json_object_get(message, "senderContent"), "title");
        const char *t = title && *title ? title : sender_title ? sender_title : "";
        const char *l = lng ? lng : "";
        const char *s = shrt && *shrt ? shrt : l;
        json_t *params = json_pack("{s:s,s:{s:s,s:s,s:s}}", "toUser", from, "receiverContent",
                                   "title", t, "long", l, "short", s);
        *out = mv__notification_doc(svc, params);
        json_decref(params);
    }
    free(title);
    free(shrt);
    free(lng);
    json_decref(data);
    return rc;
}

static mv_code build_notification(action_job *j, mv_err *err) {
    const mv_action_def *a = j->action;
    if (!a->has_sender_notification) return MV_OK;
    return mv__sender_notification(j->svc, j->message, a->notify_title, a->notify_short,
                                   a->notify_long, j->result, &j->notification, err);
}

/* What archiving adds to the message's own row change: its roles' rows, the tallies, the sender's
 * notification and its email, and the change log — one "updated" row for the message (claimed and
 * archived by one transaction: one change), one "created" for the notification. */
static mv_code archive_rest(mv_db *db, action_job *j, int64_t now, mv_err *err) {
    const char *id = j->req->message_id, *tenant = mv__svc_tenant(j->req->user);
    mv_code rc;
    /* role rows exist only for a message sent to roles (document.c), its addresses never change */
    if (json_array_size(json_object_get(j->message, "toRoles")) &&
        (rc = mv_db_execf_later(db, SQL_ARCHIVE_ROLES, err, "s", id)) != MV_OK)
        return rc;
    /* the message as loaded by this request: its addresses never change */
    if ((rc = mv__tally_archived_doc_tx(db, tenant, j->message, err)) != MV_OK) return rc;
    if (!j->notification) return message_changed(db, j, now, err);
    if ((rc = mv__doc_insert(db, j->notification, tenant, NULL, -1, err)) != MV_OK) return rc;
    if ((rc = mv__doc_deliver(j->svc, db, j->notification, tenant, NULL, NULL, NULL, err)) != MV_OK)
        return rc;
    return mv__change_add2_tx(db, tenant, id, MV_CHANGE_UPDATED, mv_json_str(j->notification, "id"),
                              MV_CHANGE_CREATED, now, err);
}

static mv_code archive_tx(mv_db *db, void *ctx, mv_err *err) {
    action_job *j = ctx;
    const char *id = j->req->message_id;
    int64_t now = mv__svc_now(j->svc), changes = 0;
    mv_code rc = mv_db_execf(db, SQL_ARCHIVE, &changes, err, "siiss", j->user_id, now, now, id,
                             j->attempt_id);
    if (rc != MV_OK) return rc;
    if (changes != 1)
        return mv_err_set(err, MV_ACTION_CONFLICT,
                          "message \"%s\" already has an action in progress", id);
    return archive_rest(db, j, now, err);
}

/* An action without a handler: claim, notification and archive in one transaction. An active
 * message is claimed and archived by one UPDATE; a retryable one (or one whose lease expired)
 * is claimed, then archived. */
static mv_code claim_and_archive_tx(mv_db *db, void *ctx, mv_err *err) {
    action_job *j = ctx;
    const char *id = j->req->message_id;
    int64_t now = mv__svc_now(j->svc), changes = 0;
    char attempt[37];
    mv_code rc = mv_id_uuid(attempt, err);
    if (rc != MV_OK || (rc = consume_approval(db, j, err)) != MV_OK) return rc;
    rc = mv_db_execf(db, SQL_CLAIM_ARCHIVE_ACTIVE, &changes, err, "sssissiis", j->action->action_cd,
                     attempt, j->user_id, now, j->approval_id[0] ? j->approval_id : NULL,
                     j->user_id, now, now, id);
    if (rc != MV_OK) return rc;
    if (changes == 1) {
        mv_strlcpy(j->attempt_id, attempt, sizeof j->attempt_id);
        j->new_attempt = true;
        if ((rc = build_notification(j, err)) != MV_OK) return rc;
        return archive_rest(db, j, now, err);
    }
    if ((rc = claim_retry(db, j, now, now + j->svc->o.action_lease_ms, false, err)) != MV_OK)
        return rc;
    if ((rc = build_notification(j, err)) != MV_OK) return rc;
    return archive_tx(db, j, err);
}

/* ---- handleAction ------------------------------------------------------------------------- */

static mv_code load_tx(mv_db *db, void *ctx, mv_err *err) {
    action_job *j = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_row(db, SQL_LOAD_FOR_ACTION, &st, err, "ss", j->req->message_id,
                           mv__svc_tenant(j->req->user));
    if (!st) return rc;
    j->message = mv__doc_from_row(st);
    attempt_info *a = &j->stored;
    memset(a, 0, sizeof *a);
    mv_strlcpy(a->attempt_id, mv_stmt_text(st, COL_ATTEMPT_ID), sizeof a->attempt_id);
    mv_strlcpy(a->state, mv_stmt_text(st, COL_ACTION_STATE), sizeof a->state);
    mv_strlcpy(a->action_cd, mv_stmt_text(st, COL_ACTION_CD), sizeof a->action_cd);
    mv_strlcpy(a->approval_id, mv_stmt_text(st, COL_APPROVAL_ID), sizeof a->approval_id);
    a->lease_expires_at = mv_stmt_int64(st, COL_LEASE_EXPIRES_AT);
    mv_stmt_done(st);
    return MV_OK;
}

/* The approval id inside a resume token "v1.<claims>.<mac>" (unverified: consume verifies). */
static void token_approval_id(const char *token, char out[64]) {
    out[0] = '\0';
    const char *a = strchr(token, '.'), *b = a ? strchr(a + 1, '.') : NULL;
    if (!b || b - a > 1024) return;
    unsigned char raw[800];
    size_t n;
    if (!mv_b64url_decode(a + 1, (size_t)(b - a - 1), raw, &n)) return;
    json_t *claims = json_loadb((const char *)raw, n, 0, NULL);
    mv_strlcpy(out, mv_json_str(claims, "id"), 64);
    json_decref(claims);
}

/* A retry of an approved attempt needs no new approval, but it stays bound to what was approved
 * (DESIGN "Approvals bind retries too"): only the approval's principal, with the approved input
 * (same digest of {actionCd, input}), may run it; anyone or anything else is refused. */
static mv_code approved_retry(action_job *j, mv_err *err) {
    mv_approval_record rec;
    mv_err e = {0};
    mv_code rc = mv_approval_get(j->svc->o.approvals, j->stored.approval_id,
                                 mv__svc_tenant(j->req->user), &rec, &e);
    if (rc == MV_APPROVAL_NOT_FOUND || (rc == MV_OK && (strcmp(rec.principal_id, j->user_id) != 0 ||
                                                        strcmp(rec.digest, j->digest) != 0)))
        return mv_err_set(err, MV_APPROVAL_BINDING,
                          "this attempt was approved for another principal or another input");
    return rc == MV_OK ? MV_OK : mv_err_copy(err, &e);
}

/* Approval gate before claiming: a fresh press of an action that needs approval creates the
 * pending approval (MV_APPROVAL_REQUIRED, nothing claimed); a press with a resume token binds
 * the consumption into the claim transaction; a retry of an approved attempt passes. */
static mv_code approval_gate(action_job *j, mv_err *err) {
    const mv_action_def *a = j->action;
    mv_service *svc = j->svc;
    if (!a->approval_capability) return MV_OK;
    if (!svc->o.approvals)
        return mv_err_set(err, MV_INTERNAL,
                          "action \"%s\" needs approvals, which are not configured", a->action_cd);
    const attempt_info *s = &j->stored;
    json_t *bound = j->req->input /* "O" takes its own reference: a fresh {} there would leak */
                        ? json_pack("{s:s,s:O}", "actionCd", a->action_cd, "input", j->req->input)
                        : json_pack("{s:s,s:{}}", "actionCd", a->action_cd, "input");
    mv_json_fingerprint(bound, j->digest);
    json_decref(bound);
    bool retry = strcmp(s->action_cd, a->action_cd) == 0 && s->approval_id[0] &&
                 (strcmp(s->state, "retryable") == 0 ||
                  (strcmp(s->state, "processing") == 0 && s->lease_expires_at <= mv__svc_now(svc)));
    if (retry) return approved_retry(j, err);
    mv_code rc = mv_id_uuid(j->effect_id, err);
    if (rc != MV_OK) return rc;
    j->approval =
        (mv_approval_request){.effect_id = j->effect_id,
                              .capability = a->approval_capability,
                              .target = j->req->message_id,
                              .digest = j->digest,
                              .tenant_id = j->req->user->tenant ? j->req->user->tenant : "default",
                              .principal_id = j->user_id,
                              .resume_token = j->req->resume_token,
                              .ttl_ms = a->approval_ttl_ms};
    if (!j->req->resume_token) {
        return mv_approval_authorize(svc->o.approvals, &j->approval, err);
    }
    token_approval_id(j->req->resume_token, j->approval_id);
    j->consume_approval = true;
    return MV_OK;
}

/* The expiry's own run of its action (timers.c): the system, not a user, presses. */
static bool is_expiry(const mv_action_request *req) {
    return req->trigger && strcmp(req->trigger, "expiry") == 0;
}

/* The checks of SEMANTICS' handleAction, in its order, before anything is claimed. j->tpl and
 * j->action are set on success (the template reference is released by the caller). */
static mv_code check_action(action_job *j, mv_err *err) {
    const mv_action_request *req = j->req;
    const char *stored_cd = mv_json_str(j->message, "templateCd");
    const char *state = mv_json_str(j->message, "actionState");
    bool system = is_expiry(req);
    /* Invisible is not found, before anything that depends on the message's state. */
    if (!req->is_admin && !system && !mv_user_is_sender(req->user, j->message) &&
        !mv_user_is_receiver(req->user, j->message))
        return mv_err_set(err, MV_MESSAGE_NOT_FOUND, "message \"%s\" not found", req->message_id);
    if (state && (strcmp(state, "archived") == 0 || strcmp(state, "cancelled") == 0))
        return mv_err_set(err, MV_MESSAGE_ARCHIVED, "message \"%s\" is archived", req->message_id);
    if (state && strcmp(state, "scheduled") == 0) /* its sender's (or an admin's) press */
        return mv_err_set(err, MV_ACTION_CONFLICT, "message \"%s\" is scheduled: not sent yet",
                          req->message_id);
    if (req->template_cd && strcmp(req->template_cd, stored_cd) != 0)
        return mv_err_set(err, MV_ACTION_TEMPLATE_MISMATCH,
                          "message template \"%s\" does not match requested template \"%s\"",
                          stored_cd, req->template_cd);
    if (!(j->tpl = mv_registry_find(j->svc->o.registry, stored_cd)))
        return mv_err_set(err, MV_TEMPLATE_NOT_FOUND, "template \"%s\" not found", stored_cd);
    const char *action_cd = req->action_cd ? req->action_cd : "";
    if (!(j->action = mv_template_action(j->tpl, action_cd)))
        return mv_err_set(err, MV_ACTION_NOT_FOUND, "action \"%s\" not found in template \"%s\"",
                          action_cd, stored_cd);
    condition_report report = {j->svc, stored_cd, req->message_id};
    mv_condition_warning w = {mv__svc_condition_stopped, &report};
    if (!system && !mv_action_allowed_warn(j->action, req->user, j->message, &w))
        return mv_err_set(err, MV_ACTION_NOT_ALLOWED, "not allowed");
    return MV_OK;
}

/* What a retryable attempt remembers as its failure (the message's lastFailure): the contract's
 * words for an error whose text may name a URL, a host or driver text, else the handler's own. */
static const char *failure_words(const mv_err *e) {
    if (!e) return "archive failed";
    const char *pub = mv_code_public_message(e->code);
    return pub ? pub : e->message;
}

/* After the handler: archive — or leave the attempt retryable (same attempt id next time),
 * active again when a saga compensated, or retryable for review when a saga is ambiguous. rc and
 * herr are the handler's outcome. */
static mv_code record_outcome(action_job *j, mv_code rc, mv_err *herr, mv_err *err) {
    mv_service *svc = j->svc;
    if (rc == MV_OK) rc = build_notification(j, herr);
    if (rc == MV_OK) {
        rc = mv_store_write(svc->o.store, archive_tx, j, err);
        if (rc != MV_OK && rc != MV_ACTION_CONFLICT) {
            retry_arg a = {j, failure_words(err), "store_failed"};
            mv_store_write(svc->o.store, mark_retryable_tx, &a, NULL);
        }
        return rc;
    }
    if (rc == MV_ACTION_COMPENSATED) { /* nothing happened: the message is active again */
        mv_store_write(svc->o.store, reset_tx, j, NULL);
        return mv_err_copy(err, herr);
    }
    /* a webhook handler's own words (already free of its URL) win over the contract's */
    retry_arg a = {j, herr->failure_code[0] ? herr->message : failure_words(herr),
                   herr->failure_code[0] ? herr->failure_code : mv_code_name(herr->code)};
    mv_store_write(svc->o.store, mark_retryable_tx, &a, NULL); /* else the lease expires */
    if (rc == MV_ACTION_NEEDS_REVIEW || rc == MV_DRAINING) {
        /* DRAINING: the call was abandoned by a server shutting down; the attempt is retryable
         * with the same id, and the client is told to go elsewhere (503) */
        mv_err_copy(err, herr);
    } else {
        mv_err_set(err, MV_ACTION_RETRYABLE,
                   "message \"%s\" action attempt \"%s\" failed before commit and may be retried",
                   j->req->message_id, j->attempt_id);
        if (err) mv_strlcpy(err->cause, herr->message, sizeof err->cause);
        rc = MV_ACTION_RETRYABLE;
    }
    if (err) mv_strlcpy(err->attempt_id, j->attempt_id, sizeof err->attempt_id);
    return rc;
}

/* A lease extension on the loop's timer thread; a lost lease aborts the handler. */
static bool extend_on_timer(void *ctx) {
    action_job *j = ctx;
    if (mv_action_extend_lease(j->svc, j->req->message_id, j->attempt_id)) return true;
    mv_abort_fire(&j->abort, "the action's lease was lost");
    return false;
}

/* A handler that runs outside the store, on this thread: claim, run it under a lease kept alive
 * by a keeper thread, then record its outcome. */
static mv_code claim_run_archive(action_job *j, mv_err *err) {
    mv_code rc = mv_store_write(j->svc->o.store, claim_tx, j, err);
    if (rc != MV_OK) return rc;
    mv_err herr = {0};
    keep_entry keep;
    /* the loop's timer thread keeps every lease; without a loop, the process's keeper thread */
    mv_loop_timer *timer =
        j->svc->o.loop ? mv_loop_every(j->svc->o.loop, keep_period(j), extend_on_timer, j) : NULL;
    bool keeping = !timer && keep_add(&keep, j);
    rc = run_handler(j, &herr);
    mv_loop_timer_cancel(timer);
    if (keeping) keep_remove(&keep);
    return record_outcome(j, rc, &herr, err);
}

/* ---- the handler on the loop -------------------------------------------------------------- */

/* A webhook handler waiting on the service's loop. The claim's lease is extended by a loop
 * timer instead of a keeper thread; the call's completion (loop thread) stops the timer, keeps
 * the outcome and wakes the caller, who records it (mv_action_finish). */
struct mv_action_pending {
    action_job j; /* first */
    mv_loop_timer *lease_timer;
    void (*wake)(void *ctx);
    void *wake_ctx;
    mv_code hrc; /* the handler's outcome */
    mv_err herr;
    mv__action_env env; /* mv__action_begin's */
    int phase;          /* what its next round does */
    char traceparent[64];
};

static void handler_done(void *ctx, mv_code rc, mv_webhook_response *res, const mv_err *e) {
    mv_action_pending *p = ctx;
    p->hrc = mv__webhook_handler_outcome(rc, res, e, &p->j.result, &p->herr);
    /* the lease timer is cancelled by mv_action_finish, not here: a cancel waits for an extension
     * in progress (a store write), which the loop's thread must never do */
    p->wake(p->wake_ctx);
}

/* A payment handler's call (the webhook provider's refund or expire) finished on the loop. */
static void payment_done(void *ctx, mv_code rc, mv_webhook_response *res, const mv_err *e) {
    mv_action_pending *p = ctx;
    p->hrc = mv__payment_webhook_outcome(rc, res, e, NULL, &p->herr);
    if (p->hrc == MV_OK) payment_result(&p->j);
    p->wake(p->wake_ctx);
}

/* A saga handler's end (on a submit thread, or at once when nothing ran): keep the outcome and
 * wake the caller, as handler_done does for a webhook. */
static void saga_handler_done(void *ctx, mv_code rc, json_t *result, const mv_err *e) {
    mv_action_pending *p = ctx;
    p->hrc = rc;
    p->j.result = result;
    mv_err_copy(&p->herr, e);
    p->wake(p->wake_ctx);
}

/* Whether this action's handler is a webhook, a call to the webhook payment provider for the
 * message's session, or a book's saga with a submit function, that can wait on the loop. */
static bool runs_on_loop(action_job *j) {
    mv_action_fn custom;
    void *custom_ctx;
    bool kind =
        j->action->handler == MV_HANDLER_WEBHOOK ||
        (j->action->handler == MV_HANDLER_PAYMENT && mv__payment_is_webhook(j->svc->o.payment) &&
         mv_json_str(j->message, "paymentSession")) ||
        (j->action->handler == MV_HANDLER_SAGA && j->req->submit &&
         mv__saga_action_on_loop(j->svc, j->action->handler_target));
    return j->svc->o.loop && kind &&
           !mv__svc_find_handler(j->svc, j->tpl->template_cd, j->action->action_cd, &custom,
                                 &custom_ctx);
}

/* Claims and starts the call. MV_OK: the call is on the loop. Anything else: the action is
 * over (err set; a claim that succeeded has had its outcome recorded). */
static mv_code claim_and_start(mv_action_pending *p, mv_err *err) {
    action_job *j = &p->j;
    mv_code rc = mv_store_write(j->svc->o.store, claim_tx, j, err);
    if (rc != MV_OK) return rc;
    char *name = NULL;
    json_t *empty = json_object();
    rc = mv_tpl_render(j->action->name, json_object_get(j->message, "payload"), MV_ESCAPE_NONE,
                       &name, NULL, &p->herr);
    if (rc == MV_OK) {
        mv_action_input in = {j->message,    j->action,
                              name,          j->req->user,
                              j->attempt_id, j->req->input ? j->req->input : empty,
                              &j->abort,     action_trigger(j->req)};
        int64_t period = j->svc->o.action_lease_ms / 3;
        p->lease_timer = mv_loop_every(j->svc->o.loop, period > 0 ? period : 1, extend_on_timer, j);
        if (!p->lease_timer) rc = mv_err_set(&p->herr, MV_DRAINING, "the server is shutting down");
        if (rc == MV_OK && j->action->handler == MV_HANDLER_SAGA) {
            mv__callctx_call("handler", j->req->message_id, j->attempt_id, NULL);
            rc = mv__saga_action_start(j->svc, j->action->handler_target, &in, j->req->submit,
                                       j->req->submit_ctx, saga_handler_done, p, &p->herr);
        } else if (rc == MV_OK && j->action->handler == MV_HANDLER_PAYMENT) {
            mv__callctx_call("handler", j->req->message_id, j->attempt_id, NULL);
            mv__payment_call c = {.op = strcmp(j->action->handler_target, "refund") == 0 ? "refund"
                                                                                         : "expire",
                                  .session = mv_json_str(j->message, "paymentSession")};
            rc = mv__payment_webhook_start(j->svc->o.payment, j->svc->o.loop, &c, payment_done, p,
                                           &p->herr);
        } else if (rc == MV_OK) {
            rc = mv__webhook_handler_start(j->svc, j->action->handler_target, &in, handler_done, p,
                                           &p->herr);
        }
        if (rc != MV_OK) {
            mv_loop_timer_cancel(p->lease_timer);
            p->lease_timer = NULL;
        }
    }
    free(name);
    json_decref(empty);
    if (rc != MV_OK) return record_outcome(j, rc, &p->herr, err);
    return MV_OK;
}

static void pending_free(mv_action_pending *p) {
    json_decref(p->j.result);
    json_decref(p->j.notification);
    json_decref(p->j.message);
    mv_template_release(p->j.tpl);
    free(p);
}

/* The press's message, read and checked: the user, the id, the message, the action's rules. */
static mv_code action_load(action_job *j, mv_err *err) {
    const mv_action_request *req = j->req;
    mv_code rc = mv__svc_require_user(req->user, j->uid, err);
    if (rc != MV_OK) return rc;
    if (!mv_valid_message_id(req->message_id))
        return mv_err_set(err, MV_MESSAGE_NOT_FOUND, "message \"%s\" not found",
                          req->message_id ? req->message_id : "");
    if ((rc = mv_store_read(j->svc->o.store, load_tx, j, err)) != MV_OK) return rc;
    if (!j->message)
        return mv_err_set(err, MV_MESSAGE_NOT_FOUND, "message \"%s\" not found", req->message_id);
    return check_action(j, err);
}

/* Nothing runs outside: claim, notify and archive in one transaction. */
static bool inline_only(action_job *j) {
    mv_action_fn custom;
    void *custom_ctx;
    return j->action->handler == MV_HANDLER_NONE &&
           !mv__svc_find_handler(j->svc, j->tpl->template_cd, j->action->action_cd, &custom,
                                 &custom_ctx);
}

/* The rest of mv_action_start once the message is read and the checks passed (p holds both):
 * the approval gate, then the claim and whatever the handler needs. Frees p unless pending. */
static mv_code start_checked(mv_action_pending *p, void (*wake)(void *ctx), void *wake_ctx,
                             mv_action_pending **pending, json_t **result, mv_err *err) {
    action_job *j = &p->j;
    mv_service *svc = j->svc;
    p->wake = wake;
    p->wake_ctx = wake_ctx;
    mv_code rc = approval_gate(j, err);
    if (rc != MV_OK) goto done;
    if (inline_only(j)) {
        rc = mv_store_write(svc->o.store, claim_and_archive_tx, j, err);
    } else if (wake && runs_on_loop(j)) {
        rc = claim_and_start(p, err);
        if (rc == MV_OK) {
            *pending = p;
            return MV_OK;
        }
    } else {
        rc = claim_run_archive(j, err);
    }
done:
    if (rc == MV_OK) *result = j->result ? json_incref(j->result) : json_null();
    pending_free(p);
    return rc;
}

mv_code mv_action_start(mv_service *svc, const mv_action_request *req, void (*wake)(void *ctx),
                        void *wake_ctx, mv_action_pending **pending, json_t **result, mv_err *err) {
    *result = NULL;
    *pending = NULL;
    mv_action_pending *p = calloc(1, sizeof *p);
    if (!p) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    p->j.svc = svc;
    p->j.req = req;
    p->j.user_id = p->j.uid;
    mv_code rc = action_load(&p->j, err);
    if (rc == MV_OK) return start_checked(p, wake, wake_ctx, pending, result, err);
    pending_free(p);
    return rc;
}

mv_code mv_action_finish(mv_action_pending *p, json_t **result, mv_err *err) {
    *result = NULL;
    mv_loop_timer_cancel(p->lease_timer); /* the claim is ours until its outcome is recorded */
    p->lease_timer = NULL;
    mv_code rc = record_outcome(&p->j, p->hrc, &p->herr, err);
    if (rc == MV_OK) *result = p->j.result ? json_incref(p->j.result) : json_null();
    pending_free(p);
    return rc;
}

/* Extends the lease of a running attempt (long handlers); false when the attempt lost it. */
typedef struct {
    mv_service *svc;
    const char *id, *attempt;
    int64_t changes;
} extend_arg;

static mv_code extend_tx(mv_db *db, void *ctx, mv_err *err) {
    extend_arg *a = ctx;
    return mv_db_execf(db, SQL_EXTEND_LEASE, &a->changes, err, "iss",
                       mv__svc_now(a->svc) + a->svc->o.action_lease_ms, a->id, a->attempt);
}

bool mv_action_extend_lease(mv_service *svc, const char *message_id, const char *attempt_id) {
    extend_arg a = {svc, message_id, attempt_id, 0};
    return mv_store_write(svc->o.store, extend_tx, &a, NULL) == MV_OK && a.changes == 1;
}

/* ---- the one action: mv__action_begin (action_async.h) -------------------------------------
 * The caller's thread (the daemon's I/O thread) reads and checks the press when the store reads
 * locally, and an action with nothing to call or approve goes no further than its write, queued
 * on the group commit: the committing thread ends it. Everything else is rounds on env.submit's
 * threads: the read (a remote store), the approval gate, the claim; a handler that waits on the
 * loop wakes a last round, which records its outcome; a C handler runs in its round. */

enum { AP_READ, AP_GO, AP_FINISH };

static void action_end(mv_action_pending *p, mv_code rc, const mv_err *err) {
    json_t *result = rc == MV_OK ? (p->j.result ? json_incref(p->j.result) : json_null()) : NULL;
    p->env.done(p->env.done_ctx, rc, result, err);
    pending_free(p);
}

/* On the committing thread, once the batch holding the claim-and-archive committed. */
static void action_written(mv_code rc, const mv_err *err, void *ctx) { action_end(ctx, rc, err); }

static void action_round(void *arg);

/* The handler's outcome is in (on the loop's thread, or a saga's last round): record it in a
 * round. */
static void action_woken(void *ctx) {
    mv_action_pending *p = ctx;
    p->phase = AP_FINISH;
    p->env.submit(p->env.submit_ctx, action_round, p);
}

/* A round: everything after the read up to a call on the loop, or the outcome of that call. */
static void action_step(mv_action_pending *p) {
    action_job *j = &p->j;
    mv_store *store = j->svc->o.store;
    mv_err err = {0};
    mv_code rc = MV_OK;
    if (p->phase == AP_FINISH) {
        mv_loop_timer_cancel(p->lease_timer); /* the claim is ours until its outcome is recorded */
        p->lease_timer = NULL;
        action_end(p, record_outcome(j, p->hrc, &p->herr, &err), &err);
        return;
    }
    if (p->phase == AP_READ) rc = action_load(j, &err);
    if (rc == MV_OK) rc = approval_gate(j, &err);
    if (rc == MV_OK && inline_only(j)) {
        rc = mv_store_write(store, claim_and_archive_tx, j, &err);
    } else if (rc == MV_OK && runs_on_loop(j)) {
        p->wake = action_woken;
        p->wake_ctx = p;
        if ((rc = claim_and_start(p, &err)) == MV_OK) return; /* p is action_woken's now */
    } else if (rc == MV_OK) {
        rc = claim_run_archive(j, &err);
    }
    action_end(p, rc, &err);
}

static void action_round(void *arg) {
    mv_action_pending *p = arg;
    mv_callctx saved = *mv__callctx(); /* a blocking caller's own thread keeps its context */
    mv_strlcpy(mv__callctx()->traceparent, p->traceparent, sizeof mv__callctx()->traceparent);
    action_step(p);
    *mv__callctx() = saved;
}

void mv__action_begin(mv_service *svc, const mv_action_request *req, const mv__action_env *env) {
    mv_err err = {0};
    mv_action_pending *p = calloc(1, sizeof *p);
    if (!p) {
        mv_err_set(&err, MV_NO_MEMORY, "out of memory");
        env->done(env->done_ctx, MV_NO_MEMORY, NULL, &err);
        return;
    }
    p->env = *env;
    p->j.svc = svc;
    p->j.req = req;
    p->j.user_id = p->j.uid;
    mv_strlcpy(p->traceparent, mv__callctx()->traceparent, sizeof p->traceparent);
    p->phase = AP_READ;
    if (env->first_here || mv__store_reads_locally(svc->o.store)) { /* reads here */
        mv_code rc = action_load(&p->j, &err);
        if (rc != MV_OK) {
            action_end(p, rc, &err);
            return;
        }
        p->phase = AP_GO;
        if (inline_only(&p->j) && !p->j.action->approval_capability) {
            mv__store_write_async(svc->o.store, claim_and_archive_tx, &p->j, action_written, p);
            return;
        }
    }
    if (env->first_here)
        action_round(p);
    else
        env->submit(env->submit_ctx, action_round, p);
}
