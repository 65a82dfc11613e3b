/* missive/message.h — the message service: create (idempotent), read, actions exactly once.
 *
 * A service is bound to one store and one template registry; two services never share state.
 * Messages are JSON documents in the shape of the HTTP API (docs/http-api.md, "Messages"): every
 * function that returns messages returns new jansson references the caller owns.
 *
 * Exactly-once actions: pressing an action claims the message (active → processing, with an
 * attempt id and a lease) in one conditional update; the handler runs outside any transaction;
 * success archives the message, inserts the sender notification and queues emails in one
 * transaction that only the claim's owner can commit. A failed handler leaves the message
 * retryable with the same attempt id, which external systems see as the Idempotency-Key. */
#ifndef MISSIVE_MESSAGE_H
#define MISSIVE_MESSAGE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "missive/base.h"
#include "missive/deliver.h"
#include "missive/durable.h"
#include "missive/store.h"
#include "missive/template.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mv_service mv_service;

/* ---- extension points --------------------------------------------------------------------- */

/* Payment provider (all three calls are idempotent on the far side). create_session receives an
 * idempotency key derived from the client request scope and item index (empty without a client
 * request id) and returns a malloc'd session id (NULL or "" counts as a failure). */
typedef struct mv_payment_provider {
    mv_code (*create_session)(void *ctx, const char *payer_id, const char *payment_cd,
                              const json_t *price_args, const char *idempotency_key,
                              char **session_id, mv_err *err);
    mv_code (*expire_session)(void *ctx, const char *session_id, mv_err *err);
    mv_code (*refund_payment)(void *ctx, const char *session_id, mv_err *err);
    void *ctx;
} mv_payment_provider;

/* Reported when expiring a payment session during compensation fails. */
typedef struct mv_payment_failure {
    const char *operation; /* "expire" */
    const char *session_id;
    const char *error;          /* the expire failure */
    const char *original_error; /* what made compensation necessary */
    const char *client_request_id, *client_request_owner_id, *template_cd; /* may be NULL */
} mv_payment_failure;

/* A prepare hook in C (a template's prepare may also be declarative or a webhook). Returns in
 * *items NULL/json null (no messages), one item object, or an array of items; each item may have
 * toUser, toRoles, templateData, payload, display, paymentCd, priceArgs, type, fromUser. */
typedef struct mv_prepare_input {
    const char *template_cd;
    const mv_user *user;
    const json_t *payload;
    const char *idempotency_key;
} mv_prepare_input;
typedef mv_code (*mv_prepare_fn)(void *ctx, const mv_prepare_input *in, json_t **items,
                                 mv_err *err);

/* An action handler in C. *result (may stay NULL = null) is a new reference. */
typedef struct mv_action_input {
    const json_t *message; /* the claimed message */
    const mv_action_def *action;
    const char *action_name; /* rendered */
    const mv_user *user;
    const char *attempt_id;
    const json_t *input; /* the request body, {} when none */
    mv_abort *abort;     /* fired when the claim's lease could not be extended: stop early */
    const char *trigger; /* "user" (NULL: a press), "link" (an action link), "expiry" */
} mv_action_input;
typedef mv_code (*mv_action_fn)(void *ctx, const mv_action_input *in, json_t **result, mv_err *err);

/* Runs an action whose template names a handler the message layer does not run itself (a saga);
 * the daemon supplies it. Same contract as mv_action_fn. */
typedef struct mv_handler_runner {
    mv_action_fn run;
    void *ctx;
} mv_handler_runner;

