/* missive/deliver.h — talking to the outside world: signed webhooks, SMTP, the recipient
 * directory, and the transactional outbox with its delivery worker.
 *
 * Every call here may block on the network, so none of it may run inside a store transaction
 * callback — except mv_outbox_add_tx(), which only writes a row and is meant to be called inside
 * the caller's write transaction (the row commits or rolls back with the caller's change).
 * Delivery is at-least-once; the far side deduplicates with the row's stable key
 * (`Idempotency-Key` for webhooks, `Message-ID` for emails). */
#ifndef MISSIVE_DELIVER_H
#define MISSIVE_DELIVER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "missive/base.h"
#include "missive/error.h"
#include "missive/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- webhooks ---------------------------------------------------------------------------- */

/* One finished outgoing call, as the optional mv_webhook_config.on_call observer sees it (for
 * logs and metrics). Strings are borrowed for the duration of the callback; ids are "" when the
 * call context (base/callctx.h) has none. */
typedef struct mv_webhook_call_info {
    const char *kind;   /* "handler", "prepare", "payment", "saga_step", "saga_compensation",
                           "outbox", "email", "directory", or "webhook" when unlabelled */
    const char *method; /* "POST" or "GET" */
    const char *url;    /* without credentials, query string or fragment */
    long status;        /* 0 when no answer came */
    int outcome;        /* mv_webhook_outcome */
    double duration_s;
    const char
        *failure; /* NULL on 2xx, else the failure in a few words ("HTTP 500", "timed out") */
    const char *message_id, *attempt_id, *saga_id, *traceparent;
} mv_webhook_call_info;

/* One signing key (borrowed bytes). */
typedef struct mv_webhook_secret {
    const void *bytes;
    size_t len;
} mv_webhook_secret;

/* Limits and signing keys for outgoing HTTP calls. A zeroed struct means the defaults and no
 * signature. Secrets are borrowed (not copied) and never appear in an error message.
 * The active keys are secrets[0..nsecrets) when nsecrets > 0, else secret alone (when set):
 * each gives one `v1,` entry of `webhook-signature`; the first also keys `X-Missive-Signature`.
 * Rotation: put the new secret first and keep the old one until every receiver has the new. */
typedef struct mv_webhook_config {
    const void *secret; /* HMAC-SHA256 key bytes; NULL or secret_len 0 → no signature header */
    size_t secret_len;
    const mv_webhook_secret *secrets; /* optional list (rotation); overrides secret */
    size_t nsecrets;
    const mv_clock *clock;     /* webhook-timestamp; NULL → real clock */
    int connect_timeout_ms;    /* 0 → 2000 */
    int timeout_ms;            /* whole request; 0 → 10000 */
    size_t max_response_bytes; /* 0 → 1048576; a longer response is an error (AMBIGUOUS) */
    /* Optional observer of every finished call (logs, metrics); runs on the calling thread. */
    void (*on_call)(void *ctx, const mv_webhook_call_info *info);
    void *on_call_ctx;
} mv_webhook_config;

/* What a caller can conclude about the far side's state after a call. */
typedef enum mv_webhook_outcome {
    MV_WEBHOOK_OK,        /* 2xx: done */
    MV_WEBHOOK_REJECTED,  /* 4xx: conclusively not done */
    MV_WEBHOOK_AMBIGUOUS, /* 5xx, 1xx/3xx, timeout after connecting, connection dropped, response
                             too large: may or may not have been done */
    MV_WEBHOOK_NOT_SENT,  /* DNS failure, connection refused, connect timeout, TLS handshake
                             failure: the request never left */
} mv_webhook_outcome;

/* Result of one call. body is NUL-terminated (body_len excludes the NUL); json is NULL when the
 * body is empty or not JSON, and json_invalid tells the two apart. Free the members with
 * mv_webhook_response_free(). */
typedef struct mv_webhook_response {
    mv_webhook_outcome outcome;
    long status; /* HTTP status, 0 when none was received */
    char *body;
    size_t body_len;
    json_t *json;
    bool json_invalid;
    /* NULL on 2xx; else a static phrase free of URLs and library text: "HTTP <status>" is left to
     * the caller (see status), the others are "timed out", "connection refused", "no answer",
     * "not sent", "response too large". */
    const char *failure;
} mv_webhook_response;

/* Frees the members (not the struct) and zeroes it. NULL-safe. */
void mv_webhook_response_free(mv_webhook_response *r);

/* Name of an outcome: "ok", "rejected", "ambiguous", "not_sent". */
const char *mv_webhook_outcome_name(mv_webhook_outcome o);

