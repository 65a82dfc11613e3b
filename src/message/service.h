/* message/service.h — internals shared by the message service's files. */
#ifndef MISSIVE_MESSAGE_SERVICE_H
#define MISSIVE_MESSAGE_SERVICE_H

#include <pthread.h>
#include <stdatomic.h>

#include "missive/message.h"
#include "store/db.h"

#define MV_MAX_ROLES 256      /* roles per user, per message and adminRoles */
#define MV_LIST_ROLE_SLOTS 16 /* role branches of one list statement (read.c) */

/* ---- visibility.c: users with more roles than one list statement has slots ---- */

/* How many list statements a user with nroles runs (1 up to MV_LIST_ROLE_SLOTS). */
size_t mv__role_slices(size_t nroles);
/* The keys of a page's messages, as the list statement finds them: a plain growable array (a list
 * reads up to limit + 1 of them per slice; no JSON object per key). */
typedef struct mv__page_key {
    char id[25];
    int64_t created_at, size; /* size: the stored size the page query reports */
} mv__page_key;
typedef struct mv__page_keys {
    mv__page_key *v;
    size_t n, cap;
} mv__page_keys;
/* Appends one key; false when out of memory. Free v when done. */
bool mv__page_keys_add(mv__page_keys *k, const char *id, int64_t created_at, int64_t size);
/* Appends to out the newest n messages of slice `slice` (its MV_LIST_ROLE_SLOTS roles; slice 0
 * also the user's own sent and received ones) after the keyset position (after_created,
 * after_id), newest first. */
typedef mv_code (*mv__slice_fetch)(void *ctx, size_t slice, int64_t after_created,
                                   const char *after_id, int64_t n, mv__page_keys *out,
                                   mv_err *err);
/* The page of n messages after the position and `skip` more, merged over every slice and each
 * message once, appended to out newest first. */
mv_code mv__visible_page(size_t slices, mv__slice_fetch fetch, void *ctx, int64_t after_created,
                         const char *after_id, int64_t skip, int64_t n, mv__page_keys *out,
                         mv_err *err);

typedef struct override_entry {
    char *template_cd, *action_cd; /* action_cd NULL for prepare overrides */
    mv_prepare_fn prepare;
    mv_action_fn handler;
    void *ctx;
    struct override_entry *next;
} override_entry;

struct mv_service {
    mv_service_options o;
    char **admin_roles;
    size_t nadmin_roles;
    json_t *email_exclusions;
    pthread_mutex_t mu; /* guards overrides */
    override_entry *overrides;
    /* Pages being read at once may hold at most MV_PAGES_IN_FLIGHT pages' worth of stored bytes
     * (read.c): many clients listing large messages wait their turn instead of multiplying the
     * memory a page costs. */
    pthread_mutex_t page_mu;
    pthread_cond_t page_cv;
    int64_t page_bytes_in_flight;
    /* o.max_message_bytes as it is now: a reload changes it while creates run */
    _Atomic int64_t max_message_bytes;
    /* o.reach as it is now: a reload swaps the channels, preference defaults and link settings */
    _Atomic(const struct mv_reach *) reach;
    /* mv__service_change_log's store (guarded by mu): on PostgreSQL the service's own
     * one-connection store, opened at the first call and closed with the service */
    mv_store *change_log;
    bool own_change_log;
};

/* The store the live-update change log is read and numbered through, for the one reader that
 * reads it all day (the stream hub): on PostgreSQL a private one-connection store on the same
 * database, so that reader's transactions (the sequencer's among them) never take a connection a
 * request is about to use, nor wait for one under load; on SQLite (or when that store cannot
 * connect) the service's store. Owned by the service; never NULL. */
mv_store *mv__service_change_log(mv_service *svc);

#define MV_PAGES_IN_FLIGHT 2

int64_t mv__svc_now(const mv_service *svc);

/* Reports an action condition stopped at its work bound to the service's on_warning hook: the
 * warning a template's author sees in the log. w->ctx must be a condition_report. */
typedef struct condition_report {
    mv_service *svc;
    const char *template_cd, *message_id;
} condition_report;
void mv__svc_condition_stopped(void *ctx, const mv_action_def *action, const mv_err *why);

/* The tenant a user acts in: user->tenant, "default" when NULL or empty. Every message read,
 * list, count, action and create is scoped to it (DESIGN "Security rules"). */
const char *mv__svc_tenant(const mv_user *user);

/* The user's id (trimmed), roles and tenant within MV_MAX_ID_BYTES each and at most MV_MAX_ROLES
 * roles, else MV_INVALID_ARGUMENT naming the field ("user.roles[3]"). NULL passes. */
mv_code mv__svc_check_user(const mv_user *user, mv_err *err);
/* A message's roles (an array; non-strings are not roles): at most MV_MAX_ROLES, each within
 * MV_MAX_ID_BYTES; else MV_INVALID_ARGUMENT naming field ("toRoles[3]"). */