typedef struct mv_service_options {
    mv_store *store;                /* required, borrowed */
    mv_registry *registry;          /* required, borrowed */
    const mv_clock *clock;          /* NULL = real time */
    const char *const *admin_roles; /* roles given to messages whose prepare gives none */
    size_t nadmin_roles;
    int default_list_limit;             /* 0 → 50 */
    int max_list_limit;                 /* 0 → 100 */
    int64_t client_request_lease_ms;    /* 0 → 30000 */
    int64_t client_request_wait_ms;     /* < 0 → 0; 0 → 5000 unless wait_zero */
    bool client_request_wait_zero;      /* make the wait exactly 0 (one attempt) */
    int64_t client_request_poll_ms;     /* 0 → 200 */
    int64_t action_lease_ms;            /* 0 → 30000 */
    const mv_payment_provider *payment; /* NULL = no payments */
    void (*on_payment_compensation_failure)(void *ctx, const mv_payment_failure *ev);
    void *hook_ctx;
    const mv_webhook_config *webhook; /* prepare and handler webhooks; NULL = defaults, unsigned */
    /* Optional, borrowed: webhook action handlers (and payment handlers of the webhook provider)
     * wait on this loop instead of on a thread, their lease extended by its timer (see
     * mv_action_start), and so do creates started with mv_message_create_start. Must outlive the
     * service's last action and create. NULL: every call is made on the caller's thread. */
    mv_loop *loop;
    mv_handler_runner handlers; /* runs handlers of other kinds (none today) */
    mv_approvals *approvals;    /* actions with "approval"; NULL = such actions fail */
    mv_saga_engine *sagas;      /* {"saga": NAME} handlers; NULL = such actions fail */
    /* Looks up a saga definition by name (e.g. mv_saga_book_find). */
    const mv_saga_definition *(*find_saga)(void *ctx, const char *name);
    void *find_saga_ctx;
    bool email; /* queue emails in the outbox (see docs/operations.md, "Email") */
    const json_t *email_exclusions; /* array of titles (trimmed, case-insensitive) */
    /* Bounded work and memory (DESIGN "Security rules"): one message's payload plus rendered
     * content (beyond: MV_PAYLOAD_TOO_LARGE), and the JSON of one list page (a page ends early,
     * with a next cursor, rather than exceed it; it always holds at least one message). */
    int64_t max_message_bytes; /* 0 → MV_DEFAULT_MESSAGE_BYTES */
    int64_t max_page_bytes;    /* 0 → MV_DEFAULT_PAGE_BYTES */
    /* Warnings for operators and template authors (an action condition stopped at its work
     * bound: {"templateCd", "actionCd", "messageId", "error"}); called with hook_ctx. */
    void (*on_warning)(void *ctx, const char *what, const json_t *fields);
    /* Optional, borrowed: fired at shutdown; a {"saga": …} handler running on the loop then
     * starts no further step and its action fails with MV_DRAINING (the attempt retryable: the
     * next press continues the same saga). */
    mv_abort *saga_stop;
    /* Optional, borrowed (missive/reach.h): named channels and preference defaults. NULL: no
     * named channels; stored preferences still decide the email. */
    const struct mv_reach *reach;
} mv_service_options;

#define MV_DEFAULT_MESSAGE_BYTES 1048576
#define MV_DEFAULT_PAGE_BYTES 4194304

/* Validates options (limits: finite integers ≥ 1, default ≤ max — MV_INVALID_PAGINATION with the
 * reference's messages) and creates a service. Free with mv_service_free(). */
mv_code mv_service_new(const mv_service_options *opts, mv_service **out, mv_err *err);
void mv_service_free(mv_service *svc);
/* Changes max_message_bytes while the service runs (0 → MV_DEFAULT_MESSAGE_BYTES): creates that
 * already measured their messages keep the limit they saw. */
void mv_service_set_max_message_bytes(mv_service *svc, int64_t max_bytes);
/* The channels, preference defaults and link settings the service uses now (borrowed), and their
 * replacement while it runs: reach must outlive every request that may still hold the old one
 * (the daemon keeps replaced ones until it closes). */
const struct mv_reach *mv_service_reach(const mv_service *svc);
void mv_service_set_reach(mv_service *svc, const struct mv_reach *reach);