/* POSTs the compact serialisation of body (NULL → `null`) to url (http:// or https:// only) with
 * `Content-Type: application/json`, `Idempotency-Key: idempotency_key` (omitted when NULL),
 * the Standard Webhooks headers `webhook-id` (the idempotency key, or a fresh UUID when NULL),
 * `webhook-timestamp` (Unix seconds of this attempt: a retry with the same key keeps the id and
 * gets a new timestamp and signature) and, when cfg has secrets, `webhook-signature` (see
 * mv_webhook_sign_v1) and `X-Missive-Signature: sha256=<hex HMAC-SHA256 of the exact body bytes>`
 * keyed with the first secret.
 * Redirects are not followed. Thread-safe (one libcurl handle per call).
 * Returns MV_OK when the outcome is MV_WEBHOOK_OK (2xx; a 2xx whose body is not JSON is still OK
 * with out->json_invalid set — the caller decides), else MV_UPSTREAM_FAILED with a message naming
 * the URL and the status or transport error. out (may be NULL) is filled in every case, including
 * errors; the caller frees it with mv_webhook_response_free(). cfg may be NULL (defaults). */
mv_code mv_webhook_post(const mv_webhook_config *cfg, const char *url, const json_t *body,
                        const char *idempotency_key, mv_webhook_response *out, mv_err *err);

/* GET url (no body; `webhook-id` a fresh UUID, `webhook-timestamp`, and `webhook-signature`
 * over the empty body when cfg has secrets; no X-Missive-Signature); same limits, outcome and
 * error rules as mv_webhook_post. */
mv_code mv_webhook_get(const mv_webhook_config *cfg, const char *url, mv_webhook_response *out,
                       mv_err *err);

/* What a failed call said, in words fit for a client (lastFailure): the far side's
 * {"error": {"code", "message"}} when its body has one (the message trimmed to 200 bytes, control
 * characters and anything URL-shaped replaced), else "HTTP <status>", "timed out", "connection
 * refused" or "no answer". *code gets the body's error.code when it is snake_case (≤ 64), else
 * "upstream_status", "upstream_timeout", "upstream_unreachable" or "upstream_no_answer". */
void mv_webhook_failure_words(const mv_webhook_response *res, char code[65], char message[256]);
/* text fit for a client: at most 200 bytes (whole UTF-8 sequences), control characters as spaces,
 * every "scheme://…" word replaced by "[url]". out must hold at least 1 byte. */
void mv_webhook_public_text(const char *text, char *out, size_t size);

/* The header value for body bytes: "sha256=<64 hex>". out must hold 72 bytes. Exposed so that
 * receivers (and tests) verify signatures with the same code. */
void mv_webhook_signature(const void *secret, size_t secret_len, const void *body, size_t len,
                          char out[72]);

/* The Standard Webhooks `webhook-signature` value for one call: for every active secret of cfg
 * (in order) an entry "v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">", space-separated.
 * Returns a malloc'd string (caller frees), "" when cfg has no secret, NULL when out of memory. */
char *mv_webhook_sign_v1(const mv_webhook_config *cfg, const char *id, int64_t timestamp_s,
                         const void *body, size_t len);

/* ---- the outgoing-call loop --------------------------------------------------------------- */

/* One thread driving libcurl's multi interface, so that any number of slow calls (action
 * handlers, deliveries) wait at once without a thread each, and one timer thread for small
 * periodic jobs that may block briefly (an action's lease extension is a store write). A call
 * made here is the same request as mv_webhook_post's (headers, signatures, limits, timeouts,
 * outcome classification, observer): only where it waits differs. Thread-safe. */
typedef struct mv_loop mv_loop;

typedef struct mv_loop_options {
    int max_transfers; /* calls on the wire at once (0 → 1024); later ones wait, in order, and
                          their timeouts start when they go out */
} mv_loop_options;

/* Starts the loop's two threads. Free with mv_loop_free(). */
mv_code mv_loop_new(const mv_loop_options *opts, mv_loop **out, mv_err *err);
/* Shutdown, part one: calls still unfinished after ms more milliseconds are abandoned — each
 * completes with MV_DRAINING (failure "shutting down"; outcome NOT_SENT when the request never
 * left, else AMBIGUOUS) — and calls submitted after that are refused. NULL-safe. */
void mv_loop_stop_after(mv_loop *loop, int64_t ms);
/* Abandons every call not yet finished (as above) now and returns once each has completed;
 * calls submitted later are refused. The threads keep running (timers too) until the free.
 * NULL-safe. */
void mv_loop_stop(mv_loop *loop);
/* Abandons every call not yet finished (as above, at once), stops the timers, joins the
 * threads and frees. Every accepted call's completion has run when it returns. NULL-safe. */
