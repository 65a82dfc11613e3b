/* create.c — createMessage: template → prepare → per-item documents (recipients, payment session,
 * rendered content) → one transaction for all items.
 *
 * With a client request id the work is bracketed by a reservation (request.c): replay what is
 * complete, wait on what is pending, and commit the messages together with the reservation's
 * completion only while still its lease owner. Payment sessions opened for a batch that then
 * fails are all expired, in order; the prepare and payment calls never run inside a
 * transaction. */
#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/callctx.h"
#include "base/strbuf.h"
#include "message/create_async.h"
#include "message/inbox_internal.h"
#include "message/reach_internal.h"
#include "message/request.h"
#include "message/time_internal.h"
#include "store/write_async.h"

typedef enum {
    CALL_NONE,
    CALL_PREPARE, /* the prepare hook (C or webhook) */
    CALL_SESSION, /* the payment provider's create_session for the item being built */
    CALL_EXPIRE   /* its expire_session for a session being compensated */
} call_kind;

typedef struct create_job { /* ordered by size and alignment (clang-analyzer's padding check) */
    mv_service *svc;
    const mv_create_request *req;
    mv_template *tpl;
    const json_t *payload;
    json_t *docs;      /* built documents */
    json_t *sessions;  /* payment session ids opened so far, in order */
    json_t *empty;     /* the payload when the request has none */
    json_t *datas;     /* message id → its template data, for channel overrides (channels.c) */
    json_t *localized; /* message id → its rendered locales (locales.c) */
    /* the build as steps between calls (see step()) */
    json_t *items; /* the prepare answer (as an array once checked) */
    size_t next;   /* the item being built, then the session being expired */
    json_t *doc;   /* the item's document, waiting for its payment session */
    const char *payment_cd;
    json_t *call_items;  /* the call's outcome: a prepare's answer, */
    char *call_session;  /* a session's id */
    int64_t expires_at;  /* the body's expiresAt; 0: none (the template's afterMs, if any) */
    int64_t send_at;     /* the body's sendAt; 0: sent at once (schedule.c) */
    mv_prepare_input in; /* the prepare call's input */
    request_scope scope;
    mv_err call_err; /* the call's error, */
    mv_err failure;  /* what failed the build or the persist (failed_rc) */
    mv_err err;      /* the create's outcome, once the steps are over (rc) */
    int at;          /* the next step */
    call_kind call;  /* the call the steps wait for */
    mv_code call_rc;
    mv_code failed_rc;
    mv_code rc;
    bool build_only;    /* stop when the documents are built (the one-transaction path) */
    bool share_payload; /* the daemon's own copy of the body, read only from here on: the
                         * documents reference its payload and documents instead of copying */
    char lease_owner[37];
    char key[65]; /* the call's Idempotency-Key (prepare, session) */
    char crid[129];
    char user_id[MV_MAX_ID_BYTES + 1];
    char payer_id[MV_MAX_ID_BYTES + 1];
} create_job;

mv_code mv_client_request_id_normalize(const json_t *value, char out[129], mv_err *err) {
    out[0] = '\0';
    if (!value) return MV_OK;
    if (!json_is_string(value))
        return mv_err_set(err, MV_INVALID_CLIENT_REQUEST_ID,
                          "clientRequestId must be a string when provided");
    const char *s = json_string_value(value);
    size_t n = json_string_length(value);
    while (n && isspace((unsigned char)*s))
        s++, n--;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    if (n == 0)
        return mv_err_set(err, MV_INVALID_CLIENT_REQUEST_ID,
                          "clientRequestId must be a non-empty string after trimming whitespace");
    if (n > 128)
        return mv_err_set(err, MV_INVALID_CLIENT_REQUEST_ID,
                          "clientRequestId must be at most 128 characters");
    memcpy(out, s, n);
    out[n] = '\0';
    if (memchr(out, '\0', n))
        return mv_err_set(err, MV_INVALID_CLIENT_REQUEST_ID,
                          "clientRequestId must not contain NUL characters");
    return MV_OK;
}

/* ---- prepare ------------------------------------------------------------------------------ */

static json_t *declarative_item(const mv_template *t, const json_t *data, const json_t *payload,
                                mv_err *err, mv_code *rc) {
    json_t *item = json_object();
    if (t->prepare_to_user) {
        char *to = NULL;
        *rc = mv_tpl_render(t->prepare_to_user, data, MV_ESCAPE_NONE, &to, NULL, err);
        if (*rc != MV_OK) {
            json_decref(item);
            return NULL;
        }
        if (*to) json_object_set_new(item, "toUser", json_string(to));
        free(to);
    }
    if (t->prepare_to_roles) json_object_set(item, "toRoles", t->prepare_to_roles);
    json_object_set(item, "templateData", (json_t *)data);
    json_object_set(item, "payload", (json_t *)payload);
    return item;
}

/* The keys' material (owner, templateCd, client request id, fingerprint or item index, with
 * their labels) always fits the buffer it is written to. */
#define KEY_MATERIAL_BYTES 1024
_Static_assert(16 + MV_MAX_ID_BYTES + 128 + 128 + 64 < KEY_MATERIAL_BYTES,
               "an idempotency key's material fits its buffer");

/* The prepare call's input and key; true when a hook (C or webhook) must be called. */
static mv_code prepare_begin(create_job *job, bool *hook, mv_err *err) {
    const mv_template *t = job->tpl;
    if (job->crid[0]) {
        char material[KEY_MATERIAL_BYTES];
        snprintf(material, sizeof material, "prepare\n%s\n%s\n%s\n%s", job->scope.owner,
                 t->template_cd, job->crid, job->scope.fingerprint);
        mv_sha256_hex(material, strlen(material), job->key);
    } else {
        char uuid[37];
        mv_code rc = mv_id_uuid(uuid, err);
        if (rc != MV_OK) return rc;
        mv_strlcpy(job->key, uuid, sizeof job->key);
    }
    job->in = (mv_prepare_input){t->template_cd, job->req->user, job->payload, job->key};
    mv_prepare_fn fn;
    void *ctx;
    *hook = mv__svc_find_prepare(job->svc, t->template_cd, &fn, &ctx) ||
            t->prepare == MV_PREPARE_WEBHOOK;
    return MV_OK;
}

/* A hook's answer: null, an item or an array of items. */
static mv_code prepare_checked(create_job *job, json_t *items, mv_err *err) {
    if (items && !json_is_null(items) && !json_is_object(items) && !json_is_array(items))
        return mv_err_set(err, MV_PREPARE_FAILED,
                          "prepare for template \"%s\" returned neither null, an item nor an "
                          "array of items",
                          job->tpl->template_cd);
    return MV_OK;
}