/* Registers a C prepare hook for a template (overrides its declarative prepare). */
void mv_service_set_prepare(mv_service *svc, const char *template_cd, mv_prepare_fn fn, void *ctx);
/* Registers a C handler for an action (overrides the template's handler). */
void mv_service_set_handler(mv_service *svc, const char *template_cd, const char *action_cd,
                            mv_action_fn fn, void *ctx);

/* A payment provider that POSTs {"op": "create"|"expire"|"refund", …} to url (signed, with an
 * Idempotency-Key). The returned provider copies url; wh stays borrowed. Free with
 * mv_payment_webhook_free(). */
mv_payment_provider *mv_payment_webhook_new(const char *url, const mv_webhook_config *wh);
void mv_payment_webhook_free(mv_payment_provider *p);

/* ---- create -------------------------------------------------------------------------------- */

typedef struct mv_create_request {
    const char *template_cd;
    const mv_user *user;
    const json_t *payload;           /* object; NULL = {} */
    const mv_user *payer;            /* NULL = user */
    const json_t *client_request_id; /* NULL = none; otherwise must be a string (normalised) */
} mv_create_request;

/* createMessage. *messages: a new JSON array of the created (or replayed) messages. *replayed
 * (may be NULL) is true when the answer is a replay of an earlier request. */
mv_code mv_message_create(mv_service *svc, const mv_create_request *req, json_t **messages,
                          bool *replayed, mv_err *err);

/* createMessage in rounds, for a server that must not hold a thread while a prepare webhook or
 * the webhook payment provider (mv_payment_webhook_new) answers: with the service's loop, the
 * reservation is taken here, then the prepare call, each paid item's session call and, after a
 * failure, each compensating expire wait on the loop, while the local work between them (and the
 * persist) runs in rounds on env->submit's threads. Same calls, keys, order, records and errors as
 * mv_message_create; a C prepare function or C payment provider is called in a round. When the
 * work went to the loop, *started is true, MV_OK is returned and env->done runs exactly once —
 * later, or before this returns — with what mv_message_create would have returned (messages: a
 * new reference, NULL on failure; a replay only for a template that calls nothing outside, whose
 * existing key is found after its write was queued). Otherwise (a replay, an error before any work,
 * no loop) *started is false and the answer is here. A call the loop abandons at shutdown fails
 * the create with MV_DRAINING (the key is left to its lease); an expire it abandons is made
 * again on a thread. req and what it points to must stay valid until env->done has run. */
typedef void (*mv_create_done)(void *ctx, mv_code rc, json_t *messages, const mv_err *err);
typedef struct mv_create_async {
    /* runs fn(arg) soon on a thread that may block, never on the loop's and never inline */
    void (*submit)(void *submit_ctx, void (*fn)(void *arg), void *arg);
    void *submit_ctx;
    mv_create_done done;
    void *done_ctx;
} mv_create_async;
mv_code mv_message_create_start(mv_service *svc, const mv_create_request *req,
                                const mv_create_async *env, bool *started, json_t **messages,
                                bool *replayed, mv_err *err);
/* True when a create of this template may call out on the service's loop (a prepare webhook, or
 * the webhook payment provider): worth mv_message_create_start. */
bool mv_message_create_calls_out(mv_service *svc, const char *template_cd);

/* Normalises a client request id: NULL → none (out[0] = 0); not a string →
 * "clientRequestId must be a string when provided"; trimmed empty → "…non-empty string after
 * trimming whitespace"; longer than 128 → "…at most 128 characters". out holds 129 bytes. */
mv_code mv_client_request_id_normalize(const json_t *value, char out[129], mv_err *err);

/* createNotification: a generic notification (templateCd "__generic-notification__").
 * params: {fromUser?, toUser?, toRoles?, receiverContent: {title, long, short?},
 * senderContent?, documents?, tenantId?}: tenantId (default "default") is the tenant the
 * notification belongs to. *message: the stored message. */