void mv_loop_free(mv_loop *loop);
/* Calls accepted and not yet completed (on the wire or waiting their turn). */
int mv_loop_pending(mv_loop *loop);

/* A finished call. rc, *res and *err are what mv_webhook_post would have returned; res's members
 * are the callee's to free (mv_webhook_response_free). Runs on the loop's thread, so it must not
 * block: hand anything slow (a store write) to another thread. */
typedef void (*mv_webhook_done)(void *ctx, mv_code rc, mv_webhook_response *res, const mv_err *err);

/* mv_webhook_post on the loop: builds the request now (on the calling thread, labelled with its
 * call context) and returns at once. MV_OK: done(ctx, …) runs exactly once, on the loop's thread,
 * possibly before this returns. Any error (a bad URL, out of memory, MV_DRAINING once the loop
 * stops): done never runs. */
mv_code mv_webhook_post_async(mv_loop *loop, const mv_webhook_config *cfg, const char *url,
                              const json_t *body, const char *idempotency_key, mv_webhook_done done,
                              void *ctx, mv_err *err);

/* A periodic job on the loop's timer thread: fn(ctx) every period_ms, the first after one period;
 * returning false stops the repetition (the timer still needs mv_loop_timer_cancel). NULL when
 * out of memory or the loop is shutting down. */
typedef struct mv_loop_timer mv_loop_timer;
mv_loop_timer *mv_loop_every(mv_loop *loop, int64_t period_ms, bool (*fn)(void *ctx), void *ctx);
/* Stops and frees the timer: when it returns fn is not running and never runs again. Never call
 * it from fn. NULL-safe. */
void mv_loop_timer_cancel(mv_loop_timer *timer);

/* ---- SMTP -------------------------------------------------------------------------------- */

typedef struct mv_smtp_config {
    const char *url;        /* smtp://host:port (STARTTLS used when offered) or smtps://host:port;
                               credentials may be given as smtp://user:pass@host:port */
    const char *from;       /* envelope and header From address (bare addr@domain) */
    int connect_timeout_ms; /* 0 → 2000 */
    int timeout_ms;         /* 0 → 10000 */
} mv_smtp_config;

/* Sends one text/plain UTF-8 message: From, To, Subject (RFC 2047-encoded when not ASCII), Date,
 * Message-ID, MIME-Version, Content-Type: text/plain; charset=utf-8, quoted-printable body.
 * message_id is the bare id without angle brackets (sent as "<id@domain-of-from>" unless it
 * holds an '@'); NULL → a fresh UUID. Addresses with spaces, CR/LF, commas or angle brackets are
 * refused (MV_INVALID_ARGUMENT); control characters in the subject become spaces. Any transport
 * or SMTP failure is MV_UPSTREAM_FAILED naming the server and the last reply code. */
mv_code mv_smtp_send(const mv_smtp_config *cfg, const char *to, const char *subject,
                     const char *body, const char *message_id, mv_err *err);

/* ---- recipient directory ------------------------------------------------------------------ */

/* Where email addresses of user ids come from: a webhook `GET {url}/{userId}` answering
 * `{"email": "…"}` (404, a missing/empty/null email → no address), or a JSON object
 * `{"userId": "address"}` loaded once. Thread-safe once opened. */
typedef struct mv_directory mv_directory;

/* url is copied; wh (may be NULL) is copied by value, its secret stays borrowed. */
mv_code mv_directory_open_webhook(const char *url, const mv_webhook_config *wh, mv_directory **out,
                                  mv_err *err);
/* Loads path; every member must be a string (errors name the path and the user id). */
mv_code mv_directory_open_file(const char *path, mv_directory **out, mv_err *err);
/* From an in-memory object (same rules as the file; map is copied). */
mv_code mv_directory_open_map(const json_t *map, mv_directory **out, mv_err *err);
void mv_directory_close(mv_directory *dir);

/* *email receives a malloc'd address (caller frees) or NULL when the user has none. A directory
 * that cannot answer (network, 5xx, bad JSON) is MV_UPSTREAM_FAILED. */
mv_code mv_directory_lookup(mv_directory *dir, const char *user_id, char **email, mv_err *err);

/* ---- email rules (SEMANTICS §1.10) ------------------------------------------------------ */

/* True when a new message should be emailed: to_user non-empty after trimming, the trimmed
 * receiver title non-empty, and not in exclusions (a JSON array of strings, may be NULL; compared
 * trimmed and case-insensitively — ASCII case folding). */