static mv_code declarative_items(create_job *job, json_t **items, mv_err *err) {
    const mv_template *t = job->tpl;
    mv_code rc = MV_OK;
    *items = NULL;
    if (t->prepare_fan_out) {
        json_t *list = mv_json_path(job->payload, t->prepare_fan_out);
        if (!json_is_array(list))
            return mv_err_set(err, MV_PREPARE_FAILED,
                              "fanOut \"%s\" is not an array in the payload", t->prepare_fan_out);
        json_t *arr = json_array();
        size_t i;
        json_t *el;
        json_array_foreach(list, i, el) {
            json_t *item = declarative_item(t, el, job->payload, err, &rc);
            if (!item) {
                json_decref(arr);
                return rc;
            }
            json_array_append_new(arr, item);
        }
        *items = arr;
        return MV_OK;
    }
    *items = declarative_item(t, job->payload, job->payload, err, &rc);
    return *items ? MV_OK : rc;
}

/* ---- documents ---------------------------------------------------------------------------- */

static const char *nonempty_str(const json_t *obj, const char *key) {
    const char *s = mv_json_str(obj, key);
    return s && *s ? s : NULL;
}

static void session_key(create_job *job, size_t index) {
    job->key[0] = '\0';
    if (!job->crid[0]) return;
    char material[KEY_MATERIAL_BYTES];
    snprintf(material, sizeof material, "payment\n%s\n%s\n%s\n%zu", job->scope.owner,
             job->tpl->template_cd, job->crid, index);
    mv_sha256_hex(material, strlen(material), job->key);
}

/* The session call's outcome (call_rc, call_err, call_session) as the create sees it; the id
 * joins job->sessions. */
static mv_code session_opened(create_job *job, char **session, mv_err *err) {
    mv_code rc = job->call_rc;
    *session = job->call_session;
    job->call_session = NULL;
    if (rc != MV_OK) {
        free(*session);
        *session = NULL;
        /* a refusal stays definitive; anything else (no answer, the provider's store) is not */
        mv_code code = rc == MV_PAYMENT_FAILED || mv_code_is_definitive(rc) ? MV_PAYMENT_FAILED
                       : rc == MV_DRAINING                                  ? MV_DRAINING
                                           : MV_PAYMENT_UNAVAILABLE;
        mv_err_copy(err, &job->call_err);
        if (err) err->code = code;
        return code;
    }
    if (!*session || !**session) {
        free(*session);
        *session = NULL;
        return mv_err_set(err, MV_PAYMENT_FAILED, "payment session creation failed");
    }
    json_array_append_new(job->sessions, json_string(*session));
    return MV_OK;
}

/* What limits.messageBytes counts: the payload, display and documents as stored (compact JSON)
 * plus every rendered content string. */
static int64_t message_bytes(const json_t *doc) {
    int64_t n = 0;
    static const char *const stored[] = {"payload", "display", "documents"};
    mv_strbuf b = {.count_only = true}; /* counted, not written */
    for (size_t i = 0; i < 3; i++) {
        const json_t *v = json_object_get(doc, stored[i]);
        if (!json_is_object(v) && !json_is_array(v)) continue; /* as json_dumpb counts */
        b.len = 0;
        if (mv_json_write(&b, v)) n += (int64_t)b.len;
    }
    static const char *const contents[] = {"senderContent", "receiverContent"};
    static const char *const fields[] = {"title", "short", "long"};
    for (size_t c = 0; c < 2; c++)
        for (size_t f = 0; f < 3; f++)
            n += (int64_t)json_string_length(
                json_object_get(json_object_get(doc, contents[c]), fields[f]));
    return n;
}

/* The users an item names (toUser, fromUser) within MV_MAX_ID_BYTES (its roles: doc_begin), else
 * MV_INVALID_ARGUMENT naming the field: the same answer on both stores (PostgreSQL would refuse
 * the index entry of a long one). */
static mv_code check_item_users(const json_t *item, mv_err *err) {
    static const char *const users[] = {"toUser", "fromUser"};
    mv_code rc = MV_OK;
    for (size_t u = 0; rc == MV_OK && u < 2; u++) {
        const json_t *v = json_object_get(item, users[u]);
        if (json_is_string(v)) rc = mv_check_id_length(users[u], json_string_length(v), err);
    }
    return rc;
}

/* Says which message of the create an invalid item was (a batch has many). */
static void name_item(const create_job *job, size_t index, mv_code rc, mv_err *err) {
    if (rc != MV_INVALID_ARGUMENT || !err) return;
    size_t n = strlen(err->message);
    snprintf(err->message + n, sizeof err->message - n, " (message %zu of template \"%.128s\")",
             index, job->tpl->template_cd);
}

/* ---- durable time: when the created messages expire ------------------------------------------ */

/* The body's "expiresAt" (ms since the epoch): absent or null, or in the future and at most
 * MV_MAX_DELAY_MS ahead. */
static mv_code read_expires_at(create_job *job, mv_err *err) {
    const json_t *v = json_object_get(job->payload, "expiresAt");
    if (!v || json_is_null(v)) return MV_OK;
    int64_t now = mv__svc_now(job->svc);
    if (!json_is_integer(v) || json_integer_value(v) <= now ||
        json_integer_value(v) > now + MV_MAX_DELAY_MS)
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "expiresAt must be a time in milliseconds since the epoch, in the future "
                          "and at most 365 days ahead");
    job->expires_at = json_integer_value(v);
    return MV_OK;
}

/* The document's expiresAt: the body's, else now + the template's expiry.afterMs, else null. */
static void set_expires_at(const create_job *job, json_t *doc) {
    const mv_expiry_def *e = job->tpl->expiry;
    int64_t at = job->expires_at;
    if (!at && e && e->after_ms)
        at = json_integer_value(json_object_get(doc, "createdAt")) + e->after_ms;
    if (at) json_object_set_new(doc, "expiresAt", json_integer((json_int_t)at));
}

/* An item's document up to its payment session: *payment_cd set (else NULL) when a session
 * must be opened before doc_end. */