mv_code mv_notification_create(mv_service *svc, const json_t *params, json_t **message,
                               mv_err *err);

/* Deletes completed client-request reservations completed at or before completed_before (ms):
 * `missive gc`. *removed (may be NULL) receives the count. */
mv_code mv_requests_gc(mv_store *store, int64_t completed_before, int64_t *removed, mv_err *err);

/* Client-request reservations by state: counts[0] pending, [1] completed, [2] failed. */
mv_code mv_requests_stats(mv_store *store, int64_t counts[3], mv_err *err);

/* MV_OK when the service can serve: store reachable, its schema current, and a write commits. */
mv_code mv_service_health(mv_service *svc, mv_err *err);

/* ---- read ---------------------------------------------------------------------------------- */

typedef struct mv_list_request {
    const mv_user *user;
    const json_t *limit; /* NULL = default; must be a finite integer; clamped to [1, max] */
    const json_t *skip;  /* NULL = 0; must be a finite integer; negative → 0 */
    const char *cursor;  /* opaque keyset cursor from a previous page, NULL = first page */
    bool archived;       /* false: the inbox (active); true: archived messages */
    const struct mv_inbox_filter *filter; /* NULL = defaults (missive/inbox.h) */
    bool
        scheduled; /* true: the user's own messages not sent yet (sendAt ahead); archived ignored */
} mv_list_request;

/* *messages: new array; *next_cursor: malloc'd cursor or NULL on the last page. A page holds at
 * most the limit and at most max_page_bytes of JSON (at least one message). */
mv_code mv_message_list(mv_service *svc, const mv_list_request *req, json_t **messages,
                        char **next_cursor, mv_err *err);
/* Receives one message of a page (steals msg) and the length of its compact JSON; false stops
 * the listing (out of memory). */
typedef bool (*mv_message_sink)(void *ctx, json_t *msg, size_t json_bytes);
/* mv_message_list handing each message to sink as soon as it is read, instead of collecting the
 * page: a caller that writes each one out never holds a page twice. */
mv_code mv_message_list_each(mv_service *svc, const mv_list_request *req, mv_message_sink sink,
                             void *sink_ctx, char **next_cursor, mv_err *err);
/* Receives one message of a page as its compact JSON (the n bytes at json, valid until the next
 * message); false stops the listing (out of memory). */
typedef bool (*mv_message_text_sink)(void *ctx, const char *json, size_t n);
/* mv_message_list_each handing each message's JSON text — the bytes mv_json_write would write
 * for the document mv_message_list returns — written from the stored row without building it. */
mv_code mv_message_list_text(mv_service *svc, const mv_list_request *req, mv_message_text_sink sink,
                             void *sink_ctx, char **next_cursor, mv_err *err);
/* Active messages visible to the user. */
mv_code mv_message_count(mv_service *svc, const mv_user *user, int64_t *count, mv_err *err);
/* A message by id (active or archived). user NULL → no visibility check; otherwise
 * MV_MESSAGE_NOT_FOUND unless visible. */
mv_code mv_message_get(mv_service *svc, const char *id, const mv_user *user, json_t **message,
                       mv_err *err);
/* mv_message_get as the document's compact JSON text (*json malloc'd, NUL-terminated, *len its
 * length; len may be NULL): the same bytes mv_json_write writes for mv_message_get's document,
 * written from the stored row in one statement. */
mv_code mv_message_get_text(mv_service *svc, const char *id, const mv_user *user, char **json,
                            size_t *len, mv_err *err);

/* getActions: *out = {"uiTemplate": …, "actions": [...]}. Order: unknown message → not found;
 * no user → MV_INVALID_USER; not that usertype and not admin → not found; generic notification;
 * unregistered template → MV_TEMPLATE_NOT_FOUND; admin or archived → no actions. */
mv_code mv_message_actions(mv_service *svc, const char *id, mv_usertype usertype,
                           const mv_user *user, bool is_admin, json_t **out, mv_err *err);