bool mv_email_should_send(const char *to_user, const char *receiver_title,
                          const json_t *exclusions);
/* The body to send: the longer of long_text and short_text (length in UTF-16 code units, as the
 * reference; a tie → short_text). NULL counts as "". Returns one of the arguments, or "" — never
 * NULL, never allocated. */
const char *mv_email_body(const char *long_text, const char *short_text);

/* ---- outbox ------------------------------------------------------------------------------ */

typedef enum mv_outbox_kind { MV_OUTBOX_EMAIL, MV_OUTBOX_WEBHOOK } mv_outbox_kind;

/* Adds a pending row, due now. MUST be called inside the caller's mv_store_write() callback;
 * the row exists only if that transaction commits. Payloads:
 *   email:   {"messageId": "…", "toUser": "…", "title": "…", "body": "…"}
 *   webhook: {"url": "http…", "body": <any JSON>, "idempotencyKey"?: "…", "contactOf"?: USER}
 *            (the key defaults to the row id, so every retry carries the same key; contactOf:
 *            see mv_outbox_config.directory).
 * A payload of the wrong shape is MV_INVALID_ARGUMENT naming the field. The _id variant also
 * writes the new row's id (a UUID) into id_out (37 bytes, may be NULL). */
mv_code mv_outbox_add_tx(mv_db *db, mv_outbox_kind kind, const json_t *payload, int64_t now,
                         mv_err *err);
mv_code mv_outbox_add_tx_id(mv_db *db, mv_outbox_kind kind, const json_t *payload, int64_t now,
                            char id_out[37], mv_err *err);

/* Where the worker sends emails: SMTP, or (when webhook_url is set) a POST of
 * {"email": {"to", "subject", "body", "messageId", "toUser"}} signed like every webhook, with the
 * outbox row id as Idempotency-Key (messageId is the missive message the email is about). */
typedef struct mv_email_config {
    mv_smtp_config smtp;     /* used when webhook_url is NULL */
    const char *webhook_url; /* optional alternative to SMTP */
    mv_directory *directory; /* borrowed; required */
} mv_email_config;

/* One delivery attempt that did not succeed, for logs and metrics. Strings are borrowed for the
 * duration of the callback. */
typedef struct mv_outbox_event {
    const char *row_id;
    mv_outbox_kind kind;
    const char *stage;      /* "recipientLookup", "notifier" (email) or "webhook" */
    const char *message_id; /* email rows */
    const char *recipient;  /* email rows: toUser */
    const char *error;      /* the error message */
    int attempt;            /* 1-based */
    bool final;             /* true: the row is now `failed` */
} mv_outbox_event;

typedef struct mv_outbox_config {
    const mv_clock *clock;            /* NULL → real clock; row times and backoff use it */
    const mv_webhook_config *webhook; /* webhook rows and the email webhook; NULL → defaults */
    const mv_email_config *email;     /* NULL → email rows are left pending (email disabled) */
    int max_attempts;                 /* 0 → MV_DEFAULT_OUTBOX_MAX_ATTEMPTS (10) */
    int64_t backoff_base_ms; /* 0 → 1000: delay before attempt n+1 is base·2^(n−1) … */
    int64_t backoff_cap_ms;  /* 0 → 300000: … capped here, then jittered to [d/2, d] */
    int64_t lease_ms;        /* 0 → 60000; must exceed one delivery's timeout */
    void (*on_event)(void *ctx, const mv_outbox_event *ev); /* optional; never inside a tx */
    void *on_event_ctx;
    /* Optional, borrowed (must outlive every run): the rows of one run are claimed in one
     * transaction and recorded in another, and its webhook rows are sent at once on this loop
     * instead of one after another; emails are still sent one by one, each only while half of
     * the lease is left (the rest go back untried, their claim not counted as an attempt). A row
     * whose call the loop refuses or abandons (shutting down) is retried later. */
    mv_loop *loop;
    /* Optional, borrowed: a webhook row with "contactOf": USER (a channel delivery) gets the
     * directory's answer for USER as body.to.contact when it is sent. NULL: left as stored. */
    mv_directory *directory;
} mv_outbox_config;

/* Claims up to max_rows due rows (pending and due, or delivering with an expired lease) one at a
 * time with a conditional UPDATE that sets a fresh lease owner, delivers each outside any
 * transaction, then records the outcome only if it still holds the lease: `sent`, `skipped` (an
 * email whose recipient has no address), a retry (`pending` with next_attempt_at = now + backoff)
 * or, after max_attempts, `failed` with last_error and failure_stage. *delivered (may be NULL)
 * receives the number of rows that reached `sent` or `skipped`. Safe to run from any number of
 * threads and processes at once: each row is delivered by one claimant at a time. Returns an error
 * only when the store fails; delivery failures are recorded on the rows. */