static mv_code doc_begin(create_job *job, const json_t *item, json_t **out, const char **payment_cd,
                         mv_err *err) {
    mv_service *svc = job->svc;
    const mv_template *t = job->tpl;
    int64_t now = mv__svc_now(svc);
    const char *type = nonempty_str(item, "type");
    if (!type) type = *t->type ? t->type : "notification";
    json_t *doc = mv__doc_new_bare(type, t->template_cd, now);
    *payment_cd = NULL;
    if (!doc) return mv_err_set(err, MV_NO_MEMORY, "out of memory building a message");

    const char *to_user = nonempty_str(item, "toUser");
    if (to_user) json_object_set_new(doc, "toUser", json_string(to_user));
    json_t *roles = json_object_get(item, "toRoles");
    if (json_is_array(roles) && json_array_size(roles)) {
        json_t *copy = json_array();
        size_t i;
        json_t *r;
        json_array_foreach(roles, i, r) if (json_is_string(r)) json_array_append(copy, r);
        json_object_set_new(doc, "toRoles", copy);
    } else {
        json_t *copy = json_array();
        for (size_t i = 0; i < svc->nadmin_roles; i++)
            json_array_append_new(copy, json_string(svc->admin_roles[i]));
        json_object_set_new(doc, "toRoles", copy);
    }
    mv_code rc = mv__svc_check_roles(json_object_get(doc, "toRoles"), "toRoles", err);
    if (rc != MV_OK) {
        json_decref(doc);
        return rc;
    }
    const char *code = nonempty_str(item, "paymentCd");
    if (!code) code = t->payment_cd;
    json_object_set_new(doc, "paymentCd", json_string(code));
    if (*code && svc->o.payment && (to_user || json_array_size(json_object_get(doc, "toRoles"))))
        *payment_cd = code;
    *out = doc;
    return MV_OK;
}

/* The rest of the item's document (session: its payment session or NULL); frees doc on failure. */
static mv_code doc_end(create_job *job, const json_t *item, size_t index, json_t *doc,
                       const char *session, mv_err *err) {
    mv_service *svc = job->svc;
    const mv_template *t = job->tpl;
    mv_code rc = MV_OK;
    if (session) json_object_set_new(doc, "paymentSession", json_string(session));
    json_t *data = json_object_get(item, "templateData");
    json_t *sender = NULL, *receiver = NULL;
    if (!json_is_object(data)) data = job->empty; /* {} that nothing adds to */
    rc = mv_content_render(&t->sender_content, data, &sender, err);
    if (rc == MV_OK) rc = mv_content_render(&t->receiver_content, data, &receiver, err);
    if (rc != MV_OK) {
        json_decref(sender);
        goto fail;
    }
    json_object_set_new(doc, "senderContent", sender);
    json_object_set_new(doc, "receiverContent", receiver);
    if (t->has_channels && (job->datas || (job->datas = json_object())))
        json_object_set(job->datas, mv_json_str(doc, "id"), data);
    const char *from = nonempty_str(item, "fromUser");
    json_object_set_new(doc, "fromUser", json_string(from ? from : job->user_id));
    json_t *documents = json_object_get(job->payload, "documents");
    json_object_set_new(doc, "documents",
                        !json_is_array(documents) ? json_array()
                        : job->share_payload      ? json_incref(documents)
                                                  : json_deep_copy(documents));
    const json_t *payload = json_object_get(item, "payload");
    if (!json_is_object(payload)) payload = job->payload;
    bool shared = job->share_payload && payload == job->payload;
    json_object_set_new(doc, "payload",
                        shared ? json_incref((json_t *)payload) : json_deep_copy(payload));
    json_t *display = json_object_get(item, "display");
    if (json_is_object(display)) json_object_set_new(doc, "display", json_deep_copy(display));
    if (job->crid[0]) json_object_set_new(doc, "clientRequestId", json_string(job->crid));
    set_expires_at(job, doc);
    if (job->send_at)
        mv__schedule_doc(doc, job->send_at, job->tpl->expiry ? job->tpl->expiry->after_ms : 0,
                         job->expires_at != 0);
    json_t *localized = NULL;
    if (t->nlocales && (rc = mv__locales_render(t, data, doc, &localized, err)) != MV_OK) goto fail;
    if (localized && (job->localized || (job->localized = json_object())))
        json_object_set_new(job->localized, mv_json_str(doc, "id"), localized);
    int64_t bytes = message_bytes(doc) + mv__locales_bytes(localized),
            max_bytes = atomic_load(&svc->max_message_bytes);
    if (bytes > max_bytes) {
        rc = mv_err_set(err, MV_PAYLOAD_TOO_LARGE,
                        "message %zu of template \"%s\" is %lld bytes (payload plus rendered "
                        "content); at most %lld are allowed",
                        index, t->template_cd, (long long)bytes, (long long)max_bytes);
        goto fail;
    }
    json_array_append_new(job->docs, doc);
    return MV_OK;
fail:
    json_decref(doc);
    return rc;
}

/* ---- persistence -------------------------------------------------------------------------- */