mv_code mv__svc_check_roles(const json_t *roles, const char *field, mv_err *err);
/* mv__svc_check_user, then the trimmed user id into buf, or MV_INVALID_USER when it has none. */
mv_code mv__svc_require_user(const mv_user *user, char buf[MV_MAX_ID_BYTES + 1], mv_err *err);

/* C overrides registered with mv_service_set_prepare / _set_handler (NULL when none). */
bool mv__svc_find_prepare(mv_service *svc, const char *template_cd, mv_prepare_fn *fn, void **ctx);
bool mv__svc_find_handler(mv_service *svc, const char *template_cd, const char *action_cd,
                          mv_action_fn *fn, void **ctx);

/* ---- document.c: the messages table <-> message JSON ---- */

/* The column list every message SELECT uses, in the order mv__doc_from_row reads. */
#define MESSAGE_COLUMNS                                                                            \
    "id, type, template_cd, from_user, to_user, to_roles, sender_content, receiver_content, "      \
    "documents, payment_session, payment_cd, payload, display, client_request_id, "                \
    "client_request_owner_id, client_request_item_index, action_state, action_cd, "                \
    "action_attempt_id, action_claimed_by, action_claimed_at, action_lease_expires_at, "           \
    "action_failure_message, action_approval_id, archived_by, archived_at, created_at, "           \
    "updated_at, "                                                                                 \
    "action_failure_code, action_failed_at, expires_at, escalated_at, send_at"
/* How many columns MESSAGE_COLUMNS has: a statement's own columns after them start here. */
#define MV__MESSAGE_NCOLS 33

/* Builds the message JSON from the current row (columns as MESSAGE_COLUMNS, from col 0). */
json_t *mv__doc_from_row(mv_stmt *st);
/* Appends the bytes mv_json_write writes for mv__doc_from_row(st) with "viewer" from the row of
 * viewer at viewer_col.. (seen, read, dismissed, reminded; viewer NULL: all null), without building
 * it. False when out of memory. */
typedef struct mv_strbuf mv_strbuf;
bool mv__doc_write_row(mv_strbuf *b, mv_stmt *st, mv_stmt *viewer, int viewer_col);
/* Only what visibility needs of the row: {"fromUser", "toUser", "toRoles", "actionState"} as
 * mv__doc_from_row. */
json_t *mv__doc_audience_from_row(mv_stmt *st);
/* That much of message id (any tenant), read without building the message: whether a user may
 * see it is mv_user_is_sender / _receiver on it. *who is the caller's; MV_MESSAGE_NOT_FOUND when
 * there is no such message. */
mv_code mv__message_audience(mv_service *svc, const char *id, json_t **who, mv_err *err);
/* Inserts a message document (as built by create/notification) and its role rows in tenant
 * (NULL = "default"). owner_id and item_index (< 0 = none) are the client request's, stored but
 * not part of the JSON shape. */
mv_code mv__doc_insert(mv_db *db, const json_t *doc, const char *tenant, const char *owner_id,
                       int64_t item_index, mv_err *err);
/* The same with its channel deliveries' plan (reach_internal.h: mv__doc_plan; NULL: none), due at
 * plan_at. */
mv_code mv__doc_insert_planned(mv_db *db, const json_t *doc, const char *tenant,
                               const char *owner_id, int64_t item_index, const char *plan,
                               int64_t plan_at, mv_err *err);
/* Loads one message by id inside a transaction; *doc NULL when absent or (tenant non-NULL) when
 * it belongs to another tenant. tenant NULL: any tenant (operators, internal). */
mv_code mv__doc_load(mv_db *db, const char *id, const char *tenant, json_t **doc, mv_err *err);
/* A fresh message document with every field at its default. */
json_t *mv__doc_new(const char *type, const char *template_cd, int64_t now);
/* The same, with null in the fields a create always sets (toRoles, contents, documents,
 * paymentCd, payload): for create.c, which sets them next. */
json_t *mv__doc_new_bare(const char *type, const char *template_cd, int64_t now);
/* Queues an email for doc when it qualifies (SEMANTICS §1.10), inside the transaction. */
mv_code mv__doc_enqueue_email(mv_service *svc, mv_db *db, const json_t *doc, mv_err *err);

/* read.c: the visibility queries (exposed for the query-plan test). */
const char *mv__message_list_sql(void);
const char *mv__message_count_sql(void);

/* webhooks.c: prepare hooks and action handlers over HTTP. */
mv_code mv__webhook_prepare(mv_service *svc, const char *url, const mv_prepare_input *in,
                            json_t **items, mv_err *err);
mv_code mv__webhook_handler(mv_service *svc, const char *url, const mv_action_input *in,
                            json_t **result, mv_err *err);

/* The webhook handler on the service's loop: done runs on the loop's thread (see
 * mv_webhook_post_async); feed what it gets to mv__webhook_handler_outcome. */