mv_code mv_outbox_run_due(mv_store *store, const mv_outbox_config *cfg, int max_rows,
                          int *delivered, mv_err *err);

/* Rows not yet done (pending + delivering) and rows given up on (failed). */
mv_code mv_outbox_depth(mv_store *store, int64_t *pending, int64_t *failed, mv_err *err);

/* One row as stored (for tests, `missive reconcile --kind outbox` and operators). Strings are
 * malloc'd copies; free with mv_outbox_row_free(). */
typedef struct mv_outbox_row {
    char id[37];
    mv_outbox_kind kind;
    json_t *payload;
    char state[16]; /* pending, delivering, sent, skipped, failed */
    int attempts;
    int64_t next_attempt_at, lease_expires_at, created_at, updated_at;
    char *lease_owner, *last_error, *failure_stage; /* NULL when unset */
} mv_outbox_row;
void mv_outbox_row_free(mv_outbox_row *row); /* frees members; NULL-safe */

/* Loads one row by id; MV_NOT_FOUND when absent. */
mv_code mv_outbox_get(mv_store *store, const char *id, mv_outbox_row *out, mv_err *err);

/* Rows needing an operator's eye, oldest first, ids after after_id (NULL → from the start):
 * `failed` rows, and `delivering` rows whose lease expired more than stale_ms before now. Calls
 * fn for each (up to limit, 1..1000); *count (may be NULL) gets how many. */
mv_code mv_outbox_scan(mv_store *store, int64_t now, int64_t stale_ms, const char *after_id,
                       int limit, void (*fn)(void *ctx, const mv_outbox_row *row), void *ctx,
                       int *count, mv_err *err);

/* One page of the outbox, newest first (`missive outbox list`). The outbox has no tenant: this
 * is the whole store's, for operators. */
typedef struct mv_outbox_list_query {
    const char *state;  /* NULL = any; pending, delivering, sent, skipped, failed */
    const char *kind;   /* NULL = any; email, webhook */
    int limit;          /* 1..1000 */
    const char *cursor; /* NULL = the first page */
} mv_outbox_list_query;
/* *rows (new array) of {"id","kind","state","attempts","nextAttemptAt","createdAt","updatedAt",
 * "lastError","failureStage","payload"} (lastError and failureStage only when set);
 * *next_cursor (malloc'd) NULL on the last page. Errors: MV_INVALID_ARGUMENT naming the bad
 * filter or limit, MV_INVALID_PAGINATION. */
mv_code mv_outbox_list(mv_store *store, const mv_outbox_list_query *q, json_t **rows,
                       char **next_cursor, mv_err *err);

/* A background thread calling mv_outbox_run_due every poll_ms (immediately again while it finds
 * full batches). cfg is copied by value (its pointers stay borrowed and must outlive the worker).
 * Stop is prompt: it wakes the thread and joins it after the delivery in flight, if any. */
typedef struct mv_outbox_worker mv_outbox_worker;
mv_code mv_outbox_worker_start(mv_store *store, const mv_outbox_config *cfg, int poll_ms,
                               mv_outbox_worker **out, mv_err *err);
/* Asks the worker to look for due rows now (e.g. after committing a message). NULL-safe. */
void mv_outbox_worker_wake(mv_outbox_worker *w);
/* Stops, joins and frees. NULL-safe. */
void mv_outbox_worker_stop(mv_outbox_worker *w);

/* ---- configuration ----------------------------------------------------------------------- */

/* The parsed `"email"` section of the daemon config:
 *   {"smtp": "smtp://…", "from": "…", "directory": {"webhook": URL} | {"file": PATH},
 *    "exclusions": ["…"], "webhook": URL}   (webhook: optional alternative to smtp)
 * Unknown keys are MV_INVALID_CONFIG naming the key; a relative directory file is resolved
 * against base_dir (may be NULL). wh (may be NULL) is used by the directory webhook; its secret
 * stays borrowed. Free with mv_email_settings_free(). */
typedef struct mv_email_settings {
    mv_email_config email; /* points into this struct's own strings and directory */
    json_t *exclusions;    /* array of strings (never NULL) */
    char *smtp_url, *from, *webhook_url;
} mv_email_settings;
mv_code mv_email_settings_load(const json_t *section, const char *base_dir,
                               const mv_webhook_config *wh, mv_email_settings **out, mv_err *err);
void mv_email_settings_free(mv_email_settings *s);

#ifdef __cplusplus
}
#endif

#endif