static mv_code insert_docs_tx(mv_db *db, create_job *job, mv_err *err) {
    size_t i;
    json_t *doc;
    json_array_foreach(job->docs, i, doc) {
        const json_t *data = json_object_get(job->datas, mv_json_str(doc, "id"));
        char *plan = NULL;
        mv_code rc = mv__doc_plan(job->svc, doc, job->tpl, data, &plan, err);
        if (rc == MV_OK)
            rc = mv__doc_insert_planned(
                db, doc, job->scope.tenant, job->crid[0] ? job->user_id : NULL,
                job->crid[0] ? (int64_t)i : -1, plan, mv__schedule_due(job->svc, doc), err);
        free(plan);
        if (rc == MV_OK && !mv__schedule_unsent(doc)) /* a scheduled one: at its send */
            rc = mv__message_time_schedule_tx(
                db, job->scope.tenant ? job->scope.tenant : MV_DEFAULT_TENANT, job->tpl,
                mv_json_str(doc, "id"), json_integer_value(json_object_get(doc, "createdAt")),
                mv__svc_now(job->svc), err);
        if (rc == MV_OK)
            rc = mv__doc_deliver(job->svc, db, doc, job->scope.tenant, job->tpl, data,
                                 json_object_get(job->localized, mv_json_str(doc, "id")), err);
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}

/* The change-log rows of the created messages (the last statements: see changes.c). */
static mv_code log_created_tx(mv_db *db, create_job *job, mv_err *err) {
    size_t i;
    json_t *doc;
    mv_code rc = MV_OK;
    json_array_foreach(job->docs, i, doc) {
        if (rc != MV_OK) break;
        if (job->send_at) continue; /* logged when it is sent (schedule.c) */
        rc = mv__change_add_tx(db, job->scope.tenant, mv_json_str(doc, "id"), MV_CHANGE_CREATED,
                               NULL, mv__svc_now(job->svc), err);
    }
    return rc;
}

static mv_code persist_tx(mv_db *db, void *ctx, mv_err *err) {
    create_job *job = ctx;
    mv_code rc = insert_docs_tx(db, job, err);
    if (rc == MV_OK && job->crid[0])
        rc = mv__request_complete_tx(db, &job->scope, job->lease_owner, job->docs,
                                     mv__svc_now(job->svc), err);
    return rc == MV_OK ? log_created_tx(db, job, err) : rc;
}

/* What a failed reservation replays: the contract's words for codes whose messages may carry
 * internal details (a URL, a host), else the message itself (written for clients). */
static void failure_text(const mv_err *e, char *out, size_t size) {
    const char *pub = mv_code_public_message(e->code);
    mv_strlcpy(out, pub ? pub : e->message, size);
}

/* Records the reservation failed — only for a definitive failure (SEMANTICS §1 and DESIGN "Only
 * definitive outcomes fail a key"): a store error, a timeout or a lost connection leaves the
 * reservation to its lease, so a retry after the lease takes it over. One rule for the one-shot
 * and the two-step paths. */
static mv_code record_failure_tx(mv_db *db, create_job *job, const mv_err *failure, mv_err *err) {
    char text[sizeof failure->message];
    failure_text(failure, text, sizeof text);
    return mv__request_fail_tx(db, &job->scope, job->lease_owner, text, mv__svc_now(job->svc), err);
}

typedef struct {
    create_job *job;
    const mv_err *failure;
} fail_arg;

static mv_code fail_tx(mv_db *db, void *ctx, mv_err *err) {
    fail_arg *a = ctx;
    return record_failure_tx(db, a->job, a->failure, err);
}

/* ---- the build, step by step ----------------------------------------------------------------
 * A create is local work separated by outgoing calls: the prepare hook, then each paid item's
 * payment session in order, then the persist transaction; when anything fails, every session
 * opened is expired in order (the first failure reported through the hook and the error), then a
 * definitive failure is recorded. step() runs the local work until the next call is needed
 * (job->call) or the create is over; a driver makes the call and steps on. The library drives it
 * on the caller's thread (call_here); the daemon makes webhook calls on the loop (the rounds at the
 * end of this file) and everything else — C hooks and C payment providers — on its own thread.
 * Either way the same steps send the same calls with the same keys in the same order. */

enum {
    AT_PREPARE,
    AT_PREPARED,
    AT_ITEM,
    AT_SESSION,
    AT_BUILT,
    AT_COMPENSATE,
    AT_EXPIRED,
    AT_RECORD,
    AT_DONE
};

static void steps_reset(create_job *job, bool build_only) {
    json_decref(job->items);
    json_decref(job->doc);
    json_decref(job->call_items);
    free(job->call_session);
    job->items = job->doc = job->call_items = NULL;
    job->call_session = NULL;
    job->at = AT_PREPARE;
    job->build_only = build_only;
    job->call = CALL_NONE;
    job->rc = job->failed_rc = MV_OK;
    mv_err_clear(&job->failure);
    mv_err_clear(&job->err);
}

/* The build or the persist failed (rc, e): compensation next, unless only building. */
static void failed(create_job *job, mv_code rc, const mv_err *e) {
    if (e != &job->failure) mv_err_copy(&job->failure, e);
    job->failed_rc = rc;
    json_decref(job->doc);
    json_decref(job->items);
    job->doc = job->items = NULL;
    job->next = 0;
    job->at = job->build_only ? AT_DONE : AT_COMPENSATE;
    if (job->build_only) {
        job->rc = rc;
        mv_err_copy(&job->err, &job->failure);
    }
}

static bool wait_for(create_job *job, call_kind call, int then) {
    job->call = call;
    job->at = then;
    mv_err_clear(&job->call_err);
    job->call_rc = MV_OK;
    return true;
}

/* Runs local work up to the next call (true: job->call says which) or the end (false: job->rc,
 * job->err; job->docs the messages). */
static bool step(create_job *job) {
    mv_service *svc = job->svc;
    const mv_payment_provider *p = svc->o.payment;
    mv_err e = {0};
    mv_code rc;
    job->call = CALL_NONE;
    for (;;) {
        switch (job->at) {
        case AT_PREPARE: {
            bool hook = false;
            if ((rc = prepare_begin(job, &hook, &e)) != MV_OK) {
                failed(job, rc, &e);
            } else if (hook) {
                return wait_for(job, CALL_PREPARE, AT_PREPARED);
            } else if ((rc = declarative_items(job, &job->items, &e)) != MV_OK) {
                failed(job, rc, &e);
            } else {
                job->at = AT_ITEM;
                job->next = 0;
            }
            break;
        }
        case AT_PREPARED:
            job->items = job->call_items;
            job->call_items = NULL;
            if (job->call_rc != MV_OK) {
                failed(job, job->call_rc, &job->call_err);
                break;
            }
            if ((rc = prepare_checked(job, job->items, &e)) != MV_OK) {
                failed(job, rc, &e);
                break;
            }
            job->at = AT_ITEM;
            job->next = 0;
            break;
        case AT_ITEM: {
            if (json_is_object(job->items)) { /* one item */
                json_t *arr = json_array();
                json_array_append_new(arr, job->items);
                job->items = arr;
            }
            if (!json_is_array(job->items) || job->next == json_array_size(job->items)) {
                job->at = AT_BUILT;
                break;
            }
            json_t *item = json_array_get(job->items, job->next);
            if (!json_is_object(item)) {
                rc = mv_err_set(&e, MV_PREPARE_FAILED, "prepare item %zu is not an object",
                                job->next);
                failed(job, rc, &e);
                break;
            }
            if ((rc = check_item_users(item, &e)) != MV_OK ||
                (rc = doc_begin(job, item, &job->doc, &job->payment_cd, &e)) != MV_OK) {
                name_item(job, job->next, rc, &e);
                failed(job, rc, &e);
                break;
            }
            if (job->payment_cd) {
                session_key(job, job->next);
                return wait_for(job, CALL_SESSION, AT_SESSION);
            }
            json_t *doc = job->doc;
            job->doc = NULL;
            if ((rc = doc_end(job, item, job->next, doc, NULL, &e)) != MV_OK)
                failed(job, rc, &e);
            else
                job->next++;
            break;
        }
        case AT_SESSION: {
            char *session = NULL;
            json_t *doc = job->doc;
            job->doc = NULL;
            json_t *item = json_array_get(job->items, job->next);
            if ((rc = session_opened(job, &session, &e)) != MV_OK) {
                json_decref(doc);
                failed(job, rc, &e);
            } else if ((rc = doc_end(job, item, job->next, doc, session, &e)) != MV_OK) {
                failed(job, rc, &e);
            } else {
                job->next++;
                job->at = AT_ITEM;
            }
            free(session);
            break;
        }
        case AT_BUILT:
            json_decref(job->items);
            job->items = NULL;
            if (job->build_only) {
                job->at = AT_DONE;
                break;
            }
            rc = mv_store_write(svc->o.store, persist_tx, job, &e);
            if (rc != MV_OK) {
                failed(job, rc, &e);
                break;
            }
            job->at = AT_DONE;
            break;
        case AT_COMPENSATE:
            if (p && p->expire_session && job->next < json_array_size(job->sessions))
                return wait_for(job, CALL_EXPIRE, AT_EXPIRED);
            job->at = AT_RECORD;
            break;
        case AT_EXPIRED: {
            const char *sid = json_string_value(json_array_get(job->sessions, job->next++));
            job->at = AT_COMPENSATE;
            if (job->call_rc == MV_OK || job->rc != MV_OK) break;
            if (svc->o.on_payment_compensation_failure) {
                mv_payment_failure ev = {"expire",
                                         sid,
                                         job->call_err.message,
                                         job->failure.message,
                                         job->crid[0] ? job->crid : NULL,
                                         job->crid[0] ? job->user_id : NULL,
                                         job->tpl->template_cd};
                svc->o.on_payment_compensation_failure(svc->o.hook_ctx, &ev);
            }
            job->rc = mv_err_set(
                &job->err, MV_PAYMENT_COMPENSATION_FAILED,
                "payment session compensation failed for session \"%s\" during expire: %s", sid,
                job->call_err.message);
            mv_strlcpy(job->err.session_id, sid, sizeof job->err.session_id);
            mv_strlcpy(job->err.operation, "expire", sizeof job->err.operation);
            mv_strlcpy(job->err.cause, job->failure.message, sizeof job->err.cause);
            break;
        }
        case AT_RECORD:
            if (job->rc == MV_OK) { /* every session expired: the original failure */
                job->rc = job->failed_rc;
                mv_err_copy(&job->err, &job->failure);
            }
            if (job->crid[0] && mv_code_is_definitive(job->failure.code)) {
                fail_arg a = {job, &job->failure};
                mv_store_write(svc->o.store, fail_tx, &a, NULL); /* best effort: the lease ends */
            }
            job->at = AT_DONE;
            break;
        default: return false;
        }
    }
}

/* Makes job->call on this thread: a C hook, a C provider or (the library) a webhook. */
static void call_here(create_job *job) {
    mv_service *svc = job->svc;
    const mv_payment_provider *p = svc->o.payment;
    mv_err *e = &job->call_err;
    switch (job->call) {
    case CALL_PREPARE: {
        mv_prepare_fn fn = NULL;
        void *ctx = NULL;
        job->call_rc = mv__svc_find_prepare(svc, job->tpl->template_cd, &fn, &ctx)
                           ? fn(ctx, &job->in, &job->call_items, e)
                           : mv__webhook_prepare(svc, job->tpl->prepare_webhook, &job->in,
                                                 &job->call_items, e);
        break;
    }
    case CALL_SESSION:
        job->call_rc =
            p->create_session(p->ctx, job->payer_id, job->payment_cd,
                              json_object_get(json_array_get(job->items, job->next), "priceArgs"),
                              job->key, &job->call_session, e);
        break;
    case CALL_EXPIRE:
        job->call_rc = p->expire_session(
            p->ctx, json_string_value(json_array_get(job->sessions, job->next)), e);
        break;
    case CALL_NONE: break;
    }
    job->call = CALL_NONE;
}

/* Builds the documents (no persist, no compensation): the one-transaction path, whose builds call
 * nothing outside. */
static mv_code build_all(create_job *job, mv_err *err) {
    steps_reset(job, true);
    while (step(job))
        call_here(job);
    if (job->rc != MV_OK) mv_err_copy(err, &job->err);
    return job->rc;
}

/* ---- the reservation loop ----------------------------------------------------------------- */

typedef struct {
    create_job *job;
    bool acquired;
    json_t *replay;
    int64_t lease_left;
} acquire_arg;

static mv_code acquire_tx(mv_db *db, void *ctx, mv_err *err) {
    acquire_arg *a = ctx;
    int64_t now = mv__svc_now(a->job->svc);
    mv_code rc =
        mv__request_acquire_tx(db, &a->job->scope, a->job->lease_owner,
                               a->job->svc->o.client_request_lease_ms, now, &a->acquired, err);
    if (rc != MV_OK || a->acquired) return rc;
    return mv__request_replay_tx(db, &a->job->scope, &a->replay, &a->lease_left, now, err);
}

static mv_code replay_tx(mv_db *db, void *ctx, mv_err *err) {
    acquire_arg *a = ctx;
    return mv__request_replay_tx(db, &a->job->scope, &a->replay, &a->lease_left,
                                 mv__svc_now(a->job->svc), err);
}

/* True when building the messages calls nothing outside: a declarative prepare and no payment
 * session to open. Then the whole create — replay check, reservation, messages, completion — is
 * one write transaction. A definitive failure (an invalid item, a message too large) is recorded
 * in that same transaction, as the two-step path records it; a store error rolls everything
 * back and leaves no reservation at all. */
static bool builds_without_io(create_job *job) {
    mv_prepare_fn fn;
    void *ctx;
    return job->tpl->prepare == MV_PREPARE_DECLARATIVE &&
           !mv__svc_find_prepare(job->svc, job->tpl->template_cd, &fn, &ctx) &&
           !(job->svc->o.payment && *job->tpl->payment_cd);
}

typedef struct {
    acquire_arg a;
    bool done;
    mv_err failure; /* a definitive failure recorded in the transaction */
    mv_code built;  /* fresh_key_tx: how building the documents (before it) ended */
} one_shot_arg;

/* Builds the one-shot path's documents before its transaction (nothing in them depends on the
 * store, so the write holds only inserts): a failure that is not definitive is returned and no
 * transaction runs; a definitive one stays in o->failure for fresh_key_tx to record. */
static mv_code one_shot_build(one_shot_arg *o, mv_err *err) {
    create_job *job = o->a.job;
    mv_err_clear(&o->failure);
    json_array_clear(job->docs);
    o->built = build_all(job, &o->failure);
    if (o->built != MV_OK && !mv_code_is_definitive(o->built)) return mv_err_copy(err, &o->failure);
    return MV_OK;
}

/* The common case of the one-shot path — a key nobody has used — written blind: the reservation
 * row goes in already completed (or failed, for a definitive failure) beside the messages, and
 * nothing in the transaction waits for an answer, so on PostgreSQL the whole create is one round
 * trip. A key that exists fails the insert (MV__REQUEST_KEY_TAKEN) and with it the transaction,
 * and the caller takes the reservation path (one_shot_tx), which replays, takes over or waits. */
static mv_code fresh_key_tx(mv_db *db, void *ctx, mv_err *err) {
    one_shot_arg *o = ctx;
    create_job *job = o->a.job;
    int64_t now = mv__svc_now(job->svc);
    mv_code rc;
    if (o->built != MV_OK) { /* definitive (one_shot_build): recorded as the key's failure */
        char text[sizeof o->failure.message];
        failure_text(&o->failure, text, sizeof text);
        return mv__request_record_tx(db, &job->scope, job->lease_owner, NULL, text, now, err);
    }
    if ((rc = mv__request_record_tx(db, &job->scope, job->lease_owner, job->docs, NULL, now,
                                    err)) != MV_OK ||
        (rc = insert_docs_tx(db, job, err)) != MV_OK ||
        (rc = log_created_tx(db, job, err)) != MV_OK)
        return rc;
    o->done = true;
    return MV_OK;
}

static mv_code one_shot_tx(mv_db *db, void *ctx, mv_err *err) {
    one_shot_arg *o = ctx;
    create_job *job = o->a.job;
    mv_code rc = acquire_tx(db, &o->a, err);
    if (rc != MV_OK || !o->a.acquired) return rc; /* a replay, or someone else's live lease */
    mv_err_clear(&o->failure);
    json_array_clear(job->docs);
    if ((rc = build_all(job, &o->failure)) != MV_OK) {
        if (!mv_code_is_definitive(rc)) return mv_err_copy(err, &o->failure);
        return record_failure_tx(db, job, &o->failure, err); /* commits the failed reservation */
    }
    if ((rc = persist_tx(db, job, err)) != MV_OK) return rc;
    o->done = true;
    return MV_OK;
}

/* Everything a create needs before its work: the ids, the payload, the template, the scope. */
static mv_code create_open(create_job *job, mv_err *err) {
    mv_service *svc = job->svc;
    const mv_create_request *req = job->req;
    mv_code rc = mv_client_request_id_normalize(req->client_request_id, job->crid, err);
    if (rc != MV_OK) return rc;
    if ((rc = mv__svc_require_user(req->user, job->user_id, err)) != MV_OK) return rc;
    if (req->payer && req->payer->id &&
        (rc = mv_check_id_length("payer.id", strlen(req->payer->id), err)) != MV_OK)
        return rc;
    if (req->payer ? !mv_user_id(req->payer, job->payer_id, sizeof job->payer_id)
                   : !mv_user_id(req->user, job->payer_id, sizeof job->payer_id))
        mv_strlcpy(job->payer_id, job->user_id, sizeof job->payer_id);
    job->empty = json_object();
    job->payload = req->payload ? req->payload : job->empty;
    if (!json_is_object(job->payload))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "body must be a JSON object");
    if ((rc = read_expires_at(job, err)) != MV_OK) return rc;
    if ((rc = mv__schedule_read(job->payload, mv__svc_now(svc), job->expires_at, &job->send_at,
                                err)) != MV_OK)
        return rc;
    job->tpl = mv_registry_find(svc->o.registry, req->template_cd ? req->template_cd : "");
    if (!job->tpl)
        return mv_err_set(err, MV_TEMPLATE_NOT_FOUND, "template \"%s\" not found",
                          req->template_cd ? req->template_cd : "");
    /* before any reservation: a body without its required fields leaves nothing behind */
    if ((rc = mv_template_check_payload(job->tpl, job->payload, err)) != MV_OK) return rc;
    job->docs = json_array();
    job->sessions = json_array();
    job->scope.tenant = mv__svc_tenant(req->user);
    return MV_OK;
}