/* ---- actions ------------------------------------------------------------------------------- */

typedef struct mv_action_request {
    const char *message_id;
    const char *template_cd; /* NULL = the message's own */
    const char *action_cd;
    const mv_user *user;
    const json_t *input;      /* request body; NULL = {} */
    const char *resume_token; /* X-Resume-Token, for actions that need approval */
    bool is_admin;            /* the caller is an admin: sees every message of its tenant */
    /* Optional, for mv_action_start: runs fn(arg) soon on a thread that may block, never inline
     * (a server's write pool). With it and a loop, a {"saga": …} handler whose definition is a
     * book's runs on the loop too (mv_saga_book_start_async): its rounds run here, wake follows
     * the saga's end. Without it the saga runs on the calling thread. */
    void (*submit)(void *submit_ctx, void (*fn)(void *arg), void *arg);
    void *submit_ctx;
    /* An action link (missive/reach.h): its use is recorded in the claim's transaction (a spent
     * link → MV_MESSAGE_ARCHIVED, nothing claimed), and the handler sees "trigger": "link". */
    const struct mv_link *link;
    /* NULL or "user": a press. "expiry": the message's expiry runs its expiry.actionCd as
     * user {"id": "system:expiry", "roles": []} — neither sender nor receiver, so the user's
     * relation to the message and the action's rules are not checked; the claim is the same. */
    const char *trigger;
} mv_action_request;

/* handleAction. *result: new reference (the handler's result, json null when none).
 * A message of another tenant, or one the user is neither sender nor receiver of (unless
 * is_admin), is MV_MESSAGE_NOT_FOUND whatever its state: no existence oracle.
 * Actions with "approval": without resume_token the call creates a pending approval and fails
 * with MV_APPROVAL_REQUIRED (err carries approval_id, resume_token, expires_at), claiming
 * nothing; with the token, consuming the approval and claiming happen in one transaction. A retry
 * of an attempt that was approved needs no new approval.
 * Saga handlers: the saga id is the attempt id. Completed → the steps' results; compensated →
 * the message is active again and the call fails with MV_ACTION_COMPENSATED; otherwise (manual
 * review, compensation pending) MV_ACTION_NEEDS_REVIEW with err->saga_id. */
mv_code mv_action_handle(mv_service *svc, const mv_action_request *req, json_t **result,
                         mv_err *err);

/* handleAction in two halves, for a server that must not hold a thread while a handler waits.
 * mv_action_start does everything up to the handler; when the handler is a webhook and the
 * service has a loop, it claims the attempt, starts the call on the loop (the claim's lease
 * extended by the loop's timer every action_lease_ms/3) and returns MV_OK with *pending set:
 * wake(wake_ctx) then runs exactly once, on the loop's thread (it must not block), when the call
 * has finished, after which the caller calls mv_action_finish — from a thread that may block —
 * to record the outcome (archive, or retryable) and get the answer. In every other case the whole
 * action runs now: *pending is NULL and the result is mv_action_handle's (wake never runs).
 * req and everything it points to must stay valid until mv_action_finish returns. */
typedef struct mv_action_pending mv_action_pending;
mv_code mv_action_start(mv_service *svc, const mv_action_request *req, void (*wake)(void *ctx),
                        void *wake_ctx, mv_action_pending **pending, json_t **result, mv_err *err);
/* Finishes a pending action (and frees it); results as mv_action_handle. A call abandoned by a
 * loop shutting down leaves the attempt retryable and fails with MV_DRAINING. */
mv_code mv_action_finish(mv_action_pending *pending, json_t **result, mv_err *err);

/* Extends the lease of a running attempt by action_lease_ms (for long handlers). Returns false
 * when the attempt no longer holds the message (its lease expired and another took over). */
bool mv_action_extend_lease(mv_service *svc, const char *message_id, const char *attempt_id);

#ifdef __cplusplus
}
#endif

#endif