mv_code mv__webhook_handler_start(mv_service *svc, const char *url, const mv_action_input *in,
                                  mv_webhook_done done, void *ctx, mv_err *err);
/* A finished handler call as the action sees it (result or the handler's words); frees res. */
mv_code mv__webhook_handler_outcome(mv_code rc, mv_webhook_response *res, const mv_err *e,
                                    json_t **result, mv_err *err);

/* The prepare webhook on the service's loop (done on the loop's thread); feed what it gets to
 * mv__webhook_prepare_outcome, the classification mv__webhook_prepare uses (frees res). */
mv_code mv__webhook_prepare_start(mv_service *svc, const char *url, const mv_prepare_input *in,
                                  mv_webhook_done done, void *ctx, mv_err *err);
mv_code mv__webhook_prepare_outcome(const char *url, mv_code rc, mv_webhook_response *res,
                                    const mv_err *e, json_t **items, mv_err *err);

/* A call to the webhook payment provider (mv_payment_webhook_new): op "create" (payer,
 * payment_cd, price_args, key — empty: a fresh one) or "expire"/"refund" (session). */
typedef struct mv__payment_call {
    const char *op;
    const char *payer, *payment_cd;
    const json_t *price_args;
    const char *key;
    const char *session;
} mv__payment_call;
/* True when p is the webhook provider, whose calls can wait on a loop. */
bool mv__payment_is_webhook(const mv_payment_provider *p);
/* c on loop (done on the loop's thread); feed what it gets to mv__payment_webhook_outcome, the
 * classification the provider's own functions use (a create's session id in *session when
 * asked; frees res). */
mv_code mv__payment_webhook_start(const mv_payment_provider *p, mv_loop *loop,
                                  const mv__payment_call *c, mv_webhook_done done, void *ctx,
                                  mv_err *err);
mv_code mv__payment_webhook_outcome(mv_code rc, mv_webhook_response *res, const mv_err *e,
                                    char **session, mv_err *err);

/* The body every handler gets: {message, action: {actionCd, name}, user, input, attemptId}. */
json_t *mv__handler_request(const mv_action_input *in);

/* saga_action.c: runs a {"saga": NAME} handler (saga id = attempt id). */
mv_code mv__saga_action_run(mv_service *svc, const char *name, const mv_action_input *in,
                            json_t **result, mv_err *err);

/* The same handler on the service's loop (a book's definition and a loop: see
 * mv__saga_action_on_loop). done(ctx, rc, result, err) runs exactly once — on a submit thread, or
 * before this returns when nothing had to run (the saga had ended) — with what mv__saga_action_run
 * would have returned (result owned). MV_OK: done follows; anything else: it never runs. */
typedef void (*mv__saga_action_done)(void *ctx, mv_code rc, json_t *result, const mv_err *err);
bool mv__saga_action_on_loop(mv_service *svc, const char *name);
mv_code mv__saga_action_start(mv_service *svc, const char *name, const mv_action_input *in,
                              void (*submit)(void *, void (*)(void *), void *), void *submit_ctx,
                              mv__saga_action_done done, void *ctx, mv_err *err);

/* claim.c: the sender's notification about message — a new generic-notification document, NULL
 * when the message has no sender — its title, short and long (each may be NULL: the sender's
 * title, the long text, "") rendered from the message's payload with "result". */
mv_code mv__sender_notification(mv_service *svc, const json_t *message, const mv_tpl *title_tpl,
                                const mv_tpl *short_tpl, const mv_tpl *long_tpl,
                                const json_t *result, json_t **out, mv_err *err);

/* timers.c: a message's expiry timer, scheduled in its insert's transaction (document.c). */
mv_code mv__expiry_schedule_tx(mv_db *db, const char *tenant, const char *message_id,
                               int64_t expires_at, int64_t now, mv_err *err);

/* schedule.c: scheduled send. A create body's "sendAt" (absent/null → 0; else future and at most
 * MV_MAX_DELAY_MS ahead, and before expires_at when that is set); the document made scheduled
 * (sendAt, actionState, expiresAt counted from sendAt); after a scheduled document's insert
 * (document.c): its `send` timer; when its deliveries are due (now, or its sendAt). */
mv_code mv__schedule_read(const json_t *payload, int64_t now, int64_t expires_at, int64_t *send_at,
                          mv_err *err);
void mv__schedule_doc(json_t *doc, int64_t send_at, int64_t after_ms, bool body_expires);
mv_code mv__schedule_inserted_tx(mv_db *db, const char *tenant, const json_t *doc, mv_err *err);
int64_t mv__schedule_due(mv_service *svc, const json_t *doc);
/* Not sent yet (scheduled) or cancelled before: nobody but its sender sees it. */
bool mv__schedule_unsent(const json_t *doc);

/* A generic-notification document from createNotification params (not stored). */
json_t *mv__notification_doc(mv_service *svc, const json_t *params);

#endif