static void create_close(create_job *job) {
    steps_reset(job, false);
    json_decref(job->docs);
    json_decref(job->datas);
    json_decref(job->localized);
    json_decref(job->sessions);
    json_decref(job->empty);
    mv_template_release(job->tpl);
}

/* ---- the one create: mv__create_begin (create_async.h) --------------------------------------
 * The caller's thread (the daemon's I/O thread) goes as far as it can without waiting: the
 * checks, and for a create that calls nothing outside the documents and the write, queued on the
 * store's group commit, whose committing thread ends the create. Everything else goes on in
 * rounds on env.submit's threads, one queued at a time: the reservation of a client request id,
 * the steps between calls that wait on the loop (a prepare webhook, the webhook payment
 * provider; a C hook or C provider is called in the round), and a wait on someone else's live
 * reservation, which is a timer that queues the next attempt — never a thread asleep. */

enum { PH_STEPS, PH_REPLAY, PH_TAKEN, PH_ACQUIRE };

typedef struct create_run {
    create_job job; /* first */
    one_shot_arg o; /* the blind write of a fresh key */
    mv__create_env env;
    pthread_mutex_t mu;   /* guards timer: armed by a round, cancelled by the round it queues */
    mv_loop_timer *timer; /* a pending wait's, on the service's loop */
    int64_t deadline;     /* the end of a pending wait (real time, even with an injected clock) */
    int phase;            /* what the next round does */
    bool expire_here;     /* an expire the loop abandoned: made again in the next round */
    char traceparent[64];
} create_run;

static void finish(create_run *r, mv_code rc, json_t *messages, bool replayed, const mv_err *e) {
    r->env.done(r->env.done_ctx, rc, messages, replayed, e);
    create_close(&r->job);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

static json_t *take_docs(create_job *job) { /* handed over, not shared: done's side owns it */
    json_t *docs = job->docs;
    job->docs = NULL;
    return docs;
}

/* A call's outcome as call_here would have it (rc, res, e: what the webhook call returned). */
static void conclude(create_job *job, mv_code rc, mv_webhook_response *res, const mv_err *e) {
    if (job->call == CALL_PREPARE)
        job->call_rc = mv__webhook_prepare_outcome(job->tpl->prepare_webhook, rc, res, e,
                                                   &job->call_items, &job->call_err);
    else
        job->call_rc = mv__payment_webhook_outcome(
            rc, res, e, job->call == CALL_SESSION ? &job->call_session : NULL, &job->call_err);
    job->call = CALL_NONE;
}

static void round_job(void *p);

static void call_done(void *p, mv_code rc, mv_webhook_response *res, const mv_err *e) {
    create_run *r = p; /* on the loop's thread: only classifies and queues the next round */
    if (r->job.call == CALL_EXPIRE && rc == MV_DRAINING) {
        /* a session must not stay open because the server stops: expire it on a thread */
        mv_webhook_response_free(res);
        r->expire_here = true;
    } else {
        conclude(&r->job, rc, res, e);
    }
    r->env.submit(r->env.submit_ctx, round_job, r);
}

/* Posts job->call on the loop when it is a webhook: 1 posted (call_done follows; r is no longer
 * ours), 0 to be made here, -1 refused by the loop and concluded as not sent. */
static int post_call(create_run *r) {
    create_job *job = &r->job;
    mv_service *svc = job->svc;
    mv_err e = {0};
    mv_code rc;
    if (!svc->o.loop) return 0;
    if (job->call == CALL_PREPARE) {
        mv_prepare_fn fn;
        void *ctx;
        if (mv__svc_find_prepare(svc, job->tpl->template_cd, &fn, &ctx)) return 0;
        rc = mv__webhook_prepare_start(svc, job->tpl->prepare_webhook, &job->in, call_done, r, &e);
    } else {
        if (!mv__payment_is_webhook(svc->o.payment)) return 0;
        mv__payment_call c =
            job->call == CALL_SESSION
                ? (mv__payment_call){.op = "create",
                                     .payer = job->payer_id,
                                     .payment_cd = job->payment_cd,
                                     .price_args = json_object_get(
                                         json_array_get(job->items, job->next), "priceArgs"),
                                     .key = job->key}
                : (mv__payment_call){
                      .op = "expire",
                      .session = json_string_value(json_array_get(job->sessions, job->next))};
        rc = mv__payment_webhook_start(svc->o.payment, svc->o.loop, &c, call_done, r, &e);
    }
    if (rc == MV_OK) return 1;
    if (job->call == CALL_EXPIRE) return 0;
    mv_webhook_response res = {.outcome = MV_WEBHOOK_NOT_SENT};
    conclude(job, rc, &res, &e);
    return -1;
}

/* The build and persist steps up to the next call on the loop, or to the end. */
static void steps(create_run *r) {
    create_job *job = &r->job;
    while (step(job)) {
        int posted = post_call(r);
        if (posted > 0) return;
        if (posted == 0) call_here(job);
    }
    finish(r, job->rc, job->rc == MV_OK ? take_docs(job) : NULL, false, &job->err);
}

static bool timer_fired(void *p) { /* on the loop's timer thread */
    create_run *r = p;
    r->env.submit(r->env.submit_ctx, round_job, r);
    return false;
}

/* Someone else holds the key: the next attempt in ms, or the pending error once the wait is
 * over (or when no timer can be had: a loop shutting down). */
static void wait_or_fail(create_run *r, int64_t lease_left) {
    create_job *job = &r->job;
    int64_t left = r->deadline - mv_now_ms(), poll = job->svc->o.client_request_poll_ms;
    int64_t ms = left < poll ? left : poll;
    if (left > 0 && r->env.after) {
        r->env.after(r->env.submit_ctx, ms, round_job, r);
        return;
    }
    bool armed = false;
    if (left > 0 && job->svc->o.loop) {
        pthread_mutex_lock(&r->mu);
        armed = (r->timer = mv_loop_every(job->svc->o.loop, ms > 0 ? ms : 1, timer_fired, r));
        pthread_mutex_unlock(&r->mu);
    }
    if (armed) return;
    mv_err err = {0};
    mv_err_set(&err, MV_CLIENT_REQUEST_PENDING,
               "clientRequestId \"%s\" is still pending; retry after the current reservation "
               "completes or its lease expires",
               job->crid);
    int secs = (int)((lease_left + 999) / 1000);
    err.retry_after_s = secs > 0 ? secs : 1;
    finish(r, MV_CLIENT_REQUEST_PENDING, NULL, false, &err);
}

/* One round of the client request id's reservation: replay what is complete, take what is free
 * or expired, else wait. */
static void reserve(create_run *r) {
    create_job *job = &r->job;
    mv_store *store = job->svc->o.store;
    acquire_arg a = {job, false, NULL, 0};
    mv_err err = {0};
    mv_code rc = MV_OK;
    if (r->phase != PH_ACQUIRE) r->deadline = mv_now_ms() + job->svc->o.client_request_wait_ms;
    if (r->phase == PH_TAKEN) { /* the blind write met the key: resolve it in one transaction */
        one_shot_arg o = {.a = a};
        if ((rc = mv_store_write(store, one_shot_tx, &o, &err)) == MV_OK &&
            o.failure.code != MV_OK) {
            finish(r, o.failure.code, NULL, false, &o.failure);
            return;
        }
        if (rc == MV_OK && (o.a.replay || o.done)) {
            finish(r, MV_OK, o.a.replay ? o.a.replay : take_docs(job), o.a.replay != NULL, NULL);
            return;
        }
    } else if (r->phase == PH_REPLAY) {
        rc = mv_store_read(store, replay_tx, &a, &err);
    }
    r->phase = PH_ACQUIRE;
    if (rc == MV_OK && !a.replay) rc = mv_store_write(store, acquire_tx, &a, &err);
    if (rc != MV_OK || a.replay) {
        finish(r, rc, a.replay, a.replay != NULL, &err);
        return;
    }
    if (!a.acquired) {
        wait_or_fail(r, a.lease_left);
        return;
    }
    r->phase = PH_STEPS;
    steps_reset(job, false);
    steps(r);
}

static void round_job(void *p) {
    create_run *r = p;
    pthread_mutex_lock(&r->mu);
    mv_loop_timer *timer = r->timer;
    r->timer = NULL;
    pthread_mutex_unlock(&r->mu);
    mv_loop_timer_cancel(timer);       /* fired: this round is what it queued */
    mv_callctx saved = *mv__callctx(); /* a blocking caller's own thread keeps its context */
    mv_strlcpy(mv__callctx()->traceparent, r->traceparent, sizeof mv__callctx()->traceparent);
    if (r->phase != PH_STEPS) {
        reserve(r);
    } else {
        if (r->expire_here) {
            r->expire_here = false;
            call_here(&r->job);
        }
        steps(r);
    }
    *mv__callctx() = saved;
}

/* On the store's committing thread, once the batch holding the blind write committed. */
static void written(mv_code rc, const mv_err *err, void *ctx) {
    create_run *r = ctx;
    if (rc == MV_OK && r->o.failure.code != MV_OK) { /* a definitive failure, now recorded */
        finish(r, r->o.failure.code, NULL, false, &r->o.failure);
    } else if (rc == MV_OK) {
        finish(r, MV_OK, take_docs(&r->job), false, NULL);
    } else if (r->job.crid[0] && rc == MV__REQUEST_KEY_TAKEN) { /* replay, take over or wait */
        r->phase = PH_TAKEN;
        r->env.submit(r->env.submit_ctx, round_job, r);
    } else {
        finish(r, rc, NULL, false, err);
    }
}

bool mv_message_create_calls_out(mv_service *svc, const char *template_cd) {
    if (!svc->o.loop) return false;
    mv_template *t = mv_registry_find(svc->o.registry, template_cd ? template_cd : "");
    if (!t) return false;
    mv_prepare_fn fn;
    void *ctx;
    bool custom = mv__svc_find_prepare(svc, t->template_cd, &fn, &ctx);
    bool hook = !custom && t->prepare == MV_PREPARE_WEBHOOK;
    bool paid = mv__payment_is_webhook(svc->o.payment) &&
                (*t->payment_cd || custom || t->prepare == MV_PREPARE_WEBHOOK);
    mv_template_release(t);
    return hook || paid;
}

void mv__create_begin(mv_service *svc, const mv_create_request *req, const mv__create_env *env) {
    mv_err err = {0};
    create_run *r = calloc(1, sizeof *r);
    if (!r) {
        mv_err_set(&err, MV_NO_MEMORY, "out of memory");
        env->done(env->done_ctx, MV_NO_MEMORY, NULL, false, &err);
        return;
    }
    pthread_mutex_init(&r->mu, NULL);
    r->env = *env;
    /* share_payload: req->payload is the caller's own copy, which nothing changes from now on */
    r->job = (create_job){.svc = svc, .req = req, .share_payload = env->share_payload};
    mv_strlcpy(r->traceparent, mv__callctx()->traceparent, sizeof r->traceparent);
    create_job *job = &r->job;
    r->o.a.job = job;
    mv_code rc = create_open(job, &err);
    if (rc == MV_OK && job->crid[0]) { /* the reservation's scope */
        job->scope.owner = job->user_id;
        job->scope.template_cd = job->tpl->template_cd;
        job->scope.id = job->crid;
        mv_json_fingerprint(job->payload, job->scope.fingerprint);
        rc = mv_id_uuid(job->lease_owner, &err);
    }
    if (rc == MV_OK && !builds_without_io(job)) { /* it calls out, or may: in rounds */
        r->phase = job->crid[0] ? PH_REPLAY : PH_STEPS;
        steps_reset(job, false);
        if (env->first_here)
            round_job(r);
        else
            env->submit(env->submit_ctx, round_job, r);
        return;
    }
    if (rc == MV_OK) /* no payment session: nothing to compensate */
        rc = job->crid[0] ? one_shot_build(&r->o, &err) : build_all(job, &err);
    if (rc != MV_OK) {
        finish(r, rc, NULL, false, &err);
        return;
    }
    if (job->crid[0]) /* rerunnable, as on the blocking path: PostgreSQL batches it */
        mv__store_write_async_rerunnable(svc->o.store, fresh_key_tx, &r->o, written, r);
    else
        mv__store_write_async(svc->o.store, persist_tx, job, written, r);
}

/* ---- notifications ------------------------------------------------------------------------ */

typedef struct {
    mv_service *svc;
    json_t *doc;
    const char *tenant;
} notify_arg;

static mv_code notify_tx(mv_db *db, void *ctx, mv_err *err) {
    notify_arg *a = ctx;
    mv_code rc = mv__doc_insert(db, a->doc, a->tenant, NULL, -1, err);
    if (rc == MV_OK) rc = mv__doc_deliver(a->svc, db, a->doc, a->tenant, NULL, NULL, NULL, err);
    if (rc != MV_OK) return rc;
    return mv__change_add_tx(db, a->tenant, mv_json_str(a->doc, "id"), MV_CHANGE_CREATED, NULL,
                             mv__svc_now(a->svc), err);
}

static json_t *content_from(const json_t *c) {
    json_t *out = json_pack("{s:s,s:s,s:s}", "title", "", "short", "", "long", "");
    const char *keys[] = {"title", "short", "long"};
    for (int i = 0; i < 3; i++) {
        const char *v = mv_json_str(c, keys[i]);
        if (v) json_object_set_new(out, keys[i], json_string(v));
    }
    return out;
}

json_t *mv__notification_doc(mv_service *svc, const json_t *params) {
    json_t *doc =
        mv__doc_new("notification", MV_GENERIC_NOTIFICATION_TEMPLATE_CD, mv__svc_now(svc));
    const char *from = mv_json_str(params, "fromUser"), *to = mv_json_str(params, "toUser");
    if (from) json_object_set_new(doc, "fromUser", json_string(from));
    if (to) json_object_set_new(doc, "toUser", json_string(to));
    json_t *roles = json_object_get(params, "toRoles");
    if (json_is_array(roles)) json_object_set_new(doc, "toRoles", json_deep_copy(roles));
    json_object_set_new(doc, "receiverContent",
                        content_from(json_object_get(params, "receiverContent")));
    json_object_set_new(doc, "senderContent",
                        content_from(json_object_get(params, "senderContent")));
    json_t *documents = json_object_get(params, "documents");
    if (json_is_array(documents)) json_object_set_new(doc, "documents", json_deep_copy(documents));
    return doc;
}

mv_code mv_notification_create(mv_service *svc, const json_t *params, json_t **message,
                               mv_err *err) {
    *message = NULL;
    if (!json_is_object(params) || !json_is_object(json_object_get(params, "receiverContent")))
        return mv_err_set(err, MV_INVALID_ARGUMENT, "receiverContent must be an object");
    const char *tenant = mv_json_str(params, "tenantId");
    if (tenant && !mv_valid_token(tenant, MV_MAX_ID_BYTES))
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "tenantId must be 1 to %d printable characters without spaces",
                          MV_MAX_ID_BYTES);
    const json_t *roles = json_object_get(params, "toRoles");
    mv_code checked = check_item_users(params, err);
    if (checked == MV_OK && json_is_array(roles))
        checked = mv__svc_check_roles(roles, "toRoles", err);
    if (checked != MV_OK) return checked;
    notify_arg a = {svc, mv__notification_doc(svc, params), tenant};
    mv_code rc = mv_store_write(svc->o.store, notify_tx, &a, err);
    if (rc == MV_OK)
        *message = a.doc;
    else
        json_decref(a.doc);
    return rc;
}
